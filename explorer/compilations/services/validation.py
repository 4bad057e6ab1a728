"""Checks of a compile request's fields, shared by every way in (one path, one message each).

`POST /api/compilations` and `POST /api/pipelines/validate` (which the browser calls as the user
types) both check the pipeline here, so they accept and refuse the same values with the same words:

- the pipeline is JSON text: a preset name (`O0`..`O3`) or pass text such as
  `fold-constants,fuse-ops{max-group-size=16}` (MLIR's pass-pipeline syntax, DESIGN.md
  "Passes"). Empty text is the empty pipeline: no passes, exactly what `O0` expands to, so the
  expanded text round-trips. A number, boolean, null, list or object is a type error (never
  `str()`-ed into a pass name);
- the model id is the 64-hex sha256 that `POST /api/models` (or `POST /api/samples/<name>/model`)
  returned.

Messages are one line and start with what is expected, then what was sent (`got 'deadbeef'`);
the API prefixes the field name (`pipeline: ...`, `model: ...`).
"""

from __future__ import annotations

import json
import math
import re

from django.conf import settings

import compiler

HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_SHOWN_CHARS = 70


class InvalidRequest(Exception):
    """A compilation request the compiler refuses; the message names what is wrong (one line).

    `details` are the compiler's error fields (`CompileError.to_dict()`: stage, pass, node, ...)
    when the compiler refused it, else empty. `field` is the request field it concerns
    (:data:`REQUEST_FIELDS`), None when it concerns none of them (the model itself).
    """

    def __init__(self, message: str, details: dict | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        self.field = field


#: the fields of POST /api/compilations an InvalidRequest may name (the 400's `field`)
REQUEST_FIELDS = ("pipeline", "target", "input_shapes", "input_values", "dim_ranges", "calibration", "threads",
                  "tune_budget_s", "options")


def request_field(exc: compiler.CompileError) -> str | None:
    """The request field a compiler's refusal of a request concerns (:data:`REQUEST_FIELDS`), read from
    what the message names first (`compiler.frontend`'s request checks: "dim range N=...", "input value
    for 'x'", "input 'x' of shape ...", "unknown target ..."), or None (the model itself)."""
    msg = exc.message
    if exc.pass_name is not None or msg.startswith(("pipeline", "unknown pass", "pass ")):
        return "pipeline"
    if msg.startswith(("dim range", "--dim-range")):
        return "dim_ranges"
    if msg.startswith(("input value", "--input-value")):
        return "input_values"
    if msg.startswith("unknown target"):
        return "target"
    if "calibration" in msg:
        return "calibration"
    if "threads" in msg:
        return "threads"
    if msg.startswith(("input ", "input_shapes", "the shape", "--input-shape", "missing inputs")) or " shape " in msg:
        return "input_shapes"
    return None


def describe(value: object) -> str:
    """What a JSON value is, for an error message: `'deadbeef'`, `the number 42`, `null`, `true`,
    `a list`, `an object` (strings longer than 70 characters are cut with `...`)."""
    if isinstance(value, str):
        return repr(value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "...")
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def pipeline_expected() -> str:
    """What a pipeline field must be, naming the compiler's presets."""
    presets = ", ".join(p["name"] for p in compiler.list_pipelines())
    return (f"text: a preset name ({presets}) or comma-separated passes such as "
            f"'fold-constants,eliminate-dead-code' ('' runs no passes, as O0)")


def pipeline_type_problem(value: object) -> str | None:
    """None when `value` is a string, else `must be text: ...; got <value>` (no field prefix)."""
    if isinstance(value, str):
        return None
    return f"must be {pipeline_expected()}; got {describe(value)}"


def expand_pipeline(value: object) -> str:
    """The expanded pipeline text of a requested pipeline (preset name or pass text; surrounding
    whitespace ignored; `''` -> `''`, the empty pipeline of `O0`).

    Raises:
        InvalidRequest: `pipeline: must be text ...` for a non-string; the compiler's one-line
            message naming an unknown pass or option and listing the valid ones (details: the
            compiler's error fields, `stage` "request").
    """
    problem = pipeline_type_problem(value)
    if problem is not None:
        raise InvalidRequest(f"pipeline: {problem}", field="pipeline")
    import compiler  # thread-safe: tests/compiler/test_api_threads.py

    try:
        return compiler.expand_pipeline(value.strip())
    except compiler.CompileError as exc:
        raise InvalidRequest(exc.message, exc.to_dict(), field="pipeline") from exc


MODEL_EXPECTED = "the 64-hex sha256 id returned by POST /api/models or POST /api/samples/<name>/model"


def model_id_problem(value: object) -> str | None:
    """None when `value` is a 64-hex string, else `must be the 64-hex sha256 id ... (got ...)`."""
    if isinstance(value, str) and HEX64.fullmatch(value):
        return None
    return f"must be {MODEL_EXPECTED} (got {describe(value)})"


def tune_budget_problem(value: object) -> str | None:
    """None when `value` is absent (None: no tuning) or a number of seconds in
    `0 < value <= PRISM_TUNE_MAX_BUDGET_S`; else a one-line message (no field prefix) saying what is
    expected and what was sent."""
    if value is None:
        return None
    limit = settings.PRISM_TUNE_MAX_BUDGET_S
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"must be the tuning time budget, a number of seconds (0 < s <= {limit}); got {describe(value)}"
    if value <= 0:
        return f"must be a positive number of seconds (the tuning time budget); got {value:g}"
    if value > limit:
        return f"must be at most {limit} s (PRISM_TUNE_MAX_BUDGET_S, this server's limit); got {value:g}"
    return None
