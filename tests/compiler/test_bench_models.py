"""The grown benchmark set (compiler.bench_models): valid ONNX of the kinds it names, cached outside the
repository, and compiled by Prism to ONNX Runtime's outputs (the small ones, at 2 threads)."""

from __future__ import annotations

import onnx
import pytest

import compiler
from compiler import bench_models


def test_models_are_valid_onnx_of_their_kind_and_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PRISM_CACHE", str(tmp_path))
    ops = {}
    for name in bench_models.BENCH_MODELS:
        path = bench_models.load(name)
        assert path == tmp_path / "models" / f"{name}.onnx"
        m = onnx.load_model(str(path))
        onnx.checker.check_model(m, full_check=True)
        ops[name] = {n.op_type for n in m.graph.node}
        assert bench_models.load(name).stat().st_mtime == path.stat().st_mtime  # built once
    assert {"Softmax", "ReduceMean", "Erf", "Transpose"} <= ops["bert_tiny_2l"]  # decomposed LayerNorm, GELU erf
    assert {"LayerNormalization", "Tanh"} <= ops["vit_enc_4l"]
    assert {"Clip", "Conv"} <= ops["mobilenet_v2ish"]
    assert {"HardSwish", "HardSigmoid", "GlobalAveragePool", "Mul"} <= ops["mobilenet_v3ish"]
    assert "GRU" in ops["gru_kws"]
    with pytest.raises(KeyError, match="unknown bench model 'nope'"):
        bench_models.load("nope")


@pytest.mark.parametrize("name", ["bert_tiny_2l", "gru_kws"])
def test_small_models_compile_to_onnxruntime_outputs(name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PRISM_CACHE", str(tmp_path))
    r = compiler.compile(str(bench_models.load(name)), benchmark=False, threads=2)
    assert r.ok, r.error
    v = r.of_type("model.verified")[-1]
    assert v["passed"], v
