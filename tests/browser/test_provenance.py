"""Issue 15 item 2 in real Chromium against the real stack: a click on an assembly line marks the
assembly, LLVM IR and loop-IR lines of the same loop-IR statement and names the kernel's ONNX nodes
(the node names are the uploaded model's own). Screenshots under test-artifacts/browser/ (provenance-*.png)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from browserkit import shot
from onnx import TensorProto, helper, numpy_helper

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]

RELATED = "() => [...document.querySelectorAll('.kernel-detail .cm-line.prov-related')].map(e => e.textContent)"


def conv_relu(path: Path) -> Path:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="stem_conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="stem_relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_clicked_assembly_line_marks_its_loop_ir_and_llvm_ir_lines(stack, page, tmp_path):
    path = conv_relu(tmp_path / "conv-relu.onnx")
    model = stack.upload(path)
    comp = stack.compile(model["id"], pipeline="O2")
    stack.wait_finished(comp["id"])
    with stack.http() as c:
        events = c.get(f"/api/compilations/{comp['id']}/events").json()["events"]
    compiled = {e["kernel"]: e for e in events if e["type"] == "kernel.compiled"}
    lowered = {e["kernel"]: e for e in events if e["type"] == "kernel.lowered"}
    kernel = next(k for k in compiled if "conv" in k)
    assert lowered[kernel]["nodes"] == [n.name for n in onnx.load(path).graph.node]
    page.goto(f"{stack.url}/c/{comp['id']}/kernel/{kernel}?tab=asm")
    page.wait_for_selector(".kernel-detail .asm-toolbar")
    page.click(".asm-goto-loop")
    line = page.locator(".kernel-detail .cm-line.cm-marked-line.asm-hot-loop")
    line.wait_for()
    page.locator(".kernel-detail .cm-line.asm-hot-loop").nth(1).click()  # the loop's first instruction
    page.wait_for_selector(".kernel-detail .cm-line.prov-related")
    status = page.inner_text(".prov-status")
    assert "ONNX nodes stem_conv, stem_relu" in status, status
    n = int(status.split("loop IR line ")[1].split(":")[0])
    loop_ir = lowered[kernel]["loop_ir"].split("\n")
    assert loop_ir[n - 1].strip() and not loop_ir[n - 1].strip().startswith("#")
    # every marked assembly line is an instruction the .loc map sends to line n
    asm, amap = compiled[kernel]["asm"].split("\n"), compiled[kernel]["asm_loop_lines"]
    at_n = {asm[i].strip() for i, m in enumerate(amap) if abs(m) == n}
    marked = page.evaluate(RELATED)
    assert marked and all(x.strip() in at_n for x in marked), (marked[:5], n)
    shot(page, "provenance-01-asm")
    page.click(".kernel-detail .tab[data-tab=loop]")
    page.wait_for_selector(".kernel-detail .tab.active[data-tab=loop]")
    page.wait_for_selector(".kernel-detail .cm-line.prov-related")
    assert [x.strip() for x in page.evaluate(RELATED)] == [loop_ir[n - 1].strip()]
    shot(page, "provenance-02-loop-ir")
    page.click(".kernel-detail .tab[data-tab=opt]")
    page.wait_for_selector(".kernel-detail .tab.active[data-tab=opt]")
    page.wait_for_selector(".kernel-detail .cm-line.prov-related")
    opt, omap = compiled[kernel]["llvm_ir_optimized"].split("\n"), compiled[kernel]["llvm_ir_optimized_loop_lines"]
    at_n = {opt[i].strip() for i, m in enumerate(omap) if m == n}
    assert all(x.strip() in at_n for x in page.evaluate(RELATED))
    shot(page, "provenance-03-llvm-ir")
