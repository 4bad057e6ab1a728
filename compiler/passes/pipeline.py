"""Pipelines as text: ``fixed-point(inline-control-flow,unroll-rnn),fold-constants,fuse-ops{max-group-size=16}``.

Grammar (MLIR's textual pass pipelines, mlir/docs/PassManagement.md)::

    pipeline := "" | preset | item ("," item)*
    item     := pass | group
    pass     := pass-name ["{" option ((" " | ",") option)* "}"]
    group    := "fixed-point" ["{" option* "}"] "(" pass ("," pass)* ")"
    option   := option-name "=" value

A ``fixed-point`` group runs its passes in order, round after round, until a round changes nothing
(at most ``max-iterations`` rounds): rewrites that expose work for each other (an inlined If body
holding an LSTM, a function body holding a sequence op) reach the form none of them changes.

Passes rewrite one of two IRs (``compiler.passes.base``): the ONNX model (level ``onnx``, before the
graph IR exists) or the graph IR (level ``graph``). Every ``onnx`` item comes before every ``graph``
item. A pipeline with no ``onnx`` item gets :data:`ONNX_PASSES` in front (the rewrites the importer
needs: control flow, sequences, RNNs, function ops, narrow types, bounded outputs), so every preset's
and every pipeline's expanded text lists what runs. A preset (``O0`` .. ``O3``) expands to pass text,
alone or as an entry of a list (``O2,quantize{...}``); a pass that declares ``before`` (``quantize``:
before ``fuse-ops``) is moved ahead of those passes. :func:`parse_pipeline` checks every pass and
option against the registry; :meth:`Pipeline.text` prints the canonical form (options in the pass's
declaration order, separated by a space, values formatted by their type), so canonical text prints
back to itself. Errors raise :class:`CompileError` with stage ``request`` naming the unknown pass or
option and listing the valid ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import CompileError
from . import load_passes, unavailable_passes
from .base import REGISTRY, Option, PassBase

#: the ONNX-level rewrites every pipeline starts with (see the module docstring)
ONNX_PASSES = ("fixed-point(resolve-sequences,inline-control-flow,unroll-rnn,expand-functions),"
               "resolve-sequences{final=true},legalize-narrow-types,bound-outputs")

_GRAPH_PRESETS: dict[str, str] = {
    "O0": "",
    "O1": "fold-constants,simplify,eliminate-dead-code",
    "O2": "fold-qdq,fold-constants,simplify,fold-batchnorm,eliminate-common-subexpressions,eliminate-dead-code,"
          "fuse-siblings,fuse-layer-norm,fuse-ops,plan-memory",
    "O3": "fold-qdq,fold-constants,simplify,fold-batchnorm,fold-constants,simplify,eliminate-common-subexpressions,"
          "eliminate-dead-code,fuse-siblings,fuse-layer-norm,fuse-ops{max-group-size=64},plan-memory",
}
PRESETS: dict[str, str] = {k: ",".join(x for x in (ONNX_PASSES, v) if x) for k, v in _GRAPH_PRESETS.items()}

FIXED_POINT = "fixed-point"
#: the ``fixed-point`` group's options
GROUP_OPTIONS = (Option("max-iterations", int, 8, "rounds at most; a round that changes nothing ends it sooner",
                        minimum=1),)

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class PassSpec:
    """One pipeline entry: a registered pass name and the options given in the text (typed)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def cls(self) -> type[PassBase]:
        return REGISTRY[self.name]

    @property
    def level(self) -> str:
        """``onnx`` or ``graph``: the IR the pass rewrites (``compiler.passes.base``)."""
        return self.cls.level

    def create(self) -> PassBase:
        return self.cls(**dict(self.options))

    def effective_options(self) -> dict[str, Any]:
        """Every option of the pass with its value (given or default)."""
        given = dict(self.options)
        return {o.name: given.get(o.name, o.default) for o in self.cls.options}

    def text(self) -> str:
        if not self.options:
            return self.name
        fmt = {o.name: o for o in self.cls.options}
        return self.name + "{" + " ".join(f"{k}={fmt[k].format(v)}" for k, v in self.options) + "}"


@dataclass(frozen=True)
class PassGroup:
    """A ``fixed-point`` group: ``passes`` (all of one level) run round after round until a round
    changes nothing, at most ``max_iterations`` rounds."""

    passes: tuple[PassSpec, ...]
    max_iterations: int = 8

    name = FIXED_POINT

    @property
    def level(self) -> str:
        return self.passes[0].level

    def text(self) -> str:
        default = GROUP_OPTIONS[0].default
        opts = "" if self.max_iterations == default else "{max-iterations=" + str(self.max_iterations) + "}"
        return f"{FIXED_POINT}{opts}(" + ",".join(p.text() for p in self.passes) + ")"


Item = PassSpec | PassGroup


@dataclass(frozen=True)
class Pipeline:
    """A parsed pipeline: its items (passes and groups) in order. ``text()`` is the canonical
    expanded text."""

    passes: tuple[Item, ...]

    def text(self) -> str:
        return ",".join(p.text() for p in self.passes)

    def __str__(self) -> str:
        return self.text()

    def specs(self) -> Iterator[PassSpec]:
        """Every pass, a group's members in their order (each once)."""
        for item in self.passes:
            yield from item.passes if isinstance(item, PassGroup) else (item,)

    def level(self, level: str) -> Pipeline:
        """The items of one level (``onnx``: the leading model passes; ``graph``: the rest)."""
        return Pipeline(tuple(p for p in self.passes if p.level == level))


def _valid_passes() -> str:
    names = sorted(REGISTRY)
    missing = sorted(unavailable_passes())
    extra = f" (not available in this build: {', '.join(missing)})" if missing else ""
    return ", ".join(names) + extra + f"; presets: {', '.join(PRESETS)}"


def _split_items(text: str) -> list[str]:
    items: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
            if depth < 0:
                raise CompileError("request", f"pipeline {text!r}: unbalanced {ch!r}")
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise CompileError("request", f"pipeline {text!r}: unbalanced '{{' or '('")
    items.append("".join(cur))
    return items


def _parse_options(what: str, declared: dict[str, Option], body: str, pass_name: str | None) -> dict[str, Any]:
    """``{option: typed value}`` from ``key=value`` tokens; raises CompileError naming ``what``."""
    given: dict[str, Any] = {}
    for tok in [t for t in re.split(r"[\s,]+", body) if t]:
        key, eq, val = tok.partition("=")
        if not eq:
            raise CompileError("request", f"{what}: option {tok!r} needs a value (key=value)", pass_name=pass_name)
        if key not in declared:
            valid = ", ".join(declared) or "none"
            raise CompileError("request", f"unknown option {key!r} for {what}; valid options: {valid}",
                               pass_name=pass_name)
        if key in given:
            raise CompileError("request", f"{what}: option {key!r} given twice", pass_name=pass_name)
        try:
            given[key] = declared[key].parse(val)
        except ValueError as exc:
            raise CompileError("request", f"{what}: {exc}", pass_name=pass_name) from None
    return given


def _parse_item(item: str, whole: str) -> PassSpec:
    item = item.strip()
    if not item:
        raise CompileError("request", f"pipeline {whole!r} has an empty entry (two commas in a row?)")
    name, brace, rest = item.partition("{")
    name = name.strip()
    if brace and not rest.endswith("}"):
        raise CompileError("request", f"pipeline entry {item!r}: text after the closing '}}'")
    if name not in REGISTRY:
        reason = unavailable_passes().get(name)
        if reason:
            raise CompileError("request", f"pass {name!r} is not available: {reason}", pass_name=name)
        raise CompileError("request", f"unknown pass {name!r}; valid passes: {_valid_passes()}", pass_name=name)
    cls = REGISTRY[name]
    given = _parse_options(f"pass {name!r}", {o.name: o for o in cls.options}, rest[:-1].strip() if brace else "",
                           name)
    order = [o.name for o in cls.options]
    return PassSpec(name, tuple(sorted(given.items(), key=lambda kv: order.index(kv[0]))))


def _parse_group(item: str, whole: str) -> PassGroup:
    """``fixed-point{max-iterations=N}(a,b,...)``: one level, no nested group."""
    head, _, rest = item.strip().partition("(")
    if not rest.endswith(")"):
        raise CompileError("request", f"pipeline entry {item.strip()!r}: text after the closing ')'")
    head = head.strip()
    opts = {}
    if "{" in head:
        if not head.endswith("}"):
            raise CompileError("request", f"pipeline entry {item.strip()!r}: text after the closing '}}'")
        opts = _parse_options(FIXED_POINT, {o.name: o for o in GROUP_OPTIONS}, head.partition("{")[2][:-1], None)
    if "(" in rest[:-1]:
        raise CompileError("request", f"pipeline entry {item.strip()!r}: a {FIXED_POINT} group cannot hold a group")
    members = [_parse_item(x, whole) for x in _split_items(rest[:-1])]
    if len({m.level for m in members}) > 1:
        raise CompileError("request", f"pipeline entry {item.strip()!r}: a {FIXED_POINT} group holds passes of one "
                           "level (all onnx-level or all graph-level)")
    rounds = int(opts.get("max-iterations", GROUP_OPTIONS[0].default))  # at least 1 (GROUP_OPTIONS)
    return PassGroup(tuple(members), rounds)


def _parse_items(text: str) -> list[Item]:
    items: list[Item] = []
    for item in _split_items(text):
        word = item.strip()
        if word in PRESETS:  # a preset inside a list expands in place: "O2,quantize{dtype=int8}"
            items += _parse_items(PRESETS[word]) if PRESETS[word] else []
        elif word.partition("{")[0].partition("(")[0].strip() == FIXED_POINT:
            items.append(_parse_group(item, text))
        else:
            items.append(_parse_item(item, text))
    return items


def parse_pipeline(text: str) -> Pipeline:
    """Parse pipeline text or a preset name (see the module docstring: a pipeline without an
    ONNX-level pass starts with :data:`ONNX_PASSES`). Raises CompileError(stage="request")."""
    load_passes()
    text = (text or "").strip()
    items = _parse_items(text) if text else []
    if not any(i.level == "onnx" for i in items):
        items = _parse_items(ONNX_PASSES) + items
    for prev, item in zip(items, items[1:], strict=False):
        if prev.level == "graph" and item.level == "onnx":
            raise CompileError("request", f"{item.name!r} rewrites the ONNX model (level onnx) and must come before "
                               f"the graph passes; it follows {prev.name!r}", pass_name=item.name)
    return Pipeline(tuple(_placed(items)))


def _placed(items: list[Item]) -> list[Item]:
    """Passes that declare ``before`` (pass names they must precede, e.g. ``quantize`` before
    ``fuse-ops``) move to just before the first of those that comes earlier in the list; the canonical
    text shows the order that runs."""
    out = list(items)
    for spec in [s for s in items if isinstance(s, PassSpec) and s.cls.before]:
        i = out.index(spec)
        first = next((j for j, s in enumerate(out[:i]) if s.name in spec.cls.before), None)
        if first is not None:
            out.pop(i)
            out.insert(first, spec)
    return out


def cut_after_run(text: str, index: int, levels: Sequence[str]) -> str:
    """Pipeline text that runs ``text`` up to and including pass run ``index`` (0-based, as
    ``pass.started``/``pass.finished`` number the runs); ``levels`` is each run's level so far
    (``onnx``/``graph``, from those events; a run of an old log without one is ``graph``). The model
    passes always run whole (a fixed-point group cannot stop between rounds): a cut inside them keeps
    them all and no graph pass; a cut inside a graph-level group keeps that group whole."""
    p = parse_pipeline(text)
    j = index - sum(1 for x in levels if x == "onnx")
    items: list[Item] = list(p.level("onnx").passes)
    runs = 0
    for item in p.level("graph").passes if j >= 0 else ():
        items.append(item)
        runs += len(item.passes) if isinstance(item, PassGroup) else 1
        if runs > j:
            break
    return Pipeline(tuple(items)).text()


def expand_pipeline(text: str) -> str:
    """The canonical expanded text of a pipeline or preset (validated)."""
    return parse_pipeline(text).text()


def list_pipelines() -> list[dict[str, str]]:
    """The presets and their expansion: ``[{"name": "O2", "text": "fold-constants,..."}]``."""
    return [{"name": name, "text": text} for name, text in PRESETS.items()]
