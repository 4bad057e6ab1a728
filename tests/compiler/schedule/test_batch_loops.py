"""compiler.schedule.batch_loops: the loops over samples of a kernel lowered at N = hi bounded by the
run-time N where the loop IR proves each iteration touches one sample; before/expected loop IR, and
the kernels it must refuse (each with the reason it gives)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from compiler.driver import Request
from compiler.driver.stages import run_stages
from compiler.driver.state import Compilation
from compiler.events import EventStream
from compiler.loops.ir import (
    Allocate,
    Bin,
    Buffer,
    Float,
    For,
    If,
    Int,
    Load,
    PrimFunc,
    Seq,
    Store,
    Var,
    add,
    call,
    mul,
    select,
    sub,
)
from compiler.loops.lower import KernelArg, LoweredKernel
from compiler.loops.printer import print_body
from compiler.runtime.batch import BatchProgram
from compiler.runtime.program import bind
from compiler.schedule.batch import BATCH_N, BatchDim, takes_batch
from compiler.schedule.batch_loops import bound_batch_loops, span
from compiler.synthetic import conv_pools

HI = 4
X = Buffer("in0", "f32", (HI, 3, 5))
Y = Buffer("out0", "f32", (HI, 3, 5))
n, c, w, r = Var("n"), Var("c"), Var("w"), Var("r")


def _kernel(body, extra=()) -> LoweredKernel:
    args = [KernelArg("value", "x", X), KernelArg("value", "y", Y), *extra]
    return LoweredKernel("k", "k", PrimFunc("k", [a.buffer for a in args], body), args)


def _bound(lk: LoweredKernel, private=()) -> str | None:
    return bound_batch_loops(lk, {"in0": 15, "out0": 15}, set(private), BatchDim(1, HI))


def _copy(n_idx, load_idx=None) -> For:
    """for n: for c: for w: out0[n_idx, c, w] = in0[load_idx or n_idx, c, w] + 1"""
    st = Store(Y, (n_idx, c, w), add(Load(X, (load_idx if load_idx is not None else n_idx, c, w)), 1.0))
    return For(n, HI, For(c, 3, For(w, 5, st)))


def test_an_outer_sample_loop_is_bounded_by_n() -> None:
    lk = _kernel(_copy(n))
    assert _bound(lk) is None
    assert print_body(lk.func.body).splitlines()[0] == "for n in T.serial(4, bound=batch_n[0]):"
    assert takes_batch(lk) and lk.func.params[-1] == BATCH_N and lk.func.attrs["batch_loops"] == ["n"]
    assert any(line.startswith("# batch: n runs batch_n[0] of its 4 iterations") for line in lk.func.attrs["schedule"])


def test_a_loop_fused_over_samples_and_rows_runs_n_times_its_rows() -> None:
    """for r in 0..hi*3 (parallel): row r is sample r // 3, channel r % 3 (GlobalAveragePool, Softmax rows)."""
    st = Store(Y, (r // 3, r % 3, w), Load(X, (r // 3, r % 3, w)))
    lk = _kernel(For(r, HI * 3, For(w, 5, st), "parallel"))
    assert _bound(lk) is None
    assert print_body(lk.func.body).splitlines()[0] == "for r in T.parallel(12, bound=batch_n[0] * 3):"


def test_a_sample_loop_inside_another_loop_is_bounded_there() -> None:
    st = Store(Y, (n, c, w), Load(X, (n, c, w)))
    lk = _kernel(For(c, 3, For(n, HI, For(w, 5, st))))
    assert _bound(lk) is None
    assert print_body(lk.func.body).splitlines()[:2] == ["for c in T.serial(3):", "    for n in T.serial(4, bound=batch_n[0]):"]


def test_a_padding_window_and_a_tile_predicate_bound_what_they_guard() -> None:
    """A load at w - 1 under select(w - 1 >= 0, ...) and a store at a tile's column 8*t + l under
    if (8*t + l < 5): the guards bound those indices (a padding window, a leftover tile)."""
    t, lane = Var("t"), Var("l")
    col = add(mul(t, 8), lane)
    val = select(Bin(">=", sub(col, 1), Int(0)), Load(X, (n, c, sub(col, 1))), Float(0.0))
    lk = _kernel(For(n, HI, For(c, 3, For(t, 1, For(lane, 8, If(Bin("<", col, Int(5)), Store(Y, (n, c, col), val)), "vectorized")))))
    assert _bound(lk) is None


def test_a_data_load_may_read_past_its_sample_but_a_store_may_not() -> None:
    """A register tile's full-width load reads a few floats of the next sample, which only lanes never
    stored use (the 1x1 Conv's last channel): accepted. A store at the next sample's row: refused."""
    t, lane = Var("t"), Var("l")
    col = add(mul(t, 8), lane)
    acc = Buffer("acc", "f32", (1,), "local")
    tile = Allocate(acc, Seq([Store(acc, (Int(0),), Load(X, (n, c, col))),  # unguarded: up to 3 floats past
                              If(Bin("<", col, Int(5)), Store(Y, (n, c, col), Load(acc, (Int(0),))))]))
    ok = _kernel(For(n, HI, For(c, 3, For(t, 1, For(lane, 8, tile, "vectorized")))))
    assert _bound(ok) is None
    bad = _kernel(For(n, HI, For(c, 3, For(t, 1, For(lane, 8, Store(Y, (n, c, col), Load(X, (n, c, col))), "vectorized")))))
    assert _bound(bad) == "an access to out0 is in no loop over samples alone"
    assert print_body(bad.func.body).splitlines()[0] == "for n in T.serial(4):"  # nothing changed
    assert not takes_batch(bad)


def test_samples_visited_in_another_order_are_refused() -> None:
    assert _bound(_kernel(_copy(sub(HI - 1, n)))) == "an access to out0 is in no loop over samples alone"


def test_an_address_read_from_the_next_sample_is_refused() -> None:
    """in0[n + 1] as data would be harmless, as an index (a Gather through per-sample indices) not."""
    idx = Buffer("idx", "i64", (HI, 3, 5))
    gathered = Load(X, (n, c, call("abs", Load(idx, (add(n, 1), c, w)))))
    lk = LoweredKernel("k", "k", PrimFunc("k", [X, idx, Y], For(n, HI, For(c, 3, For(w, 5, Store(Y, (n, c, w), gathered))))),
                       [KernelArg("value", "x", X), KernelArg("value", "i", idx), KernelArg("value", "y", Y)])
    assert bound_batch_loops(lk, {"in0": 15, "out0": 15, "idx": 15}, set(), BatchDim(1, HI)) is not None


def test_a_temporary_shared_by_two_sample_loops_is_refused() -> None:
    """A scratch filled by one loop over samples and read by another: the second loop's kept
    iterations could read what the first one's skipped iterations would have written."""
    tmp = Buffer("tmp", "f32", (HI * 15,), "scratch")
    fill = For(n, HI, For(c, 3, For(w, 5, Store(tmp, (add(mul(n, 15), add(mul(c, 5), w)),), Load(X, (n, c, w))))))
    m = Var("m")
    use = For(m, HI, For(c, 3, For(w, 5, Store(Y, (m, c, w), Load(tmp, (add(mul(sub(HI - 1, m), 15), add(mul(c, 5), w)),))))))
    lk = _kernel(Seq([fill, use]), [KernelArg("scratch", "tmp", tmp)])
    assert _bound(lk, ["tmp"]) == "the temporary tmp is used inside and outside its batch loop"
    # a local allocated inside the one loop over samples is private to each iteration: accepted
    acc = Buffer("acc", "f32", (1,), "local")
    inner = For(n, HI, For(c, 3, For(w, 5, Allocate(acc, Seq([Store(acc, (Int(0),), Load(X, (n, c, w))),
                                                              Store(Y, (n, c, w), Load(acc, (Int(0),)))])))))
    assert _bound(_kernel(inner)) is None


def test_span_of_index_arithmetic() -> None:
    env = {"i": (0, 9), "j": (0, 7), "@tab": (-1, 6)}
    i, j = Var("i"), Var("j")
    assert span(add(mul(i, 8), j), env) == (0, 79)
    assert span(i // 4, env) == (0, 2) and span(i % 4, env) == (0, 3) and span(add(i, 2) % 16, env) == (2, 11)
    assert span(select(Bin("<", i, Int(3)), i, j), env) == (0, 9)
    assert span(Load(Buffer("tab", "i64", (4,), "const"), (i,)), env) == (-1, 6)
    assert span(Load(Buffer("tab", "i64", (4,), "arena"), (i,)), env) is None  # data: unknown
    assert span(sub(i, 1), env, {sub(i, 1): (0, 1 << 62)}) == (0, 8)  # a guard i - 1 >= 0
    assert span(Var("k"), env) is None  # a variable it does not know
    assert span(call("abs", sub(i, 2)), env) == (0, 7)  # i - 2 in [-2, 7]: its abs in [0, 7]
    assert span(call("abs", sub(Int(0), add(i, 1))), env) == (1, 10)  # -(i + 1) in [-10, -1]
    assert span(call("exp", i), env) is None  # another intrinsic


def conv_net() -> onnx.ModelProto:
    """Every Conv schedule and the pooling and normalization around them at 16x16, batch dim 'N'
    (``compiler.synthetic.conv_pools``)."""
    return conv_pools(16)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_conv_net_runs_every_kernel_with_n_inside_and_matches_onnxruntime(threads: int) -> None:
    m = conv_net()
    events: list[dict] = []
    comp = Compilation(Request(m, input_shapes={"x": ["N", 3, 16, 16]}, dim_ranges={"N": (1, 8)}, verify=False,
                               benchmark=False, link=True, threads=threads), EventStream(events.append))
    run_stages(comp)
    prog = comp.program
    assert isinstance(prog, BatchProgram)
    took = [c["name"] for c in prog.unit.calls if any(a["kind"] == "dim" for a in c["args"])]
    assert len(took) == len(prog.unit.calls) and not any(any(s) for s in prog.steps)  # no per-sample call left
    lowered = {e["kernel"]: e for e in events if e["type"] == "kernel.lowered"}
    convs = [k for k in took if "conv" in k]
    assert len(convs) >= 4 and all("bound=batch_n[0]" in lowered[k]["loop_ir"] for k in convs)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    bound = None
    for n in (1, 3, 8, 5):
        x = np.random.default_rng(n).standard_normal([n, 3, 16, 16]).astype(np.float32)
        ref = sess.run(None, {"x": x})[0]
        if bound is None:
            bound = bind(prog, [x])
        else:
            bound.set_inputs([x])
        for per_kernel in (False, True):
            bound.run(per_kernel=per_kernel)
            np.testing.assert_allclose(bound.outputs()[0], ref, rtol=1e-4, atol=1e-4)


def test_a_parallel_sample_loop_runs_serially_below_the_n_where_a_launch_pays() -> None:
    """Lowered at N = 4 the fused row loop carries 4 samples' work per launch (20 us: parallel); one
    sample's 5 us is below the 10 us threshold (compiler.schedule.parallel), so it runs in parallel
    only from N = 2, serially below: the threshold is decided from N at run time."""
    st = Store(Y, (r // 3, r % 3, w), Load(X, (r // 3, r % 3, w)))
    lk = _kernel(For(r, HI * 3, For(w, 5, st), "parallel"))
    lk.func.attrs["bytes"] = 20 * 20e3  # 20 us at the assumed 20 GB/s
    assert _bound(lk) is None
    text = print_body(lk.func.body).splitlines()
    assert [x for x in text if not x.startswith("        ")] == [
        "if batch_n[0] >= 2:", "    for r in T.parallel(12, bound=batch_n[0] * 3):",
        "if batch_n[0] < 2:", "    for r in T.serial(12, bound=batch_n[0] * 3):"]
    assert "# batch: r parallel from N=2 (~5 us of work per sample per launch, 10 us threshold), serial below" \
        in lk.func.attrs["schedule"]
    many = _kernel(For(r, HI * 3, For(w, 5, st), "parallel"))
    many.func.attrs["bytes"] = 40 * 20e3  # 10 us per sample: parallel at every N
    assert _bound(many) is None and print_body(many.func.body).startswith("for r in T.parallel(12, bound=")
