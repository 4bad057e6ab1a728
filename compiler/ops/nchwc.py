"""The NCHWc layout ops that ``convert-layout`` writes (domain ``prism``; ORT's NCHWc transformer
has the same three in ``com.microsoft.nchwc``, NeoCPU, USENIX ATC'19).

A blocked tensor ``[N, ceil(C/c), H, W, c]`` holds channel ``k`` of ``[N, C, H, W]`` at
``[n, k div c, h, w, k mod c]``; the lanes past ``C`` in the last block are zeros after
``ReorderInput`` and unspecified after any other op (every consumer either drops them,
``ReorderOutput``, or multiplies them by zero weights, ``NchwcConv``).

* ``prism.ReorderInput(X) {block}``: ``[N, C, H, W]`` -> ``[N, ceil(C/block), H, W, block]``.
* ``prism.ReorderOutput(Xb) {block, channels}``: back to ``[N, channels, H, W]``.
* ``prism.NchwcConv(Xb, Wb[, B]) {block, kernel_shape, strides, pads, dilations, depthwise}``: ONNX
  Conv on blocked tensors. ``depthwise = 0``: ``Wb: [Co/c, C/c, kH, kW, c_in, c_out]``
  (``Wb[ob, ib, y, x, i, o] = W[ob*c + o, ib*c + i, y, x]``, zero past C or Co); ``depthwise = 1``
  (ONNX group = C = Co): ``Wb: [C/c, kH, kW, c]``. ``B``: ``[Co/c * c]`` (zero-padded). ``pads`` are
  explicit ``[top, left, bottom, right]``. Output ``[N, ceil(Co/c), OH, OW, c]``.
"""

from __future__ import annotations

from ..ir import TensorType
from .registry import InferContext, op

DOMAIN = "prism"


def _block(ctx: InferContext) -> int:
    b = int(ctx.attr("block", 0))
    if b < 1:
        raise ctx.fail(f"block {b} must be at least 1", attribute="block")
    return b


@op("ReorderInput", kind="injective", domain=DOMAIN)
def infer_reorder_input(ctx: InferContext) -> list[TensorType]:
    b, t = _block(ctx), ctx.type(0)
    n, c, h, w = ctx.shape(0) if ctx.rank(0) == 4 else (None,) * 4
    if not isinstance(c, int):
        raise ctx.fail(f"input must be [N, C, H, W] with a known C, got {t}")
    return [TensorType(t.elem_type, (n, -(-c // b), h, w, b))]  # type: ignore[arg-type]


@op("ReorderOutput", kind="injective", domain=DOMAIN)
def infer_reorder_output(ctx: InferContext) -> list[TensorType]:
    b, t = _block(ctx), ctx.type(0)
    if ctx.rank(0) != 5 or ctx.shape(0)[4] != b:
        raise ctx.fail(f"input must be [N, C/{b}, H, W, {b}], got {t}")
    n, cb, h, w, _ = ctx.shape(0)
    c = int(ctx.attr("channels", 0))
    if not isinstance(cb, int) or not (cb - 1) * b < c <= cb * b:
        raise ctx.fail(f"channels {c} does not fit {cb} blocks of {b}", attribute="channels")
    return [TensorType(t.elem_type, (n, c, h, w))]


@op("NchwcConv", kind="out-elementwise-fusable", domain=DOMAIN)
def infer_nchwc_conv(ctx: InferContext) -> list[TensorType]:
    b, t = _block(ctx), ctx.type(0)
    if ctx.rank(0) != 5:
        raise ctx.fail(f"input must be blocked [N, C/{b}, H, W, {b}], got {t}")
    n, _, h, w, _ = ctx.shape(0)
    wshape = ctx.shape(1)
    cob = wshape[0]
    kh, kw = (int(k) for k in ctx.attr("kernel_shape"))
    st = [int(s) for s in ctx.attr("strides", [1, 1])]
    dil = [int(d) for d in ctx.attr("dilations", [1, 1])]
    pads = [int(p) for p in ctx.attr("pads", [0, 0, 0, 0])]
    if not isinstance(h, int) or not isinstance(w, int):
        raise ctx.fail("spatial dims must be known")
    oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // st[0] + 1
    ow = (w + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // st[1] + 1
    return [TensorType(t.elem_type, (n, cob, oh, ow, b))]


__all__ = ["DOMAIN", "infer_nchwc_conv", "infer_reorder_input", "infer_reorder_output"]
