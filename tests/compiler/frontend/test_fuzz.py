"""Seeded byte corruption of a small valid model: every outcome is a finished compilation or one
``compile.failed`` with a stage and a user-facing message (never an internal error), and the
report is JSON."""

from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import compiler


def _model_bytes() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    s = numpy_helper.from_array(np.array([1, -1], np.int64), "s")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "s"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "f", [x], [y], initializer=[w, s]),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def test_corrupted_models_fail_cleanly() -> None:
    data = _model_bytes()
    rng = np.random.default_rng(0)
    outcomes: dict[str, int] = {}
    for _ in range(150):
        b = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        r = compiler.compile(bytes(b), pipeline="O2", backend=False)
        terminal = [e for e in r.events if e["type"] in ("compile.finished", "compile.failed")]
        assert len(terminal) == 1 and terminal[0] is r.events[-1]
        json.dumps(r.to_dict())
        if not r.ok:
            assert "internal error" not in r.error["message"], r.error
            assert "\n" not in r.error["message"]
        key = "ok" if r.ok else r.error["stage"]
        outcomes[key] = outcomes.get(key, 0) + 1
    assert outcomes.get("import", 0) > 10 and outcomes.get("ok", 0) > 10
