"""compiler.isolated: the read-only calls in a limited child give what the in-process calls give (the
same result, the same CompileError), and name the limit they run into."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
from compiler import isolated
from tests.compiler.conftest import LIGHT_DIR

LIMITS = {"max_address_space_bytes": 4 << 30, "timeout_s": 120}


def test_inspect_and_validate_in_the_child_match_the_in_process_calls() -> None:
    path = LIGHT_DIR / "light_resnet50.onnx"
    assert isolated.inspect_model(path, **LIMITS) == compiler.inspect_model(path)
    req = {"target": "host", "pipeline": "O2", "input_shapes": None, "threads": 1}
    assert isolated.validate_request(path, **req, **LIMITS) == compiler.validate_request(path, **req)
    bad = {**req, "pipeline": "O2,no-such-pass"}
    with pytest.raises(compiler.CompileError) as child:
        isolated.validate_request(path, **bad, **LIMITS)
    with pytest.raises(compiler.CompileError) as here:
        compiler.validate_request(path, **bad)
    assert child.value.to_dict() == here.value.to_dict()


def test_a_model_over_the_child_limit_names_it(tmp_path) -> None:
    w = numpy_helper.from_array(np.zeros(24 << 20, np.float32), "W")  # 96 MiB, parsed twice over
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], "big",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [24 << 20])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [24 << 20])], [w])
    path = tmp_path / "big.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(compiler.CompileError) as e:
        isolated.inspect_model(path, max_address_space_bytes=320 << 20, timeout_s=120, limit_name="LIMIT_X")
    assert e.value.stage == "import"
    assert e.value.message == f"reading the model needs more memory than the limit of {320 << 20} bytes (LIMIT_X)"
