"""Pipelines as text: ``fold-constants,fuse-ops{max-group-size=16}``.

Grammar (MLIR's textual pass pipelines, mlir/docs/PassManagement.md)::

    pipeline := "" | preset | item ("," item)*
    item     := pass-name ["{" option ((" " | ",") option)* "}"]
    option   := option-name "=" value

A preset (``O0`` .. ``O3``) expands to pass text, alone or as an entry of a list (``O2,quantize{...}``);
a pass that declares ``before`` (``quantize``: before ``fuse-ops``) is moved ahead of those passes. :func:`parse_pipeline` checks every pass and
option against the registry; :meth:`Pipeline.text` prints the canonical form (options in the pass's
declaration order, separated by a space, values formatted by their type), so canonical text prints
back to itself. Errors raise :class:`CompileError` with stage ``request`` naming the unknown pass or
option and listing the valid ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import CompileError
from . import load_passes, unavailable_passes
from .base import REGISTRY, Pass

PRESETS: dict[str, str] = {
    "O0": "",
    "O1": "fold-constants,simplify,eliminate-dead-code",
    "O2": "fold-qdq,fold-constants,simplify,fold-batchnorm,eliminate-common-subexpressions,eliminate-dead-code,"
          "fuse-siblings,fuse-layer-norm,fuse-ops,plan-memory",
    "O3": "fold-qdq,fold-constants,simplify,fold-batchnorm,fold-constants,simplify,eliminate-common-subexpressions,"
          "eliminate-dead-code,fuse-siblings,fuse-layer-norm,fuse-ops{max-group-size=64},plan-memory",
}

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class PassSpec:
    """One pipeline entry: a registered pass name and the options given in the text (typed)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def cls(self) -> type[Pass]:
        return REGISTRY[self.name]

    def create(self) -> Pass:
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
class Pipeline:
    """A parsed pipeline: its passes in order. ``text()`` is the canonical expanded text."""

    passes: tuple[PassSpec, ...]

    def text(self) -> str:
        return ",".join(p.text() for p in self.passes)

    def __str__(self) -> str:
        return self.text()


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
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise CompileError("request", f"pipeline {text!r}: unbalanced '}}'")
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise CompileError("request", f"pipeline {text!r}: unbalanced '{{'")
    items.append("".join(cur))
    return items


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
    declared = {o.name: o for o in cls.options}
    given: dict[str, Any] = {}
    body = rest[:-1].strip() if brace else ""
    for tok in [t for t in re.split(r"[\s,]+", body) if t]:
        key, eq, val = tok.partition("=")
        if not eq:
            raise CompileError("request", f"pass {name!r}: option {tok!r} needs a value (key=value)", pass_name=name)
        if key not in declared:
            valid = ", ".join(declared) or "none"
            raise CompileError("request", f"unknown option {key!r} for pass {name!r}; valid options: {valid}",
                               pass_name=name)
        if key in given:
            raise CompileError("request", f"pass {name!r}: option {key!r} given twice", pass_name=name)
        try:
            given[key] = declared[key].parse(val)
        except ValueError as exc:
            raise CompileError("request", f"pass {name!r}: {exc}", pass_name=name) from None
    order = [o.name for o in cls.options]
    return PassSpec(name, tuple(sorted(given.items(), key=lambda kv: order.index(kv[0]))))


def parse_pipeline(text: str) -> Pipeline:
    """Parse pipeline text or a preset name. Raises CompileError(stage="request")."""
    load_passes()
    text = (text or "").strip()
    if text in PRESETS:
        text = PRESETS[text]
    if not text:
        return Pipeline(())
    specs: list[PassSpec] = []
    for item in _split_items(text):
        if item.strip() in PRESETS:  # a preset inside a list expands in place: "O2,quantize{dtype=int8}"
            specs += [_parse_item(x, text) for x in _split_items(PRESETS[item.strip()]) if x.strip()]
        else:
            specs.append(_parse_item(item, text))
    return Pipeline(tuple(_placed(specs)))


def _placed(specs: list[PassSpec]) -> list[PassSpec]:
    """Passes that declare ``before`` (pass names they must precede, e.g. ``quantize`` before
    ``fuse-ops``) move to just before the first of those that comes earlier in the list; the canonical
    text shows the order that runs."""
    out = list(specs)
    for spec in [s for s in specs if getattr(s.cls, "before", ())]:
        i = out.index(spec)
        first = next((j for j, s in enumerate(out[:i]) if s.name in spec.cls.before), None)
        if first is not None:
            out.pop(i)
            out.insert(first, spec)
    return out


def expand_pipeline(text: str) -> str:
    """The canonical expanded text of a pipeline or preset (validated)."""
    return parse_pipeline(text).text()


def list_pipelines() -> list[dict[str, str]]:
    """The presets and their expansion: ``[{"name": "O2", "text": "fold-constants,..."}]``."""
    return [{"name": name, "text": text} for name, text in PRESETS.items()]
