"""A compilation's tuned schedules replayed from its log (compiler/tune/recorded.py): the shared library
rebuilt for a tuned compilation (the explorer's module.so) holds the kernels that compilation compiled,
tuned ones included, not the defaults; a record whose workload changed falls back with a warning."""

from __future__ import annotations

import ctypes

import numpy as np
import onnxruntime as ort

import compiler
from compiler import standalone
from compiler.targets import get_target
from compiler.tune.recorded import RecordedSchedules
from tests.compiler.tune.models import conv_tail
from tests.compiler.tune.test_apply import _by, _db_with


def test_the_rebuilt_library_holds_the_tuned_kernels_and_matches_onnx_runtime(tmp_path):  # type: ignore[no-untyped-def]
    model = conv_tail()
    path, tasks, _ = _db_with(tmp_path, model, [{"tile": "4x3", "block_rows": 4, "grain_us": "serial"}, {"vector": 4}])
    r = compiler.compile(model, tuning_db=str(path), verify=False, benchmark=False, threads=1)
    assert r.ok, r.error
    symbols = {e["kernel"]: e["symbol"] for e in _by(r.events, "kernel.compiled")}
    rec = RecordedSchedules(r.events)
    assert set(rec.records) == {t.kernel for t in tasks}
    tuned = standalone.program_for(model, target="host", pipeline="O2", schedules=rec)
    default = standalone.program_for(model, target="host", pipeline="O2")
    assert {c["name"]: c["symbol"] for c in tuned.calls} == symbols  # the very kernels the compilation compiled
    assert {c["symbol"] for c in default.calls} != set(symbols.values())  # which are not the defaults
    assert rec.warnings() == []
    # the library loads with ctypes and computes what ONNX Runtime computes
    lib_path = tmp_path / "module.so"
    lib_path.write_bytes(standalone.shared_library(tuned, "host"))
    lib = ctypes.CDLL(str(lib_path))
    (inp,) = tuned.inputs
    x = np.random.default_rng(0).standard_normal(inp[2]).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {inp[0]: x})[0]
    got = np.zeros_like(want)
    ins = (ctypes.c_void_p * 1)(x.ctypes.data)
    outs = (ctypes.c_void_p * 1)(got.ctypes.data)
    assert lib.prism_run(ins, outs) == 0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_record_whose_workload_changed_takes_the_default_and_says_so(tmp_path):  # type: ignore[no-untyped-def]
    model = conv_tail()
    path, tasks, _ = _db_with(tmp_path, model, [{"tile": "4x3", "block_rows": 4, "grain_us": "serial"}])
    r = compiler.compile(model, tuning_db=str(path), verify=False, benchmark=False, threads=1)
    assert r.ok, r.error
    events = [dict(e) for e in r.events]
    for e in events:
        if e["type"] == "kernel.lowered" and e.get("tuned"):
            e["tuned"] = {**e["tuned"], "workload": "a workload of another compiler version"}
    rec = RecordedSchedules(events)
    assert list(rec.records) == [tasks[0].kernel] and rec
    replayed = standalone.program_for(model, target="host", pipeline="O2", schedules=rec)
    default = standalone.program_for(model, target="host", pipeline="O2")
    assert [c["symbol"] for c in replayed.calls] == [c["symbol"] for c in default.calls]
    assert rec.warnings() == [f"kernel {tasks[0].kernel}: its workload changed since the compilation; default schedule"]
    assert not RecordedSchedules([]) and RecordedSchedules([]).lookup(None, "k", get_target("host")) is None
