"""Helpers for the browser tests."""

import re
from pathlib import Path

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
