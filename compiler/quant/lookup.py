"""Elementwise chains between two quantized tensors as 256-entry lookup tables (``fold-qdq``'s first rewrite).

A QDQ model computes an activation between two quantized layers in float: ``DequantizeLinear -> Sigmoid
-> QuantizeLinear``, YOLO's SiLU ``DQ(x) * Q(Sigmoid(DQ(x)))`` re-quantized, PP-OCR's ``HardSwish``, a
``LeakyRelu``, ``Tanh``, ``Gelu`` ... Whatever the chain, its result is a function of one 8-bit value, so
it takes at most 256 values: :func:`tabulate` evaluates the chain once per possible input at compile time
and replaces it with ``prism.QLinearLookup(x, table)`` (``compiler.ops.lookup``), as ONNX Runtime's
``QLinearLookupBase`` (QLinearSigmoid, QLinearLeakyRelu) and TensorRT do for single activations.

The region of an 8-bit value ``x`` (uint8 or int8, the output of a QuantizeLinear, an integer op or a graph
input): the ONNX-domain nodes of fusion kind elementwise or broadcast (``compiler.ops``) with one output,
whose inputs other than constants of one element all belong to it (``x`` itself or an output of a node of
the region) and have ``x``'s shape; QuantizeLinear/DequantizeLinear with a constant per-tensor scale and
zero point are such nodes. An 8-bit value of the region that is read outside it (or is a graph output),
or that a DequantizeLinear read outside the region dequantizes, becomes ``QLinearLookup(x)`` when the
nodes computing it from ``x`` include one that is not a QuantizeLinear/DequantizeLinear/Identity (a pure
requantization stays as it is). Random ops and ops of other domains are never part of a region.

Semantics: the table is the chain's own result on the 256 input values, computed by ``onnx.reference``
(the ONNX spec's evaluator, float32 as numpy computes it; at opset 21, since it implements Q/DQ from 19 on); the compiled program then gives exactly the
reference's integers. ONNX Runtime computes Sigmoid, Tanh, Exp ... with its own approximations (MLAS), so
its integers may differ by one step where the float result lies within a few ulp of a rounding boundary.
Nodes of the region left without users are removed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from onnx import helper

from ..export import node_proto, tensor_proto
from ..ir import Graph, Node, Value
from ..ops.registry import op_kind
from .qdq import INT8

PASSIVE = ("QuantizeLinear", "DequantizeLinear", "Identity")
NOT_TABULATED = ("Dropout", "RandomNormalLike", "RandomUniformLike", "Bernoulli")


@dataclass
class Tabulated:
    """One rewrite: ``value`` (its name) now ``QLinearLookup(source)``; ``chain`` the op types it replaces."""

    value: str
    source: str
    node: str
    chain: list[str]
    dtype: str


def _eight_bit(v: Value) -> bool:
    return v.type is not None and v.type.short in INT8


def _scalar_const(v: Value) -> bool:
    return v.const is not None and np.asarray(v.const).size == 1


def _node_root(n: Node, root: dict[int, Value]) -> Value | None:
    """The single 8-bit value ``n``'s result is an elementwise function of, else None."""
    if n.domain or len(n.outputs) != 1 or n.op_type in NOT_TABULATED or op_kind(n) not in ("elementwise", "broadcast"):
        return None
    out = n.outputs[0]
    found: Value | None = None
    for v in n.inputs:
        if v is None or _scalar_const(v):
            continue
        if v.const is not None:
            return None
        r = root.get(id(v)) or (v if _eight_bit(v) else None)
        if r is None or (found is not None and r is not found):
            return None
        found = r
    if found is None or out.type is None or found.type is None or v_shape(out) != v_shape(found):
        return None
    if any(v is not None and v.const is None and v_shape(v) != v_shape(found) for v in n.inputs):
        return None
    return found


def v_shape(v: Value) -> tuple:  # type: ignore[type-arg]
    return tuple(v.type.shape or ()) if v.type is not None else ()


def _regions(graph: Graph) -> dict[int, Value]:
    """``{id(value): its root}`` for every value computed by a region node (topological order)."""
    root: dict[int, Value] = {}
    for n in graph.nodes:
        r = _node_root(n, root)
        if r is not None:
            root[id(n.outputs[0])] = r
    return root


def _exits(graph: Graph, root: dict[int, Value]) -> list[Value]:
    """The 8-bit region values to tabulate (see the module docstring), in graph order."""
    outs = {id(v) for v in graph.outputs}
    picked: dict[int, Value] = {}
    for n in graph.nodes:
        v = n.outputs[0] if n.outputs else None
        if v is None or id(v) not in root:
            continue
        r = root[id(v)]
        outside = id(v) in outs or any(root.get(id(c.outputs[0]) if c.outputs else -1) is not r for c in v.consumers())
        if not outside:
            continue
        if _eight_bit(v):
            picked.setdefault(id(v), v)
        elif n.op_type == "DequantizeLinear" and n.inputs[0] is not None and n.inputs[0] is not r \
                and id(n.inputs[0]) in root:
            picked.setdefault(id(n.inputs[0]), n.inputs[0])
    return [v for v in picked.values() if any(m.op_type not in PASSIVE for m in _chain(v, root))]


def _chain(v: Value, root: dict[int, Value]) -> list[Node]:
    """The region nodes computing ``v`` from its root, in graph order."""
    r, seen, stack = root[id(v)], {}, [v]
    while stack:
        x = stack.pop()
        p = x.producer
        if x is r or p is None or id(p) in seen or id(x) not in root:
            continue
        seen[id(p)] = p
        stack.extend(i for i in p.inputs if i is not None and i.const is None)
    g = next(iter(seen.values())).graph if seen else None
    order = {id(n): k for k, n in enumerate(g.nodes)} if g is not None else {}
    return sorted(seen.values(), key=lambda n: order.get(id(n), 0))


def _table(graph: Graph, v: Value, src: Value, chain: list[Node]) -> np.ndarray:
    """``v`` for each of the 256 values of ``src``, smallest first, by ``onnx.reference``."""
    # deferred: onnx.reference loads all its op modules
    from onnx.reference import ReferenceEvaluator

    np_dt = np.uint8 if src.type.short == "u8" else np.int8  # type: ignore[union-attr]
    xs = np.arange(np.iinfo(np_dt).min, np.iinfo(np_dt).max + 1).astype(np_dt)
    consts = {id(i): i for n in chain for i in n.inputs if i is not None and i.const is not None}
    g = helper.make_graph([node_proto(n) for n in chain], "lookup",
                          [helper.make_tensor_value_info(src.name, src.type.elem_type, [256])],  # type: ignore[union-attr]
                          [helper.make_tensor_value_info(v.name, v.type.elem_type, None)],  # type: ignore[union-attr]
                          [tensor_proto(c.name, np.asarray(c.const)) for c in consts.values()])
    opset = int(graph.opset_imports.get("", graph.opset_imports.get("ai.onnx", 17)))
    if opset < 11:
        raise ValueError(f"opset {opset}: elementwise ops changed form at 11 (Clip bounds as inputs)")
    # onnx.reference implements QuantizeLinear/DequantizeLinear from opset 19; the elementwise ops have
    # kept their semantics from 11 on (later versions add types)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", max(opset, 21))])
    model.ir_version = 10
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        (y,) = ReferenceEvaluator(model).run(None, {src.name: xs})
    y = np.asarray(y).reshape(-1)
    want = np.uint8 if v.type.short == "u8" else np.int8  # type: ignore[union-attr]
    if y.size != 256 or y.dtype != want:
        raise ValueError(f"{v.name}: the chain gave {y.dtype}[{y.size}], not {np.dtype(want)}[256]")
    return y


def tabulate(graph: Graph) -> list[Tabulated]:
    """Rewrite every tabulable region of ``graph`` (top level) in place; see the module docstring."""
    root = _regions(graph)
    plans = []
    for v in _exits(graph, root):
        chain = _chain(v, root)
        try:
            plans.append((v, root[id(v)], chain, _table(graph, v, root[id(v)], chain)))
        except Exception:  # an op onnx.reference cannot run on this chain: it stays in float
            continue
    done: list[Tabulated] = []
    for v, src, chain, table in plans:
        old = v.producer
        assert old is not None
        graph.remove_node(old, force=True)
        name = next((n.name for n in reversed(chain) if n.op_type not in PASSIVE), None) or old.name
        _remove_dead(graph, chain)
        t = graph.add_constant(graph.fresh_name(v.name + "_table"), table)
        node = graph.add_node("QLinearLookup", [src, t], [v], {}, name=name, domain="prism")
        done.append(Tabulated(v.name, src.name, node.label, [n.op_type for n in chain], v.type.short))  # type: ignore[union-attr]
    if done:
        graph.opset_imports.setdefault("prism", 1)
        graph.topological_sort()
    return done


def _remove_dead(graph: Graph, chain: list[Node]) -> None:
    outs = {id(v) for v in graph.outputs}
    for n in reversed(chain):
        if n.graph is graph and not any(o.uses() or id(o) in outs for o in n.outputs):
            graph.remove_node(n)
