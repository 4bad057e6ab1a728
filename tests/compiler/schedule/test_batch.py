"""The batch dim inside GEMM-class kernels' loops (issue 13 item 3; compiler.schedule.batch,
compiler.driver.batch_kernels): a model compiled once for N = lo..hi runs its Gemm and MatMul kernels
as one GEMM over every sample's rows (the row-tile loop bounded by N at run time, leftover tiles per
row count), not N calls of one sample. Expected values come from ONNX Runtime at each N."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from compiler.codegen.batch_entry import batch_entry_ir
from compiler.driver import Request
from compiler.driver.stages import run_stages
from compiler.driver.state import Compilation
from compiler.events import EventStream
from compiler.loops.ir import For, Int, Seq, Store, Var
from compiler.loops.printer import print_body
from compiler.runtime.batch import BatchProgram
from compiler.runtime.program import bind
from compiler.schedule.batch import BATCH_N, BatchDim
from tests.compiler.runtime.test_dim_range import conv_net


def _c(name, arr):
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def encoder(tokens: int, d: int = 16) -> onnx.ModelProto:
    """Self-attention (Q/K/V projections, Q K^T per sample, softmax, P V), residual, LayerNormalization,
    a Relu MLP and a Gemm head on the first token: [N, tokens, d] -> ([N, tokens, d], [N, 3])."""
    rng = np.random.default_rng(tokens)
    nodes = [h.make_node("MatMul", ["x", "wq"], ["q"]), h.make_node("MatMul", ["x", "wk"], ["k"]),
             h.make_node("MatMul", ["x", "wv"], ["v"]), h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             h.make_node("MatMul", ["q", "kt"], ["s"]), h.make_node("Mul", ["s", "scale"], ["ss"]),
             h.make_node("Softmax", ["ss"], ["a"], axis=-1), h.make_node("MatMul", ["a", "v"], ["o"]),
             h.make_node("Add", ["o", "x"], ["res"]),
             h.make_node("LayerNormalization", ["res", "gamma", "beta"], ["ln"], axis=-1),
             h.make_node("MatMul", ["ln", "w1"], ["f1"]), h.make_node("Relu", ["f1"], ["g1"]),
             h.make_node("MatMul", ["g1", "w2"], ["f2"]), h.make_node("Add", ["f2", "ln"], ["y"]),
             h.make_node("Gather", ["y", "zero"], ["first"], axis=1),
             h.make_node("Gemm", ["first", "wc", "bc"], ["cls"], transB=1)]
    inits = [_c(n, rng.standard_normal((d, d)) * 0.3) for n in ("wq", "wk", "wv")]
    inits += [_c("scale", 1 / np.sqrt(d)), _c("gamma", np.ones(d)), _c("beta", np.zeros(d)),
              _c("w1", rng.standard_normal((d, 2 * d)) * 0.3), _c("w2", rng.standard_normal((2 * d, d)) * 0.3),
              numpy_helper.from_array(np.array(0, np.int64), "zero"), _c("wc", rng.standard_normal((3, d))),
              _c("bc", rng.standard_normal(3))]
    g = h.make_graph(nodes, "encoder", [h.make_tensor_value_info("x", T.FLOAT, ["N", tokens, d])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", tokens, d]),
                      h.make_tensor_value_info("cls", T.FLOAT, ["N", 3])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _compile(m: onnx.ModelProto, shape: list, lo: int, hi: int, threads: int = 1) -> tuple[BatchProgram, list[dict]]:
    events: list[dict] = []
    comp = Compilation(Request(m, input_shapes={"x": shape}, dim_ranges={"N": (lo, hi)}, verify=False,
                               benchmark=False, link=True, threads=threads), EventStream(events.append))
    run_stages(comp)
    assert isinstance(comp.program, BatchProgram)
    return comp.program, events


def _batched(prog: BatchProgram) -> list[str]:
    return [c["name"] for c in prog.unit.calls if any(a["kind"] == "dim" for a in c["args"])]


@pytest.mark.parametrize(("tokens", "threads"), [(7, 1), (7, 2), (32, 2)])
def test_gemm_kernels_take_n_and_match_onnxruntime(tokens: int, threads: int) -> None:
    m = encoder(tokens)
    prog, events = _compile(m, ["N", tokens, 16], 1, 8, threads)
    names = _batched(prog)
    lowered = {e["kernel"]: e for e in events if e["type"] == "kernel.lowered"}
    gemm = [n for n in names if "samples < N" not in lowered[n]["schedule"]]
    # the Q/K/V projection (one MatMul after the passes), both attention products, the MLP's two and
    # the Gemm head: every GEMM-class kernel, by its own schedule; softmax and layernorm rows with their
    # row loop bounded by N (compiler.schedule.batch_loops): every kernel takes N
    assert len(gemm) == 6 and any("gemm" in n for n in gemm), names
    assert len(names) == len(prog.unit.calls) == 9 and not any(any(s) for s in prog.steps)  # and the Gather
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    bound = None
    for n in (1, 3, 8, 5, 2):  # tokens=7: 7n rows leave every remainder mod the register tile's rows
        x = np.random.default_rng(n).standard_normal([n, tokens, 16]).astype(np.float32)
        refs = sess.run(None, {"x": x})
        if bound is None:
            bound = bind(prog, [x])
        else:
            bound.set_inputs([x])  # one binding, every size in turn
        for per_kernel in (False, True):  # the batch entry function, and one ctypes call per kernel
            bound.run(per_kernel=per_kernel)
            for got, ref in zip(bound.outputs(), refs, strict=True):
                assert got.shape == ref.shape
                np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    for name in names:  # the events show the kernel that runs: its loops bounded by N
        assert "bound=" in lowered[name]["loop_ir"] and "# batch:" in lowered[name]["schedule"]
    plan = next(e for e in events if e["type"] == "memory.planned")
    assert "9 kernels take N inside their loops, 6 of them GEMM-class" in plan["dim_range"]["message"]


def _refuse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels whose batch loops are not proven (compiler.schedule.batch_loops refuses) keep the
    per-sample call: planted here so that the per-sample path of the batch entry runs."""
    monkeypatch.setattr("compiler.driver.batch_kernels.bound_batch_loops", lambda *a: "planted by the test")


def test_kernels_whose_batch_loops_are_not_proven_keep_the_per_sample_call(monkeypatch: pytest.MonkeyPatch) -> None:
    _refuse(monkeypatch)
    m = encoder(4)
    prog, events = _compile(m, ["N", 4, 16], 2, 4)
    per_sample = {c["name"] for c, steps in zip(prog.unit.calls, prog.steps, strict=True) if any(steps)}
    assert per_sample and not per_sample & set(_batched(prog))  # softmax, layernorm rows: one call per sample
    assert any("softmax" in n for n in per_sample)
    plan = next(e for e in events if e["type"] == "memory.planned")
    assert f"{len(per_sample)} kernels over per-sample buffers loop N times" in plan["dim_range"]["message"]
    lowered = {e["kernel"]: e for e in events if e["type"] == "kernel.lowered"}
    assert all("# batch: one call per sample (N calls): planted by the test" in lowered[k]["schedule"] for k in per_sample)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (2, 4, 3):
        x = np.random.default_rng(n).standard_normal([n, 4, 16]).astype(np.float32)
        b = bind(prog, [x])
        b.run()
        for got, ref in zip(b.outputs(), sess.run(None, {"x": x}), strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_rows_of_a_batch_dim() -> None:
    dim = BatchDim(2, 4)
    per, run, sizes = dim.rows(28)  # type: ignore[misc]
    assert per == 7 and sizes == [14, 21, 28] and dim.rows(30) is None
    assert print_body(For(Var("mo"), 4, Store(BATCH_N, (Int(0),), Var("mo")), "parallel", run)) == \
        "for mo in T.parallel(4, bound=batch_n[0] * 7):\n    batch_n[0] = mo"
    # a bound is part of the printed kernel (the code cache's key): two bounds, two texts
    a = print_body(Seq([For(Var("i"), 4, Store(BATCH_N, (Int(0),), Var("i")), bound=run)]))
    assert a != print_body(Seq([For(Var("i"), 4, Store(BATCH_N, (Int(0),), Var("i")))]))


def test_per_sample_kernels_split_their_samples_over_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    _refuse(monkeypatch)
    prog, _ = _compile(encoder(4), ["N", 4, 16], 1, 4, threads=2)
    text = batch_entry_ir(prog.unit.calls, prog.unit.entry_layout, prog.steps, 1, 4, "entry", "x86_64-unknown-linux-gnu")
    per = [c for c, steps in zip(prog.unit.calls, prog.steps, strict=True) if any(steps)]
    assert per and text.count("call void @\"prism_parallel_for\"") == len(per)  # softmax, layernorm rows


def test_per_sample_scratch_is_one_copy_per_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-sample Conv's im2col scratch: its step is its size, so that samples on two threads never
    share it; verified at 2 threads against ONNX Runtime."""
    _refuse(monkeypatch)
    m = conv_net()
    prog, _ = _compile(m, ["N", 3, 8, 8], 1, 4, threads=2)
    scratch = [(ci, ai) for ci, c in enumerate(prog.unit.calls) for ai, a in enumerate(c["args"]) if a["kind"] == "scratch"
               and any(prog.steps[ci])]
    assert scratch and all(prog.steps[ci][ai] == 4 * int(np.prod(prog.unit.calls[ci]["args"][ai]["shape"]))
                           for ci, ai in scratch)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (4, 1, 3):
        x = np.random.default_rng(n).standard_normal([n, 3, 8, 8]).astype(np.float32)
        b = bind(prog, [x])
        b.run()
        np.testing.assert_allclose(b.outputs()[0], sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
