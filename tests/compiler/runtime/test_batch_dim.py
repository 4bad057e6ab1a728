"""The batch size as a run-time argument (issue 13 item 3): one set of kernels compiled for N=1 serves
every N of ``--dim-range`` when no node computes across samples (compiler.frontend.batch_split,
compiler.driver.batch, compiler.runtime.batch); otherwise one compilation per size, with a remark
naming the node. Expected values come from ONNX Runtime on the same model at each N."""

from __future__ import annotations

import ctypes

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import compiler.driver.lower as lower_mod
from compiler import CompileError
from compiler.driver import Request
from compiler.driver.stages import run_stages
from compiler.driver.state import Compilation
from compiler.events import EventStream
from compiler.runtime.batch import BatchProgram
from compiler.runtime.dim_range import DimRangeProgram
from compiler.runtime.execute import run_program
from compiler.runtime.program import bind


def _c(name, arr, dt=np.float32):
    return numpy_helper.from_array(np.asarray(arr, dt), name)


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    m = h.make_model(h.make_graph(nodes, "m", inputs, outputs, inits), opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def mlp() -> onnx.ModelProto:
    """Two inputs with a batch dim and one without: Gemm, MatMul, ReduceMean over axis 1, Softmax."""
    rng = np.random.default_rng(0)
    nodes = [h.make_node("Gemm", ["x", "w1", "b1"], ["g"], transB=1), h.make_node("Relu", ["g"], ["r"]),
             h.make_node("Add", ["r", "y"], ["ry"]), h.make_node("Mul", ["ry", "s"], ["rs"]),
             h.make_node("MatMul", ["rs", "w2"], ["z"]), h.make_node("Softmax", ["z"], ["p"], axis=-1),
             h.make_node("ReduceMean", ["z", "ax1"], ["mz"], keepdims=1), h.make_node("Sub", ["p", "mz"], ["out"])]
    inits = [_c("w1", rng.standard_normal((16, 12)) * 0.3), _c("b1", rng.standard_normal(16)),
             _c("w2", rng.standard_normal((16, 5)) * 0.3), _c("ax1", [1], np.int64)]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 12]), h.make_tensor_value_info("y", T.FLOAT, ["N", 16]),
                          h.make_tensor_value_info("s", T.FLOAT, [16])],
                  [h.make_tensor_value_info("out", T.FLOAT, ["N", 5])], inits)


def _compile(m: onnx.ModelProto, shapes: dict, lo: int, hi: int) -> tuple[object, dict]:
    events: list[dict] = []
    comp = Compilation(Request(m, input_shapes=shapes, dim_ranges={"N": (lo, hi)}, verify=False, benchmark=False,
                               link=True, kernel_events=False), EventStream(events.append))
    run_stages(comp)
    plan = [e for e in events if e["type"] == "memory.planned"][-1]
    return comp.program, plan["dim_range"]


def _feeds(m: onnx.ModelProto, shapes: dict, n: int) -> dict:
    rng = np.random.default_rng(n)
    return {i.name: rng.standard_normal([n if d == "N" else d for d in shapes[i.name]]).astype(np.float32)
            for i in m.graph.input}


def _against_ort(m: onnx.ModelProto, prog: object, shapes: dict, sizes: tuple[int, ...]) -> None:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    bound = None
    for n in sizes:
        feeds = _feeds(m, shapes, n)
        args = [feeds[i.name] for i in m.graph.input]
        got = run_program(prog, args)
        for g, r in zip(got, sess.run(None, feeds), strict=True):
            assert g.shape == r.shape
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
        if bound is None:  # one binding, fed every size in turn (as a server reuses it)
            bound = bind(prog, args)
        else:
            bound.set_inputs(args)
        bound.run()
        for g, r in zip(bound.outputs(), sess.run(None, feeds), strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


MLP_SHAPES = {"x": ["N", 12], "y": ["N", 16], "s": [16]}


def test_one_set_of_kernels_serves_every_batch_size() -> None:
    m = mlp()
    prog, remark = _compile(m, MLP_SHAPES, 1, 8)
    assert isinstance(prog, BatchProgram) and remark["mode"] == "run-time"
    assert prog.arena_bytes == prog.unit.arena_bytes * 8  # the plan at the maximum
    _against_ort(m, prog, MLP_SHAPES, (1, 3, 8, 2))


def test_sizes_outside_the_range_and_disagreeing_inputs_are_named() -> None:
    m = mlp()
    prog, _ = _compile(m, MLP_SHAPES, 2, 5)
    f = _feeds(m, MLP_SHAPES, 6)
    with pytest.raises(CompileError) as info:
        run_program(prog, [f["x"], f["y"], f["s"]])
    assert info.value.stage == "request" and "input 'x' has N = 6 (axis 0), outside the compiled range N=2..5" \
        in info.value.message
    with pytest.raises(CompileError) as info:
        run_program(prog, [f["x"][:3], f["y"][:4], f["s"]])
    assert "input 'y' has N = 4 (axis 0), input 'x' has N = 3" in info.value.message
    with pytest.raises(CompileError) as info:
        run_program(prog, [f["x"][:3], f["y"][:3], f["s"][:4]])
    assert "input 's' has shape (4,); compiled for (16,)" in info.value.message
    bound = bind(prog, [f["x"][:3], f["y"][:3], f["s"]])  # the generated entry refuses a size outside it too
    assert bound._entry(ctypes.addressof(bound._table), 6) == 1 and bound._entry(ctypes.addressof(bound._table), 1) == 1


def _one_node(node: onnx.NodeProto, out_shape: list, inits=()) -> onnx.ModelProto:
    return _model([h.make_node("Relu", ["x"], ["r"]), node], [h.make_tensor_value_info("x", T.FLOAT, ["N", 4, 3])],
                  [h.make_tensor_value_info("y", T.FLOAT, out_shape)], list(inits))


@pytest.mark.parametrize(("node", "out", "inits", "needle"), [
    (h.make_node("Softmax", ["r"], ["y"], axis=0), ["N", 4, 3], [], "computes along axis 0"),
    (h.make_node("ReduceSum", ["r", "a0"], ["y"], keepdims=1), [1, 4, 3], [_c("a0", [0], np.int64)],
     "reads per-sample values and writes %y"),
    (h.make_node("Concat", ["r", "r"], ["y"], axis=0), ["M", 4, 3], [], "computes along axis 0"),
    (h.make_node("Transpose", ["r"], ["y"], perm=[1, 0, 2]), [4, "N", 3], [], "the batch is not its leading dim"),
    (h.make_node("CumSum", ["r", "a0s"], ["y"]), ["N", 4, 3], [_c("a0s", 0, np.int64)], "computes along axis 0"),
    (h.make_node("Pad", ["r", "p0"], ["y"]), ["M", 4, 3], [_c("p0", [1, 0, 0, 0, 0, 0], np.int64)],
     "the batch is not its leading dim alone"),
])
def test_models_mixing_samples_fall_back_to_one_compilation_per_size(node, out, inits, needle) -> None:
    m = _one_node(node, out, inits)
    shapes = {"x": ["N", 4, 3]}
    prog, remark = _compile(m, shapes, 1, 3)
    assert isinstance(prog, DimRangeProgram) and remark["mode"] == "specialized"
    assert needle in remark["message"] and remark["dim"] == "N"
    _against_ort(m, prog, shapes, (1, 2, 3))


def test_a_dim_that_is_not_axis_0_is_specialized() -> None:
    m = _model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [2, "N"])],
               [h.make_tensor_value_info("y", T.FLOAT, [2, "N"])], [])
    prog, remark = _compile(m, {"x": [2, "N"]}, 1, 4)
    assert isinstance(prog, DimRangeProgram) and "N is not axis 0 alone of input 'x'" in remark["message"]
    _against_ort(m, prog, {"x": [2, "N"]}, (1, 4))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_a_pad_of_other_axes_keeps_samples_apart(mode: str) -> None:
    """Pad with nothing on the batch axis (any mode) is separable: one BatchProgram for N = 1..3,
    against ONNX Runtime (it was 'not known to keep samples apart': one compilation per size). Its
    kernel takes N inside its loops in every mode: reflect's index (``n-1 - |n-1 - |j||``) is bounded
    by interval arithmetic through ``abs`` (it kept a per-sample call)."""
    m = _one_node(h.make_node("Pad", ["r", "p"], ["y"], mode=mode), ["N", 6, 5], [_c("p", [0, 1, 2, 0, 1, 0], np.int64)])
    prog, remark = _compile(m, {"x": ["N", 4, 3]}, 1, 3)
    assert isinstance(prog, BatchProgram) and remark["mode"] == "run-time"
    assert all(any(a["kind"] == "dim" for a in c["args"]) for c in prog.unit.calls) and not any(any(s) for s in prog.steps)
    assert "loop N times" not in remark["message"]
    _against_ort(m, prog, {"x": ["N", 4, 3]}, (1, 3, 2))


@pytest.mark.parametrize("mode", ["mlp", "topk"])
def test_only_the_kernels_that_run_are_compiled(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With N a run-time argument no N = 1 object is built for a kernel its batched form replaces, nor
    the N = 1 entry function: the artifact holds one object per distinct call symbol plus the batch entry
    function, LLVM compiles one kernel per call, and the kernel.compiled events name the symbols that
    run. TopK keeps a per-sample N = 1 call beside the batched Relu; the MLP has none."""
    built: list[str] = []
    real = lower_mod.compile_kernel

    def counting(func, target):  # the one entry to LLVM for kernels (compile_all)
        built.append(func.name)
        return real(func, target)

    monkeypatch.setattr(lower_mod, "compile_kernel", counting)
    if mode == "mlp":
        m, shapes = mlp(), MLP_SHAPES
    else:
        m = _one_node(h.make_node("TopK", ["r", "k"], ["y", "iy"], axis=2), ["N", 4, 2], [_c("k", [2], np.int64)])
        m.graph.output.append(h.make_tensor_value_info("iy", T.INT64, ["N", 4, 2]))
        shapes = {"x": ["N", 4, 3]}
    events: list[dict] = []
    comp = Compilation(Request(m, input_shapes=shapes, dim_ranges={"N": (1, 4)}, verify=False, benchmark=False,
                               link=True), EventStream(events.append))
    run_stages(comp)
    prog = comp.program
    assert isinstance(prog, BatchProgram)
    used = {c["symbol"] for c in prog.unit.calls}
    assert set(prog.objects) == used | {prog.batch_entry} and set(prog.unit.objects) == used
    assert len(built) == len(prog.unit.calls)
    compiled = [e for e in events if e["type"] == "kernel.compiled"]
    assert len(compiled) == len(prog.unit.calls) and {e["symbol"] for e in compiled} == used
    per_sample = [c["name"] for c in prog.unit.calls if not any(a["kind"] == "dim" for a in c["args"])]
    assert bool(per_sample) == (mode == "topk")
    _against_ort(m, prog, shapes, (1, 4, 3))


def _if_on_the_batch() -> onnx.ModelProto:
    """An If on a condition computed from every sample (ReduceSum(x) > 0: Relu or Neg), then a MatMul."""
    then = h.make_graph([h.make_node("Relu", ["x"], ["t"])], "then", [], [h.make_tensor_value_info("t", T.FLOAT, ["N", 8])])
    els = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [h.make_tensor_value_info("e", T.FLOAT, ["N", 8])])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["cond"]),
             h.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=els, name="bif"),
             h.make_node("MatMul", ["y", "w"], ["z"])]
    w = np.random.default_rng(0).standard_normal((8, 4))
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 8])], [h.make_tensor_value_info("z", T.FLOAT, ["N", 4])],
                  [_c("zero", 0.0), _c("w", w)])


def _scan_over_time(steps: int) -> onnx.ModelProto:
    """A Scan over axis 1 (time) of x [N, steps, 4]: s = tanh(s + x_t), the states as scan output."""
    vi = h.make_tensor_value_info
    body = h.make_graph([h.make_node("Add", ["s", "xt"], ["s2"]), h.make_node("Tanh", ["s2"], ["y"])], "b",
                        [vi("s", T.FLOAT, ["N", 4]), vi("xt", T.FLOAT, ["N", 4])],
                        [vi("s2", T.FLOAT, ["N", 4]), vi("y", T.FLOAT, ["N", 4])])
    node = h.make_node("Scan", ["s0", "x"], ["fin", "ys"], body=body, num_scan_inputs=1, scan_input_axes=[1],
                       scan_output_axes=[1], name="tscan")
    return _model([node], [vi("s0", T.FLOAT, ["N", 4]), vi("x", T.FLOAT, ["N", steps, 4])],
                  [vi("fin", T.FLOAT, ["N", 4]), vi("ys", T.FLOAT, ["N", steps, 4])], [])


@pytest.mark.parametrize("case", ["if", "scan"])
def test_run_time_control_flow_under_a_dim_range_is_compiled_per_size(case: str) -> None:
    """A model the control-flow stage compiles in parts (a data-dependent If; a Scan of 40 steps, over
    the unroll limit) has no one call list for N to bound: one compilation per size, each with its
    run-time control flow, against ONNX Runtime at N = 1, 2, 4 (the If both ways). It failed with an
    internal AssertionError."""
    if case == "if":
        m, shapes = _if_on_the_batch(), {"x": ["N", 8]}
    else:
        m, shapes = _scan_over_time(40), {"s0": ["N", 4], "x": ["N", 40, 4]}
    comp = Compilation(Request(m, input_shapes=shapes, dim_ranges={"N": (1, 4)}, verify=False, benchmark=False,
                               link=True, kernel_events=False), EventStream(lambda e: None))
    run_stages(comp)
    assert isinstance(comp.program, DimRangeProgram)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 2, 4):
        feeds = _feeds(m, shapes, n)
        for sign in ((1, -1) if case == "if" else (1,)):
            f = {k: np.abs(v) * sign for k, v in feeds.items()} if case == "if" else feeds
            got = run_program(comp.program, [f[i.name] for i in m.graph.input])
            for g, r in zip(got, sess.run(None, f), strict=True):
                assert g.shape == r.shape
                np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
