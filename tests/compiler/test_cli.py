"""The command line: report, per-pass IR files, IR dumps, memory figures, samples by name."""

from __future__ import annotations

import json

from compiler.cli import main
from compiler.passes.pipeline import parse_pipeline
from compiler.samples import SAMPLES, cache_dir, fetch, list_samples


def test_cli_json_report_and_emit_dir(squeezenet_path, tmp_path, capsys) -> None:
    rc = main(["compile", str(squeezenet_path), "--pipeline", "fold-constants,eliminate-dead-code", "--json",
               "--emit-dir", str(tmp_path), "--no-backend"])
    out = capsys.readouterr().out
    assert rc == 0
    report = json.loads(out)
    assert report["version"] == 1 and report["error"] is None
    assert [p["name"] for p in report["passes"] if p["level"] == "graph"] == ["fold-constants", "eliminate-dead-code"]
    files = sorted(p.name for p in tmp_path.iterdir())
    suffix = {"onnx": ".onnx.txt", "graph": ".ir"}  # ONNX text (onnx.printer) before import, graph IR after
    assert files == sorted([f"{p['index']:02d}-{p['name']}{suffix[p['level']]}" for p in report["passes"]]
                           + ["report.json"])
    fold = next(p for p in report["passes"] if p["name"] == "fold-constants")
    assert (tmp_path / f"{fold['index']:02d}-fold-constants.ir").read_text() == fold["ir"] + "\n"


def test_cli_print_after_all_and_memory_figures(capsys) -> None:
    rc = main(["compile", "light_squeezenet", "--pipeline", "O2", "--print-after-all", "--no-backend"])
    out = capsys.readouterr().out
    assert rc == 0
    o2 = [p.name for p in parse_pipeline("O2").specs()]  # squeezenet: the fixed-point group runs once
    assert out.count("// ----- IR Dump After ") == len(o2)
    assert f"IR Dump After fuse-ops (pass {o2.index('fuse-ops')})" in out
    assert "memory: arena " in out and "no-sharing / arena = " in out and "arena / lower bound = " in out


def test_cli_input_shape_binds(capsys) -> None:
    rc = main(["compile", str(fetch("yolov8n")), "--pipeline", "O0", "--input-shape", "images=1,3,256,256",
               "--json", "--no-backend"])
    assert rc == 0, capsys.readouterr().err
    rep = json.loads(capsys.readouterr().out)
    assert rep["model"]["inputs"][0]["shape"] == ["batch", 3, "height", "width"]


def test_cli_bad_input_shape_text(capsys) -> None:
    rc = main(["compile", "light_squeezenet", "--input-shape", "data_0=1,x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--input-shape" in err[0]


def test_samples_are_listed_and_cached() -> None:
    names = [s["name"] for s in list_samples()]
    assert names == list(SAMPLES) and len(names) == 12
    p = fetch("ppocr_v4_det")
    assert p.parent == cache_dir() and p.stat().st_size > 1_000_000
    mtime = p.stat().st_mtime_ns
    assert fetch("ppocr_v4_det") == p and p.stat().st_mtime_ns == mtime  # reused, not downloaded again


def test_cli_a_bad_option_value_is_a_one_line_error(squeezenet_path, capsys) -> None:
    for text, words in (("quantize{dtype=int4}", "option 'dtype' = int4 is not one of: int8, bf16, fp16"),
                        ("O2,fuse-ops{max-group-size=0}", "option 'max-group-size' = 0 must be at least 1")):
        rc = main(["compile", str(squeezenet_path), "--pipeline", text, "--no-backend"])
        err = capsys.readouterr().err
        assert rc == 2
        assert err.count("\n") == 1 and err.startswith("error: ") and words in err, err
