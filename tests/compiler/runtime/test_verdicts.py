"""Honest verdicts (issue 17 item 7): ONNX Runtime crashing on the reference does not fail Prism's
compilation (it is "not verified: ONNX Runtime failed (killed by SIGFPE)" and Prism's timing stays);
messages carry no control characters."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import compiler
from compiler.errors import CompileError
from compiler.runtime.process import clean_tail


def _int_min_mod_minus_one() -> bytes:
    """y = (x + INT32_MIN) mod (x - 1) on x = 0 (the runner's integer inputs are zeros): INT32_MIN mod
    -1, whose x86 idiv traps; ONNX Runtime's Mod kernel dies of SIGFPE there, Prism's gives 0 (the
    mathematical remainder, as numpy's np.mod)."""
    nodes = [helper.make_node("Add", ["x", "m"], ["a"], name="add"), helper.make_node("Sub", ["x", "one"], ["b"], name="sub"),
             helper.make_node("Mod", ["a", "b"], ["y"], name="mod")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT32, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, [4])],
                          initializer=[numpy_helper.from_array(np.array(-2**31, np.int32), "m"),
                                       numpy_helper.from_array(np.array(1, np.int32), "one")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_onnx_runtime_crashing_keeps_prism_s_result_and_says_not_verified():
    assert int(np.mod(np.int32(-2**31), np.int32(-1))) == 0  # the reference value of the remainder
    r = compiler.compile(_int_min_mod_minus_one(), pipeline="O1", benchmark=True)
    assert r.ok, r.error
    (v,) = r.of_type("model.verified")
    assert v["verified"] is False and v["passed"] is None
    assert v["message"] == "not verified: ONNX Runtime failed (killed by SIGFPE)"
    (timed,) = r.of_type("model.timed")
    assert timed["prism_ms"] > 0 and timed["onnxruntime_ms"] is None


def test_messages_are_one_line_without_control_characters():
    err = CompileError("run", "\x1b[1;31mboom\x1b[0m\r\nin kernel\tk\x07")
    assert err.message == "boom in kernel k"
    stderr = ("Traceback (most recent call last):\n  ...\nMemoryError: \x1b[31mUnable\x1b[0m\n"
              "\x1b[0;93m2026-12-01 10:00:00.123 [W:onnxruntime:, graph.cc:1] Removing initializer\x1b[m\n")
    assert clean_tail(stderr) == "MemoryError: Unable"
