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

from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper, numpy_helper

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

    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs: object) -> str:
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


def _attr(node: NodeProto, name: str, default: object) -> object:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _unroll(node: NodeProto, shapes: dict[str, list[int]], dtypes: dict[str, np.dtype], opset: int
            ) -> tuple[list[NodeProto], list[onnx.TensorProto]]:
    op = node.op_type
    ins = list(node.input) + [""] * (8 - len(node.input))
    x, w, r, bias, seq_lens, init_h = ins[:6]
    init_c, peep = (ins[6], ins[7]) if op == "LSTM" else ("", "")
    layout = int(_attr(node, "layout", 0))
    hidden = int(_attr(node, "hidden_size", 0)) or shapes[r][-1]
    direction = _attr(node, "direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = 2 if direction == "bidirectional" else 1
    if op == "LSTM" and int(_attr(node, "input_forget", 0)):
        raise ValueError(f"{op} node {node.name!r}: input_forget=1 is not supported")
    xs = shapes[x]
    seq, batch = (xs[0], xs[1]) if layout == 0 else (xs[1], xs[0])
    dt = dtypes[x]
    g = GATES[op]
    acts = [a.decode() if isinstance(a, bytes) else a for a in _attr(node, "activations", [])] or \
        DEFAULT_ACTS[op] * dirs
    alphas = list(_attr(node, "activation_alpha", []))
    betas = list(_attr(node, "activation_beta", []))
    clip = _attr(node, "clip", None)
    lbr = int(_attr(node, "linear_before_reset", 0))
    b = _Builder((node.name or op) + "_unrolled", opset)
    if seq_lens and direction != "forward":
        raise ValueError(f"{op} node {node.name!r}: sequence_lens with direction {direction} is not supported")
    n_act = len(DEFAULT_ACTS[op])
    ys, hs, cs = [], [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        a_off = d * n_act
        fa = [acts[a_off + k] for k in range(n_act)]
        al = [alphas[a_off + k] if a_off + k < len(alphas) else None for k in range(n_act)]
        be = [betas[a_off + k] if a_off + k < len(betas) else None for k in range(n_act)]
        wd, rd = b.take(w, d, 0), b.take(r, d, 0)
        if bias:
            bd = b.take(bias, d, 0)
            bsum = b.op("Add", [b.op("Slice", [bd, b.const(np.array([0], np.int64)), b.const(np.array([g * hidden],
                        np.int64)), b.const(np.array([0], np.int64))]) if opset >= 10 else
                        b.op("Slice", [bd], starts=[0], ends=[g * hidden], axes=[0]),
                        b.op("Slice", [bd, b.const(np.array([g * hidden], np.int64)), b.const(np.array([2 * g * hidden],
                             np.int64)), b.const(np.array([0], np.int64))]) if opset >= 10 else
                        b.op("Slice", [bd], starts=[g * hidden], ends=[2 * g * hidden], axes=[0])])
            rb_h = None
            if op == "GRU" and lbr:  # Rbh stays inside the reset product
                wb = b.op("Slice", [bd, b.const(np.array([0], np.int64)), b.const(np.array([g * hidden], np.int64)),
                                    b.const(np.array([0], np.int64))])
                rb = b.op("Slice", [bd, b.const(np.array([g * hidden], np.int64)),
                                    b.const(np.array([2 * g * hidden], np.int64)), b.const(np.array([0], np.int64))])
                rb_h = b.op("Slice", [rb, b.const(np.array([2 * hidden], np.int64)),
                                      b.const(np.array([3 * hidden], np.int64)), b.const(np.array([0], np.int64))])
                bsum = b.op("Add", [wb, b.op("Mul", [rb, b.const(np.concatenate(
                    [np.ones(2 * hidden), np.zeros(hidden)]).astype(dt))])])
        else:
            bsum, rb_h = b.const(np.zeros(g * hidden, dt), "zb"), None
        h = b.take(init_h, d, 0) if init_h else b.const(np.zeros((batch, hidden), dt), "h0")
        c = (b.take(init_c, d, 0) if init_c else b.const(np.zeros((batch, hidden), dt), "c0")) if op == "LSTM" else ""
        pd = b.take(peep, d, 0) if peep else ""
        steps = list(range(seq))[::-1] if reverse else list(range(seq))
        outs: dict[int, str] = {}
        for t in steps:
            xt = b.take(x, t, 0 if layout == 0 else 1)
            pre = b.op("Add", [b.op("Gemm", [xt, wd, bsum], transB=1), b.op("Gemm", [h, rd], transB=1)]) \
                if op != "GRU" else b.op("Gemm", [xt, wd, bsum], transB=1)

            def gate(src: str, k: int) -> str:
                return b.cols(src, k * hidden, (k + 1) * hidden)

            def clipped(v: str) -> str:
                return b.op("Clip", [v], min=-float(clip), max=float(clip)) if clip is not None and opset < 11 else \
                    b.op("Clip", [v, b.const(np.array(-clip, dt)), b.const(np.array(clip, dt))]) if clip is not None \
                    else v
            if op == "RNN":
                h_new = b.act(fa[0], clipped(pre), al[0], be[0], dt)
            elif op == "LSTM":
                gi, go, gf, gc = (gate(pre, k) for k in range(4))
                if pd:
                    gi = b.op("Add", [gi, b.op("Mul", [b.cols(b.unsqueeze(pd, [0]), 0, hidden), c])])
                    gf = b.op("Add", [gf, b.op("Mul", [b.cols(b.unsqueeze(pd, [0]), 2 * hidden, 3 * hidden), c])])
                it = b.act(fa[0], clipped(gi), al[0], be[0], dt)
                ft = b.act(fa[0], clipped(gf), al[0], be[0], dt)
                ct = b.act(fa[1], clipped(gc), al[1], be[1], dt)
                c_new = b.op("Add", [b.op("Mul", [ft, c]), b.op("Mul", [it, ct])])
                if pd:
                    go = b.op("Add", [go, b.op("Mul", [b.cols(b.unsqueeze(pd, [0]), hidden, 2 * hidden), c_new])])
                ot = b.act(fa[0], clipped(go), al[0], be[0], dt)
                h_new = b.op("Mul", [ot, b.act(fa[2], c_new, al[2], be[2], dt)])
            else:  # GRU
                rz = b.op("Gemm", [h, b.op("Slice", [rd, b.const(np.array([0], np.int64)),
                                                     b.const(np.array([2 * hidden], np.int64)),
                                                     b.const(np.array([0], np.int64))])], transB=1)
                zt = b.act(fa[0], clipped(b.op("Add", [gate(pre, 0), b.cols(rz, 0, hidden)])), al[0], be[0], dt)
                rt = b.act(fa[0], clipped(b.op("Add", [gate(pre, 1), b.cols(rz, hidden, 2 * hidden)])), al[0], be[0],
                           dt)
                rh = b.op("Slice", [rd, b.const(np.array([2 * hidden], np.int64)),
                                    b.const(np.array([3 * hidden], np.int64)), b.const(np.array([0], np.int64))])
                if lbr:
                    lin = b.op("Gemm", [h, rh] + ([rb_h] if rb_h else []), transB=1)
                    hh = b.op("Add", [gate(pre, 2), b.op("Mul", [rt, lin])])
                else:
                    hh = b.op("Add", [gate(pre, 2), b.op("Gemm", [b.op("Mul", [rt, h]), rh], transB=1)])
                ht = b.act(fa[1], clipped(hh), al[1], be[1], dt)
                one_minus = b.op("Sub", [b.const(np.array(1.0, dt)), zt])
                h_new = b.op("Add", [b.op("Mul", [one_minus, ht]), b.op("Mul", [zt, h])])
                c_new = ""
            if seq_lens:
                live = b.unsqueeze(b.op("Less", [b.const(np.array(t, np.int64)), b.op("Cast", [seq_lens], to=7)]), [1])
                y_t = b.op("Where", [live, h_new, b.const(np.zeros((), dt))])
                h_new = b.op("Where", [live, h_new, h])
                if op == "LSTM":
                    c_new = b.op("Where", [live, c_new, c])
            else:
                y_t = h_new
            outs[t] = y_t
            h = h_new
            if op == "LSTM":
                c = c_new
        ys.append(b.op("Concat", [b.unsqueeze(outs[t], [0, 1]) for t in range(seq)], axis=0) if seq else "")
        hs.append(b.unsqueeze(h, [0]))
        cs.append(b.unsqueeze(c, [0]) if op == "LSTM" else "")
    outs_named = list(node.output) + [""] * 3
    if outs_named[0]:
        y = ys[0] if dirs == 1 else b.op("Concat", ys, axis=1)
        if layout == 1:
            y = b.op("Transpose", [y], perm=[2, 0, 1, 3])
        b.op("Identity", [y], outs_named[0])
    for k, parts in ((1, hs), (2, cs)):
        if outs_named[k] and (k == 1 or op == "LSTM"):
            v = parts[0] if dirs == 1 else b.op("Concat", parts, axis=0)
            if layout == 1:
                v = b.op("Transpose", [v], perm=[1, 0, 2])
            b.op("Identity", [v], outs_named[k])
    return b.nodes, b.inits


def describe(node: NodeProto, shapes: dict[str, list[int]]) -> dict[str, Any]:
    """The numbers of one unrolled recurrent node: ``steps`` (sequence length), ``directions``
    (1 or 2), ``direction``, ``hidden_size``, ``batch``, ``gates`` (``GATES``)."""
    layout = int(_attr(node, "layout", 0))
    xs = shapes[node.input[0]]
    direction = _attr(node, "direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    hidden = int(_attr(node, "hidden_size", 0)) or shapes[node.input[2]][-1]  # type: ignore[call-overload]
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
    from .control_flow import _shape_of  # Prism's own inference knows values onnx's does not

    for k, v in _shape_of(model).items():
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
