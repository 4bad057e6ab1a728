"""The pass contract: a pass rewrites a graph in place and says what it did and why.

A pass is one class in one file, registered by its kebab-case name with :func:`register`. It
declares typed options as :class:`Option` s, and its module docstring says what it rewrites, what it
leaves alone, and why. Two kinds, by the IR they rewrite (``level``):

* a graph pass (:class:`Pass`, level ``graph``): ``run(graph, ctx)`` rewrites the graph IR in place
  and returns a :class:`PassResult`: whether the IR changed and the :class:`Remark` s it made;
* a model pass (:class:`ModelPass`, level ``onnx``): an ONNX-level rewrite that must run before the
  graph IR exists (control-flow inlining, RNN unrolling, function expansion ...): ``run(model, ctx)``
  returns a :class:`ModelPassResult` holding the rewritten ``ModelProto`` (the input itself when
  nothing changed; the input is never modified).

A pass may return a subclass of its result type carrying typed data (the memory plan, the fusion,
the bounded outputs); instruments (``compiler.passes.instruments``) turn those into events. Passes
never print or emit events; the pass manager snapshots, times and verifies around them.
Models: onnx-ir's ``PassResult(model, modified)``; MLIR pass options; TVM's ``PassContext``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from onnx import ModelProto

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


@dataclass
class FusionResult(PassResult):
    """A pass that formed fused groups (fuse-ops): the ``graph.fused`` event follows it."""


@dataclass
class MemoryPlanResult(PassResult):
    """A pass that planned the arena (plan-memory): ``plan`` (a ``MemoryPlan``, or a dict with
    its fields); the ``memory.planned`` event follows it."""

    plan: Any = None


@dataclass
class ModelPassResult(PassResult):
    """What a model pass did: as :class:`PassResult`, plus ``model``, the rewritten ``ModelProto``
    (the pass's input object itself when ``changed`` is False)."""

    model: ModelProto = field(default_factory=ModelProto)


@dataclass(frozen=True)
class Option:
    """A typed pass option, declared once on the pass and checked when the pipeline text is parsed
    (the CLI, ``POST /api/pipelines/validate`` and submit all parse it, so a bad value is refused
    before any work, never on the worker).

    ``type`` is ``int``, ``float``, ``bool`` or ``str``. The allowed values, where not every value of
    the type is: ``choices`` (the only values accepted), ``minimum`` / ``maximum`` (inclusive bounds
    for ``int`` / ``float``), ``power_of_two`` (an ``int`` that is 1, 2, 4, ...).
    """

    name: str
    type: type
    default: Any
    doc: str
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    power_of_two: bool = False

    def parse(self, text: str) -> Any:
        """The typed value of the option's text form; raises ValueError naming the option, the value
        given and the values allowed (``option 'dtype' = int4 is not one of: int8, bf16, fp16``)."""
        try:
            if self.type is bool:
                if text.lower() in ("true", "1"):
                    return True
                if text.lower() in ("false", "0"):
                    return False
                raise ValueError(text)
            value = self.type(text)
        except ValueError:
            raise ValueError(
                f"option {self.name!r} expects {self.type.__name__}, got {text!r}"
            ) from None
        self.check(value)
        return value

    def allowed(self) -> str:
        """The allowed values in words (``int8, bf16, fp16``; ``at least 1``; ``any int``)."""
        if self.choices:
            return ", ".join(self.format(c) for c in self.choices)
        words = []
        if self.minimum is not None:
            words.append(f"at least {self.format(self.minimum)}")
        if self.maximum is not None:
            words.append(f"at most {self.format(self.maximum)}")
        if self.power_of_two:
            words.append("a power of two")
        return " and ".join(words) or f"any {self.type.__name__}"

    def check(self, value: Any) -> None:
        """Raise ValueError naming the option, ``value`` and :meth:`allowed` when ``value`` is not allowed."""
        bad = bool(self.choices) and value not in self.choices
        bad |= self.minimum is not None and value < self.minimum
        bad |= self.maximum is not None and value > self.maximum
        bad |= self.power_of_two and (value <= 0 or value & (value - 1) != 0)
        if bad:
            how = "is not one of:" if self.choices else "must be"
            raise ValueError(f"option {self.name!r} = {self.format(value)} {how} {self.allowed()}")

    def format(self, value: Any) -> str:
        if self.type is bool:
            return "true" if value else "false"
        if self.type is int and isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    def describe(self) -> dict[str, Any]:
        """``{"name", "type", "default", "doc", "allowed"}`` for listings (``compiler passes``, the API)."""
        return {"name": self.name, "type": self.type.__name__, "default": self.default, "doc": self.doc,
                "allowed": self.allowed()}


@dataclass
class Artifacts:
    """What passes leave for the stages after them (typed; each field says which pass sets it).

    Attributes:
        calibration_data: the quantize pass's calibration inputs, given by the caller
            (``compiler.quant.calibrate``: an ``.npz`` path, its bytes or ``{input: array}``).
        memory_plan: plan-memory's ``MemoryPlan`` (``compiler.passes.plan_memory``).
        qdq_model: quantize's QDQ ``ModelProto``, which ONNX Runtime runs to verify (else None).
        reduced_model: ``quantize{dtype=bf16|fp16}``'s model in ONNX form (Cast pairs per layer), which
            ONNX Runtime runs to verify (else None).
        accuracy: quantize's ``model.accuracy`` payload (``compiler.quant.session``).
        rounding_steps: legalize-narrow-types' count of ``prism.NarrowCast`` steps.
        trims: bound-outputs' ``[(output index, count output, bound)]``
            (``compiler.frontend.bounded.bound_outputs``), cut by the runtime.
        unbounded: the model as bound-outputs found it (None: that pass did not change it).
    """

    calibration_data: Any = None
    memory_plan: Any = None
    qdq_model: ModelProto | None = None
    reduced_model: ModelProto | None = None
    accuracy: dict[str, Any] | None = None
    rounding_steps: int = 0
    trims: list[tuple[int, str, int]] = field(default_factory=list)
    unbounded: ModelProto | None = None


@dataclass
class PassContext:
    """State shared by the passes of one compilation.

    Attributes:
        target: the target name the pipeline compiles for (for target-aware passes).
        input_shapes: the caller's ``{input name: [dim, ...]}`` (model passes that import the model
            to read its shapes bind them; the graph passes see them already bound).
        artifacts: typed results later stages read (:class:`Artifacts`).
    """

    target: str = "host"
    input_shapes: Any = None
    artifacts: Artifacts = field(default_factory=Artifacts)


class PassBase:
    """What both kinds of pass share: ``name`` (kebab-case), ``options``, ``level`` and ``before``.

    ``self.opts`` holds the option values (defaults overridden by the pipeline text).
    """

    name: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    #: the IR it rewrites: ``graph`` (the graph IR) or ``onnx`` (the ModelProto, before import)
    level: ClassVar[str] = "graph"
    #: pass names this pass must run before; a pipeline listing it after one of them is reordered
    before: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **opts: Any) -> None:
        known = {o.name: o for o in self.options}
        for key in opts:
            if key not in known:
                valid = ", ".join(known) or "none"
                raise ValueError(f"unknown option {key!r} for pass {self.name!r} (valid: {valid})")
            try:
                known[key].check(opts[key])
            except ValueError as exc:
                raise ValueError(f"pass {self.name!r}: {exc}") from None
        self.opts: dict[str, Any] = {o.name: opts.get(o.name, o.default) for o in self.options}

    def remark(self, kind: str, message: str, nodes: list[str] | None = None, **data: Any) -> Remark:
        return Remark(kind, self.name, message, list(nodes or []), data)


class Pass(PassBase, ABC):
    """A graph pass: subclasses implement ``run`` on the graph IR."""

    @abstractmethod
    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        """Rewrite ``graph`` in place; return whether it changed and the remarks made."""


class ModelPass(PassBase, ABC):
    """A model pass (level ``onnx``): subclasses implement ``run`` on the ``ModelProto``."""

    level = "onnx"
    #: True for a pass whose output differs from its input in its graph inputs' or outputs' types or
    #: count (legalize-narrow-types, bound-outputs): the reference ONNX Runtime runs is the model
    #: before the first such pass
    changes_interface: ClassVar[bool] = False

    @abstractmethod
    def run(self, model: ModelProto, ctx: PassContext) -> ModelPassResult:
        """Return the rewritten model (``model`` itself when unchanged; never modify ``model``),
        whether it changed, and the remarks made."""


REGISTRY: dict[str, type[PassBase]] = {}

P = TypeVar("P", bound=type[PassBase])


def register(cls: P) -> P:
    """Class decorator: register a pass by its ``name``. Raises ValueError on a duplicate."""
    if not cls.name or cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise ValueError(f"pass name {cls.name!r} is empty or already registered")
    REGISTRY[cls.name] = cls
    return cls
