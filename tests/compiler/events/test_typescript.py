"""The browser's event types are generated from the schema and never copied by hand."""

from __future__ import annotations

import re
from pathlib import Path

from compiler.events import EVENT_TYPES, STAGE_KEYS
from compiler.events.typescript import render

FRONTEND = Path(__file__).resolve().parents[3] / "frontend" / "src"
GENERATED = FRONTEND / "events.generated.ts"


def test_the_checked_in_typescript_is_what_the_schema_generates():
    assert GENERATED.read_text() == render(), (
        "frontend/src/events.generated.ts differs from the schema: run "
        "`.venv/bin/python -m compiler.events.typescript > frontend/src/events.generated.ts` (make events-ts)")


def test_generated_text_has_every_event_type_and_stage():
    text = render()
    for t in EVENT_TYPES:
        assert f'type: "{t}";' in text
    assert "export const STAGES = [" + ", ".join(f'"{s}"' for s in STAGE_KEYS) + "] as const;" in text


def test_no_hand_copied_event_lists_in_the_browser_code():
    """Only the generated file spells out the lists of event types and stages."""
    copied = re.compile(r'"compile\.finished",\s*"compile\.failed"|"import",\s*"passes",\s*"lowering"|\["queue"\]')
    offenders = [p.name for p in FRONTEND.rglob("*.ts") if p != GENERATED and copied.search(p.read_text())]
    assert offenders == []
    assert 'export * from "./events.generated"' in (FRONTEND / "events.ts").read_text()
