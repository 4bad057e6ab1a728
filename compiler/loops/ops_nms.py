"""NonMaxSuppression as one sequential kernel (ONNX operator spec, opset 10/11).

Semantics, as the spec and ``onnx.reference`` (``op_non_max_suppression.py``) define them, per
batch ``b`` and class ``c``: the candidate boxes are those whose score is above
``score_threshold`` (all boxes when it is omitted), visited by score, highest first (equal scores:
lower box index first); a candidate is selected when its IoU with every box already selected for
this ``(b, c)`` is at most ``iou_threshold``, until ``max_output_boxes_per_class`` are selected.
``selected_indices`` lists ``(b, c, box)`` rows batch-major, then class, then in selection order.
Boxes are ``[y1, x1, y2, x2]`` corners in any order (``center_point_box=0``) or ``[x_center,
y_center, width, height]`` (``center_point_box=1``). The IoU follows the reference step by step in
float32 (an empty intersection or a non-positive area never suppresses); intermediate products are
stored before they are added, so no ``a * b + c`` becomes a fused multiply-add.

The kernel implements the bounded form (``compiler.ops.detection``): output 0 is
``[bound, 3]`` int64, zero past the count; output 1 is the count. Loop IR, per ``(b, c)``: the
visiting order is a rank sort (``rank[i]`` = number of boxes before ``i`` in that order, so
``order[rank[i]] = i``; O(n^2)), then one pass over ``order`` that tests each candidate against the
``k`` boxes selected so far (a loop of ``min(max_output_boxes_per_class, n)`` iterations guarded by
``k < count``). ``iou_threshold`` and ``score_threshold`` are runtime values (loads);
``max_output_boxes_per_class`` is compile-time (it sizes the output). A plain one-output node (its
result feeds other ops) raises CompileError: its length is data-dependent.
"""

from __future__ import annotations

from typing import Any

from ..errors import CompileError
from .ir import (
    Allocate,
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
    binary,
    select,
)
from .sequential import ScratchFn, register_sequential
from .tensor import Tensor


def _ld(buf: Buffer, *idx: Any) -> Expr:
    return Load(buf, tuple(i if isinstance(i, Expr) else Int(int(i)) for i in idx))


def _st(buf: Buffer, idx: tuple[Any, ...], value: Expr) -> Stmt:
    return Store(buf, tuple(i if isinstance(i, Expr) else Int(int(i)) for i in idx), value)


def _all(*conds: Expr) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = binary("and", out, c)
    return out


def _scalar(t: Tensor | None, default: Expr | None) -> Expr | None:
    """Element 0 of a threshold input (shape ``[]`` or ``[1]``), or ``default`` when omitted."""
    if t is None:
        return default
    return t[[Int(0)] * t.rank]


def _corners(boxes: Tensor, b: Expr, e: Expr, center: bool, dst: Buffer) -> Stmt:
    """Store x_min, x_max, y_min, y_max of box ``e`` of batch ``b`` into ``dst[0:4]``."""
    def at(k: int) -> Expr:
        return boxes[[b, e, Int(k)]]

    if center:
        xc, yc, w, h = at(0), at(1), at(2), at(3)
        two = Float(2.0, boxes.dtype)
        hw, hh = binary("/", w, two), binary("/", h, two)
        vals = [binary("-", xc, hw), binary("+", xc, hw), binary("-", yc, hh), binary("+", yc, hh)]
    else:  # [y1, x1, y2, x2]; max_min(a, b) of the reference: (b, a) if a >= b else (a, b)
        vals = []
        for lo, hi in ((1, 3), (0, 2)):
            a, c = at(lo), at(hi)
            ge = binary(">=", a, c)
            vals += [select(ge, c, a), select(ge, a, c)]
    return Seq([_st(dst, (k,), v) for k, v in enumerate(vals)])


def _area(src: Buffer, dst: Buffer) -> Stmt:
    return _st(dst, (0,), binary("*", binary("-", _ld(src, 1), _ld(src, 0)), binary("-", _ld(src, 3), _ld(src, 2))))


def _visiting_order(scores: Tensor, order: Buffer, acc: Buffer, n: int, vb: Var, vc: Var, vi: Var, vj: Var,
                    vr: Var) -> Stmt:
    """``order[r]`` = the box visited at position ``r`` for class ``(vb, vc)``: score descending, then
    box index ascending (a stable sort, as the reference's); ``-1`` past the last box."""
    s_i, s_j = scores[[vb, vc, vi]], scores[[vb, vc, vj]]
    before = binary("or", binary(">", s_j, s_i), binary("and", binary("==", s_j, s_i), binary("<", vj, vi)))
    return Seq([
        For(vr, n, _st(order, (vr,), Int(-1))),
        For(vi, n, Seq([
            _st(acc, (0,), Int(0)),
            For(vj, n, _st(acc, (0,), binary("+", _ld(acc, 0), select(before, Int(1), Int(0))))),
            _st(order, (_ld(acc, 0),), vi),
        ])),
    ])


def _suppress_if_overlapping(bi: Buffer, ai: Buffer, bj: Buffer, aj: Buffer, inter: Buffer, keep: Buffer,
                             iou_thr: Expr) -> list[Stmt]:
    """Statements setting ``keep[0] = 0`` where the IoU of the candidate (corners ``bi``, area ``ai``) with a selected box
    (``bj``, ``aj``) exceeds ``iou_thr``, computed as the reference computes it (``inter`` holds the
    intersection's corners and area; empty boxes and a zero union never suppress)."""
    fdt = bi.dtype
    i0, i1, i2, i3 = (_ld(bi, k) for k in range(4))
    j0, j1, j2, j3 = (_ld(bj, k) for k in range(4))
    t0, t1, t2, t3, t4 = (_ld(inter, k) for k in range(5))
    union = binary("-", binary("+", _ld(ai, 0), _ld(aj, 0)), t4)
    suppress = _all(binary(">", t1, t0), binary(">", t3, t2), binary(">", t4, Float(0.0, fdt)),
                    binary(">", _ld(ai, 0), Float(0.0, fdt)), binary(">", _ld(aj, 0), Float(0.0, fdt)),
                    binary(">", union, Float(0.0, fdt)), binary(">", binary("/", t4, union), iou_thr))
    return [
        _st(inter, (0,), select(binary(">", j0, i0), j0, i0)),  # Python's max(a, b) / min(a, b)
        _st(inter, (1,), select(binary("<", j1, i1), j1, i1)),
        _st(inter, (2,), select(binary(">", j2, i2), j2, i2)),
        _st(inter, (3,), select(binary("<", j3, i3), j3, i3)),
        _st(inter, (4,), binary("*", binary("-", t1, t0), binary("-", t3, t2))),
        If(suppress, _st(keep, (0,), Int(0))),
    ]


@register_sequential("NonMaxSuppression")
def lower_non_max_suppression(ctx: Any, node: Any, ins: list[Tensor | None], outs: list[Buffer | None],
                              scratch: ScratchFn) -> Stmt:
    """boxes ``[nb, n, 4]`` f32, scores ``[nb, nc, n]`` f32 -> ``outs[0]`` ``[bound, 3]`` i64 (padded with
    zeros), ``outs[1]`` ``[]`` i64 (rows selected). Raises CompileError for the one-output form."""
    if len(outs) != 2 or outs[0] is None or outs[1] is None:
        raise CompileError("lowering", f"{node.label} (NonMaxSuppression): the number of selected boxes depends "
                           "on the data, so its output has no static shape; Prism compiles NonMaxSuppression only in "
                           "its bounded form, which compiler.compile() and the ONNX backend make when boxes and scores have "
                           "static shapes (padded to its bound plus a count: compiler.frontend.bounded, bounded_flow)",
                           node=node.label, op=node.op_type)
    boxes, scores = ins[0], ins[1]
    assert boxes is not None and scores is not None
    nb, n, _ = boxes.shape
    nc = scores.shape[1]
    sel, count = outs[0], outs[1]
    rows = sel.shape[0]
    most = rows // (nb * nc) if nb * nc else 0  # min(max_output_boxes_per_class, n)
    center = int(node.attr("center_point_box", 0)) == 1
    fdt = boxes.dtype
    iou_thr = _scalar(ins[3] if len(ins) > 3 else None, Float(0.0, fdt))
    score_thr = _scalar(ins[4] if len(ins) > 4 else None, None)
    assert iou_thr is not None

    order = scratch("i64", (max(n, 1),))  # box index at each visiting position, -1 where none
    kept = scratch("i64", (max(most, 1),))  # boxes selected for the current (b, c)
    total, cnt, acc, cur, keep = (Buffer(f"nms_{s}", "i64", (1,), "local") for s in ("total", "cnt", "acc", "cur",
                                                                                     "keep"))
    bi, bj = Buffer("nms_bi", fdt, (4,), "local"), Buffer("nms_bj", fdt, (4,), "local")
    ai, aj = Buffer("nms_ai", fdt, (1,), "local"), Buffer("nms_aj", fdt, (1,), "local")
    inter = Buffer("nms_inter", fdt, (5,), "local")  # ix_min, ix_max, iy_min, iy_max, area
    vb, vc, vi, vj, vr, vk, vq = (Var(f"nms_{s}") for s in ("b", "c", "i", "j", "r", "k", "q"))

    zero_fill = For(vr, rows, For(vq, 3, _st(sel, (vr, vq), Int(0))))
    rank = _visiting_order(scores, order, acc, n, vb, vc, vi, vj, vr)
    against = For(vk, most, If(binary("<", vk, _ld(cnt, 0)), Seq([
        _corners(boxes, vb, _ld(kept, vk), center, bj),
        _area(bj, aj),
        *_suppress_if_overlapping(bi, ai, bj, aj, inter, keep, iou_thr),
    ])))
    e = _ld(cur, 0)
    take = Seq([
        _st(kept, (_ld(cnt, 0),), e),
        _st(sel, (_ld(total, 0), 0), vb),
        _st(sel, (_ld(total, 0), 1), vc),
        _st(sel, (_ld(total, 0), 2), e),
        _st(cnt, (0,), binary("+", _ld(cnt, 0), Int(1))),
        _st(total, (0,), binary("+", _ld(total, 0), Int(1))),
    ])
    candidate: Stmt = Seq([
        _st(keep, (0,), Int(1)),
        _corners(boxes, vb, e, center, bi),
        _area(bi, ai),
        against,
        If(binary("==", _ld(keep, 0), Int(1)), take),
    ])
    if score_thr is not None:
        candidate = If(binary(">", scores[[vb, vc, e]], score_thr), candidate)
    visit = For(vr, n, Seq([
        _st(cur, (0,), _ld(order, vr)),
        If(binary("and", binary(">=", e, Int(0)), binary("<", _ld(cnt, 0), Int(most))), candidate),
    ]))
    per_class = Seq([rank, _st(cnt, (0,), Int(0)), visit])
    body: Stmt = Seq([
        zero_fill,
        _st(total, (0,), Int(0)),
        For(vb, nb, For(vc, nc, per_class)) if most > 0 else Seq([]),
        _st(count, (), _ld(total, 0)),
    ])
    for buf in (inter, aj, ai, bj, bi, keep, cur, acc, cnt, total):
        body = Allocate(buf, body)
    return body
