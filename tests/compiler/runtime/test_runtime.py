"""Runtime: child-process runs, a planted crash fails only that compilation (naming the kernel),
and end-to-end compilation of light_squeezenet verified against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import compiler
from compiler.codegen.compile import compile_kernel
from compiler.errors import CompileError
from compiler.ir import Graph, TensorType
from compiler.loops.ir import Buffer, Float, Int, PrimFunc, Store
from compiler.loops.lower import KernelArg, lower_group
from compiler.passes.plan_memory import liveness, place
from compiler.runtime.runner import run_model
from compiler.samples import randomized
from compiler.schedule.default import apply_default
from compiler.targets import get_target
from tests.compiler.conftest import LIGHT_DIR


def _relu_model() -> tuple[Graph, bytes]:
    g = Graph("m")
    g.opset_imports = {"": 17}
    x = g.add_input("x", TensorType.of(np.float32, (4, 32)))
    n = g.add_node("Relu", [x], ["y"], name="relu")
    n.outputs[0].type = x.type
    g.outputs = [n.outputs[0]]
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "m",
                                            [helper.make_tensor_value_info("x", 1, [4, 32])],
                                            [helper.make_tensor_value_info("y", 1, [4, 32])]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return g, m.SerializeToString()


def _relu_kernel(g: Graph) -> dict:
    lk = lower_group(g.nodes[0], "relu", 17)
    apply_default(lk.func, get_target("host"))
    ck = compile_kernel(lk.func, get_target("host"))
    return {"name": "relu", "symbol": ck.symbol, "obj": ck.obj, "args": lk.args}


def test_run_verifies_and_times_in_a_child() -> None:
    g, mb = _relu_model()
    res = run_model([_relu_kernel(g)], g, place(liveness(g)[0]), mb, verify=True, benchmark=True, budget_s=0.2)
    assert res["outputs"]["y"]["passed"] and res["outputs"]["y"]["max_abs_error"] == 0.0
    assert res["kernels"][0]["name"] == "relu" and res["kernels"][0]["median_us"] > 0
    assert res["prism_ms"] > 0 and res["onnxruntime_ms"] > 0 and res["repeats"] >= 5


def test_planted_crash_fails_only_this_compilation() -> None:
    g, mb = _relu_model()
    wild = Buffer("wild", "f32", (1 << 40,), "arena")  # a kernel that writes far out of bounds
    bad = PrimFunc("planted", [wild], Store(wild, (Int((1 << 40) - 1),), Float(1.0)))
    ck = compile_kernel(bad, get_target("host"))
    planted = {"name": "planted_crash", "symbol": ck.symbol, "obj": ck.obj,
               "args": [KernelArg("value", "x", Buffer("wild", "f32", (4, 32), "arena"))]}
    with pytest.raises(CompileError) as ei:
        run_model([_relu_kernel(g), planted], g, place(liveness(g)[0]), mb, verify=True, benchmark=False)
    assert ei.value.stage == "run" and ei.value.kernel == "planted_crash"
    assert "SIGSEGV" in ei.value.message or "SIGBUS" in ei.value.message
    # the calling process carries on
    res = run_model([_relu_kernel(g)], g, place(liveness(g)[0]), mb, verify=True, benchmark=False)
    assert res["outputs"]["y"]["passed"]


def test_squeezenet_end_to_end_host_and_cross() -> None:
    proto = randomized(LIGHT_DIR / "light_squeezenet.onnx", seed=0)
    r = compiler.compile(proto, target="host", pipeline="O2")
    assert r.ok, r.error
    ver = r.of_type("model.verified")[0]
    assert ver["passed"] and ver["rtol"] == 1e-3
    timed = r.of_type("model.timed")[0]
    assert timed["prism_ms"] > 0 and timed["onnxruntime_ms"] > 0 and timed["ratio"] > 0
    lowered = r.of_type("kernel.lowered")
    assert len(lowered) == len(r.of_type("kernel.compiled")) == len(r.of_type("kernel.timed"))
    assert all(r.stage_ms[k] > 0 for k in ("lowering", "codegen", "run"))
    for target, needle in (("aarch64", "fmla"), ("riscv64", "vfmacc")):
        rc = compiler.compile(proto, target=target, pipeline="O2")
        assert rc.ok, rc.error
        compiled = rc.of_type("kernel.compiled")
        assert len(compiled) == len(lowered) and all(e["asm"].strip() for e in compiled)
        assert any(needle in e["asm"] for e in compiled)
        assert not rc.of_type("kernel.timed") and not rc.of_type("model.timed")


def test_onnx_model_bytes_roundtrip() -> None:  # the child reads the model ONNX Runtime runs
    g, mb = _relu_model()
    assert onnx.load_model_from_string(mb).graph.output[0].name == "y"


def test_planted_crash_through_compile_is_compile_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """compile() on a real model with one planted kernel that writes far out of bounds: the result is
    compile.failed (stage run, naming that kernel), the process carries on and compiles again."""
    import compiler.driver.lower as build
    from compiler.loops.lower import LoweredKernel

    real = build.lower_graph

    def planted(graph, target, schedule_for=None):  # type: ignore[no-untyped-def]
        kernels = real(graph, target, schedule_for)
        wild = Buffer("wild", "f32", (1 << 40,), "arena")
        func = PrimFunc("planted_crash", [wild], Store(wild, (Int((1 << 40) - 1),), Float(1.0)))
        first_in = kernels[0].args[0]
        arg = KernelArg("value", first_in.name, Buffer("wild", "f32", first_in.buffer.shape, "arena"))
        return kernels[:1] + [LoweredKernel("planted_crash", "planted", func, [arg])] + kernels[1:]

    monkeypatch.setattr(build, "lower_graph", planted)
    proto = randomized(LIGHT_DIR / "light_squeezenet.onnx", seed=0)
    r = compiler.compile(proto, target="host", pipeline="O2", benchmark=False)
    assert not r.ok
    assert r.error is not None and r.error["stage"] == "run" and r.error["kernel"] == "planted_crash"
    assert r.events[-1]["type"] == "compile.failed"
    monkeypatch.setattr(build, "lower_graph", real)
    again = compiler.compile(proto, target="host", pipeline="O2", benchmark=False)
    assert again.ok and again.of_type("model.verified")[0]["passed"]


def test_compare_treats_matching_nan_and_infinities_as_equal() -> None:
    """Issue 13: NaN where the reference has NaN and the same infinity pass (numpy's equal_nan, as
    onnx's backend runner compares); a NaN for a number, a number for NaN or the other infinity fail."""
    from compiler.runtime.child import _compare

    ref = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    ok = _compare(ref.copy(), ref, 1e-3, 1e-4)
    assert ok["passed"] and ok["max_abs_error"] == 0.0 and ok["scale"] == 1.0
    for bad in ([np.nan, np.nan, np.inf, -np.inf], [1.0, 0.0, np.inf, -np.inf], [1.0, np.nan, -np.inf, -np.inf],
                [1.0, np.nan, np.inf, np.nan]):
        assert not _compare(np.array(bad, np.float32), ref, 1e-3, 1e-4)["passed"], bad
