"""fold-qdq's lookup tables (compiler.quant.lookup, prism.QLinearLookup, compiler.codegen.lookup): elementwise
chains between two quantized tensors against onnx.reference (exact integers) and ONNX Runtime (its MLAS
Sigmoid/Tanh/Exp approximations may move a value across a rounding boundary: at most one step)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.version_converter
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator
from qmodels import ort_quantized

import compiler
from compiler import backend
from compiler.codegen.lookup import vbmi
from compiler.targets import get_target

NP = {"u8": np.uint8, "i8": np.int8}
SHAPE = [1, 4, 8, 64]


def _chain(act: str, dt: str) -> onnx.ModelProto:
    """``x (dt) -> DQ -> act -> Q -> y (dt)``; ``silu``: YOLO's ``DQ(x) * DQ(Q(Sigmoid(DQ(x))))``."""
    elem = T.UINT8 if dt == "u8" else T.INT8
    inits = [nh.from_array(np.array(0.05, np.float32), "xs"), nh.from_array(np.array(131 if dt == "u8" else 3, NP[dt]), "xz"),
             nh.from_array(np.array(0.021, np.float32), "ys"), nh.from_array(np.array(60 if dt == "u8" else -70, NP[dt]), "yz")]
    nodes = [h.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"], name="dq")]
    if act == "silu":
        nodes += [h.make_node("Sigmoid", ["xd"], ["s"], name="sigmoid"),
                  h.make_node("QuantizeLinear", ["s", "ys", "yz"], ["sq"], name="q_s"),
                  h.make_node("DequantizeLinear", ["sq", "ys", "yz"], ["sd"], name="dq_s"),
                  h.make_node("Mul", ["xd", "sd"], ["a"], name="mul")]
    elif act == "leaky_tanh":  # two ops and a scalar constant
        inits.append(nh.from_array(np.array(0.5, np.float32), "half"))
        nodes += [h.make_node("LeakyRelu", ["xd"], ["l"], alpha=0.1, name="leaky"),
                  h.make_node("Mul", ["l", "half"], ["m"], name="scale"),
                  h.make_node("Tanh", ["m"], ["a"], name="tanh")]
    else:
        nodes.append(h.make_node(act, ["xd"], ["a"], name=act.lower()))
    nodes.append(h.make_node("QuantizeLinear", ["a", "ys", "yz"], ["y"], name="q"))
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", elem, SHAPE)],
                     [h.make_tensor_value_info("y", elem, SHAPE)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def _every_value(dt: str) -> np.ndarray:
    info = np.iinfo(NP[dt])
    x = np.random.default_rng(0).integers(info.min, info.max + 1, int(np.prod(SHAPE)))
    x[:256] = np.arange(info.min, info.max + 1)
    return x.astype(NP[dt]).reshape(SHAPE)


def _ort(m: onnx.ModelProto, x: np.ndarray, optimized: bool) -> np.ndarray:
    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("target", ["host", "x86-64-v3"])
@pytest.mark.parametrize("dt", ["u8", "i8"])
@pytest.mark.parametrize("act", ["Sigmoid", "HardSwish", "Tanh", "Elu", "silu", "leaky_tanh"])
def test_chain_becomes_a_table_with_the_reference_integers(act: str, dt: str, target: str) -> None:
    m = _chain(act, dt)
    x = _every_value(dt)
    r = compiler.compile(m, pipeline="O2", target=target, benchmark=False, verify=False, backend=False)
    assert r.ok, r.error
    ops = [n.op_type for n in r.graph.walk()]  # type: ignore[union-attr]
    assert ops.count("QLinearLookup") == 1 and not {"Sigmoid", "HardSwish", "Tanh", "Elu", "Mul"} & set(ops), ops
    (got,) = backend.prepare(m, pipeline="O2", target=target).run([x])
    ref = ReferenceEvaluator(onnx.version_converter.convert_version(m, 21)).run(None, {"x": x})[0]
    assert got.dtype == NP[dt]
    np.testing.assert_array_equal(got, ref)  # the table is the reference's chain: exact
    for optimized in (False, True):  # ORT's own Sigmoid/Tanh (and, optimized, its QLinearSigmoid ... tables)
        diff = np.abs(got.astype(np.int32) - _ort(m, x, optimized).astype(np.int32))
        flipped = np.unique(x[diff != 0])  # the input values whose integer differs (a tie rounded the other way)
        assert diff.max() <= 1 and flipped.size <= 6, (optimized, diff.max(), flipped)


def test_lookup_remark_and_pure_requantization_left_alone() -> None:
    m = _chain("Sigmoid", "u8")
    r = compiler.compile(m, pipeline="O2", benchmark=False, verify=False, backend=False)
    (fold,) = [e for e in r.of_type("pass.finished") if e["name"] == "fold-qdq"]
    (msg,) = [x["message"] for x in fold["remarks"] if x.get("data", {}).get("op") == "QLinearLookup"
              or "QLinearLookup" in x["message"] and x["kind"] == "applied"]
    assert "DequantizeLinear -> Sigmoid -> QuantizeLinear" in msg and "256-entry u8 table" in msg
    # DQ -> Q with other parameters is a requantization: no table (nothing computed in float)
    g = m.graph
    del g.node[1]
    g.node[1].input[0] = "xd"
    r2 = compiler.compile(m, pipeline="O2", benchmark=False, verify=False, backend=False)
    assert "QLinearLookup" not in [n.op_type for n in r2.graph.walk()]  # type: ignore[union-attr]


def test_per_channel_constant_keeps_the_chain_in_float() -> None:
    """A constant with more than one element makes the function depend on the position: no table."""
    m = _chain("Sigmoid", "u8")
    m.graph.initializer.append(nh.from_array(np.linspace(0.5, 2, 64).astype(np.float32), "w"))
    m.graph.node[1].input[0] = "xw"
    m.graph.node.insert(1, h.make_node("Mul", ["xd", "w"], ["xw"], name="per_column"))
    r = compiler.compile(m, pipeline="O2", benchmark=False, verify=False, backend=False)
    assert "QLinearLookup" not in [n.op_type for n in r.graph.walk()]  # type: ignore[union-attr]


def _conv_silu_conv() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             h.make_node("Sigmoid", ["c1"], ["s1"], name="sig1"), h.make_node("Mul", ["c1", "s1"], ["a1"], name="silu1"),
             h.make_node("Conv", ["a1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             h.make_node("HardSwish", ["c2"], ["y"], name="hswish")]
    inits = [nh.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w1", (16, 8, 3, 3)), ("b1", (16,)), ("w2", (16, 16, 3, 3)), ("b2", (16,)))]
    g = h.make_graph(nodes, "conv_silu", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 16, 16, 16])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def test_ort_quantized_silu_fuses_into_the_integer_conv_and_verifies() -> None:
    q = ort_quantized(_conv_silu_conv(), fmt="qdq", activation="u8")
    r = compiler.compile(q, pipeline="O2", benchmark=False)
    assert r.ok, r.error
    assert r.of_type("model.verified")[-1]["passed"]
    fused = r.of_type("graph.fused")[-1]
    ops = {n["name"]: n["op_type"] for n in fused["nodes"]}
    groups = [[ops[n] for n in g["nodes"]] for g in fused["groups"]]
    assert any("QLinearConv" in g and "QLinearLookup" in g for g in groups), groups  # the SiLU in the epilogue
    assert "Sigmoid" not in ops.values()


@pytest.mark.parametrize("target", ["host", "x86-64-v3"])
def test_vbmi_targets_emit_vpermi2b(target: str) -> None:
    t = get_target(target)
    r = compiler.compile(_chain("silu", "i8"), pipeline="O2", target=target, benchmark=False, verify=False)
    assert r.ok, r.error
    asm = "\n".join(k["asm"] for k in r.of_type("kernel.compiled"))
    has = vbmi(frozenset(f[1:] for f in t.features.split(",") if f.startswith("+")))
    assert ("vpermi2b" in asm or "vpermt2b" in asm) == has
    if target == "x86-64-v3":
        assert not has and "vpgatherdd" in asm  # AVX2: the dword-gather lookup (8 or 16 lanes here)
