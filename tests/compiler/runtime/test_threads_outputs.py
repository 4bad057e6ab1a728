"""Outputs do not depend on the thread count: a model whose kernels run parallel loops (micro-kernel
Conv and batched MatMul row tiles, the Conv's im2col prologue, Softmax and LayerNormalization rows, elementwise outer loops,
a reduction's output loop) gives bitwise the same outputs at 1 and 2 threads, and matches ONNX
Runtime; kernels below the work threshold stay serial (compiler.schedule.parallel)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import compiler
from compiler.driver import compile_program
from compiler.runtime.program import Bound


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(7)

    def init(name: str, shape: tuple[int, ...], scale: float = 0.1) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [init("w", (64, 32, 3, 3)), init("b", (64,)), init("wm", (4, 3136 // 4, 96), 0.03),
             init("g", (96,), 1.0), init("be", (96,)), init("tiny", (4,), 1.0)]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["r3"], name="reshape"),
        helper.make_node("MatMul", ["r3", "wm"], ["m"], name="batched_matmul"),
        helper.make_node("LayerNormalization", ["m", "g", "be"], ["ln"], axis=-1, epsilon=1e-5, name="ln"),
        helper.make_node("Softmax", ["ln"], ["sm"], axis=-1, name="softmax"),
        helper.make_node("Tanh", ["r"], ["t"], name="tanh"),
        helper.make_node("ReduceMean", ["t"], ["rm"], axes=[2, 3], keepdims=0, name="reduce"),
        helper.make_node("Mul", ["s", "tiny"], ["small"], name="small_mul"),
    ]
    inits.append(numpy_helper.from_array(np.array([4, 64, 3136 // 4], np.int64), "shape"))
    g = helper.make_graph(nodes, "threads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 56, 56]),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("sm", "rm", "small")],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_outputs_are_bitwise_equal_at_1_and_2_threads_and_match_onnxruntime() -> None:
    model = _model()
    comp = compile_program(model, None)
    prog = comp.program
    assert prog is not None
    parallel = {lk.name for lk, ck in zip(comp.kernels, comp.compiled, strict=True) if ".task" in ck.llvm_ir}
    assert any("conv" in k for k in parallel) and any("softmax" in k or "layer" in k for k in parallel)
    assert any("tanh" in k or "reduce" in k for k in parallel)
    assert not any("mul" in k and "matmul" not in k for k in parallel)  # 4 elements: serial
    x = np.random.default_rng(0).standard_normal((1, 32, 56, 56)).astype(np.float32)
    s = np.arange(4, dtype=np.float32)
    outs = {}
    for threads in (1, 2):
        prog.threads = threads
        b = Bound(prog, [x, s])
        b.run()
        outs[threads] = b.outputs()
    for a, c in zip(outs[1], outs[2], strict=True):
        np.testing.assert_array_equal(a, c)  # every kernel: same code per iteration, nothing reassociated
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "s": s})
    for got, want in zip(outs[2], ref, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_small_kernels_stay_serial_with_the_reason_in_the_schedule() -> None:
    comp = compile_program(_model(), None)
    small = next(lk for lk in comp.kernels if "mul" in lk.name and "matmul" not in lk.name)
    text = "\n".join(small.func.attrs["schedule"])
    assert "parallel threshold" in text or "parallel(" not in text
    conv = next(lk for lk in comp.kernels if "conv" in lk.name)
    assert any("split into tasks" in line for line in conv.func.attrs["schedule"])
    assert any(line.startswith("parallel(ci)  # the column block's prologue") for line in conv.func.attrs["schedule"])


def test_compile_reports_threads_and_one_thread_times() -> None:
    r = compiler.compile(_model(), threads=2)
    assert r.ok, r.error
    t = r.of_type("model.timed")[-1]
    assert t["threads"] == 2 and t["prism_ms_1t"] > 0 and t["prism_kernel_calls_ms"] > 0
    for k in r.of_type("kernel.timed"):
        assert k["threads"] == 2 and k["median_us_1t"] > 0
    assert r.of_type("model.verified")[-1]["passed"]
    bad = compiler.compile(_model(), threads=0)
    assert not bad.ok and bad.error["stage"] == "request" and "threads must be" in bad.error["message"]
