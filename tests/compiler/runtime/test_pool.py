"""The native thread pool (compiler.runtime.pool) and parallel loops (compiler.codegen.parallel):
tasks cover the loop exactly once at any thread count, the pool survives many launches and
concurrent callers, a crash inside a task is a CompileError naming the kernel, and bad thread
counts are one-line request errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from compiler.codegen.compile import compile_kernel
from compiler.errors import CompileError
from compiler.ir import Graph, TensorType
from compiler.loops.ir import (
    Bin,
    Buffer,
    Cast,
    Float,
    For,
    Int,
    Load,
    PrimFunc,
    Seq,
    Store,
    Var,
    add,
    mul,
)
from compiler.loops.lower import KernelArg
from compiler.runtime import pool
from compiler.runtime.execute import run_program_isolated
from compiler.runtime.jit import JitModule
from compiler.runtime.program import link
from compiler.targets import get_target

ROWS, COLS = 37, 64  # 37 rows: not a multiple of any task count


def _scaled_rows() -> PrimFunc:
    """y[r, c] = x[r, c] * 2 + r, rows parallel; cnt[r] = cnt[r] + 1 counts how often row r ran."""
    x, y = Buffer("x", "f32", (ROWS, COLS), "input"), Buffer("y", "f32", (ROWS, COLS), "arena")
    cnt = Buffer("cnt", "i64", (ROWS,), "arena")
    r, c = Var("r"), Var("c")
    row = For(c, COLS, Store(y, (r, c), add(mul(Load(x, (r, c)), Float(2.0)), Cast("f32", r))))
    bump = Store(cnt, (r,), add(Load(cnt, (r,)), Int(1)))
    return PrimFunc("scaled_rows", [x, y, cnt], For(r, ROWS, Seq([row, bump]), "parallel"))


@pytest.fixture(scope="module")
def kernel():
    ck = compile_kernel(_scaled_rows(), get_target("host"))
    assert ".task1" in ck.llvm_ir and "prism_parallel_for" in ck.llvm_ir  # outlined, launched on the pool
    jit = JitModule([ck.obj])  # kept alive: the engine owns the code
    yield jit.function(ck.symbol, 3)
    del jit


def _run(fn, x: np.ndarray, times: int = 1) -> tuple[np.ndarray, np.ndarray]:
    y, cnt = np.zeros_like(x), np.zeros(ROWS, np.int64)
    for _ in range(times):
        fn(x.ctypes.data, y.ctypes.data, cnt.ctypes.data)
    return y, cnt


@pytest.mark.parametrize("threads", [1, 2])
def test_every_row_runs_once_per_launch_over_many_launches(kernel, threads: int) -> None:
    pool.set_threads(threads)
    x = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32)
    y, cnt = _run(kernel, x, times=3000)
    np.testing.assert_array_equal(cnt, np.full(ROWS, 3000))  # each row exactly once per launch, 3000 launches
    np.testing.assert_array_equal(y, x * np.float32(2) + np.arange(ROWS, dtype=np.float32)[:, None])
    assert pool.threads() == threads


def test_concurrent_callers_share_the_pool(kernel) -> None:
    pool.set_threads(2)
    x = np.random.default_rng(1).standard_normal((ROWS, COLS)).astype(np.float32)
    results: list[tuple[np.ndarray, np.ndarray]] = []

    def worker() -> None:  # ctypes drops the GIL: the two launches really overlap; one runs serially
        results.append(_run(kernel, x, times=500))

    ts = [threading.Thread(target=worker) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for y, cnt in results:
        np.testing.assert_array_equal(cnt, np.full(ROWS, 500))
        np.testing.assert_array_equal(y, x * np.float32(2) + np.arange(ROWS, dtype=np.float32)[:, None])


def test_crash_inside_a_task_names_the_kernel_and_the_caller_carries_on() -> None:
    g = Graph("m")
    g.opset_imports = {"": 17}
    v = g.add_input("x", TensorType.of(np.float32, (ROWS, COLS)))
    g.outputs = [v]
    wild = Buffer("wild", "f32", (1 << 40,), "arena")
    r = Var("r")
    far = Bin("+", mul(r, Int(1 << 30)), Int((1 << 40) - (1 << 35)))  # every task writes far out of bounds
    crash = compile_kernel(PrimFunc("planted", [wild], For(r, 8, Store(wild, (far,), Float(1.0)), "parallel")),
                           get_target("host"))
    assert ".task1" in crash.llvm_ir
    prog = link(g, [{"name": "planted_parallel_crash", "symbol": crash.symbol, "obj": crash.obj,
                     "args": [KernelArg("value", "x", Buffer("wild", "f32", (ROWS, COLS), "arena"))]}], None)
    prog.threads = 2
    x = np.ones((ROWS, COLS), np.float32)
    with pytest.raises(CompileError) as ei:
        run_program_isolated(prog, [x])
    assert ei.value.stage == "run" and ei.value.kernel == "planted_parallel_crash"
    ok = compile_kernel(_scaled_rows(), get_target("host"))  # this process and its pool still work
    jit = JitModule([ok.obj])
    fn = jit.function(ok.symbol, 3)
    pool.set_threads(2)
    _, cnt = _run(fn, x, times=10)
    np.testing.assert_array_equal(cnt, np.full(ROWS, 10))


@pytest.mark.parametrize("bad", [0, -1, pool.available_threads() + 1, True, 1.5])
def test_bad_thread_counts_are_one_line_request_errors(bad) -> None:
    with pytest.raises(CompileError) as ei:
        pool.check_threads(bad)
    assert ei.value.stage == "request" and "\n" not in ei.value.message
    assert f"from 1 to {pool.available_threads()}" in ei.value.message


def test_default_thread_count_is_the_affinity_mask() -> None:
    import os

    assert pool.check_threads(None) == len(os.sched_getaffinity(0)) == pool.available_threads()
    assert pool.check_threads(1) == 1
