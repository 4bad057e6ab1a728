"""Helpers for the browser tests."""

from pathlib import Path

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


def shot(page, name: str) -> None:
    """Saves a full-page screenshot of `page` as test-artifacts/browser/<name>.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def pipeline_passes(stack, preset: str) -> list[str]:
    """The pass names a preset expands to, from the server's GET /api/pipelines."""
    with stack.http() as c:
        text = next(p["text"] for p in c.get("/api/pipelines").json() if p["name"] == preset)
    names, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            item = text[start:i].strip()
            if item:
                names.append(item.split("{")[0].strip())
            start = i + 1
    return names
