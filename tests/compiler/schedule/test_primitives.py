"""Schedule primitives: the rewritten loop nest prints as expected and computes the same values
(checked against onnx.reference through a compiled kernel)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.compile import compile_kernel
from compiler.loops.lower import lower_group
from compiler.loops.printer import print_func
from compiler.runtime.jit import JitModule
from compiler.schedule import primitives as P
from compiler.targets import get_target
from tests.compiler.backend_helpers import onnx_node_case


def _run(lk, inputs):  # type: ignore[no-untyped-def]
    ck = compile_kernel(lk.func, get_target("host"))
    arrays, outs = [], []
    for a in lk.args:
        if a.kind == "const":
            arrays.append(a.data)
        elif a.name in inputs:
            arrays.append(inputs[a.name])
        else:
            outs.append(np.zeros(a.buffer.shape, np.float32))
            arrays.append(outs[-1])
    JitModule([ck.obj]).call(ck.symbol, arrays)
    return outs[0]


def test_tile_unroll_vectorize_keep_semantics() -> None:
    x = np.random.default_rng(1).standard_normal((1, 2, 8, 32)).astype(np.float32)
    ref, node = onnx_node_case("Sigmoid", {"x": x})
    lk = lower_group(node, "sig", 17)
    loops = lk.func.attrs["computes"][0]
    (h, _), (w, _) = loops[2], loops[3]
    ho, wo, hi, wi = P.tile(lk.func, h, w, 4, 16)
    P.unroll(lk.func, hi)
    P.vectorize(lk.func, wi)
    text = print_func(lk.func)
    assert f"for {ho} in T.serial(2):" in text and f"for {wo} in T.serial(2):" in text
    assert f"for {hi} in T.unrolled(4):" in text and f"for {wi} in T.vectorized(16):" in text
    assert text.index(f"for {wo} in") < text.index(f"for {hi} in")
    assert lk.func.attrs["schedule"][-2:] == [f"unroll({hi})", f"vectorize({wi})"]
    np.testing.assert_allclose(_run(lk, {"x": x}), ref[0], rtol=1e-5, atol=1e-6)


def test_split_rejects_a_non_dividing_factor_and_unknown_loops() -> None:
    _, node = onnx_node_case("Relu", {"x": np.zeros((3, 10), np.float32)})
    lk = lower_group(node, "relu", 17)
    var = lk.func.attrs["computes"][0][1][0]
    with pytest.raises(P.ScheduleError, match="does not divide"):
        P.split(lk.func, var, 4)
    with pytest.raises(P.ScheduleError, match="no loop"):
        P.vectorize(lk.func, "nope")
