"""The event schema (compiler/events/schema.py): payloads validated at emit, seq assigned once, the
stage and terminal lists derived from it, every event of a real compilation inside it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import compiler
import compiler.api
from compiler import samples
from compiler.errors import CompileError
from compiler.events import (
    EVENT_STAGE,
    EVENT_TYPES,
    STAGE_KEYS,
    TERMINAL_EVENT_TYPES,
    EventSchemaError,
    EventStream,
    check_payload,
)

PASS_FINISHED = {"index": 0, "name": "fold-constants", "options": {}, "duration_ms": 0.1, "changed": False,
                 "ir": "graph g() {}", "stats": {"nodes": 3, "qdq_folded": 0}, "remarks": [
                     {"kind": "applied", "pass": "fold-constants", "message": "folded", "nodes": ["a"]}]}


def test_stream_numbers_events_from_zero_and_hands_each_out():
    seen = []
    s = EventStream(seen.append)
    s.emit("pass.started", index=0, name="fold-constants", options={})
    s.emit("pass.finished", **PASS_FINISHED)
    s.emit("compile.finished", duration_ms=1.5, stage_ms={"import": 0.5, "passes": 1.0})
    assert [e["seq"] for e in seen] == [0, 1, 2] and s.next_seq == 3
    assert seen == s.events and [e["type"] for e in seen] == ["pass.started", "pass.finished", "compile.finished"]


@pytest.mark.parametrize(("etype", "payload", "message"), [
    ("pass.begun", {}, "unknown event type 'pass.begun'"),
    ("pass.started", {"index": 0, "name": "x", "options": {}, "seq": 4}, "may not set ['seq']"),
    ("pass.started", {"index": 0, "name": "x"}, "pass.started: missing field(s) ['options']"),
    ("pass.started", {"index": 0, "name": "x", "options": {}, "threads": 2},
     "field(s) ['threads'] are not in the schema of PassStarted"),
    ("pass.started", {"index": "0", "name": "x", "options": {}}, "pass.started.index: expected int, got str"),
    ("pass.started", {"index": True, "name": "x", "options": {}}, "pass.started.index: expected int, got bool"),
    ("pass.finished", {**PASS_FINISHED, "remarks": [{"kind": "applied", "pass": "p", "message": "m", "nodes": [3]}]},
     "pass.finished.remarks[0].nodes[0]: expected str, got int"),
    ("pass.finished", {**PASS_FINISHED, "remarks": [{"kind": "good", "pass": "p", "message": "m", "nodes": []}]},
     "pass.finished.remarks[0].kind: 'good' is not one of ['applied', 'missed', 'analysis']"),
    ("compile.finished", {"duration_ms": 1.0, "stage_ms": {"link": 1.0}}, "compile.finished.stage_ms: key 'link'"),
    ("compile.failed", {"stage": "linking", "message": "m"}, "compile.failed.stage: 'linking' is not one of"),
    ("model.timed", {"prism_ms": 1.0, "onnxruntime_ms": "fast", "ratio": None, "repeats": 5},
     "model.timed.onnxruntime_ms: 'fast' matches none of"),
    ("compile.started", {"model": {"name": "m", "sha256": "0", "inputs": [{"name": "x", "dtype": "float32"}],
                                   "outputs": []}, "target": "host", "pipeline": "O0"},
     "compile.started.model.inputs[0]: missing field(s) ['shape'] of TensorInfo"),
])
def test_a_payload_outside_the_schema_is_a_clear_error_at_emit(etype, payload, message):
    s = EventStream()
    with pytest.raises(EventSchemaError) as err:
        s.emit(etype, **payload)
    assert message in str(err.value)
    assert s.events == []  # nothing numbered, nothing handed out


def test_numbers_from_numpy_nan_and_open_structs_are_accepted():
    stats = {"nodes": np.int64(3), "groups": 1, "fused": 2, "pass_specific": {"any": ["json"]}}
    check_payload("pass.finished", {**PASS_FINISHED, "duration_ms": np.float32(0.5), "stats": stats})
    check_payload("model.verified", {"passed": False, "max_abs_error": math.inf, "max_rel_error": math.nan,
                                     "rtol": 1e-3, "atol": 1e-4, "outputs": {"y": {
                                         "passed": False, "max_abs_error": None, "max_rel_error": None,
                                         "message": "shape (2,) != (3,)", "future_field": 1}}})
    with pytest.raises(EventSchemaError, match="remarks"):  # a closed struct stays closed inside an open one
        check_payload("pass.finished", {**PASS_FINISHED, "remarks": [{**PASS_FINISHED["remarks"][0], "x": 1}]})


def test_stage_and_terminal_lists_come_from_the_schema():
    assert TERMINAL_EVENT_TYPES == {"compile.finished", "compile.failed"}
    assert set(EVENT_STAGE) == set(EVENT_TYPES) - TERMINAL_EVENT_TYPES
    assert set(EVENT_STAGE.values()) <= set(STAGE_KEYS)
    assert compiler.api.STAGE_KEYS == STAGE_KEYS
    assert all(CompileError(stage, "m").stage == stage for stage in STAGE_KEYS)  # each is a failure stage too


def test_a_compile_error_payload_is_a_valid_compile_failed():
    err = CompileError("passes", "pass fuse-ops failed", pass_name="fuse-ops", node="Conv_1", op="Conv")
    check_payload("compile.failed", err.to_dict())


def test_every_event_of_a_real_compilation_is_in_the_schema():
    """light_squeezenet verified and timed against ONNX Runtime: each of its events passed the check at
    emit; here the stream holds every non-failure type once or more, numbered without gaps."""
    r = compiler.compile(samples.fetch("light_squeezenet"), verify=True, benchmark=True)
    assert r.ok, r.error
    types = [e["type"] for e in r.events]
    assert set(types) == set(EVENT_TYPES) - {"model.accuracy", "compile.failed", "tune.applied", "tune.started",
                                             "tune.progress", "tune.finished"}
    assert [e["seq"] for e in r.events] == list(range(len(r.events)))
    assert types[-1] == "compile.finished" and sum(t in TERMINAL_EVENT_TYPES for t in types) == 1
    for e in r.events:
        check_payload(e["type"], {k: v for k, v in e.items() if k not in ("seq", "type", "ts")})


def test_a_failed_compilation_ends_in_a_valid_compile_failed():
    r = compiler.compile(b"not an onnx model")
    assert not r.ok and r.events[-1]["type"] == "compile.failed" and r.events[-1]["stage"] == "import"
