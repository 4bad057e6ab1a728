"""More inference ops: Einsum, LpNormalization, GridSample, RoiAlign, QLinearConv,
DynamicQuantizeLinear (ONNX operator spec, per op)."""

from __future__ import annotations

from onnx import TensorProto

from ..ir import TensorType
from ..ir.types import Dim
from .nn import infer_conv
from .registry import InferContext, broadcast, op


def _terms(ctx: InferContext, eq: str) -> tuple[list[str], str | None]:
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != ctx.n_inputs:
        raise ctx.fail(f"equation {eq!r} has {len(terms)} operands for {ctx.n_inputs} inputs", attribute="equation")
    return terms, (rhs if arrow else None)


@op("Einsum", kind="opaque")
def infer_einsum(ctx: InferContext) -> list[TensorType]:
    """Explicit (``->``) and implicit output, with ``...`` broadcasting (numpy.einsum rules)."""
    terms, rhs = _terms(ctx, str(ctx.attr("equation", "")))
    sizes: dict[str, Dim] = {}
    counts: dict[str, int] = {}
    ell: list[tuple[Dim, ...]] = []
    for i, term in enumerate(terms):
        shape = ctx.shape(i)
        letters = term.replace("...", "")
        n_ell = len(shape) - len(letters)
        if ("..." in term and n_ell < 0) or ("..." not in term and n_ell != 0):
            raise ctx.fail(f"operand {i} ({term!r}) does not match its rank {len(shape)}", attribute="equation")
        pos = 0
        head = term.split("...")[0] if "..." in term else term
        for ch in head:
            _bind(ctx, sizes, ch, shape[pos])
            counts[ch] = counts.get(ch, 0) + 1
            pos += 1
        if "..." in term:
            ell.append(tuple(shape[pos:pos + n_ell]))
            pos += n_ell
            for ch in term.split("...")[1]:
                _bind(ctx, sizes, ch, shape[pos])
                counts[ch] = counts.get(ch, 0) + 1
                pos += 1
    ell_shape = broadcast(ctx, *ell) if ell else ()
    if rhs is None:  # implicit: ellipsis dims, then the letters seen once, in alphabetical order
        out: list[Dim] = [*ell_shape, *[sizes[ch] for ch in sorted(counts) if counts[ch] == 1]]
    else:
        out = []
        for part_i, part in enumerate(rhs.split("...")):
            if part_i:
                out.extend(ell_shape)
            for ch in part:
                if ch not in sizes:
                    raise ctx.fail(f"output letter {ch!r} is not in any operand", attribute="equation")
                out.append(sizes[ch])
    return [ctx.type(0).with_shape(out)]


def _bind(ctx: InferContext, sizes: dict[str, Dim], ch: str, d: Dim) -> None:
    prev = sizes.get(ch)
    if prev is None or prev == 1:
        sizes[ch] = d
    elif isinstance(prev, int) and isinstance(d, int) and d not in (1, prev):
        raise ctx.fail(f"letter {ch!r} has sizes {prev} and {d}", attribute="equation")


@op("LpNormalization", kind="opaque")
def infer_lp_normalization(ctx: InferContext) -> list[TensorType]:
    ctx.axis(int(ctx.attr("axis", -1)), max(ctx.rank(0), 1))
    return [ctx.type(0)]


@op("GridSample", kind="opaque")
def infer_grid_sample(ctx: InferContext) -> list[TensorType]:
    x, grid = ctx.shape(0), ctx.shape(1)
    return [ctx.type(0).with_shape((x[0], x[1], *grid[1:-1]))]


@op("RoiAlign", kind="opaque")
def infer_roi_align(ctx: InferContext) -> list[TensorType]:
    x, rois = ctx.shape(0), ctx.shape(1)
    oh, ow = int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))
    return [ctx.type(0).with_shape((rois[0], x[1], oh, ow))]


@op("QLinearConv", kind="out-elementwise-fusable")  # an integer Conv: anchors its epilogue's group
def infer_qlinear_conv(ctx: InferContext) -> list[TensorType]:
    x, w = ctx.node.inputs[0], ctx.node.inputs[3]
    proxy = _Proxy(ctx, [x, w])
    (t,) = infer_conv(proxy)  # type: ignore[arg-type]
    return [TensorType(ctx.type(7).elem_type, t.shape)]


class _Proxy:
    """An InferContext view with other inputs (QLinearConv's x and w are inputs 0 and 3)."""

    def __init__(self, ctx: InferContext, inputs: list) -> None:
        self._ctx, self._inputs = ctx, inputs
        self.node, self.opset = ctx.node, ctx.opset

    def shape(self, i: int) -> tuple[Dim, ...]:
        v = self._inputs[i]
        if v is None or v.type is None or v.type.shape is None:
            raise self._ctx.fail(f"operand {i} has no shape")
        return v.type.shape

    def type(self, i: int) -> TensorType:
        return self._inputs[i].type

    def has(self, i: int) -> bool:
        return False

    def attr(self, name: str, default: object = None) -> object:
        return self._ctx.attr(name, default)

    def fail(self, message: str, attribute: str | None = None) -> Exception:
        return self._ctx.fail(message, attribute)


@op("DynamicQuantizeLinear", kind="opaque")
def infer_dynamic_quantize(ctx: InferContext) -> list[TensorType]:
    return [TensorType(TensorProto.UINT8, ctx.shape(0)), TensorType(TensorProto.FLOAT, ()),
            TensorType(TensorProto.UINT8, ())]


@op("STFT", kind="opaque")
def infer_stft(ctx: InferContext) -> list[TensorType]:
    """STFT (opset 17): ``[batch, frames, bins, 2]``; ``frames = (L - frame_length) // frame_step + 1``,
    ``bins = frame_length // 2 + 1`` when ``onesided`` (default 1), else ``frame_length``."""
    x = ctx.shape(0)
    step = ctx.ints(1)
    flen = ctx.ints(3) if ctx.has(3) else None
    if flen is None and ctx.has(2):
        flen = [ctx.shape(2)[0]]  # type: ignore[list-item]
    if step is None or flen is None or not isinstance(x[1], int) or not isinstance(flen[0], int):
        name = ctx.node.outputs[0].name
        return [ctx.type(0).with_shape((x[0], f"{name}_frames", f"{name}_bins", 2))]
    frames = (x[1] - flen[0]) // step[0] + 1
    bins = flen[0] // 2 + 1 if int(ctx.attr("onesided", 1)) else flen[0]
    return [ctx.type(0).with_shape((x[0], frames, bins, 2))]


@op("MaxUnpool", kind="opaque")
def infer_max_unpool(ctx: InferContext) -> list[TensorType]:
    """MaxUnpool: the ``output_shape`` input when known, else per spatial dim
    ``(in - 1) * stride - pad_begin - pad_end + kernel`` (ONNX spec)."""
    given = ctx.ints(2) if ctx.has(2) else None
    if given is not None:
        return [ctx.type(0).with_shape(tuple(given))]
    x = ctx.shape(0)
    ks = list(ctx.attr("kernel_shape"))
    nd = len(ks)
    st = list(ctx.attr("strides", [1] * nd))
    pads = list(ctx.attr("pads", [0] * 2 * nd))
    sp: list[Dim] = [(d - 1) * s - pads[k] - pads[nd + k] + kk if isinstance(d, int) else f"{ctx.node.outputs[0].name}_d{k}"
                     for k, (d, s, kk) in enumerate(zip(x[2:], st, ks, strict=True))]
    return [ctx.type(0).with_shape((x[0], x[1], *sp))]
