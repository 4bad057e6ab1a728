"""The web server reads a large model in a child process under an address-space and a time limit
(issue 17 item 1: explorer/compilations/services/reading.py, compiler/isolated.py): the upload and the
compile request give what the ONNX file says, a model that needs more than the limit is refused with a
message naming it, and a slow read names the time limit.

In process (Django's test client, the test database; a test's transaction is rolled back, so the
compilations it creates are never queued). The oracle for what a model holds is its ONNX protobuf.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from api_client import post_compilation
from django.core.files.uploadedfile import SimpleUploadedFile
from onnx import TensorProto, helper, numpy_helper

from explorer.compilations.services import reading


def add_model(n: int, name: str = "add") -> onnx.ModelProto:
    """y = x + W, W a float32 initializer of `n` elements (4n bytes of file)."""
    w = numpy_helper.from_array(np.arange(n, dtype=np.float32), "W")
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="prism-test")


def upload(client, model: onnx.ModelProto):
    return client.post("/api/models", {"model": SimpleUploadedFile("m.onnx", model.SerializeToString())})


@pytest.fixture
def in_child(settings):
    settings.PRISM_INSPECT_IN_PROCESS_MAX_BYTES = 0  # every model is read by the child
    return settings


@pytest.mark.django_db
def test_a_model_read_in_the_child_is_described_as_its_protobuf_says(client, in_child, monkeypatch):
    in_process = []
    monkeypatch.setattr(reading.compiler, "inspect_model", lambda *a, **k: in_process.append(a))
    m = add_model(1000, name="child_read")
    r = upload(client, m)
    assert r.status_code == 201, r.content
    got = r.json()
    assert in_process == []  # the web process did not parse it
    assert got["opset"] == 17 and got["graph_name"] == "child_read" and got["node_count"] == 1
    assert [(i["name"], i["dtype"], i["shape"]) for i in got["inputs"]] == [("x", "float32", ["N", 1000])]
    assert [(o["name"], o["shape"]) for o in got["outputs"]] == [("y", ["N", 1000])]
    # the compile request is checked in the child too: the symbolic dim is named, then bound
    r = post_compilation(client, got["id"], target="host")
    assert r.status_code == 400 and "unbound dim 0 (N)" in r.json()["error"], r.content
    r = post_compilation(client, got["id"], target="host", input_shapes={"x": [2, 1000]})
    assert r.status_code in (200, 201, 202), r.content
    assert r.json()["input_shapes"] == {"x": [2, 1000]}


@pytest.mark.django_db
def test_a_small_model_is_read_in_the_web_process(client, settings, monkeypatch):
    settings.PRISM_INSPECT_IN_PROCESS_MAX_BYTES = 1 << 20
    monkeypatch.setattr(reading.isolated, "inspect_model", lambda *a, **k: pytest.fail("started a child"))
    assert upload(client, add_model(100)).status_code == 201


def test_a_broken_model_read_in_the_child_gets_the_in_process_message(in_child, tmp_path):
    path = tmp_path / "cut.onnx"
    path.write_bytes(add_model(1000).SerializeToString()[:2000])
    with pytest.raises(reading.compiler.CompileError) as child:
        reading.inspect_model(path)
    with pytest.raises(reading.compiler.CompileError) as here:
        reading.compiler.inspect_model(path)
    assert child.value.to_dict() == here.value.to_dict()
    assert "truncated" in child.value.message


@pytest.mark.django_db
def test_a_model_over_the_reading_limit_is_refused_naming_the_limit(client, in_child, tmp_path):
    big = add_model(24 << 20)  # 96 MiB of weights: onnx holds them twice while it parses
    limit = 320 << 20  # the interpreter with onnx and numpy fits (about 250 MiB), the model does not
    in_child.PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES = limit
    in_child.PRISM_MAX_UPLOAD_BYTES = 200 << 20
    r = upload(client, big)
    assert r.status_code == 400, r.content
    assert r.json()["error"] == (f"reading the model needs more memory than the limit of {limit} bytes "
                                 "(PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES)")
    # under the default limit it is accepted; a compile request under the small one names it again
    in_child.PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES = 4 << 30
    r = upload(client, big)
    assert r.status_code == 201, r.content
    in_child.PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES = limit
    r = post_compilation(client, r.json()["id"], target="host", input_shapes={"x": [1, 24 << 20]})
    assert r.status_code == 400, r.content
    assert f"the limit of {limit} bytes (PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES)" in r.json()["error"]


def test_a_slow_read_names_the_time_limit(in_child, tmp_path):
    in_child.PRISM_INSPECT_TIME_LIMIT_S = 0.01  # less than the interpreter takes to start
    path = Path(tmp_path / "m.onnx")
    onnx.save(add_model(10), path)
    with pytest.raises(reading.compiler.CompileError) as e:
        reading.inspect_model(path)
    assert e.value.stage == "import"
    assert e.value.message == "reading the model took longer than 0.01 s (PRISM_INSPECT_TIME_LIMIT_S)"


@pytest.mark.django_db
def test_more_large_reads_than_the_concurrency_wait_then_are_503(client, in_child):
    """PRISM_INSPECT_CONCURRENCY children at most: with every slot taken for longer than the time
    limit, an upload of a large model is 503 with Retry-After naming the setting."""
    in_child.PRISM_INSPECT_CONCURRENCY = 1
    in_child.PRISM_INSPECT_TIME_LIMIT_S = 0.5
    with reading._slot():  # another request's child holds the only slot
        r = upload(client, add_model(100, name="waits"))
    assert r.status_code == 503 and r["Retry-After"] == "10", r.content
    assert r.json()["error"] == ("the server is reading 1 other large model(s) (PRISM_INSPECT_CONCURRENCY) and none "
                                 "finished within 0.5 s; retry in a moment")
    in_child.PRISM_INSPECT_TIME_LIMIT_S = 60
    assert upload(client, add_model(100, name="waits")).status_code == 201  # the slot is free again
