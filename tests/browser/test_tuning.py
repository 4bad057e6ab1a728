"""Auto-tuning in real Chromium against the real stack (issue 16): the compile form's "Tune for"
field (a budget of 0 is refused naming the field), the tuning pane following `tune.progress` live (a
best-time curve per kernel drawn while the search runs, the stage strip waiting), the Stop button
ending the search long before its budget with what it found kept, and the kernels pane's schedule
column saying where each kernel's schedule came from, as the events say. A measurement worker
serving `prism.tune.host` joins the session's stack. Screenshots: test-artifacts/browser/tuning-*.png."""

from __future__ import annotations

import re
import time

import pytest
from browserkit import shot, stage_strip
from tuning_models import conv_stack_model

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def tuner(stack):
    if "tuner" not in stack.procs:
        stack.start_worker("tuner", queues="prism.tune.host")
    return stack


def test_tuning_streams_live_and_stop_keeps_what_was_found(tuner, page, tmp_path):
    stack = tuner
    path = conv_stack_model(tmp_path / "convs.onnx")
    page.goto(stack.url + "/")
    page.set_input_files("input.file-input", str(path))
    page.wait_for_selector(".configure:not([hidden]) .compile")
    page.fill(".tune-budget", "0")
    page.click(".compile")
    assert "tune_budget_s: must be a positive number of seconds" in page.inner_text(".submit-message")
    page.fill(".tune-budget", "600")
    page.fill(".threads", "1")
    page.click(".compile")
    page.wait_for_url(re.compile(r"/c/[\w]+$"))
    cid = page.url.rsplit("/", 1)[1]
    assert stack.get(cid)["options"]["tune_budget_s"] == 600
    page.wait_for_selector(".tuning:not([hidden])")
    page.wait_for_selector(".tuning .tuning-svg polyline.curve", timeout=300_000)  # a measured batch, live
    assert page.inner_text(".tuning-state").startswith("Searching")
    assert {status for status, _ in stage_strip(page).values()} == {"waiting"}  # the compile comes after
    assert page.locator(".tuning-legend li").count() >= 1
    shot(page, "tuning-01-live")
    page.click(".stop-tuning")
    asked = time.monotonic()
    page.wait_for_function("() => document.querySelector('.tuning-state')?.textContent.startsWith('Stopped:')",
                           timeout=180_000)
    assert time.monotonic() - asked < 180
    page.wait_for_selector(".status-badge.succeeded", timeout=600_000)
    page.wait_for_selector(".tuning-latency")
    assert "after" in page.inner_text(".tuning-latency")
    assert page.locator(".stop-tuning").count() == 0
    shot(page, "tuning-02-stopped")
    with stack.http() as c:
        events = c.get(f"/api/compilations/{cid}/events").json()["events"]
    finished = next(e for e in events if e["type"] == "tune.finished")
    assert finished["stopped"] is True
    legend = {li.split(" ", 1)[0]: li for li in page.locator(".tuning-legend li").all_inner_texts()}
    for k in finished["tuned"]:  # the best so far is never slower than the default: a kept default says so
        words = legend[k["kernel"]]
        if not k["stored"]:
            assert "default kept" in words, (words, k)
        else:
            shown_us = [float(v) for v in re.findall(r"([\d.]+) µs", words.split("·")[-1])]
            assert shown_us[1] < shown_us[0] and "default kept" not in words, (words, k)
    lowered = {e["kernel"]: e for e in events if e["type"] == "kernel.lowered"}
    page.goto(f"{stack.url}/c/{cid}/kernels")
    page.wait_for_selector(".kernels-table td.sched-src")
    # a tuned kernel reads "tuned" until GET .../tuning says where its schedule came from
    page.wait_for_function("() => ![...document.querySelectorAll('.kernels-table td.sched-src')]"
                           ".some(td => td.textContent === 'tuned')")
    shown = page.evaluate("() => Object.fromEntries([...document.querySelectorAll('.kernels-table tbody tr')]"
                          ".map(r => [r.dataset.kernel, r.querySelector('td.sched-src').textContent]))")
    assert set(shown) == set(lowered)
    with stack.http() as c:
        records = c.get(f"/api/compilations/{cid}/tuning").json()["records"]
    for kernel, e in lowered.items():
        expect = "default" if e.get("schedule_source") != "tuned" else "this run"
        workload = (e.get("tuned") or {}).get("workload")
        assert shown[kernel] == expect, (kernel, shown[kernel], e.get("schedule_source"), e.get("tuned"),
                                         records.get(workload), sorted(records))
    tuned = [k for k, e in lowered.items() if e.get("schedule_source") == "tuned"]
    if tuned:  # the share of the model's measured kernel time on tuned schedules, as the kernel.timed events say
        timed = {e["kernel"]: e["median_us"] for e in events if e["type"] == "kernel.timed"}
        pct = int(100 * sum(timed[k] for k in tuned) / sum(timed.values()) + 0.5)  # as toFixed(0) rounds
        assert f"run {len(tuned)} of {len(lowered)} kernels: {pct}%" in page.inner_text(".tuning-share")
    stored = {t["workload"] for t in finished["tuned"] if t["stored"]}  # the records this run added
    assert {k for k, s in shown.items() if s == "this run"} == {
        k for k, e in lowered.items() if e.get("tuned", {}).get("workload") in stored}
    applied = next(e for e in events if e["type"] == "tune.applied")  # the line agrees with the column
    assert applied["this_run"] == sum(1 for v in shown.values() if v == "this run")
    assert page.inner_text(".tune-applied") == applied["message"]
    if applied["tuned"] and applied["this_run"] == applied["tuned"]:
        assert applied["message"].endswith(f"kernels on tuned schedules ({applied['this_run']} found by this run)")
    shot(page, "tuning-03-kernels")
