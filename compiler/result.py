"""The outcome of a compilation: :class:`CompileResult`, and the CLI's ``--json`` report.

``compiler.compile`` returns one; it holds every event emitted (in ``seq`` order), exactly one of
them terminal (``compile.finished`` or ``compile.failed``), and the report of DESIGN.md "Command
line" (:meth:`CompileResult.to_dict`) gathers their payloads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ir import Graph
from .version import __version__

REPORT_VERSION = 1


@dataclass
class CompileResult:
    """The outcome of :func:`compiler.compile`.

    Attributes:
        ok: True when the compilation finished.
        error: the ``compile.failed`` payload (stage, message, pass, node ...) or None.
        events: every event emitted, in ``seq`` order.
        graph: the graph IR after the passes (None if import failed).
        stage_ms: wall time per stage in ms (import, passes, lowering, codegen, run, verify).
        checks: with ``check_passes``, one record per stage checked against ONNX Runtime:
            ``{"after": "import" | pass name, "passed": bool, "problem": str | None}``.
    """

    ok: bool = False
    error: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    graph: Graph | None = None
    target: str = ""
    pipeline: str = ""
    model: dict[str, Any] | None = None
    stage_ms: dict[str, float] = field(default_factory=dict)
    duration_ms: float = 0.0
    checks: list[dict[str, Any]] = field(default_factory=list)

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == type_]

    @staticmethod
    def _payload(event: dict[str, Any] | None) -> dict[str, Any] | None:
        if event is None:
            return None
        return {k: v for k, v in event.items() if k not in ("seq", "type", "ts")}

    def _last(self, type_: str) -> dict[str, Any] | None:
        found = self.of_type(type_)
        return self._payload(found[-1]) if found else None

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` report (DESIGN.md "Command line"): ``{"version": 1, "model", "target",
        "pipeline", "passes", "fusion", "memory", "kernels", "timing", "verification", "stage_ms",
        "error"}``; kernels merge the kernel.lowered/compiled/timed payloads per kernel name."""
        kernels: dict[str, dict[str, Any]] = {}
        for e in self.events:
            if e["type"] in ("kernel.lowered", "kernel.compiled", "kernel.timed"):
                kernels.setdefault(str(e.get("kernel")), {}).update(self._payload(e) or {})
        return {
            "version": REPORT_VERSION,
            "compiler_version": __version__,
            "model": self.model,
            "target": self.target,
            "pipeline": self.pipeline,
            "passes": [self._payload(e) for e in self.of_type("pass.finished")],
            "fusion": self._last("graph.fused"),
            "memory": self._last("memory.planned"),
            "kernels": list(kernels.values()),
            "timing": self._last("model.timed"),
            "verification": self._last("model.verified"),
            "accuracy": self._last("model.accuracy"),
            "stage_ms": dict(self.stage_ms),
            "duration_ms": self.duration_ms,
            "error": self.error,
            "checks": list(self.checks),
        }

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, default=json_default)


def json_default(o: Any) -> Any:
    """``json.dumps`` ``default`` for report values: numpy scalars and arrays as numbers and
    lists, anything else as its ``str``."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
