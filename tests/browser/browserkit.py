"""Helpers for the browser tests."""

import re
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


def shot(page, name: str) -> None:
    """Saves a full-page screenshot of `page` as test-artifacts/browser/<name>.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def pipeline_passes(stack, preset: str) -> list[str]:
    """The pass names a preset expands to, from the server's GET /api/pipelines, a ``fixed-point(...)``
    group's passes once each (the light models need one round: each runs once)."""
    with stack.http() as c:
        text = next(p["text"] for p in c.get("/api/pipelines").json() if p["name"] == preset)
    names, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
        elif ch == "," and depth == 0:
            item = text[start:i].strip()
            if "(" in item:  # fixed-point{...}(a,b{...},c)
                inner = item[item.index("(") + 1:item.rindex(")")]
                names += [x.split("{")[0].strip() for x in re.split(r",(?![^{]*})", inner) if x.strip()]
            elif item:
                names.append(item.split("{")[0].strip())
            start = i + 1
    return names


# Overlapping pairs of shape-label boxes in the fusion graph as drawn (screen pixels; two edge
# labels drawn on top of each other are unreadable), and cluster names drawn cut ("fuse…elu_0")
# or wider than their cluster.
GRAPH_LABEL_DEFECTS = """() => {
  const boxes = [...document.querySelectorAll('.graph-svg .edge-label')].map(e => e.getBoundingClientRect())
    .filter(r => r.width > 0);
  const over = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) over.push([i, j]);
  }
  const cut = [...document.querySelectorAll('.graph-svg .cluster')].filter(c => {
    const t = c.querySelector('.cluster-label'), r = c.querySelector('rect');
    return t.textContent.includes('…') || t.getBoundingClientRect().width > r.getBoundingClientRect().width;
  }).map(c => c.querySelector('.cluster-label').textContent);
  return {labels: boxes.length, overlapping: over.length, cut};
}"""


def graph_label_defects(page) -> dict:
    """`{labels, overlapping, cut}` for the fusion graph on `page` (see GRAPH_LABEL_DEFECTS)."""
    return page.evaluate(GRAPH_LABEL_DEFECTS)


def stage_strip(page) -> dict[str, tuple[str, str]]:
    """`{stage: (status, text)}` of the compilation page's stage strip."""
    rows = page.evaluate(
        "() => [...document.querySelectorAll('.progress .stage')]"
        ".map(s => [s.dataset.stage, s.dataset.status, s.innerText.replace(/\\s+/g, ' ').trim()])"
    )
    return {stage: (status, text) for stage, status, text in rows}


# Pan and zoom frame times: each step a wheel zoom or a drag, timed from the input to the next
# painted frame (requestAnimationFrame after the browser handled it); ms, in the page's own clock.
FRAME_TIMES = """async () => {
  const svg = document.querySelector('.graph-svg'), r = svg.getBoundingClientRect();
  const cx = r.left + r.width / 2, cy = r.top + r.height / 2, out = [];
  const frame = () => new Promise(res => requestAnimationFrame(() => requestAnimationFrame(res)));
  for (let i = 0; i < 40; i++) {
    const t0 = performance.now();
    if (i % 2) svg.dispatchEvent(new WheelEvent('wheel', {deltaY: i % 4 === 1 ? -120 : 120, clientX: cx, clientY: cy, bubbles: true, cancelable: true}));
    else {
      svg.dispatchEvent(new PointerEvent('pointerdown', {clientX: cx, clientY: cy, pointerId: 1, bubbles: true}));
      svg.dispatchEvent(new PointerEvent('pointermove', {clientX: cx + 40, clientY: cy + 25, pointerId: 1, bubbles: true}));
      svg.dispatchEvent(new PointerEvent('pointerup', {clientX: cx + 40, clientY: cy + 25, pointerId: 1, bubbles: true}));
    }
    await frame();
    out.push(performance.now() - t0);
  }
  return out;
}"""


def conv_relu(path: Path) -> Path:
    """Saves at ``path`` a two-node ONNX model (opset 17): a 3x3 Conv 3->8 with seeded weights named
    ``stem_conv`` and a Relu named ``stem_relu`` on a [1, 3, 32, 32] input; returns ``path``."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="stem_conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="stem_relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path
