"""Downloads (issue 15 item 6): GET /api/compilations/<id>/artifacts and each artifact, opened with
its own tool's loader (json.load, onnx.load + onnx.checker and ONNX Runtime, ctypes.CDLL, an ELF
reader, zipfile); a 404 with the reason for what a compilation lacks; each built once; visibility.

Compilations run in process through the service the Celery task calls (`runs.run_compilation`).
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import shlex
import subprocess
import sys
import threading
import zipfile
from itertools import pairwise
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler import standalone
from compiler.tune.database import make_record
from compiler.tune.tasks import compile_graph, extract_tasks
from explorer.compilations.models import Compilation
from explorer.compilations.services import uploads
from explorer.compilations.services.runs import run_compilation
from explorer.compilations.services.tuning_db import DjangoTuningDatabase
from tests.compiler.tune.models import conv_tail

pytestmark = pytest.mark.timeout(600)
REPO = Path(__file__).resolve().parents[2]
ELF_MACHINE = {"host": 62, "aarch64": 183}  # e_machine: EM_X86_64, EM_AARCH64 (System V gABI)


def _relu_sigmoid(path: Path) -> Path:
    """Relu then Sigmoid on x[1, 8]: one elementwise kernel `(in0, out0)`."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="first_relu"),
             helper.make_node("Sigmoid", ["r"], ["y"], name="sig")]
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _conv_pool(path: Path) -> Path:
    """Conv(k3, s2) + Relu, then MaxPool(k3, s2), on x[1, 3, 32, 32]: two kernels."""
    w = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv_0", kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"], name="relu_0"),
             helper.make_node("MaxPool", ["r"], ["y"], name="pool_0", kernel_shape=[3, 3], strides=[2, 2])]
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 7, 7])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _random_model(path: Path) -> Path:
    """Relu then RandomNormalLike on x[1, 8]: the passes run, then lowering refuses the random op
    (no lowering: its values are not reproducible), naming the node."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu_0"),
             helper.make_node("RandomNormalLike", ["r"], ["y"], name="odd_one")]
    graph = helper.make_graph(nodes, "fails", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _compiled(path: Path, *, target: str = "host", pipeline: str = "O2", owner=None,
              visibility: str = "unlisted", benchmark: bool = False) -> Compilation:
    data = path.read_bytes()
    model, _ = uploads.register_upload([data], name=path.name, size=len(data), owner=owner, visibility=visibility)
    comp = Compilation.objects.create(model=model, target=target, pipeline=pipeline, compiler_version="t",
                                      cache_key=f"artifacts-{target}-{path.name}", owner=owner, visibility=visibility,
                                      options={"verify": False, "benchmark": benchmark})
    run_compilation(comp.id)
    comp.refresh_from_db()
    return comp


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.VAR_DIR


def _get(client, comp, name):
    return client.get(f"/api/compilations/{comp.id}/artifacts/{name}")


@pytest.mark.django_db
def test_every_listed_artifact_opens_with_its_own_loader(client, var_dir, tmp_path):
    comp = _compiled(_relu_sigmoid(tmp_path / "relu-sigmoid.onnx"), benchmark=True)
    assert comp.status == "succeeded", comp.error
    listing = client.get(f"/api/compilations/{comp.id}/artifacts").json()
    names = {a["name"]: a for a in listing["artifacts"]}
    assert {"report.json", "trace.json", "run-trace.json", "kernels.zip", "module.o", "module.so"} <= set(names)
    assert listing["missing"] == {}
    passes = [n for n in names if n.startswith("pass-")]
    assert len(passes) == len(comp.pipeline.split(",")) or len(passes) > 5

    r = _get(client, comp, "report.json")
    assert r["Content-Disposition"] == f'attachment; filename="{comp.id}-report.json"'
    report = json.load(io.BytesIO(r.content))
    assert report["version"] == 1 and report["error"] is None and report["target"] == "host"
    assert [p["name"] for p in report["passes"]] == [n.split("-", 2)[2][:-5] for n in sorted(passes, key=lambda n: int(n.split("-")[1]))]
    (kernel,) = report["kernels"]

    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    expected = ReferenceEvaluator(onnx.load(tmp_path / "relu-sigmoid.onnx")).run(None, {"x": x})[0]
    last = max(passes, key=lambda n: int(n.split("-")[1]))
    m = onnx.load_from_string(_get(client, comp, last).content)
    onnx.checker.check_model(m, full_check=True)
    assert [f.name for f in m.functions] == [kernel["kernel"]]  # the fused group as a function
    got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)

    so = tmp_path / "module.so"
    so.write_bytes(_get(client, comp, "module.so").content)
    lib = ctypes.CDLL(str(so))
    fn = getattr(lib, kernel["symbol"])
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p], None
    out = np.zeros_like(x)
    fn(x.ctypes.data, out.ctypes.data)  # def fused_...(in0, out0): the kernel's loop IR signature
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)
    # the whole model through its documented entry point: int prism_run(inputs, outputs)
    lib.prism_run.argtypes, lib.prism_run.restype = [ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
    whole = np.full_like(x, np.nan)
    assert lib.prism_run((ctypes.c_void_p * 1)(x.ctypes.data), (ctypes.c_void_p * 1)(whole.ctypes.data)) == 0
    np.testing.assert_allclose(whole, expected, rtol=1e-6, atol=1e-7)

    obj = _get(client, comp, "module.o").content
    assert obj[:4] == b"\x7fELF" and int.from_bytes(obj[18:20], "little") == ELF_MACHINE["host"]
    assert int.from_bytes(obj[16:18], "little") == 1  # ET_REL: a relocatable object file
    assert kernel["symbol"].encode() in obj

    zf = zipfile.ZipFile(io.BytesIO(_get(client, comp, "kernels.zip").content))
    k = kernel["kernel"]
    assert sorted(zf.namelist()) == sorted(f"{k}/{f}" for f in ("loop.txt", "llvm.ll", "llvm.opt.ll", "asm.s"))
    assert zf.read(f"{k}/asm.s").decode() == kernel["asm"]


@pytest.mark.django_db
def test_what_a_compilation_lacks_is_a_404_with_the_reason(client, var_dir, tmp_path):
    failed = _compiled(_random_model(tmp_path / "fails.onnx"))
    assert failed.status == "failed" and failed.error["stage"] == "lowering" and failed.error["node"] == "odd_one"
    listing = client.get(f"/api/compilations/{failed.id}/artifacts").json()
    assert "lowering" in listing["missing"]["module.o"] and "module.so" in listing["missing"]
    assert "kernels.zip" in listing["missing"]
    names = [a["name"] for a in listing["artifacts"]]
    assert names[:3] == ["reproducer.zip", "report.json", "trace.json"]
    passes = [n for n in names if n.startswith("pass-")]
    assert len(passes) >= 9  # what came before the failure is kept
    onnx.checker.check_model(onnx.load_from_string(_get(client, failed, passes[-1]).content))
    r = _get(client, failed, "module.o")
    assert r.status_code == 404 and "failed during lowering" in r.json()["error"] and r.json()["artifact"] == "module.o"
    assert _get(client, failed, "kernels.zip").status_code == 404
    assert _get(client, failed, "no-such-thing.bin").json()["error"] == "this compilation has no artifact 'no-such-thing.bin'"
    assert _get(client, failed, "report.json").json()["error"]["node"] == "odd_one"  # the report is there

    cross = _compiled(_relu_sigmoid(tmp_path / "cross.onnx"), target="aarch64")
    assert cross.status == "succeeded", cross.error
    r = _get(client, cross, "module.so")
    assert r.status_code == 404 and "cross target" in r.json()["error"]
    obj = _get(client, cross, "module.o").content
    assert obj[:4] == b"\x7fELF" and int.from_bytes(obj[18:20], "little") == ELF_MACHINE["aarch64"]


@pytest.mark.django_db(transaction=True)
def test_an_artifact_is_built_once_however_many_ask(var_dir, tmp_path, monkeypatch):
    comp = _compiled(_relu_sigmoid(tmp_path / "once.onnx"))
    from compiler import artifacts as compiler_artifacts

    calls: list[int] = []
    real = compiler_artifacts.model_after_pass

    def counted(*args, **kwargs):
        calls.append(kwargs["index"])
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler_artifacts, "model_after_pass", counted)
    results: list[bytes] = []

    first_graph = next(e.payload for e in comp.events.order_by("seq")
                       if e.type == "pass.finished" and e.payload.get("level") == "graph")
    name = f"pass-{first_graph['index']}-{first_graph['name']}.onnx"

    def fetch():
        results.append(Client().get(f"/api/compilations/{comp.id}/artifacts/{name}").content)

    threads = [threading.Thread(target=fetch) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fetch()
    assert calls == [first_graph["index"]] and len(results) == 4 and len(set(results)) == 1
    onnx.checker.check_model(onnx.load_from_string(results[0]))


@pytest.mark.django_db
def test_a_private_compilations_artifacts_are_404_for_others(var_dir, tmp_path):
    users = {n: get_user_model().objects.create_user(n, password=f"{n}-pw-123") for n in ("owner", "outsider")}
    comp = _compiled(_relu_sigmoid(tmp_path / "private.onnx"), owner=users["owner"], visibility="private")
    clients = {"anonymous": Client()}
    for name, user in users.items():
        clients[name] = Client()
        clients[name].force_login(user)
    paths = [f"/api/compilations/{comp.id}/artifacts", f"/api/compilations/{comp.id}/artifacts/report.json",
             f"/api/compilations/{comp.id}/artifacts/module.so"]
    got = {who: [clients[who].get(p).status_code for p in paths] for who in ("outsider", "anonymous")}
    assert got == {"outsider": [404] * 3, "anonymous": [404] * 3}
    assert clients["outsider"].get(paths[1]).json()["error"] == f"no compilation with id {comp.id}"  # as unknown
    assert not (Path(var_dir) / "artifacts" / comp.id).exists()  # nothing was built for them
    assert [clients["owner"].get(p).status_code for p in paths] == [200, 200, 200]



def _spans(trace: dict) -> list[dict]:
    """The complete events of a Chrome trace, each checked for the fields the Trace Event Format
    requires of one (name, ph, ts, dur, pid, tid; times in µs)."""
    assert isinstance(trace["traceEvents"], list)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    for e in spans:
        assert isinstance(e["name"], str) and all(isinstance(e[k], (int, float)) for k in ("ts", "dur", "pid", "tid"))
        assert e["dur"] >= 0
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M") and "pid" in e
    return spans


@pytest.mark.django_db
def test_the_traces_are_chrome_trace_event_json(client, var_dir, tmp_path):
    comp = _compiled(_conv_pool(tmp_path / "traced.onnx"), benchmark=True)
    report = _get(client, comp, "report.json").json()
    spans = _spans(json.load(io.BytesIO(_get(client, comp, "trace.json").content)))
    stages = [e for e in spans if e["cat"] == "stage"]
    passes = [e for e in spans if e["cat"] == "pass"]
    codegen = [e for e in spans if e["cat"] == "codegen"]
    assert [e["name"] for e in stages] == ["import", "passes", "lowering", "codegen", "run"]
    assert {e["tid"] for e in stages + passes} == {1}  # stages and passes on one track
    assert [e["name"] for e in passes] == [p["name"] for p in report["passes"]]
    (outer,) = [e for e in stages if e["name"] == "passes"]
    for p in passes:  # nested in the passes stage, one after another
        assert outer["ts"] - 0.5 <= p["ts"] and p["ts"] + p["dur"] <= outer["ts"] + outer["dur"] + 0.5
    assert all(a["ts"] + a["dur"] <= b["ts"] + 0.5 for a, b in pairwise(passes))
    assert len(report["kernels"]) == 2 and [e["name"] for e in codegen] == [k["kernel"] for k in report["kernels"]]
    assert {e["tid"] for e in codegen}.isdisjoint({1})  # each kernel's codegen on another track
    assert [e["dur"] for e in codegen] == pytest.approx([k["compile_ms"] * 1e3 for k in report["kernels"]], abs=1e-3)

    run = _spans(json.load(io.BytesIO(_get(client, comp, "run-trace.json").content)))
    kernels = [e for e in run if e["cat"] == "kernel"]
    assert [e["name"] for e in kernels] == [k["kernel"] for k in report["kernels"]]  # execution order
    assert [e["dur"] for e in kernels] == pytest.approx([k["median_us"] for k in report["kernels"]], abs=1e-3)
    assert all(a["ts"] + a["dur"] == pytest.approx(b["ts"], abs=1e-3) for a, b in pairwise(kernels))
    (model,) = [e for e in run if e["cat"] == "model"]
    assert model["dur"] == pytest.approx(report["timing"]["prism_ms"] * 1e3, abs=1e-3)


@pytest.mark.django_db
def test_a_failed_compilations_reproducer_fails_the_same_way(client, var_dir, tmp_path):
    comp = _compiled(_random_model(tmp_path / "fails.onnx"))
    error = comp.error
    listing = client.get(f"/api/compilations/{comp.id}/artifacts").json()
    assert listing["artifacts"][0]["name"] == "reproducer.zip"
    zf = zipfile.ZipFile(io.BytesIO(_get(client, comp, "reproducer.zip").content))
    assert sorted(zf.namelist()) == ["README.txt", "command.txt", "failure.json", "model.onnx"]
    work = tmp_path / "repro"
    zf.extractall(work)
    (command,) = (work / "command.txt").read_text().splitlines()  # one line
    assert command.startswith("python -m compiler compile model.onnx --target host --pipeline ")
    cut = onnx.load(work / "model.onnx")
    onnx.checker.check_model(cut)
    assert [n.name for n in cut.graph.node] == ["odd_one"]  # the failing node alone
    argv = shlex.split(command)
    proc = subprocess.run([sys.executable, *argv[1:]], cwd=work, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {error['stage']}: ")
    assert f"[node {error['node']}]" in proc.stderr
    assert json.loads(zf.read("failure.json")) == error


@pytest.mark.django_db
def test_a_service_failure_has_no_reproducer(client, var_dir, make_compilation):
    from explorer.compilations.services.events import append_failure

    comp = make_compilation(id="qlost123")
    append_failure(comp.id, reason="queue_lost", stage="queue", message="lost 3 times")
    listing = client.get(f"/api/compilations/{comp.id}/artifacts").json()
    assert "not the compiler" in listing["missing"]["reproducer.zip"]
    assert _get(client, comp, "reproducer.zip").status_code == 404


@pytest.mark.django_db
def test_the_shared_object_of_parallel_kernels_loads_alone(client, var_dir, tmp_path):
    """A kernel with a parallel loop calls the runtime's thread pool (prism_parallel_for): the object
    file carries the pool too, so the shared object loads with nothing of Prism's runtime."""
    shape = [1, 16, 256, 256]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "big",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "big-relu.onnx")
    comp = _compiled(tmp_path / "big-relu.onnx")
    (kernel,) = _get(client, comp, "report.json").json()["kernels"]
    assert "prism_parallel_for" in kernel["llvm_ir_optimized"]  # else pick a bigger shape
    so = tmp_path / "parallel.so"
    so.write_bytes(_get(client, comp, "module.so").content)
    fn = getattr(ctypes.CDLL(str(so)), kernel["symbol"])
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p], None
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = np.zeros_like(x)
    fn(x.ctypes.data, out.ctypes.data)
    np.testing.assert_array_equal(out, ReferenceEvaluator(model).run(None, {"x": x})[0])


@pytest.mark.django_db
def test_the_shared_object_of_a_tuned_compilation_holds_its_tuned_kernels(client, var_dir, tmp_path):
    """module.so is rebuilt at download time: with the schedules the compilation's kernel.lowered events
    recorded (compiler.tune.recorded), not the defaults, so it holds the kernels the compilation timed."""

    model = conv_tail()
    g, target = compile_graph(model)
    tasks, _ = extract_tasks(g, target)
    DjangoTuningDatabase().add(make_record(tasks[0].workload, tasks[0].desc, target,
                                           {"tile": "4x3", "block_rows": 4, "grain_us": "serial"}, 50.0, 60.0, trials=4, threads=1))
    onnx.save(model, tmp_path / "conv-tail.onnx")
    comp = _compiled(tmp_path / "conv-tail.onnx")
    assert comp.status == "succeeded", comp.error
    kernels = {k["kernel"]: k for k in _get(client, comp, "report.json").json()["kernels"]}
    tuned = kernels[tasks[0].kernel]
    assert tuned.get("schedule_source") == "tuned", tuned.get("schedule_source")
    so = tmp_path / "tuned.so"
    so.write_bytes(_get(client, comp, "module.so").content)
    lib = ctypes.CDLL(str(so))
    for k in kernels.values():
        assert hasattr(lib, k["symbol"]), k["kernel"]  # every kernel the compilation compiled, the tuned one too
    default = standalone.program_for(str(tmp_path / "conv-tail.onnx"), target="host", pipeline="O2")
    assert tuned["symbol"] not in {c["symbol"] for c in default.calls}  # which the default schedules do not build
