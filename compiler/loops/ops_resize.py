"""Lowering of Resize (opsets 10 to the latest) and Upsample: every mode, coordinate
transformation, nearest mode, antialiasing, ``exclude_outside``, ``axes`` and
``keep_aspect_ratio_policy``.

Semantics: the ONNX Resize spec, computed the way its reference implementation
(``onnx.reference.ops.op_resize``) defines it, axis by axis (interpolation in ONNX is separable):
for each resized axis and each output coordinate ``x`` the source coordinate ``x_ori`` follows the
coordinate transformation mode (``half_pixel``: ``(x + 0.5) / scale - 0.5``; ``asymmetric``:
``x / scale``; ``align_corners``, ``pytorch_half_pixel`` (these use the unrounded output length
``scale * input``, as the reference does); ``half_pixel_symmetric``;
``tf_crop_and_resize`` with its ``roi`` and ``extrapolation_value``), with ``scale`` the *given*
scale (or ``output / input`` when sizes are given), never recomputed from the rounded output
size. The taps are the ``n`` nearest input positions (edge-clamped), ``n`` = 2 for nearest and
linear, 4 for cubic, wider with ``antialias`` when downscaling; their weights are the mode's
coefficients of ``ratio = x_ori - floor(x_ori)`` (linear: ``1 - ratio, ratio``; cubic: Keys'
kernel with ``cubic_coeff_a``; nearest: 1 on the tap the nearest mode picks). Taps and weights
are computed at compile time into small constant tables (per axis: ``[output, taps]``); the kernel
sums ``prod(weights) * x[taps]`` over the taps of every resized axis (nearest: one gather).
Opset 10 Resize and Upsample use ``asymmetric`` coordinates and ``floor`` rounding.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import Node
from . import ops_elementwise  # noqa: F401  (registers first: Resize, Upsample here replace its)
from .ir import Bin, Cast, Expr, Float, Int, mul, select
from .ops_reduce import red
from .registry import LowerCtx, bad, register
from .tensor import Tensor


def _x_ori(ctm: str, x: float, scale: float, n_in: int, n_out: int, roi: tuple[float, float]) -> float | None:
    out_f = scale * n_in
    if ctm == "align_corners":
        return 0.0 if out_f == 1 else x * (n_in - 1) / (out_f - 1)
    if ctm == "asymmetric":
        return x / scale
    if ctm == "tf_crop_and_resize":
        if out_f == 1:
            v = (roi[1] - roi[0]) * (n_in - 1) / 2
        else:
            v = x * (roi[1] - roi[0]) * (n_in - 1) / (out_f - 1)
        v += roi[0] * (n_in - 1)
        return None if v < 0 or v > n_in - 1 else v
    if ctm == "pytorch_half_pixel":
        return -0.5 if out_f == 1 else (x + 0.5) / scale - 0.5
    if ctm == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if ctm == "half_pixel_symmetric":
        adj = n_out / out_f
        return n_in / 2 * (1 - adj) + (x + 0.5) / scale - 0.5
    raise ValueError(f"coordinate_transformation_mode {ctm!r}")


def _coeffs(mode: str, ratio: float, scale: float, a: float, antialias: bool, nearest: str) -> np.ndarray:
    if mode == "nearest":
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        pick = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False,
                "ceil": True}[nearest]
        return np.array([0.0, 1.0]) if pick else np.array([1.0, 0.0])
    if mode == "linear":
        if antialias and scale < 1:
            start = int(np.floor(-1 / scale) + 1)
            args = (np.arange(start, start + 2 - 2 * start) - ratio) * scale
            c = np.clip(1 - np.abs(args), 0, 1)
            return c / c.sum()
        return np.array([1 - ratio, ratio])
    if antialias and scale < 1:
        i0 = int(np.floor(-2 / scale) + 1)
        xs = [abs(scale * (i - ratio)) for i in range(i0, 2 - i0)]
        c = np.array([(a + 2) * x ** 3 - (a + 3) * x ** 2 + 1 if x <= 1 else
                      a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a if x < 2 else 0.0 for x in xs])
        return c / c.sum()
    r = ratio
    return np.array([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                     ((a + 2) * r - (a + 3)) * r * r + 1,
                     ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                     ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a])


def axis_table(mode: str, ctm: str, nearest: str, n_in: int, n_out: int, scale: float, roi: tuple[float, float],
               a: float = -0.75, exclude_outside: bool = False, antialias: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output position: tap indices ``[n_out, taps]`` (int64, clamped), weights (float64) and
    validity (1.0, or 0.0 where tf_crop_and_resize extrapolates)."""
    rows_i, rows_w, valid = [], [], []
    for x in range(n_out):
        xo = _x_ori(ctm, float(x), scale, n_in, n_out, roi)
        if xo is None:
            valid.append(0.0)
            xo = 0.0
        else:
            valid.append(1.0)
        ratio = 1.0 if float(xo).is_integer() else xo - math.floor(xo)
        c = _coeffs(mode, ratio, scale, a, antialias, nearest).astype(np.float64)
        n = len(c)
        base = math.ceil(xo) - 1
        idx = np.arange(base - n // 2 + 1, base - n // 2 + 1 + n)
        if exclude_outside:
            c = np.where((idx < 0) | (idx >= n_in), 0.0, c)
            c = c / c.sum() if c.sum() else c
        rows_i.append(np.clip(idx, 0, n_in - 1))
        rows_w.append(c)
    return np.array(rows_i, np.int64), np.array(rows_w, np.float64), np.array(valid)


def _scales(ctx: LowerCtx, node: Node, ins: list[Tensor | None], x: Tensor, axes: list[int], old: bool) -> list[float]:
    """Per-axis scale of ``x`` (rank r): the ``scales`` attribute of Upsample-7, else the constant
    ``scales`` input, else output size / input size from the constant ``sizes`` input (with
    ``keep_aspect_ratio_policy``, Resize-18); 1.0 on axes not in ``axes``. Raises CompileError naming
    ``scales`` when neither input is a compile-time constant."""
    scales = [1.0] * x.rank
    if node.op_type == "Upsample" and ctx.opset < 9:
        return [float(s) for s in node.attr("scales")]
    k_sc = 1 if old else 2
    sc = ins[k_sc] if len(ins) > k_sc else None
    sz = ins[3] if not old and len(ins) > 3 else None
    if sc is not None and sc.const is not None and np.asarray(sc.const).size:
        for a, s in zip(axes, np.asarray(sc.const, np.float64).reshape(-1), strict=True):
            scales[a] = float(s)
    elif sz is not None and sz.const is not None:
        sizes = np.asarray(sz.const).reshape(-1)
        ratios = [float(s) / x.shape[a] for a, s in zip(axes, sizes, strict=True)]
        policy = node.attr_str("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            common = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [common] * len(ratios)
        for a, ratio in zip(axes, ratios, strict=True):
            scales[a] = ratio
    else:
        raise bad(node, "scales", "scales or sizes must be compile-time constants")
    return scales


@register("Resize", "Upsample", complex_op=True)
def _resize(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    out = ctx.out_shape(node)
    mode = node.attr_str("mode", "nearest")
    mode = {"bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    if mode not in ("nearest", "linear", "cubic"):
        raise bad(node, "mode", f"mode {mode!r} is not defined")
    old = node.op_type == "Upsample" or ctx.opset < 11
    ctm = "asymmetric" if old else node.attr_str("coordinate_transformation_mode", "half_pixel")
    nearest = "floor" if old else node.attr_str("nearest_mode", "round_prefer_floor")
    r = x.rank
    axes = list(range(r)) if old or node.attr("axes", None) is None else [a % r for a in node.attr("axes")]
    scales = _scales(ctx, node, ins, x, axes, old)
    roi_v = np.zeros(2 * r)
    roi_v[r:] = 1.0
    if ctm == "tf_crop_and_resize" and len(ins) > 1 and ins[1] is not None and ins[1].const is not None:
        given = np.asarray(ins[1].const, np.float64).reshape(-1)
        for k, a in enumerate(axes):
            roi_v[a], roi_v[r + a] = given[k], given[len(axes) + k]
    cubic_a = float(node.attr("cubic_coeff_a", -0.75))
    excl = bool(node.attr("exclude_outside", 0))
    anti = bool(node.attr("antialias", 0))
    extrap = float(node.attr("extrapolation_value", 0.0))
    lw = ctx.lowering
    fdt = x.dtype if x.dtype in ("f32", "f64") else "f32"
    tabs: dict[int, tuple[Tensor, Tensor | None, np.ndarray]] = {}  # axis: (indices, weights, valid)
    for a in range(r):
        idx, w, valid = axis_table(mode, ctm, nearest, x.shape[a], out[a], scales[a], (roi_v[a], roi_v[r + a]),
                                   cubic_a, excl, anti)
        if mode == "nearest":
            pick = idx[np.arange(out[a]), np.argmax(w, axis=1)]
            if out[a] == x.shape[a] and np.array_equal(pick, np.arange(out[a])) and valid.all():
                continue
            tabs[a] = (ctx.const_tensor(pick, f"{node.label}_idx{a}"), None, valid)
        else:
            ident = out[a] == x.shape[a] and valid.all() and all(
                np.isclose(w[o][idx[o] == o].sum(), 1.0) and np.allclose(w[o][idx[o] != o], 0) for o in range(out[a]))
            if ident:
                continue
            tabs[a] = (ctx.const_tensor(idx, f"{node.label}_idx{a}"),
                       ctx.const_tensor(w.astype(np.float32 if fdt == "f32" else np.float64), f"{node.label}_w{a}"),
                       valid)
    vt = {a: ctx.const_tensor(t[2].astype(np.float32), f"{node.label}_valid{a}") for a, t in tabs.items()
          if not t[2].all()}

    def fn(i: list[Expr]) -> Expr:
        if mode == "nearest":
            v = x[[tabs[a][0][[i[a]]] if a in tabs else i[a] for a in range(r)]]
        else:
            taps = {a: lw.axis("rt", tabs[a][0].shape[1]) for a in tabs}
            src = [tabs[a][0][[i[a], taps[a][0]]] if a in tabs else i[a] for a in range(r)]
            body: Expr = x[src]
            if body.dtype != fdt:
                body = Cast(fdt, body)
            for a in tabs:
                body = mul(body, tabs[a][1][[i[a], taps[a][0]]])  # type: ignore[index]
            v = red("sum", [taps[a] for a in tabs], body) if tabs else body
        if vt:
            ok: Expr | None = None
            for a, t in vt.items():
                c = Bin(">", t[[i[a]]], Float(0.5))
                ok = c if ok is None else Bin("and", ok, c)
            assert ok is not None
            fill = Float(extrap, v.dtype) if v.dtype in ("f32", "f64") else Int(int(extrap), v.dtype)
            v = select(ok, v, fill)
        return v
    return [Tensor(out, x.dtype, fn)]
