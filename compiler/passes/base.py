"""The pass contract: a pass rewrites a graph in place and says what it did and why.

A pass is one class in one file, registered by its kebab-case name with :func:`register`. It
declares typed options as :class:`Option` s, and its module docstring says what it rewrites, what it
leaves alone, and why. ``run(graph, ctx)`` returns a :class:`PassResult`: whether the IR changed
and the :class:`Remark` s it made. Passes never print; the pass manager snapshots, times and verifies.
Models: onnx-ir's ``PassResult``; MLIR pass options; TVM's ``PassContext``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..ir import Graph

REMARK_KINDS = ("applied", "missed", "analysis")


@dataclass
class Remark:
    """An optimization decision in words a reviewer can judge.

    ``kind`` is ``applied``, ``missed`` or ``analysis``; ``nodes`` names the nodes it is about;
    ``data`` carries the numbers behind the message (counts, bytes, shapes).
    """

    kind: str
    pass_name: str
    message: str
    nodes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in REMARK_KINDS:
            raise ValueError(f"unknown remark kind {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "pass": self.pass_name, "message": self.message,
                "nodes": list(self.nodes), "data": dict(self.data)}


@dataclass
class PassResult:
    """What a pass did: ``changed`` (the IR differs) and its remarks, plus pass-specific stats."""

    changed: bool
    remarks: list[Remark] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Option:
    """A typed pass option. ``type`` is ``int``, ``float``, ``bool`` or ``str``."""

    name: str
    type: type
    default: Any
    doc: str

    def parse(self, text: str) -> Any:
        """Parse the option's text form; raises ValueError naming the option on bad text."""
        try:
            if self.type is bool:
                if text.lower() in ("true", "1"):
                    return True
                if text.lower() in ("false", "0"):
                    return False
                raise ValueError(text)
            return self.type(text)
        except ValueError:
            raise ValueError(
                f"option {self.name!r} expects {self.type.__name__}, got {text!r}"
            ) from None

    def format(self, value: Any) -> str:
        if self.type is bool:
            return "true" if value else "false"
        return str(value)


@dataclass
class PassContext:
    """State shared by the passes of one compilation.

    Attributes:
        target: the target name the pipeline compiles for (for target-aware passes).
        artifacts: results later stages read, e.g. ``artifacts["memory_plan"]`` from plan-memory.
    """

    target: str = "host"
    artifacts: dict[str, Any] = field(default_factory=dict)


class Pass(ABC):
    """Base class. Subclasses set ``name`` (kebab-case) and ``options`` and implement ``run``.

    ``self.opts`` holds the option values (defaults overridden by the pipeline text).
    """

    name: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    #: pass names this pass must run before; a pipeline listing it after one of them is reordered
    before: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **opts: Any) -> None:
        known = {o.name: o for o in self.options}
        for key in opts:
            if key not in known:
                valid = ", ".join(known) or "none"
                raise ValueError(f"unknown option {key!r} for pass {self.name!r} (valid: {valid})")
        self.opts: dict[str, Any] = {o.name: opts.get(o.name, o.default) for o in self.options}

    @abstractmethod
    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        """Rewrite ``graph`` in place; return whether it changed and the remarks made."""

    def remark(self, kind: str, message: str, nodes: list[str] | None = None, **data: Any) -> Remark:
        return Remark(kind, self.name, message, list(nodes or []), data)


REGISTRY: dict[str, type[Pass]] = {}


def register(cls: type[Pass]) -> type[Pass]:
    """Class decorator: register a pass by its ``name``. Raises ValueError on a duplicate."""
    if not cls.name or cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise ValueError(f"pass name {cls.name!r} is empty or already registered")
    REGISTRY[cls.name] = cls
    return cls
