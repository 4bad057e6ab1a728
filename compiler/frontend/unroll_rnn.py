"""Unroll LSTM, GRU and RNN nodes over their (static) sequence length into standard ONNX ops.

A recurrence cannot be one loop-IR kernel built from index functions (step ``t`` reads the state
that step ``t - 1`` wrote), so each recurrent node becomes, per direction and time step, a
``Gemm`` of the step input with ``W``, a ``Gemm`` of the previous hidden state with ``R``, the
bias add, ``Slice`` s per gate, the activations and the state update; the step outputs are
stacked with ``Unsqueeze`` + ``Concat``. The graph passes then fuse each step's elementwise tail
into its Gemm. The sequence length comes from the input's static shape (after specialization),
so a new length compiles again. This is the ONNX specs' equations, term by term (gate order
``iofc`` for LSTM, ``zrh`` for GRU), with ``activations``/``activation_alpha``/``activation_beta``,
``clip``, ``direction`` (forward, reverse, bidirectional), ``layout``, peepholes ``P``,
``linear_before_reset`` (GRU) and ``initial_h``/``initial_c``. ``sequence_lens`` shorter than the
sequence is supported for the forward direction (later steps keep the state and output zeros);
``input_forget=1`` and shorter ``sequence_lens`` in reverse raise ``ValueError`` (reported as an
import error naming the node).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper, numpy_helper

from ..ir import as_text
from .control_flow import _shape_of

DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


class _Builder:
    def __init__(self, prefix: str, opset: int) -> None:
        self.prefix, self.opset = prefix, opset
        self.nodes: list[NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{self.prefix}_{base}_{self.n}"

    def const(self, arr: np.ndarray, base: str = "c") -> str:
        nm = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm

    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        out = out or self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def take(self, x: str, index: int, axis: int) -> str:
        """``x`` indexed at ``index`` on ``axis`` (that axis removed)."""
        return self.op("Gather", [x, self.const(np.array(index, np.int64), "i")], axis=axis)

    def cols(self, x: str, start: int, end: int) -> str:
        """``x[:, start:end]``."""
        if self.opset < 10:
            return self.op("Slice", [x], starts=[start], ends=[end], axes=[1])
        return self.op("Slice", [x, self.const(np.array([start], np.int64)), self.const(np.array([end], np.int64)),
                                 self.const(np.array([1], np.int64))])

    def unsqueeze(self, x: str, axes: list[int]) -> str:
        if self.opset < 13:
            return self.op("Unsqueeze", [x], axes=axes)
        return self.op("Unsqueeze", [x, self.const(np.array(axes, np.int64))])

    def act(self, name: str, x: str, alpha: float | None, beta: float | None, dtype: np.dtype) -> str:
        simple = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu", "softsign": "Softsign", "softplus": "Softplus"}
        key = name.lower()
        if key in simple:
            return self.op(simple[key], [x])
        if key == "leakyrelu":
            return self.op("LeakyRelu", [x], alpha=0.01 if alpha is None else alpha)
        if key == "thresholdedrelu":
            return self.op("ThresholdedRelu", [x], alpha=1.0 if alpha is None else alpha)
        if key == "elu":
            return self.op("Elu", [x], alpha=1.0 if alpha is None else alpha)
        if key == "hardsigmoid":
            return self.op("HardSigmoid", [x], alpha=0.2 if alpha is None else alpha, beta=0.5 if beta is None else beta)
        if key == "affine":
            m = self.op("Mul", [x, self.const(np.array(1.0 if alpha is None else alpha, dtype))])
            return self.op("Add", [m, self.const(np.array(0.0 if beta is None else beta, dtype))])
        if key == "scaledtanh":
            m = self.op("Mul", [x, self.const(np.array(1.0 if beta is None else beta, dtype))])
            return self.op("Mul", [self.op("Tanh", [m]), self.const(np.array(1.0 if alpha is None else alpha, dtype))])
        raise ValueError(f"activation {name!r} is not defined")


def _attr(node: NodeProto, name: str, default: Any) -> Any:
    """The value of ``node``'s attribute ``name`` as onnx.helper gives it (int, float, bytes, a list of
    them...: its type depends on the attribute), else ``default``."""
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


@dataclass
class _Cell:
    """What one direction's step equations read: the builder, the op, sizes, dtype, its activations
    (``fa``/``al``/``be``: functions, alphas, betas), ``clip``, the recurrence weights ``rd``, GRU's
    ``lbr``/``rb_h`` and LSTM's peepholes ``pd``."""

    b: _Builder
    op: str
    hidden: int
    dt: np.dtype
    opset: int
    fa: list[str]
    al: list[Any]
    be: list[Any]
    clip: Any
    rd: str
    lbr: int
    rb_h: str | None
    pd: str

    def gate(self, src: str, k: int) -> str:
        return self.b.cols(src, k * self.hidden, (k + 1) * self.hidden)

    def clipped(self, v: str) -> str:
        b, clip = self.b, self.clip
        if clip is None:
            return v
        if self.opset < 11:
            return b.op("Clip", [v], min=-float(clip), max=float(clip))
        return b.op("Clip", [v, b.const(np.array(-clip, self.dt)), b.const(np.array(clip, self.dt))])

    def act(self, k: int, v: str) -> str:
        return self.b.act(self.fa[k], v, self.al[k], self.be[k], self.dt)

    def rows(self, lo: int, hi: int) -> str:
        """Rows ``lo*hidden .. hi*hidden`` of R (its gates' recurrence weights)."""
        b = self.b
        return b.op("Slice", [self.rd, b.const(np.array([lo * self.hidden], np.int64)),
                              b.const(np.array([hi * self.hidden], np.int64)), b.const(np.array([0], np.int64))])


def _lstm_step(c: _Cell, pre: str, cst: str) -> tuple[str, str]:
    """One LSTM step (ONNX spec, gates ``iofc``): ``(H_t, C_t)`` from the gate pre-activations."""
    b, hidden = c.b, c.hidden
    gi, go, gf, gc = (c.gate(pre, k) for k in range(4))
    if c.pd:
        gi = b.op("Add", [gi, b.op("Mul", [b.cols(b.unsqueeze(c.pd, [0]), 0, hidden), cst])])
        gf = b.op("Add", [gf, b.op("Mul", [b.cols(b.unsqueeze(c.pd, [0]), 2 * hidden, 3 * hidden), cst])])
    it, ft, ct = c.act(0, c.clipped(gi)), c.act(0, c.clipped(gf)), c.act(1, c.clipped(gc))
    c_new = b.op("Add", [b.op("Mul", [ft, cst]), b.op("Mul", [it, ct])])
    if c.pd:
        go = b.op("Add", [go, b.op("Mul", [b.cols(b.unsqueeze(c.pd, [0]), hidden, 2 * hidden), c_new])])
    return b.op("Mul", [c.act(0, c.clipped(go)), c.act(2, c_new)]), c_new


def _gru_step(c: _Cell, pre: str, h: str) -> str:
    """One GRU step (ONNX spec, gates ``zrh``, ``linear_before_reset``): ``H_t``."""
    b, hidden = c.b, c.hidden
    rz = b.op("Gemm", [h, c.rows(0, 2)], transB=1)
    zt = c.act(0, c.clipped(b.op("Add", [c.gate(pre, 0), b.cols(rz, 0, hidden)])))
    rt = c.act(0, c.clipped(b.op("Add", [c.gate(pre, 1), b.cols(rz, hidden, 2 * hidden)])))
    rh = c.rows(2, 3)
    if c.lbr:
        lin = b.op("Gemm", [h, rh] + ([c.rb_h] if c.rb_h else []), transB=1)
        hh = b.op("Add", [c.gate(pre, 2), b.op("Mul", [rt, lin])])
    else:
        hh = b.op("Add", [c.gate(pre, 2), b.op("Gemm", [b.op("Mul", [rt, h]), rh], transB=1)])
    ht = c.act(1, c.clipped(hh))
    one_minus = b.op("Sub", [b.const(np.array(1.0, c.dt)), zt])
    return b.op("Add", [b.op("Mul", [one_minus, ht]), b.op("Mul", [zt, h])])


def _bias(b: _Builder, op: str, bias: str, d: int, g: int, hidden: int, dt: np.dtype, opset: int, lbr: int
          ) -> tuple[str, str | None]:
    """Direction ``d``'s summed bias ``Wb + Rb`` (``[g * hidden]``), and GRU's ``Rbh`` when it stays
    inside the reset product (``linear_before_reset``); zeros without a bias."""
    if not bias:
        return b.const(np.zeros(g * hidden, dt), "zb"), None

    def part(bd: str, lo: int, hi: int) -> str:
        if opset >= 10:
            return b.op("Slice", [bd, b.const(np.array([lo], np.int64)), b.const(np.array([hi], np.int64)),
                                  b.const(np.array([0], np.int64))])
        return b.op("Slice", [bd], starts=[lo], ends=[hi], axes=[0])

    bd = b.take(bias, d, 0)
    if op == "GRU" and lbr:  # Rbh stays inside the reset product
        wb, rb = part(bd, 0, g * hidden), part(bd, g * hidden, 2 * g * hidden)
        rb_h = part(rb, 2 * hidden, 3 * hidden)
        return b.op("Add", [wb, b.op("Mul", [rb, b.const(np.concatenate(
            [np.ones(2 * hidden), np.zeros(hidden)]).astype(dt))])]), rb_h
    return b.op("Add", [part(bd, 0, g * hidden), part(bd, g * hidden, 2 * g * hidden)]), None


def _unroll(node: NodeProto, shapes: dict[str, list[int]], dtypes: dict[str, np.dtype], opset: int
            ) -> tuple[list[NodeProto], list[onnx.TensorProto]]:
    op = node.op_type
    ins = list(node.input) + [""] * (8 - len(node.input))
    x, w, r, bias, seq_lens, init_h = ins[:6]
    init_c, peep = (ins[6], ins[7]) if op == "LSTM" else ("", "")
    layout = int(_attr(node, "layout", 0))
    hidden = int(_attr(node, "hidden_size", 0)) or shapes[r][-1]
    direction = as_text(_attr(node, "direction", b"forward"))
    dirs = 2 if direction == "bidirectional" else 1
    if op == "LSTM" and int(_attr(node, "input_forget", 0)):
        raise ValueError(f"{op} node {node.name!r}: input_forget=1 is not supported")
    xs = shapes[x]
    seq, batch = (xs[0], xs[1]) if layout == 0 else (xs[1], xs[0])
    dt = dtypes[x]
    acts = [as_text(a) for a in _attr(node, "activations", [])] or \
        DEFAULT_ACTS[op] * dirs
    alphas = list(_attr(node, "activation_alpha", []))
    betas = list(_attr(node, "activation_beta", []))
    lbr = int(_attr(node, "linear_before_reset", 0))
    b = _Builder((node.name or op) + "_unrolled", opset)
    if seq_lens and direction != "forward":
        raise ValueError(f"{op} node {node.name!r}: sequence_lens with direction {direction} is not supported")
    n_act = len(DEFAULT_ACTS[op])
    ys, hs, cs = [], [], []
    for d in range(dirs):
        off = d * n_act
        bsum, rb_h = _bias(b, op, bias, d, GATES[op], hidden, dt, opset, lbr)
        wd = b.take(w, d, 0)
        cell = _Cell(b, op, hidden, dt, opset, [acts[off + k] for k in range(n_act)],
                     [alphas[off + k] if off + k < len(alphas) else None for k in range(n_act)],
                     [betas[off + k] if off + k < len(betas) else None for k in range(n_act)],
                     _attr(node, "clip", None), b.take(r, d, 0), lbr, rb_h, b.take(peep, d, 0) if peep else "")
        h = b.take(init_h, d, 0) if init_h else b.const(np.zeros((batch, hidden), dt), "h0")
        c = (b.take(init_c, d, 0) if init_c else b.const(np.zeros((batch, hidden), dt), "c0")) if op == "LSTM" else ""
        steps = list(range(seq))[::-1] if direction == "reverse" or d == 1 else list(range(seq))
        outs: dict[int, str] = {}
        for t in steps:
            xt = b.take(x, t, 0 if layout == 0 else 1)
            pre = b.op("Add", [b.op("Gemm", [xt, wd, bsum], transB=1), b.op("Gemm", [h, cell.rd], transB=1)]) \
                if op != "GRU" else b.op("Gemm", [xt, wd, bsum], transB=1)
            c_new = ""
            if op == "RNN":
                h_new = cell.act(0, cell.clipped(pre))
            elif op == "LSTM":
                h_new, c_new = _lstm_step(cell, pre, c)
            else:
                h_new = _gru_step(cell, pre, h)
            if seq_lens:
                live = b.unsqueeze(b.op("Less", [b.const(np.array(t, np.int64)), b.op("Cast", [seq_lens], to=7)]), [1])
                outs[t] = b.op("Where", [live, h_new, b.const(np.zeros((), dt))])
                h_new = b.op("Where", [live, h_new, h])
                if op == "LSTM":
                    c_new = b.op("Where", [live, c_new, c])
            else:
                outs[t] = h_new
            h, c = h_new, c_new if op == "LSTM" else c
        ys.append(b.op("Concat", [b.unsqueeze(outs[t], [0, 1]) for t in range(seq)], axis=0) if seq else "")
        hs.append(b.unsqueeze(h, [0]))
        cs.append(b.unsqueeze(c, [0]) if op == "LSTM" else "")
    _name_outputs(b, node, ys, hs, cs, dirs, layout)
    return b.nodes, b.inits


def _name_outputs(b: _Builder, node: NodeProto, ys: list[str], hs: list[str], cs: list[str], dirs: int,
                  layout: int) -> None:
    """``Y`` (``[seq, dirs, batch, hidden]``), ``Y_h`` and ``Y_c`` (``[dirs, batch, hidden]``), as the
    node's own output names (``layout=1``: batch first)."""
    outs_named = list(node.output) + [""] * 3
    if outs_named[0]:
        y = ys[0] if dirs == 1 else b.op("Concat", ys, axis=1)
        if layout == 1:
            y = b.op("Transpose", [y], perm=[2, 0, 1, 3])
        b.op("Identity", [y], outs_named[0])
    for k, parts in ((1, hs), (2, cs)):
        if outs_named[k] and (k == 1 or node.op_type == "LSTM"):
            v = parts[0] if dirs == 1 else b.op("Concat", parts, axis=0)
            if layout == 1:
                v = b.op("Transpose", [v], perm=[1, 0, 2])
            b.op("Identity", [v], outs_named[k])


def describe(node: NodeProto, shapes: dict[str, list[int]]) -> dict[str, Any]:
    """The numbers of one unrolled recurrent node: ``steps`` (sequence length), ``directions``
    (1 or 2), ``direction``, ``hidden_size``, ``batch``, ``gates`` (``GATES``)."""
    layout = int(_attr(node, "layout", 0))
    xs = shapes[node.input[0]]
    direction = as_text(_attr(node, "direction", b"forward"))
    hidden = int(_attr(node, "hidden_size", 0)) or shapes[node.input[2]][-1]
    return {"steps": int(xs[0] if layout == 0 else xs[1]), "batch": int(xs[1] if layout == 0 else xs[0]),
            "directions": 2 if direction == "bidirectional" else 1, "direction": direction,
            "hidden_size": int(hidden), "gates": GATES[node.op_type]}


def unroll_rnns(model: ModelProto, decisions: list[dict[str, Any]] | None = None) -> ModelProto:
    """A copy of ``model`` with every top-level LSTM/GRU/RNN node unrolled (see module docstring).
    A node whose X, W or R shape is not static is left as it is; raises ValueError naming the node
    for an unsupported attribute. Appends to ``decisions``, per recurrent node, ``{"node", "op",
    "unrolled": bool, "reason" (kept), **describe(...)}`` (unrolled)."""
    if not any(n.op_type in GATES and n.domain in ("", "ai.onnx") for n in model.graph.node):
        return model
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes: dict[str, list[int]] = {}
    dtypes: dict[str, np.dtype] = {}
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = [d.dim_value for d in tt.shape.dim]
        if tt.elem_type:
            dtypes[vi.name] = helper.tensor_dtype_to_np_dtype(tt.elem_type)
    for t in inferred.graph.initializer:
        shapes[t.name] = list(t.dims)
        dtypes[t.name] = helper.tensor_dtype_to_np_dtype(t.data_type)
    for k, v in _shape_of(model).items():  # Prism's own inference knows values onnx's does not
        shapes.setdefault(k, v)
    for n in model.graph.node:
        if n.op_type in GATES and n.input[0] not in dtypes:
            dtypes[n.input[0]] = np.dtype(np.float32)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    out = ModelProto()
    out.CopyFrom(model)
    nodes: list[NodeProto] = []
    unrolled = 0
    for n in model.graph.node:
        if n.op_type not in GATES or n.domain not in ("", "ai.onnx"):
            nodes.append(n)
            continue
        missing = [n.input[k] for k in (0, 1, 2) if n.input[k] not in shapes]
        if missing:
            nodes.append(n)  # shapes not static (unbound input dims): specialization reports that
            if decisions is not None:
                decisions.append({"node": n.name or n.op_type, "op": n.op_type, "unrolled": False,
                                  "reason": f"input %{missing[0]} has no static shape"})
            continue
        new, inits = _unroll(n, shapes, dtypes, opset)
        unrolled += 1
        if decisions is not None:
            decisions.append({"node": n.name or n.op_type, "op": n.op_type, "unrolled": True, "new_nodes": len(new),
                              **describe(n, shapes)})
        nodes.extend(new)
        out.graph.initializer.extend(inits)
    if not unrolled:
        return model
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out
