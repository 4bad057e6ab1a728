"""The linked Program both runtime paths run: binding, progress markers, and crash attribution in the
ONNX backend's isolated path (the same child and launcher as the verifying runner)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.compile import compile_kernel
from compiler.errors import CompileError
from compiler.ir import Graph, TensorType
from compiler.loops.ir import Buffer, Float, Int, PrimFunc, Store
from compiler.loops.lower import KernelArg, lower_group
from compiler.passes.plan_memory import liveness, place
from compiler.runtime.buffers import running_kernel
from compiler.runtime.execute import run_program, run_program_isolated
from compiler.runtime.program import Bound, link
from compiler.schedule.default import apply_default
from compiler.targets import get_target


def _relu_graph() -> Graph:
    g = Graph("m")
    g.opset_imports = {"": 17}
    x = g.add_input("x", TensorType.of(np.float32, (4, 32)))
    n = g.add_node("Relu", [x], ["y"], name="relu")
    n.outputs[0].type = x.type
    g.outputs = [n.outputs[0], x]  # a kernel-written output and the input itself
    return g


def _relu_kernel(g: Graph) -> dict:
    lk = lower_group(g.nodes[0], "relu", 17)
    apply_default(lk.func, get_target("host"))
    ck = compile_kernel(lk.func, get_target("host"))
    return {"name": "relu", "symbol": ck.symbol, "obj": ck.obj, "args": lk.args}


def _planted() -> dict:
    wild = Buffer("wild", "f32", (1 << 40,), "arena")  # writes far out of bounds
    ck = compile_kernel(PrimFunc("planted", [wild], Store(wild, (Int((1 << 40) - 1),), Float(1.0))),
                        get_target("host"))
    return {"name": "planted_crash", "symbol": ck.symbol, "obj": ck.obj,
            "args": [KernelArg("value", "x", Buffer("wild", "f32", (4, 32), "arena"))]}


def test_bound_runs_again_and_writes_progress(tmp_path) -> None:
    g = _relu_graph()
    prog = link(g, [_relu_kernel(g)], place(liveness(g)[0]))
    assert [(n, k) for n, k, _ in prog.outputs] == [("y", "value"), ("x", "input")]
    x = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    b = Bound(prog, [x])
    b.run(progress=tmp_path / "progress")
    assert (tmp_path / "progress").read_text() == "start relu\ndone\n"
    assert running_kernel(tmp_path) is None
    y, x_out = b.outputs()
    np.testing.assert_array_equal(y, np.maximum(x, 0))  # Relu (ONNX spec)
    np.testing.assert_array_equal(x_out, x)
    for _, fn, ptrs in b.calls:  # a timing loop calls the same bound kernels again
        fn(*ptrs)
    np.testing.assert_array_equal(b.outputs()[0], np.maximum(x, 0))
    assert all(np.array_equal(a, e) for a, e in zip(run_program(prog, [x]), [y, x], strict=True))


def test_isolated_backend_run_names_the_crashing_kernel() -> None:
    g = _relu_graph()
    prog = link(g, [_relu_kernel(g), _planted()], place(liveness(g)[0]))
    x = np.ones((4, 32), np.float32)
    with pytest.raises(CompileError) as ei:
        run_program_isolated(prog, [x])
    assert ei.value.stage == "run" and ei.value.kernel == "planted_crash"
    assert "crashed in kernel planted_crash" in ei.value.message
    good = link(g, [_relu_kernel(g)], place(liveness(g)[0]))  # the calling process carries on
    y, x_out = run_program_isolated(good, [x])
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(x_out, x)


def test_wrong_inputs_are_a_request_error() -> None:
    g = _relu_graph()
    prog = link(g, [_relu_kernel(g)], None)  # no plan: every value on the heap
    assert all(v["kind"] in ("input", "heap") for v in prog.values.values())
    with pytest.raises(CompileError) as ei:
        Bound(prog, [np.zeros((4, 31), np.float32)])
    assert ei.value.stage == "request" and "'x'" in ei.value.message
    with pytest.raises(CompileError, match="takes 1 inputs, 0 were given"):
        Bound(prog, [])

