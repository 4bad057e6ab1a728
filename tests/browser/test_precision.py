"""The precision view in a real Chromium: a model quantized to INT8 with uploaded calibration data shows
its accuracy against FP32 beside the speed, the layer table sorts, the fusion graph is coloured by
precision with a legend, and one click recompiles with a layer kept in FP32; the compile form's precision
field and calibration upload start such a compilation."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler" / "quant"))
from browserkit import shot  # noqa: E402
from qmodels import calibration, small_cnn  # noqa: E402

PIPELINE = "O2,quantize{dtype=int8}"


def _upload_calibration(stack, model: onnx.ModelProto) -> str:
    buf = io.BytesIO()
    np.savez(buf, x=np.stack([d["x"] for d in calibration(model, 8)]))
    with stack.http() as c:
        r = c.post("/api/calibrations", files={"data": ("cal.npz", buf.getvalue(), "application/octet-stream")})
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def _rows(page) -> list[str]:
    return page.locator(".precision table.layers tbody tr").evaluate_all("rs => rs.map(r => r.dataset.node)")


def test_precision_view(stack, page, tmp_path):
    m = small_cnn()
    path = tmp_path / "small_cnn.onnx"
    onnx.save(m, path)
    model = stack.upload(path)
    cal = _upload_calibration(stack, m)
    comp = stack.compile(model["id"], target="host", pipeline=PIPELINE, options={"calibration": cal})
    assert stack.wait_finished(comp["id"], timeout=600)["status"] == "succeeded"
    page.goto(f"{stack.url}/c/{comp['id']}")
    card = page.locator(".precision")
    card.wait_for(timeout=120_000)
    text = card.inner_text()
    assert "Precision: INT8 against FP32" in text and "criterion met" in text
    assert "ONNX Runtime FP32" in text and "ONNX Runtime INT8" in text
    rows = _rows(page)
    assert {"conv1", "conv2", "add", "fc"} <= set(rows)
    sqnr = page.locator(".precision table.layers tbody tr td.sqnr").all_inner_texts()
    numbers = [float(s.split()[0]) for s in sqnr if s.endswith("dB")]
    assert numbers == sorted(numbers)  # worst SQNR first
    page.click('.precision button[data-sort="max_abs_error"]')
    assert _rows(page) != rows or len(rows) < 2
    shot(page, "10-precision-summary")
    page.goto(f"{stack.url}/c/{comp['id']}/graph")
    legend = page.locator(".graph-legend")
    legend.wait_for(timeout=120_000)
    assert "int8 ≥ 40 dB" in legend.inner_text() and "fp32" in legend.inner_text()
    page.wait_for_selector(".gnode.prec-int8", timeout=120_000)
    fills = page.locator(".gnode.prec-int8 rect").evaluate_all("rs => rs.map(r => r.getAttribute('fill'))")
    assert fills and all(f != "#fff" for f in fills)
    shot(page, "11-precision-graph")
    page.goto(f"{stack.url}/c/{comp['id']}")
    page.locator('.precision tr[data-node="conv2"] button.keep-fp32').click()
    page.wait_for_url(lambda u: f"/c/{comp['id']}" not in u, timeout=60_000)
    new_id = page.url.rstrip("/").split("/c/")[1].split("/")[0]
    assert "exclude=conv2" in stack.get(new_id)["pipeline"]
    page.locator(".precision").wait_for(timeout=600_000)
    row = page.locator('.precision tr[data-node="conv2"]')
    assert "fp32" in row.inner_text()


def test_precision_form_field(stack, page, tmp_path):
    """Start page: precision int8 and a calibration .npz chosen in the form; the compilation quantizes with
    those samples (not random inputs), its layer table comes sorted by SQNR (worst first) and its graph is
    coloured by precision."""
    m = small_cnn()
    path, cal = tmp_path / "small_cnn.onnx", tmp_path / "cal.npz"
    onnx.save(m, path)
    np.savez(cal, x=np.stack([d["x"] for d in calibration(m, 6)]))
    page.goto(stack.url + "/")
    page.set_input_files("input.file-input", str(path))
    page.wait_for_selector(".configure:not([hidden]) .compile")
    page.select_option(".pipeline-preset", "O2")
    assert page.locator(".field.calibration").is_hidden()  # only for a reduced precision
    page.select_option("select.precision-choice", "int8")
    page.locator(".field.calibration").wait_for(state="visible")
    page.set_input_files("input.calibration-file", str(cal))
    shot(page, "12-precision-form")
    page.click(".compile")
    page.wait_for_url(re.compile(r"/c/[\w]+$"), timeout=60_000)
    cid = page.url.rstrip("/").split("/")[-1]
    assert stack.wait_finished(cid, timeout=600)["status"] == "succeeded"
    assert stack.get(cid)["requested_pipeline"] == "O2,quantize{dtype=int8}"
    card = page.locator(".precision")
    card.wait_for(timeout=120_000)
    text = card.inner_text()
    assert "Precision: INT8 against FP32" in text and "calibration minmax on 6 samples" in text, text
    assert "random" not in text.split("calibration", 1)[1].split("\n", 1)[0]
    sqnr = page.locator(".precision table.layers tbody tr td.sqnr").all_inner_texts()
    numbers = [float(s.split()[0]) for s in sqnr if s.endswith("dB")]
    assert len(numbers) >= 3 and numbers == sorted(numbers)  # worst SQNR first
    shot(page, "13-precision-form-result")
    page.goto(f"{stack.url}/c/{cid}/graph")
    page.wait_for_selector(".gnode.prec-int8", timeout=120_000)
    fills = page.locator(".gnode.prec-int8 rect").evaluate_all("rs => rs.map(r => r.getAttribute('fill'))")
    assert fills and all(f != "#fff" for f in fills)
    assert page.locator(".gnode.prec-fp32").count() + page.locator(".gnode.prec-int8").count() > 0
    shot(page, "14-precision-form-graph")
