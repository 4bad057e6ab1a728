"""Issue 15 item 9, in real Chromium against the real stack: what a new user saw wrong, fixed.

One small model with symbolic input dims (its output declared with the shape formulas PyTorch's
exporter writes) compiled twice; screenshots under test-artifacts/browser/ (depth-*.png).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from browserkit import FRAME_TIMES, shot
from onnx import TensorProto, helper, numpy_helper

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
# ONNX's output size of a k3/s2 Conv then a k3/s2 MaxPool on H, written as PyTorch's exporter does.
FORMULA = "floor((floor((H - 3)/2) + 1 - 3)/2) + 1"


def tiny_convnet(path: Path) -> Path:
    """Conv(k3, s2) -> Relu -> MaxPool(k3, s2) on x[N, 3, H, W]; graph name "main_graph"."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv_0", kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"], name="relu_0"),
        helper.make_node("MaxPool", ["r"], ["y"], name="pool_0", kernel_shape=[3, 3], strides=[2, 2]),
    ]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, FORMULA, FORMULA.replace("H", "W")])
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                              [out], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def overflowing(page, selector: str) -> list[str]:
    """Texts of elements under `selector` drawn wider than their box (cut or spilling out)."""
    return page.evaluate("""(sel) => [...document.querySelectorAll(sel)].filter(e => {
        const r = e.getBoundingClientRect(), card = e.closest('.card').getBoundingClientRect();
        return r.right > card.right + 0.5 || e.scrollWidth > e.clientWidth + 1; }).map(e => e.textContent)""", selector)


def test_the_defects_a_new_user_saw(stack, context, page, tmp_path):
    model = stack.upload(tiny_convnet(tmp_path / "tiny-convnet.onnx"))
    shapes = {"x": [1, 3, 64, 64]}
    a = stack.compile(model["id"], pipeline="O2", input_shapes=shapes, visibility="public", cache=False)
    b = stack.compile(model["id"], pipeline="O1", input_shapes=shapes, visibility="public", cache=False)
    for c in (a, b):
        assert stack.wait_finished(c["id"])["status"] == "succeeded"

    # Titled with the uploaded file's name, not the graph's "main_graph".
    page.goto(f"{stack.url}/c/{a['id']}")
    page.wait_for_selector(".status-badge.succeeded", timeout=300_000)
    assert page.inner_text(".page-header .model-name") == "tiny-convnet.onnx"
    assert page.title().startswith("tiny-convnet.onnx")
    assert page.inner_text(".summary .model-file") == "tiny-convnet.onnx"

    # The summary gives the bound shapes (ONNX's floor((64 - 3) / 2) + 1 = 31, floor((31 - 3) / 2) + 1 = 15),
    # the declared formula only as a muted note cut to the card, and nothing spills out of its card.
    out_row = page.locator(".summary .io tr[data-io=y]")
    assert out_row.locator(".bound-shape").inner_text() == "[1, 4, 15, 15]"
    assert page.locator(".summary .io tr[data-io=x] .bound-shape").inner_text() == "[1, 3, 64, 64]"
    assert "floor" in out_row.locator(".declared-shape").get_attribute("title")
    assert overflowing(page, ".summary .io td") == []
    shot(page, "depth-01-summary")

    # Remarks name the ONNX nodes with their op types.
    page.click(".main-tabs .tab[data-tab=remarks]")
    page.select_option(".remarks-pass", "fuse-ops")
    link = page.locator(".remark .node-link").first
    assert link.get_attribute("data-node") in ("conv_0", "relu_0", "pool_0")
    assert link.locator(".node-op").inner_text().strip() in ("Conv", "Relu", "MaxPool")
    # The timeline says "N remarks" in words, never a bare "1 ✎".
    counts = page.locator(".timeline-row .pass-remarks").all_inner_texts()
    assert "✎" not in "".join(counts) and any(re.fullmatch(r"\d+ remarks?", t) for t in counts), counts
    shot(page, "depth-02-remarks")

    # The kernels table: the time column names the measure; each value carries its own unit.
    page.click(".main-tabs .tab[data-tab=kernels]")
    page.wait_for_selector(".kernels-table tbody tr")
    heads = page.locator(".kernels-table th").all_inner_texts()
    assert not any(h.strip().startswith("µs") for h in heads) and any("median time" in h for h in heads), heads
    times = page.locator(".kernels-table tbody td:nth-child(3)").all_inner_texts()
    assert times and all(re.fullmatch(r"[\d.]+ (µs|ms|s)", t) for t in times), times

    # The start page: pass docs rendered (no reST markup), the expansion's place said right,
    # one card per sample with its own short title, the shared note once, the chosen card marked.
    page.goto(stack.url + "/")
    page.wait_for_selector(".sample")
    descs = page.locator(".sample .sample-desc").all_inner_texts()
    assert len(descs) >= 9 and len(set(descs)) == len(descs), descs
    assert page.locator(".gallery-note").count() == 1
    card = page.locator(".sample[data-sample=light_squeezenet]")
    card.click()
    page.wait_for_selector(".configure:not([hidden]) .compile")
    assert card.get_attribute("aria-pressed") == "true"
    assert page.locator(".sample[aria-pressed=true]").count() == 1
    assert card.locator(".sample-note").inner_text() == "on this server"
    assert "shown above" not in page.inner_text(".pipeline-note")
    page.click(".pass-docs > summary")
    docs = page.inner_text(".pass-docs")
    assert "``" not in docs and ":class:" not in docs, docs[:300]
    page.locator(".pass-docs .pass-doc").first.locator("summary").click()
    assert page.locator(".pass-docs .pass-doc[open] .rst p").count() >= 1
    shot(page, "depth-03-start")

    # The compare page opens at its top, not at the start page's scroll position.
    page.goto(stack.url + "/")
    page.wait_for_selector(".recent:not([hidden]) tbody tr")
    for cid in (a["id"], b["id"]):
        page.check(f"input[aria-label='select {cid} to compare']")
    # A short window, so the start page scrolls however few compilations the run has made so far.
    page.set_viewport_size({"width": 1400, "height": 320})
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    assert page.evaluate("window.scrollY") > 0
    page.click(".compare-selected")
    page.wait_for_url(re.compile(r"/compare/"))
    assert page.evaluate("window.scrollY") == 0
    page.set_viewport_size({"width": 1400, "height": 900})
    # The header other pages have (user menu: sign in or sign out), and nothing wider than the
    # window, even a notes cell holding one long unbroken word (a fresh user's B note made it 3836 px).
    page.wait_for_selector(".compare .page-header .user-menu :is(.sign-in, .sign-out)")
    notes = page.locator(".compare-table").first.locator("tbody tr", has_text="notes").locator("td").nth(2)
    notes.evaluate("td => { td.textContent = 'verification-note-'.repeat(200); }")
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    shot(page, "depth-04-compare")

    # An unknown path is the app's own page, status 404.
    response = page.goto(stack.url + "/no/such/page")
    assert response.status == 404
    page.wait_for_selector(".not-found")
    assert page.inner_text(".not-found-title") == "Not found: the page /no/such/page"
    assert page.locator("#app .page-header a.brand").count() == 1  # the app's header (test_narrow_width.py: every kind of 404)
    assert page.locator("#app a", has_text="start page").count() == 1
    shot(page, "depth-05-404")


QUEUE_LOST = """
from explorer.compilations.models import Compilation, UploadedModel
from explorer.compilations.services.events import append_failure
c = Compilation.objects.create(model=UploadedModel.objects.get(sha256="{sha}"), target="host", pipeline="",
                               compiler_version="test", cache_key="queue-lost")
append_failure(c.id, reason="queue_lost", stage="queue", message="its task message was lost 3 times")
print(c.id)
"""


def test_a_queue_failure_reads_as_one(stack, page, tmp_path):
    """A compilation whose job was lost from the queue (the service's own `queue_lost` event, as
    `services.queue` writes it): no compiler stage red, no "No the model" sentence."""
    model = stack.upload(tiny_convnet(tmp_path / "tiny-convnet.onnx"))
    cid = subprocess.run([sys.executable, "manage.py", "shell", "-c", QUEUE_LOST.format(sha=model["id"])],
                         cwd=REPO, env=stack.env, check=True, capture_output=True, text=True, timeout=120).stdout.split()[-1]
    page.goto(f"{stack.url}/c/{cid}")
    page.wait_for_selector(".failure:not([hidden])")
    assert page.inner_text(".failure h2") == "Compilation failed in the queue before the compiler started"
    assert "lost from the queue" in page.inner_text(".failure")
    statuses = page.evaluate("() => [...document.querySelectorAll('.progress .stage')].map(s => s.dataset.status)")
    assert statuses == ["unreached"] * 6, statuses
    summary = page.inner_text(".summary")
    assert "No the" not in summary and "before the compiler read the model" in summary, summary
    shot(page, "depth-06-queue-failure")


def _random_op(path: Path) -> Path:
    """Relu then RandomNormalLike: the passes run, then lowering refuses the random op, naming it."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu_0"),
             helper.make_node("RandomNormalLike", ["r"], ["y"], name="odd_one")]
    graph = helper.make_graph(nodes, "fails", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _download(page, selector: str, to: Path) -> Path:
    with page.expect_download() as info:
        page.click(selector)
    info.value.save_as(to)
    return to


def test_downloads_open_with_their_own_loaders(stack, page, tmp_path):
    import ctypes
    import json
    import zipfile

    model = stack.upload(tiny_convnet(tmp_path / "tiny-convnet.onnx"))
    comp = stack.compile(model["id"], pipeline="O2", input_shapes={"x": [1, 3, 64, 64]}, cache=False)
    page.goto(f"{stack.url}/c/{comp['id']}")
    page.wait_for_selector(".status-badge.succeeded", timeout=300_000)
    page.wait_for_selector(".downloads .artifact-link")
    report = json.loads(_download(page, ".downloads a[download='report.json']", tmp_path / "r.json").read_text())
    assert report["version"] == 1 and report["error"] is None
    trace = json.loads(_download(page, ".downloads a[download='trace.json']", tmp_path / "t.json").read_text())
    assert {e["name"] for e in trace["traceEvents"] if e.get("cat") == "pass"} >= {"fuse-ops", "plan-memory"}
    lib = ctypes.CDLL(str(_download(page, ".downloads a[download='module.so']", tmp_path / "m.so")))
    assert all(getattr(lib, k["symbol"]) for k in report["kernels"])
    page.click(".downloads .pass-models > summary")
    last = page.locator(".downloads .pass-models a").last
    onnx.checker.check_model(onnx.load(_download(page, f".downloads a[download='{last.get_attribute('download')}']",
                                                 tmp_path / "last.onnx")))
    shot(page, "depth-07-downloads")
    page.click(".timeline-row[data-name=fuse-ops] a")
    href = page.get_attribute(".ir-pane .ir-download", "href")
    assert re.fullmatch(rf"/api/compilations/{comp['id']}/artifacts/pass-\d+-fuse-ops\.onnx", href), href

    failing = stack.upload(_random_op(tmp_path / "random-op.onnx"))
    bad = stack.compile(failing["id"], pipeline="O2", cache=False)
    page.goto(f"{stack.url}/c/{bad['id']}")
    page.wait_for_selector(".failure:not([hidden]) .repro-link", timeout=300_000)
    zf = zipfile.ZipFile(_download(page, ".failure .repro-link", tmp_path / "repro.zip"))
    assert zf.read("command.txt").decode().startswith("python -m compiler compile model.onnx")
    assert [n.name for n in onnx.load_from_string(zf.read("model.onnx")).graph.node] == ["odd_one"]
    assert page.locator(".downloads li[data-missing='module.o']").count() == 1  # says why there is none
    shot(page, "depth-08-reproducer")


# The whole text a CodeMirror view holds (it draws only the lines in view): its EditorView, from the DOM.
SHOWN = "() => document.querySelector('.kernel-detail .cm-editor').prismView.state.doc.toString().split('\\n')"


def test_assembly_as_compiler_explorer_shows_it(stack, page, tmp_path):
    model = stack.upload(tiny_convnet(tmp_path / "tiny-convnet.onnx"))
    comp = stack.compile(model["id"], pipeline="O2", input_shapes={"x": [1, 3, 64, 64]})
    stack.wait_finished(comp["id"])
    with stack.http() as c:
        events = c.get(f"/api/compilations/{comp['id']}/events").json()["events"]
    compiled = {e["kernel"]: e for e in events if e["type"] == "kernel.compiled"}
    kernel = next(k for k in compiled if k.startswith("fused_conv2d"))
    page.goto(f"{stack.url}/c/{comp['id']}/kernel/{kernel}?tab=asm")
    page.wait_for_selector(".kernel-detail .asm-toolbar")
    lines = page.evaluate(SHOWN)
    raw = compiled[kernel]["asm"].splitlines()
    assert any(re.match(r"\s*\.(p2align|section|globl)", x) for x in raw)  # the raw text has them
    assert not any(re.match(r"\s*\.[a-z]", x) for x in lines), [x for x in lines if re.match(r"\s*\.[a-z]", x)][:5]
    assert not any(x.startswith(".LCPI") for x in lines) and not any("#" in x for x in lines)
    assert f"{kernel}:" in lines and compiled[kernel]["symbol"] not in " ".join(lines)  # readable name
    count = page.inner_text(".asm-count")
    assert f"of {len(raw)} lines shown" in count, count
    # The innermost loop: marked, and the link goes there; its last line branches back to its first.
    hot = page.locator(".kernel-detail .cm-line.asm-hot-loop")
    assert hot.count() >= 2
    page.click(".asm-goto-loop")
    page.wait_for_selector(".kernel-detail .cm-line.cm-marked-line.asm-hot-loop")
    shot(page, "depth-09-asm")
    # Each filter toggles: directives shown again.
    page.uncheck(".asm-toolbar input[data-filter=directives]")
    page.wait_for_selector(".asm-toolbar input[data-filter=directives]:not(:checked)")
    assert any(re.match(r"\s*\.p2align", x) for x in page.evaluate(SHOWN))
    page.check(".asm-toolbar input[data-filter=directives]")
    page.wait_for_selector(".asm-toolbar input[data-filter=directives]:checked")
    assert not any(re.match(r"\s*\.p2align", x) for x in page.evaluate(SHOWN))


def _add_chain(path: Path, n: int = 16) -> Path:
    """x[1, 64] + c_0 + ... + c_{n-1}, then Relu: n distinct constants (lines fuse-ops leaves alone)."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), f"c_{i}") for i in range(n)]
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"a_{i - 1}", f"c_{i}"], [f"a_{i}"], name=f"add_{i}") for i in range(n)]
    nodes.append(helper.make_node("Relu", [f"a_{n - 1}"], ["y"], name="relu"))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_diff_reads_well(stack, page, tmp_path):
    model = stack.upload(_add_chain(tmp_path / "add-chain.onnx"))
    comp = stack.compile(model["id"], pipeline="O2", cache=False)
    stack.wait_finished(comp["id"])
    with stack.http() as c:
        events = c.get(f"/api/compilations/{comp['id']}/events").json()["events"]
    fuse = next(e for e in events if e["type"] == "pass.finished" and e["name"] == "fuse-ops")
    after = fuse["ir"].splitlines()
    line = next(i for i, t in enumerate(after, 1) if "prism.fused_group" in t)
    page.goto(f"{stack.url}/c/{comp['id']}/pass/{fuse['index']}?diff=1&line={line}")
    page.wait_for_selector(".ir-pane .cm-mergeView .cm-collapsedLines")
    # The collapsed run in words, framed by no glyph a font may lack.
    marker = page.inner_text(".ir-pane .cm-collapsedLines >> nth=0")
    assert re.fullmatch(r"… \d+ unchanged lines …", marker), marker
    frames = page.evaluate("""() => { const e = document.querySelector('.ir-pane .cm-collapsedLines');
        return [getComputedStyle(e, '::before').content, getComputedStyle(e, '::after').content]; }""")
    assert frames == ["none", "none"], frames
    assert "⦚" not in page.inner_text(".ir-pane")
    # Lines scroll sideways, never wrap; changed words are marked inside changed lines.
    assert page.locator(".ir-pane .cm-mergeView .cm-lineWrapping").count() == 0
    assert page.locator(".ir-pane .cm-mergeView .cm-changedText").count() > 0
    # ?line=N marks that line of the "after" side and scrolls it into view.
    marked = page.locator(".ir-pane .cm-merge-b .cm-marked-line")
    marked.wait_for()
    assert "prism.fused_group" in marked.inner_text()
    assert marked.is_visible()
    # A node only moved into the group's body (re-indented) is drawn level with itself on both sides.
    # (the re-indented run is unchanged, so its middle collapses; its first and last lines show)
    for text in ("%a_0 = Add(", "%a_15 = Add("):
        tops = page.evaluate("""(text) => ['a', 'b'].map(side => { const l = [...document.querySelectorAll(`.ir-pane .cm-merge-${side} .cm-line`)]
            .find(e => e.textContent.includes(text)); return l ? l.getBoundingClientRect().top : null; })""", text)
        assert None not in tops and abs(tops[0] - tops[1]) < 1, (text, tops)
    shot(page, "depth-10-diff")


def test_time_on_the_graph(stack, page, tmp_path):
    from browserkit import graph_label_defects

    model = stack.upload(tiny_convnet(tmp_path / "tiny-convnet.onnx"))
    comp = stack.compile(model["id"], pipeline="O2", input_shapes={"x": [1, 3, 64, 64]})
    stack.wait_finished(comp["id"])
    with stack.http() as c:
        events = c.get(f"/api/compilations/{comp['id']}/events").json()["events"]
    us = {e["kernel"]: e["median_us"] for e in events if e["type"] == "kernel.timed"}
    total = sum(us.values())
    page.goto(f"{stack.url}/c/{comp['id']}/graph")
    page.wait_for_selector(".graph-svg .cluster[data-heat]", timeout=120_000)
    clusters = page.evaluate("""() => [...document.querySelectorAll('.graph-svg .cluster')].map(c => ({
        kernel: c.querySelector('.cluster-label').textContent, heat: c.dataset.heat,
        fill: c.querySelector('rect').getAttribute('fill'), time: c.querySelector('.cluster-time').textContent }))""")
    bands = {b: page.evaluate(f"() => getComputedStyle(document.querySelector(\"[data-band='{b}'] .swatch\")).backgroundColor")
             for b in ("≥ 20%", "10–20%", "5–10%", "1–5%", "< 1%")}
    assert {c["kernel"] for c in clusters} == set(us)
    for c in clusters:  # the band of its share of the timed kernels' sum, and its time and share in words
        share = us[c["kernel"]] / total
        want = "≥ 20%" if share >= 0.2 else "10–20%" if share >= 0.1 else "5–10%" if share >= 0.05 else "1–5%" if share >= 0.01 else "< 1%"
        assert c["heat"] == want, (c, share)
        assert re.fullmatch(r"[\d.]+ (µs|ms) · [\d.]+%", c["time"]), c
        assert abs(float(c["time"].split("· ")[1].rstrip("%")) - 100 * share) < 0.6
    assert page.locator(".graph-legend [data-band]").count() == 5 and len(set(bands.values())) == 5
    assert "2 of 2 kernels timed" in page.inner_text(".graph-legend")
    defects = graph_label_defects(page)
    assert defects["overlapping"] == 0 and not defects["cut"], defects
    # The minimap: every top-level box in its time colour, the view framed; a click moves the view.
    mm = page.evaluate("""() => [...document.querySelectorAll('.graph-minimap rect.mm-cluster')].map(r => r.getAttribute('fill'))""")
    assert sorted(mm) == sorted(c["fill"] for c in clusters), mm
    before = page.get_attribute(".graph-world", "transform")
    box = page.locator(".graph-minimap").bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.95)
    assert page.get_attribute(".graph-world", "transform") != before
    page.click(".graph-controls button[title='Fit to view']")
    # The node panel lists every input with its type, the weight included.
    page.click(".graph-svg .gnode.op:has-text('Conv')")
    page.wait_for_selector(".graph-side .node-inputs")
    items = page.locator(".graph-side .node-inputs li").all_inner_texts()
    assert items == ["x f32[1, 3, 64, 64]", "w f32[4, 3, 3, 3] constant"], items
    shot(page, "depth-11-graph-heat")
    page.uncheck(".graph-heat")
    assert page.locator(".graph-legend [data-band]").count() == 0
    assert page.locator(".graph-svg .cluster[data-heat]").count() == 0  # the group colours again
    assert page.evaluate("() => document.querySelector('.graph-svg .cluster rect').getAttribute('fill')") != clusters[0]["fill"]


def test_a_5000_node_graph_stays_interactive(stack, page, tmp_path):
    n = 2500  # Add + Relu each: 5,000 nodes
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), f"c_{i}") for i in range(n)]
    nodes = []
    for i in range(n):
        nodes.append(helper.make_node("Add", ["x" if i == 0 else f"r_{i - 1}", f"c_{i}"], [f"a_{i}"], name=f"add_{i}"))
        nodes.append(helper.make_node("Relu", [f"a_{i}"], [f"r_{i}"], name=f"relu_{i}"))
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info(f"r_{n - 1}", TensorProto.FLOAT, [1, 16])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "big.onnx")
    up = stack.upload(tmp_path / "big.onnx")
    comp = stack.compile(up["id"], pipeline="O2", options={"verify": False, "benchmark": True}, cache=False)
    assert stack.wait_finished(comp["id"], timeout=600)["status"] == "succeeded"
    page.goto(f"{stack.url}/c/{comp['id']}/graph")
    page.wait_for_selector(".graph-svg .gnode", timeout=300_000)
    status = page.inner_text(".graph-status")
    assert "5000 nodes" in status, status
    times = sorted(page.evaluate(FRAME_TIMES))
    median, p95, worst = times[len(times) // 2], times[int(len(times) * 0.95) - 1], times[-1]
    print(f"\n5,000-node fusion graph ({status}): pan/zoom frame time median {median:.1f} ms, p95 {p95:.1f} ms, "
          f"max {worst:.1f} ms over {len(times)} steps (target < 50 ms; shared machine)")
    page.click(".graph-controls button[title='Fit to view']")
    assert page.locator(".graph-svg .gnode.group[data-heat]").count() == 157  # one box per group, each painted
    shot(page, "depth-12-graph-5000")
    assert len(times) == 40


def test_the_roofline_places_and_opens_kernels(stack, page, tmp_path):
    model = stack.upload(tiny_convnet(tmp_path / "tiny-convnet.onnx"))
    comp = stack.compile(model["id"], pipeline="O2", input_shapes={"x": [1, 3, 64, 64]})
    stack.wait_finished(comp["id"])
    with stack.http() as c:
        events = c.get(f"/api/compilations/{comp['id']}/events").json()["events"]
    timed = [e for e in events if e["type"] == "kernel.timed" and e["flops"] > 0 and e["bytes"] > 0]
    page.goto(f"{stack.url}/c/{comp['id']}/kernels")
    page.click(".roofline-box > summary")
    dots = page.locator(".roofline-svg .roof-point")
    assert dots.count() == len(timed) > 0
    # Each dot at its FLOP/byte: the one with the most FLOP per byte is the rightmost.
    xs = {d.get_attribute("data-kernel"): float(d.get_attribute("cx")) for d in dots.all()}
    best = max(timed, key=lambda e: e["flops"] / e["bytes"])["kernel"]
    assert max(xs, key=xs.get) == best
    # the roof is the worker's measured ceilings (model.timed), each drawn with its value
    ceilings = next(e for e in events if e["type"] == "model.timed")["ceilings"]
    assert ceilings["peak_gflops"] > 0 and ceilings["peak_gbps"] > 0
    assert page.locator(".roofline-svg .roof.measured").count() == 1
    labels = page.evaluate("() => [...document.querySelectorAll('.roofline-svg .roof-label')].map(e => e.textContent)")
    assert f"peak FP32 {ceilings['peak_gflops']:.2f} GFLOP/s" in labels, labels
    assert any(x == f"memory {ceilings['peak_gbps']:.2f} GB/s" for x in labels) or \
        f"{ceilings['peak_gbps']:.2f} GB/s" in page.inner_text(".roofline-note"), labels
    # the cache levels' ceilings Linux reports, each a slope of its own with its value; whose machine it is
    note = page.inner_text(".roofline-note")
    for lv in ("L2", "L3"):
        g = ceilings.get(f"{lv.lower()}_gbps")
        if g is not None:
            assert page.locator(f".roofline-svg .roof.cache[data-level={lv}]").count() == 1
            assert f"{lv} {g:.2f} GB/s" in labels or f"{g:.2f} GB/s" in note, (lv, labels)
    assert ceilings["host"] and f"measured on {ceilings['host']}, {ceilings['cpu']}" in note, note
    # the flat roof sits at the peak: above every kernel's dot
    roof_y = min(float(v) for v in page.evaluate(
        "() => document.querySelector('.roofline-svg .roof.measured').getAttribute('points').split(' ').map(p => p.split(',')[1])"))
    # (a dot sits below it when the kernel ran under the measured peak, above it otherwise: both are timings,
    # and on a loaded machine the worker's FMA run can measure less than a kernel timed later reaches)
    rate = {e["kernel"]: e["flops"] / (e["median_us"] * 1e3) for e in timed}
    for d in dots.all():
        below = rate[d.get_attribute("data-kernel")] <= ceilings["peak_gflops"]
        cy = float(d.get_attribute("cy"))
        assert (cy >= roof_y - 0.5) if below else (cy <= roof_y + 0.5), (d.get_attribute("data-kernel"), cy, roof_y)
    print(f"\nroofline ceilings measured by the worker: {ceilings['peak_gflops']} GFLOP/s, {ceilings['peak_gbps']} GB/s "
          f"(L2 {ceilings.get('l2_gbps')}, L3 {ceilings.get('l3_gbps')} GB/s) at {ceilings['threads']} threads on "
          f"{ceilings['host']} ({ceilings['cpu']}; shared machine)")
    shot(page, "depth-13-roofline")
    page.locator(f".roofline-svg .roof-point[data-kernel='{best}']").click()
    page.wait_for_url(re.compile(rf"/c/{comp['id']}/kernel/{best}"))
