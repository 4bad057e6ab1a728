"""The browser app in real Chromium against the real server, worker and Redis (issue 5).

Screenshots of the compilation page go to test-artifacts/browser/.
"""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import onnx.numpy_helper
import pytest
from browserkit import graph_label_defects, pipeline_passes, shot, stage_strip
from onnx import TensorProto, helper

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

SQUEEZENET = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"

# Records (finished pass rows, status badge) every 20 ms, across in-app navigations.
RECORDER = """() => {
  window.__snaps = [];
  setInterval(() => {
    const rows = document.querySelectorAll('.timeline-row[data-index]').length;
    const badge = document.querySelector('.status-badge');
    window.__snaps.push([rows, badge ? badge.textContent : '']);
  }, 20);
}"""


def cm_text(page, scope: str) -> str:
    return page.locator(f"{scope} .cm-content").first.inner_text()


def test_upload_compile_and_explore(stack, context, page):
    o2 = pipeline_passes(stack, "O2")
    fuse = o2.index("fuse-ops")
    base = stack.url
    page.goto(base + "/")
    page.set_input_files("input.file-input", str(SQUEEZENET))
    page.wait_for_selector(".configure:not([hidden]) .compile")
    dims = page.locator(".inputs input.dim")
    assert [dims.nth(i).input_value() for i in range(dims.count())] == ["1", "3", "224", "224"]
    assert "timed here" in page.locator("select.target option[value=host]").inner_text()
    page.select_option(".pipeline-preset", "O2")
    assert "fuse-ops" in page.input_value(".pipeline-text")
    shot(page, "01-start")

    page.evaluate(RECORDER)
    page.click(".compile")
    page.wait_for_url(re.compile(r"/c/[\w]+$"))
    cid = page.url.rstrip("/").split("/")[-1]
    page.wait_for_selector(".status-badge.succeeded", timeout=600_000)
    snaps = page.evaluate("window.__snaps")
    assert any(rows > 0 and status == "running" for rows, status in snaps), (
        "the pass timeline never showed a finished pass while the compilation was running"
    )
    assert page.locator(".timeline-row[data-index]").count() == len(o2)
    assert page.locator(".stage-failed").count() == 0
    assert "×" in page.locator(".summary .big").inner_text()
    assert page.locator(".verdict").count() == 1
    shot(page, "02-summary")

    # Whole pass names in the sidebar (never "eliminate-commo…"), each with its name as a title.
    cut = page.evaluate("""() => [...document.querySelectorAll('.timeline-row[data-index] .pass-name')]
      .filter(e => e.scrollWidth > e.clientWidth + 1 || !e.title.startsWith(e.textContent)).map(e => e.textContent)""")
    assert cut == []
    # The two pass times say what they are: the strip the stage's wall time and the passes' share
    # of it, the sidebar the passes' own time, the same number in both.
    strip = page.locator(".stage[data-stage=passes]").inner_text()
    own = re.search(r"(\S+ [µm]?s) in passes", strip)
    assert "wall" in strip and own, strip
    total = page.inner_text(".timeline-total")
    # (the ONNX-level passes run in the import stage: their time is given apart, "+ X ms in ONNX-level passes")
    assert re.search(rf"{re.escape(own.group(1))} in passes( \+ \S+ [µm]?s in ONNX-level passes \(import stage\))? \(stage ",
                     total) and "wall with IR snapshots" in total, total
    # The accuracy line gives the atol applied, no number in it broken over two lines.
    assert "applied (" in page.inner_text(".verdict-detail")
    broken = page.evaluate("""() => [...document.querySelectorAll('.verdict-detail .nowrap')]
      .filter(e => e.getClientRects().length > 1).map(e => e.textContent)""")
    assert broken == []

    # Every view is a path: the tabs, an old ?view= link (rewritten in place) and a reload.
    page.click(".main-tabs .tab[data-tab=kernels]")
    page.wait_for_url(re.compile(rf"/c/{cid}/kernels$"))
    page.goto(f"{base}/c/{cid}?view=remarks&kind=missed")
    page.wait_for_url(re.compile(rf"/c/{cid}/remarks\?kind=missed$"))
    assert page.get_attribute(".main-tabs .tab.active", "data-tab") == "remarks"
    page.goto(f"{base}/c/{cid}/kernels")
    page.wait_for_selector(".kernels-table tbody tr")
    page.go_back()
    page.wait_for_url(re.compile(rf"/c/{cid}/remarks\?kind=missed$"))
    page.goto(f"{base}/c/{cid}")
    page.wait_for_selector(".verdict")

    # The timeline filters: search by name and hide unchanged passes.
    page.fill(".timeline-search", "fuse")
    assert page.locator(".timeline-row[data-index]").count() == sum("fuse" in name for name in o2)
    page.fill(".timeline-search", "")
    page.check(".timeline-hide")
    assert 0 < page.locator(".timeline-row[data-index]").count() < len(o2)
    assert page.locator(".timeline-row .is-unchanged").count() == 0
    page.uncheck(".timeline-hide")

    # Remarks: filter by kind and follow a remark to its nodes in the graph.
    page.click(".main-tabs .tab[data-tab=remarks]")
    page.select_option(".remarks-kind", "applied")
    page.select_option(".remarks-pass", "fuse-ops")
    remark = page.locator(".remark").first
    assert remark.locator(".badge").inner_text() == "applied"
    node_name = remark.locator(".node-link").first.get_attribute("data-node")
    remark.locator(".node-link").first.click()
    page.wait_for_url(re.compile(rf"/c/{cid}/graph\?node=.+"))
    page.wait_for_selector(".graph-side h3")
    assert page.inner_text(".graph-side h3") == node_name
    page.go_back()
    page.wait_for_selector(".remarks .remark")

    # A pass and its diff against the pass before.
    page.click(".timeline-row[data-name=fuse-ops] a")
    page.wait_for_url(re.compile(rf"/c/{cid}/pass/{fuse}$"))
    page.wait_for_selector(".ir-pane .cm-editor")
    assert "Conv" in cm_text(page, ".ir-pane")
    page.check(".ir-diff-toggle")
    page.wait_for_url(re.compile(rf"/c/{cid}/pass/{fuse}\?diff=1$"))
    page.wait_for_selector(".ir-pane .cm-mergeView")
    assert re.search(r"\+\d+ −\d+", page.inner_text(".ir-diffstat"))
    shot(page, "03-pass-diff")

    # Double-clicking a node's IR line opens that node in the fusion graph.
    page.uncheck(".ir-diff-toggle")
    page.locator(".ir-pane .cm-line", has_text=re.compile(r"= Conv\(.*// ")).first.dblclick()
    page.wait_for_url(re.compile(rf"/c/{cid}/graph\?node=.+"))
    page.wait_for_selector(".graph-side h3")
    assert page.inner_text(".graph-side p strong") == "Conv"

    # The fusion graph: click a node, see its attributes, IR line and kernel.
    page.click(".main-tabs .tab[data-tab=graph]")
    node = page.locator(".graph-svg .gnode.op").first
    node.wait_for(timeout=120_000)
    # Shape labels laid apart (none drawn over another) and whole kernel names, as first shown.
    defects = graph_label_defects(page)
    assert defects["labels"] > 50 and defects["overlapping"] == 0 and not defects["cut"], defects
    node.click()
    page.wait_for_url(re.compile(rf"/c/{cid}/graph\?node=.+"))
    side = page.locator(".graph-side")
    assert side.locator("h3").inner_text() != ""
    assert page.locator(".graph-side .ir-line").count() == 1
    shot(page, "04-graph")

    # The kernels list alone uses the page's height: no box of its own that scrolls.
    page.click(".main-tabs .tab[data-tab=kernels]")
    page.wait_for_selector(".kernels-table tbody tr")
    inner = page.evaluate(
        "() => { const t = document.querySelector('.kernels-table'); return [t.scrollHeight, t.clientHeight]; }"
    )
    assert inner[0] <= inner[1] + 1 and inner[1] > 600, inner  # 39 rows, all in the page's flow
    page.go_back()
    page.wait_for_selector(".graph-side h3")

    # Its kernel, and the kernel's assembly.
    side.locator("a", has_text=re.compile(r"^fused_")).first.click()
    page.wait_for_url(re.compile(rf"/c/{cid}/kernel/fused_\w+$"))
    page.click(".kernel-detail .tab[data-tab=asm]")
    page.wait_for_url(re.compile(r"\?tab=asm$"))
    page.wait_for_selector(".kernel-detail .cm-editor")
    asm = cm_text(page, ".kernel-detail")
    assert len(asm.strip()) > 20
    assert page.locator(".kernels-table tr.selected").count() == 1
    # The table sorts by time, slowest first; a click on "kernel" sorts by name.
    shares = [
        float(t.rstrip("%"))
        for t in page.locator(".kernels-table tbody td:nth-child(4)").all_inner_texts()
    ]
    assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 100) < 1
    page.click(".kernels-table th:has-text('kernel')")
    names = page.locator(".kernels-table tbody td:first-child").all_inner_texts()
    assert names[0] <= names[-1]
    page.click(".kernels-table th:has-text('median time')")
    shot(page, "05-kernel-asm")

    # Copy the link and open it in a new page: the same view from the stored events.
    page.click(".copy-link")
    link = page.evaluate("navigator.clipboard.readText()")
    assert link == page.url
    other = context.new_page()
    other.goto(link)
    other.wait_for_selector(".kernel-detail .cm-editor")
    assert other.locator(".kernel-detail .tab.active").get_attribute("data-tab") == "asm"
    assert cm_text(other, ".kernel-detail")[:400] == asm[:400]
    shot(other, "06-reopened")
    other.close()

    # Back and forward restore the views; reload keeps the view.
    page.go_back()
    page.wait_for_selector(".kernel-detail .tab.active[data-tab=loop]")
    page.go_forward()
    page.wait_for_selector(".kernel-detail .tab.active[data-tab=asm]")
    page.reload()
    page.wait_for_selector(".kernel-detail .tab.active[data-tab=asm]")


def _two_node_model(
    path: Path, second_op: str, *, graph_name: str, first: str, second: str
) -> Path:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name=first),
        helper.make_node(second_op, ["r"], ["y"], name=second),
    ]
    graph = helper.make_graph(
        nodes,
        graph_name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by the ONNX Runtime that verifies the result
    onnx.save(model, path)
    return path


def _late_failure_model(path: Path) -> Path:
    """Relu, a sum, then RandomNormalLike: valid ONNX the compiler imports, optimizes and fuses,
    but has no lowering for (its values are random, so no result could be checked), so it fails
    late, at lowering. (An `If` on the data served here until runtime control flow compiled it.)"""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu_0"),
        helper.make_node("Add", ["r", "r"], ["s"], name="sum_0"),
        helper.make_node("RandomNormalLike", ["s"], ["y"], name="late_failure"),
    ]
    graph = helper.make_graph(
        nodes, "fails", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_failed_compilation_keeps_what_came_before(stack, page, tmp_path):
    model = stack.upload(_late_failure_model(tmp_path / "fails.onnx"))
    comp = stack.compile(model["id"], target="host", pipeline="O2", cache=False)
    page.goto(stack.url + comp["url"])
    page.wait_for_selector(".status-badge.failed, .status-badge.succeeded", timeout=300_000)
    assert page.locator(".failure:not([hidden])").count() == 1, (
        "the RandomNormalLike model compiled: pick another late failure"
    )
    text = page.inner_text(".failure")
    assert "lowering" in text and "late_failure" in text and "RandomNormalLike" in text
    strip = stage_strip(page)
    assert strip["lowering"][0] == "failed", strip
    assert [strip[s][0] for s in ("import", "passes")] == ["done", "done"], strip
    assert [strip[s][0] for s in ("codegen", "run", "verify")] == ["unreached"] * 3, strip
    assert page.locator(".timeline-row[data-index]").count() == len(
        pipeline_passes(stack, "O2")
    )  # kept
    page.click(".failure a:has-text('late_failure')")
    page.wait_for_selector(".graph-side h3")
    assert page.inner_text(".graph-side h3") == "late_failure"
    page.click(".main-tabs .tab[data-tab=pass]")
    page.wait_for_selector(".ir-pane .cm-editor")
    shot(page, "07-failed")


HTML_GRAPH = '<img src=x onerror="window.__xss=1">'
HTML_NODE = "<script>window.__xss=2</script>"


def test_html_names_render_literally(stack, page, tmp_path):
    path = _two_node_model(
        tmp_path / "evil<i>name<x>.onnx",
        "Relu",
        graph_name=HTML_GRAPH,
        first=HTML_NODE,
        second="<b>second</b>",
    )
    page.goto(stack.url + "/")
    page.set_input_files("input.file-input", str(path))
    page.wait_for_selector(".configure:not([hidden]) .compile")
    assert page.inner_text(".configure .model-name") == path.name
    page.click(".compile")
    page.wait_for_url(re.compile(r"/c/[\w]+$"))
    page.wait_for_selector(".status-badge.succeeded", timeout=300_000)
    assert page.inner_text(".page-header .model-name") == path.name  # the uploaded file's name
    assert page.get_attribute(".page-header .model-name", "title") == f"graph {HTML_GRAPH}"
    page.click(".main-tabs .tab[data-tab=graph]")
    page.locator(".graph-svg .gnode").first.wait_for(timeout=120_000)
    page.goto(page.url.split("/graph")[0] + "/graph?node=" + HTML_NODE.replace("=", "%3D"))
    page.wait_for_selector(".graph-side h3")
    assert page.inner_text(".graph-side h3") == HTML_NODE
    page.click(".main-tabs .tab[data-tab=remarks]")
    page.click(".main-tabs .tab[data-tab=pass]")
    page.wait_for_selector(".ir-pane .cm-editor")
    assert page.evaluate("window.__xss") is None
    for tag in ("img", "script", "b", "i"):
        assert page.locator(f"#app {tag}").count() == 0, f"a <{tag}> from a name reached the DOM"
    shot(page, "08-html-names")


def test_compare_two_pipelines(stack, page):
    model = stack.upload(SQUEEZENET)
    a = stack.compile(model["id"], target="host", pipeline="O2")
    b = stack.compile(model["id"], target="host", pipeline="O1")
    page.goto(f"{stack.url}/compare/{a['id']}...{b['id']}")
    page.wait_for_selector(".compare .cm-mergeView", timeout=600_000)
    overview = page.locator(".compare-table").first.inner_text()
    assert "O2" in overview and "O1" in overview and "squeezenet_old" in overview
    assert page.locator(".compare-table").nth(1).locator("tbody tr").count() == len(
        pipeline_passes(stack, "O2")
    )
    shot(page, "09-compare")


def test_upload_error_in_words(stack, page, tmp_path):
    bad = tmp_path / "not-a-model.onnx"
    bad.write_text("this is not ONNX")
    page.goto(stack.url + "/")
    page.set_input_files("input.file-input", str(bad))
    error = page.locator(".upload-message.error")
    error.wait_for()
    text = error.inner_text()
    assert text and "HTTP" not in text, text  # the server's own words, not a status code
    assert page.locator(".configure:not([hidden])").count() == 0
    shot(page, "10-upload-error")
