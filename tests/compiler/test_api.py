"""The public API contract the explorer service relies on (issue 2, "Public API contract")."""

from __future__ import annotations

import json
import re

import onnx
import pytest

import compiler
from compiler import CompileError
from compiler.passes.pipeline import ONNX_PASSES
from tests.compiler.conftest import wheel_model


def test_version_is_stable_string() -> None:
    assert re.fullmatch(r"0\.1\.0\+[0-9a-f]{12}", compiler.__version__)


def test_inspect_model_of_yolov8n() -> None:
    info = compiler.inspect_model(wheel_model("yolov8n"))
    assert info["opset"] == 17 and info["ir_version"] == 10
    assert info["inputs"] == [{"name": "images", "dtype": "float32", "shape": ["batch", 3, "height", "width"]}]
    assert info["outputs"][0]["name"] == "output0"
    assert info["node_count"] == len(onnx.load(str(wheel_model("yolov8n"))).graph.node)


def test_inspect_model_light_hides_initializer_inputs(squeezenet_path) -> None:
    info = compiler.inspect_model(squeezenet_path.read_bytes())
    assert info["opset"] == 9 and [i["name"] for i in info["inputs"]] == ["data_0"]
    assert info["inputs"][0]["shape"] == [1, 3, 224, 224]


def test_inspect_model_bad_bytes() -> None:
    with pytest.raises(CompileError) as info:
        compiler.inspect_model(b"\x00\x01garbage")
    assert info.value.stage == "import"


def test_list_functions_shapes() -> None:
    passes = compiler.list_passes()
    names = {p["name"] for p in passes}
    assert {"fold-constants", "eliminate-dead-code", "fuse-ops", "plan-memory"} <= names
    for p in passes:
        assert p["doc"] and all({"name", "type", "default", "doc"} <= set(o) for o in p["options"])
    assert [p["name"] for p in compiler.list_pipelines()] == ["O0", "O1", "O2", "O3"]
    targets = compiler.list_targets()
    assert targets[0]["name"] == "host"
    assert all({"name", "triple", "cpu", "features", "runnable", "note"} <= set(t) for t in targets)
    json.dumps([passes, compiler.list_pipelines(), targets])


def test_validate_request_expands_and_binds() -> None:
    path = wheel_model("yolov8n")
    out = compiler.validate_request(path, target="host", pipeline="O1", input_shapes={"images": [1, 3, 320, 320]})
    assert out == {"target": "host", "pipeline": ONNX_PASSES + ",fold-constants,simplify,eliminate-dead-code",
                   "input_shapes": {"images": [1, 3, 320, 320]}}


@pytest.mark.parametrize("kwargs,words", [
    ({"target": "vax", "pipeline": "O2", "input_shapes": {"images": [1, 3, 320, 320]}}, "vax"),
    ({"target": "host", "pipeline": "fold-constants,nope", "input_shapes": {"images": [1, 3, 320, 320]}}, "nope"),
    ({"target": "host", "pipeline": "fuse-ops{size=3}", "input_shapes": {"images": [1, 3, 320, 320]}}, "size"),
    ({"target": "host", "pipeline": "O2", "input_shapes": None}, "height"),
])
def test_validate_request_errors(kwargs, words) -> None:
    with pytest.raises(CompileError) as info:
        compiler.validate_request(wheel_model("yolov8n"), **kwargs)
    assert info.value.stage == "request" and words in info.value.message


def test_compile_started_payload_and_report(squeezenet_path) -> None:
    r = compiler.compile(squeezenet_path, pipeline="O1", backend=False)
    assert r.ok, r.error
    start = r.events[0]
    assert start["type"] == "compile.started" and start["seq"] == 0
    assert start["pipeline"] == ONNX_PASSES + ",fold-constants,simplify,eliminate-dead-code"
    assert start["compiler_version"] == compiler.__version__ and start["target"] == "host"
    import hashlib

    assert start["model"]["sha256"] == hashlib.sha256(squeezenet_path.read_bytes()).hexdigest()
    assert start["model"]["inputs"][0]["name"] == "data_0"
    fin = r.events[-1]
    assert fin["type"] == "compile.finished"
    assert set(fin["stage_ms"]) == {"import", "passes", "lowering", "codegen", "run", "verify"}
    rep = json.loads(r.to_json())
    assert rep["version"] == 1 and rep["error"] is None and [p["level"] for p in rep["passes"]] == ["onnx"] * 7 + ["graph"] * 3
    assert set(rep) >= {"model", "target", "pipeline", "passes", "fusion", "memory", "kernels", "timing",
                        "verification", "stage_ms", "error"}


def test_compile_request_error_is_one_failed_event(squeezenet_path) -> None:
    seen = []
    r = compiler.compile(squeezenet_path, pipeline="fold-constants{bogus=1}", on_event=seen.append)
    assert not r.ok and r.error["stage"] == "request" and "bogus" in r.error["message"]
    assert [e["type"] for e in seen] == ["compile.failed"] and seen[0]["seq"] == 0


def test_sample_names_are_models() -> None:
    info = compiler.inspect_model("silero_vad")
    assert [i["name"] for i in info["inputs"]] == ["input", "state", "sr"]
    r = compiler.compile("light_squeezenet", pipeline="O0", backend=False)
    assert r.ok and r.model["name"] == "squeezenet_old"
    r = compiler.compile("no_such_model_or_sample", pipeline="O0", backend=False)
    assert not r.ok and r.error["stage"] == "import" and "does not exist" in r.error["message"]
