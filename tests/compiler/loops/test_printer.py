"""Golden tests for the loop IR printer (TVMScript-like text; stable across runs)."""

from __future__ import annotations

import numpy as np

from compiler.loops.compute import Lowering, reduce_
from compiler.loops.ir import Buffer, Float, Load, PrimFunc, call, emax, mul
from compiler.loops.lower import lower_group
from compiler.loops.printer import print_func
from compiler.schedule import primitives as P
from compiler.schedule.default import apply_default
from compiler.targets import get_target
from tests.compiler.backend_helpers import onnx_node_case

RELU_GOLDEN = '''@T.prim_func
def relu(X: T.Buffer((2, 32), "f32", "arena"), Y: T.Buffer((2, 32), "f32", "arena")):
    # schedule: split(i2, factor=16) -> i2_o, i2_i
    # schedule: vectorize(i2_i)
    for i1 in T.serial(2):
        for i2_o in T.serial(2):
            for i2_i in T.vectorized(16):
                Y[i1, (i2_o * 16) + i2_i] = T.max(X[i1, (i2_o * 16) + i2_i], T.f32(0.0))
'''

ROWSUM_GOLDEN = '''@T.prim_func
def rowsum(X: T.Buffer((4, 8), "f32", "arena"), Y: T.Buffer((4,), "f32", "arena")):
    for i2 in T.serial(4):
        acc3 = T.alloc_buffer((1,), "f32", "local")
        acc3[0] = T.f32(0.0)
        for r1 in T.serial(8):
            acc3[0] = acc3[0] + T.exp(X[i2, r1] * T.f32(0.5))
        Y[i2] = acc3[0]
'''


def test_relu_golden() -> None:
    x, y = Buffer("X", "f32", (2, 32)), Buffer("Y", "f32", (2, 32))
    lw = Lowering()
    body = lw.compute(y, lambda i: emax(Load(x, tuple(i)), Float(0.0)))
    f = PrimFunc("relu", [x, y], body)
    P.split(f, "i2", 16)
    P.vectorize(f, "i2_i")
    assert print_func(f) == RELU_GOLDEN


def test_reduction_golden() -> None:
    x, y = Buffer("X", "f32", (4, 8)), Buffer("Y", "f32", (4,))
    lw = Lowering()
    r = lw.axis("r", 8)
    body = lw.compute(y, lambda i: reduce_("sum", [r], call("exp", mul(Load(x, (i[0], r[0])), Float(0.5)))))
    assert print_func(PrimFunc("rowsum", [x, y], body)) == ROWSUM_GOLDEN


def test_printing_is_deterministic_and_names_bindings() -> None:
    rng = np.random.default_rng(0)
    texts = set()
    for _ in range(2):
        _, node = onnx_node_case("Conv", {"x": rng.standard_normal((1, 3, 8, 16)).astype(np.float32)},
                                 {"pads": [1, 1, 1, 1]}, consts={"w": np.ones((4, 3, 3, 3), np.float32)})
        lk = lower_group(node, "conv", 17)
        apply_default(lk.func, get_target("host"))
        texts.add(print_func(lk.func))
    assert len(texts) == 1
    text = texts.pop()
    assert "# bind: in0 = value %x" in text and "# bind: c1 = const %w" in text
    assert "T.Select(" in text and f"T.vectorized({get_target('host').vector_width_f32})" in text
