"""``prism.NarrowCast`` lowered to loop IR and emitted by ``compiler.codegen.narrow``: one kernel,
scalar and vectorized, against ``onnx.reference``'s Cast (``ml_dtypes``) on the same values."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

from compiler.codegen.narrow import FLOAT_FORMATS, parse
from compiler.ir import Graph, TensorType
from compiler.loops.printer import print_func
from compiler.ops.narrow import FORMATS
from tests.compiler.backend_helpers import run_node


def _reference_cast(x: np.ndarray, fmt: str, saturate: int) -> np.ndarray:
    to = FORMATS[fmt][0]
    attrs = {"saturate": saturate} if "float8" in fmt else {}
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)], "r",
        [helper.make_tensor_value_info("x", T.FLOAT, x.shape)], [helper.make_tensor_value_info("y", to, x.shape)]),
        opset_imports=[helper.make_opsetid("", 25)])
    return np.asarray(ReferenceEvaluator(m).run(None, {"x": x})[0]).astype(np.float32)


def _node(fmt: str, saturate: int, n: int):
    g = Graph("t")
    g.opset_imports = {"": 25, "prism": 1}
    x = g.add_input("x", TensorType.of(np.float32, (n,)))
    node = g.add_node("NarrowCast", [x], ["y"], {"to": fmt, "saturate": saturate}, name="nc", domain="prism")
    node.outputs[0].type = TensorType.of(np.float32, (n,))
    g.outputs = list(node.outputs)
    return node


@pytest.mark.parametrize("fmt", sorted(FLOAT_FORMATS))
@pytest.mark.parametrize("schedule", [True, False], ids=["vectorized", "scalar"])
def test_narrow_kernel_matches_reference(fmt, schedule):
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(40) * 10.0 ** rng.integers(-9, 6, 40),
                        [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e38, 3e-39]]).astype(np.float32)  # 47: a vector tail
    sat = 1 if "float8" in fmt else 0
    (got,), lk, ck = run_node(_node(fmt, sat, x.size), {"x": x}, opset=25, schedule=schedule)
    ref = _reference_cast(x, fmt, sat)
    same = (got.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(got) & np.isnan(ref))
    assert same.all(), (x[~same], got[~same], ref[~same])
    fn = "narrow." + fmt + (".sat" if sat else "")
    assert f"T.{fn}(" in print_func(lk.func)
    # integer and bit operations plus llvm intrinsics only: no libm or runtime call
    assert not [c for c in re.findall(r"call [^@]*@([\w.]+)", ck.llvm_ir_optimized) if not c.startswith("llvm.")]


def test_parse_rejects_unknown_calls():
    assert parse("narrow.float8e8m0.nearest.sat") == ("float8e8m0", True, "nearest")
    assert parse("narrow.bfloat16") == ("bfloat16", False, "up")
    for bad in ("narrow.float7", "narrow.float8e8m0.sideways", "round.bfloat16"):
        with pytest.raises(ValueError):
            parse(bad)
