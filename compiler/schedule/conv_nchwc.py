"""Register-tiled schedule of ``prism.NchwcConv`` (``convert-layout``): the channels of a block in the
vector lanes (NeoCPU, USENIX ATC'19; ORT's NCHWc kernels).

Per image, output-channel block pair (the ``parallel`` axis: disjoint outputs) and output row, the
row is cut into tiles of ``R`` output pixels; a tile keeps ``NV x R`` accumulator vectors of the
block's ``c`` lanes in registers across the whole reduction (input block, kernel row, kernel column,
input lane): per step one vector load of the packed weight per output block and one broadcast of an
input value per pixel, ``NV x R`` multiply-adds (``llvm.fma``). Depthwise: per tap one weight vector
and one input vector per pixel (the input's lanes are the same channels). Taps outside the input read
zeros (a select on the tap's position); pixels past the row's end are computed from clamped reads and
never stored. The group's epilogue (bias, activation, residual Add on the blocked tensor) is applied
to the accumulators before the one store. The sum runs in the order of the generic lowering (input
block, kH, kW, input lane), one product at a time: no reassociation.
"""

from __future__ import annotations

from typing import Any

from ..loops.ir import (
    Allocate,
    Bin,
    Buffer,
    Expr,
    Float,
    For,
    If,
    Int,
    Load,
    Seq,
    Stmt,
    Store,
    Var,
    add,
    mul,
    select,
    substitute,
)
from ..loops.lower import LoweredKernel
from ..loops.ops_nn import _window
from ..loops.tensor import Tensor
from ..targets import Target
from .gemm import epilogue, epilogue_flops, finish, probe_buffer, replace_anchor
from .knobs import choose


def nchwc_conv(lk: LoweredKernel, node: Any, ins: list[Tensor | None], out_buf: Buffer, out_t: Tensor,
               target: Target) -> LoweredKernel | None:
    """The register-tiled kernel of an NchwcConv group (module docstring), or None where it does not
    fit (a block other than the target's f32 width, an input that is not a plain buffer read)."""
    x, w = ins[0], ins[1]
    width = target.vector_width_f32
    b = int(node.attr("block"))
    if x is None or w is None or w.const is None or b != width:
        return None
    xbuf = probe_buffer(x)
    ep = epilogue(out_t, 5, None)  # fuse-ops fuses only elementwise ops of the blocked output
    if xbuf is None or ep is None:
        return None
    dw = int(node.attr("depthwise", 0))
    n_b, cib, h, wd, _ = xbuf.shape
    _, cob, oh, ow, _ = out_buf.shape
    kh, kw = (int(k) for k in node.attr("kernel_shape"))
    st = [int(s) for s in node.attr("strides", [1, 1])]
    dil = [int(d) for d in node.attr("dilations", [1, 1])]
    pb = [int(p) for p in node.attr("pads", [0, 0, 0, 0])][:2]
    wbuf = probe_buffer(w)
    if wbuf is None:
        return None
    nv = 2 if not dw and cob % 2 == 0 else 1
    r_n = (12 if width >= 16 else 6) // nv if not dw else (8 if width >= 16 else 6)
    r_n = min(r_n, ow)
    nv, r_n = nchwc_tile(nv, r_n, cob, ow, bool(dw), width)
    tiles = -(-ow // r_n)
    vn, vcb, vy, vt = Var("n"), Var("cbo"), Var("oy"), Var("ot")
    vv, vr, vl = Var("v"), Var("r"), Var("l")
    acc = Buffer("acc", "f32", (nv, r_n, b), "local")
    at = (vv, vr, vl)

    def lanes(body: Stmt) -> Stmt:
        return For(vv, nv, For(vr, r_n, For(vl, b, body, "vectorized"), "unrolled"), "unrolled")

    vkh, vkw, vci, vil = Var("kh"), Var("kw"), Var("ci"), Var("il")
    ox = add(mul(vt, r_n), vr)
    pos, cond = _window([vy, ox], [vkh, vkw], st, dil, pb, [h, wd], [oh, tiles * r_n], [kh, kw])
    co_blk = add(mul(vcb, nv), vv)
    if dw:
        xv: Expr = Load(xbuf, (vn, co_blk, pos[0], pos[1], vl))
        wv: Expr = Load(wbuf, (co_blk, vkh, vkw, vl))
    else:
        xv = Load(xbuf, (vn, vci, pos[0], pos[1], vil))
        wv = Load(wbuf, (co_blk, vci, vkh, vkw, vil, vl))
    if cond is not None:
        xv = select(cond, xv, Float(0.0))
    upd: Stmt = lanes(Store(acc, at, add(Load(acc, at), mul(xv, wv))))
    red: Stmt = For(vkh, kh, For(vkw, kw, upd if dw else For(vil, b, upd, "unrolled")))
    if not dw:
        red = For(vci, cib, red)
    epi, vs = ep
    mapping = {vs[0].name: vn, vs[1].name: co_blk, vs[2].name: vy, vs[3].name: ox, vs[4].name: vl}
    store: Stmt = Store(out_buf, (vn, co_blk, vy, ox, vl), substitute(replace_anchor(epi, Load(acc, at)), mapping))
    if ow % r_n:
        store = If(Bin("<", ox, Int(ow)), store)
    tile = Allocate(acc, Seq([lanes(Store(acc, at, Float(0.0))), red, lanes(store)]))
    nest = For(vn, n_b, For(vcb, cob // nv, For(vy, oh, For(vt, tiles, tile)), "parallel"))
    lk.func.attrs.setdefault("schedule", []).extend([
        f"# {node.label}: NCHW{b}c Conv{' (depthwise)' if dw else ''}, {cob} output blocks, {oh}x{ow} outputs",
        f"tile(ox, {r_n}) x blocks {nv}  # {nv * r_n} accumulators of <{b} x float> across the reduction",
        "vectorize(lane)  # the block's channels in the vector lanes",
        "broadcast(X) per pixel, vector load(W) per block" if not dw else "vector loads of X and W per tap",
        "parallel(cbo)  # output channel blocks write disjoint outputs",
        "compute_at(epilogue, lane)  # applied to the accumulators before the one store"])
    k_n = kh * kw * (1 if dw else cib * b)
    return finish(lk, [nest], n_b * cob * b * oh * ow * (2 * k_n + epilogue_flops(epi)))


def nchwc_tile(nv: int, r_n: int, cob: int, ow: int, dw: bool, width: int) -> tuple[int, int]:
    """The knob ``nchwc_tile`` (``compiler.schedule.knobs``, ``"NVxR"``): ``nv`` output blocks x ``r_n``
    output pixels of accumulators, default the rule above. Choices: NV in 1, 2 (2 only for a dense Conv
    whose output blocks pair up), R <= OW, and NV x R accumulators + NV weight vectors + one broadcast
    (depthwise: R accumulators, R input vectors and a weight vector) within the register file (32
    vector registers with AVX-512, 16 otherwise)."""
    regs = 32 if width >= 16 else 16
    opts = [f"{v}x{r}" for v in ((1,) if dw or cob % 2 else (1, 2)) for r in range(1, min(ow, 16) + 1)
            if (2 * r + 1 if dw else v * r + v + 1) <= regs]
    v, r = (int(x) for x in str(choose("nchwc_tile", f"{nv}x{r_n}", opts)).split("x"))
    return v, r


__all__ = ["nchwc_conv", "nchwc_tile"]
