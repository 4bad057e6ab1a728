"""Comment anchors: validated against a compilation's stored events, and found again in another
compilation of the same model (carry-over, as GitHub's review comments on a new commit and Gerrit's
ported comments on a new patch set).

An anchor is one JSON object (issue 14):

    {"kind": "pass", "pass": 5}
    {"kind": "ir_line", "pass": 5, "line": 12, "text": "..."}        the IR printed after pass 5
    {"kind": "node", "node": "<ONNX node name>"}
    {"kind": "kernel", "kernel": "fused_conv2d_relu_3"}
    {"kind": "remark", "pass": 5, "remark": 17}                      index into pass 5's remarks
    {"kind": "code_line", "kernel": "...", "code": "loop" | "llvm" | "llvm_optimized" | "asm",
     "line": 40, "text": "..."}

Lines are 1-based. `text` is filled in from the events when omitted; when given it must be the
line's text. `validate` returns the completed anchor and its context (pass name and occurrence, the
lines around a line, a remark's message, a node's op): what a reader needs when the anchor is gone.
`locate` maps such an anchor onto another compilation's events, or None: outdated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from explorer.compilations import selectors
from explorer.compilations.models import Compilation

KIND_FIELDS = {
    "pass": ("pass",),
    "ir_line": ("pass", "line", "text"),
    "node": ("node",),
    "kernel": ("kernel",),
    "remark": ("pass", "remark"),
    "code_line": ("kernel", "code", "line", "text"),
}
OPTIONAL = {"text"}
CODES = {"loop": "loop_ir", "llvm": "llvm_ir", "llvm_optimized": "llvm_ir_optimized", "asm": "asm"}
CONTEXT_LINES = 2
_NODE_COMMENT = re.compile(r"//\s*(\S+)\s*$")


class AnchorError(ValueError):
    """An anchor that does not exist in the compilation; the message names what is missing."""


@dataclass
class Subject:
    """What comments can be anchored to in one compilation, read from its stored events."""

    passes: list[dict] = field(default_factory=list)  # pass.finished payloads, by index
    nodes: dict[str, dict] = field(default_factory=dict)  # node name -> {op_type, group}
    kernels: dict[str, dict[str, str]] = field(default_factory=dict)  # kernel -> {code: text}

    def pass_label(self, index: int) -> str:
        return f"pass {index} ({self.passes[index].get('name', '?')})"


def load_subject(comp: Compilation) -> Subject:
    """The passes, nodes and kernels of a compilation (from `selectors.compilation_for`)."""
    subj = Subject()
    types = ("pass.finished", "graph.fused", "kernel.lowered", "kernel.compiled")
    for event in selectors.events_of_types(comp, types):
        kind = event["type"]
        if kind == "pass.finished":
            subj.passes.append(event)
        elif kind == "graph.fused":
            for node in event.get("nodes", []):
                subj.nodes[str(node.get("name"))] = {"op_type": node.get("op_type"), "group": node.get("group")}
            for group in event.get("groups", []):
                subj.kernels.setdefault(str(group.get("kernel")), {})
        else:
            texts = subj.kernels.setdefault(str(event.get("kernel")), {})
            for code, key in CODES.items():
                if isinstance(event.get(key), str):
                    texts[code] = event[key]
    if subj.passes:  # nodes of the final graph IR (`... // <node name>`), also without fusion
        for line in str(subj.passes[-1].get("ir", "")).splitlines():
            m = _NODE_COMMENT.search(line)
            if m and "=" in line:
                subj.nodes.setdefault(m.group(1), {"op_type": None, "group": None})
    return subj


def _int(anchor: dict, key: str) -> int:
    value = anchor.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnchorError(f"anchor: {key!r} must be an integer; got {value!r}")
    return value


def _str(anchor: dict, key: str) -> str:
    value = anchor.get(key)
    if not isinstance(value, str) or not value:
        raise AnchorError(f"anchor: {key!r} must be non-empty text; got {value!r}")
    return value


def _pass(anchor: dict, subj: Subject) -> int:
    index = _int(anchor, "pass")
    if not 0 <= index < len(subj.passes):
        have = f"passes 0..{len(subj.passes) - 1}" if subj.passes else "no finished pass"
        raise AnchorError(f"anchor: pass {index} does not exist (this compilation has {have})")
    return index


def _line(anchor: dict, text: str, where: str) -> tuple[int, list[str], dict]:
    lines = text.splitlines()
    line = _int(anchor, "line")
    if not 1 <= line <= len(lines):
        raise AnchorError(f"anchor: line {line} does not exist in {where} (it has {len(lines)} lines)")
    actual = lines[line - 1]
    given = anchor.get("text")
    if given is not None and (not isinstance(given, str) or given.rstrip() != actual.rstrip()):
        raise AnchorError(f"anchor: line {line} of {where} is {actual.strip()[:120]!r}, not {str(given).strip()[:120]!r}")
    first = max(1, line - CONTEXT_LINES)
    return line, lines, {"first": first, "lines": lines[first - 1:line + CONTEXT_LINES]}


def _occurrence(subj: Subject, index: int) -> int:
    name = subj.passes[index].get("name")
    return sum(1 for p in subj.passes[:index] if p.get("name") == name)


def _pass_context(subj: Subject, index: int) -> dict:
    return {"pass_name": subj.passes[index].get("name"), "occurrence": _occurrence(subj, index)}


def validate(anchor: object, subj: Subject) -> tuple[dict, dict]:
    """`(anchor completed, context)`; raises AnchorError naming the field, pass, line, node,
    kernel or remark that does not exist."""
    if not isinstance(anchor, dict):
        raise AnchorError(f"anchor: must be an object with a 'kind' ({', '.join(KIND_FIELDS)})")
    kind = anchor.get("kind")
    if kind not in KIND_FIELDS:
        raise AnchorError(f"anchor: unknown kind {kind!r}; kinds: {', '.join(KIND_FIELDS)}")
    fields = KIND_FIELDS[kind]
    unknown = sorted(set(anchor) - {"kind", *fields})
    if unknown:
        raise AnchorError(f"anchor: unknown field {unknown[0]!r} for kind {kind!r} (fields: {', '.join(fields)})")
    missing = [f for f in fields if f not in anchor and f not in OPTIONAL]
    if missing:
        raise AnchorError(f"anchor: {kind} needs {missing[0]!r}")
    out: dict = {"kind": kind}
    if kind in ("pass", "ir_line", "remark"):
        index = _pass(anchor, subj)
        out["pass"] = index
        context = _pass_context(subj, index)
        if kind == "ir_line":
            line, lines, around = _line(anchor, str(subj.passes[index].get("ir", "")), f"the IR after {subj.pass_label(index)}")
            out.update(line=line, text=lines[line - 1])
            context.update(around)
        elif kind == "remark":
            remarks = subj.passes[index].get("remarks") or []
            r = _int(anchor, "remark")
            if not 0 <= r < len(remarks):
                raise AnchorError(f"anchor: remark {r} does not exist in {subj.pass_label(index)} (it has {len(remarks)} remarks)")
            out["remark"] = r
            context.update({k: remarks[r].get(k) for k in ("kind", "message", "nodes")})
        return out, context
    if kind == "node":
        node = _str(anchor, "node")
        if node not in subj.nodes:
            raise AnchorError(f"anchor: no node {node[:200]!r} in this compilation's graph")
        return {"kind": kind, "node": node}, dict(subj.nodes[node])
    kernel = _str(anchor, "kernel")
    if kernel not in subj.kernels:
        raise AnchorError(f"anchor: no kernel {kernel[:200]!r} in this compilation")
    if kind == "kernel":
        return {"kind": kind, "kernel": kernel}, {}
    code = anchor.get("code")
    if code not in CODES:
        raise AnchorError(f"anchor: code must be one of {', '.join(CODES)}; got {code!r}")
    text = subj.kernels[kernel].get(code)
    if text is None:
        raise AnchorError(f"anchor: kernel {kernel!r} has no {code} code")
    line, lines, around = _line(anchor, text, f"the {code} code of kernel {kernel!r}")
    return {"kind": kind, "kernel": kernel, "code": code, "line": line, "text": lines[line - 1]}, around


def _find_pass(subj: Subject, context: dict) -> int | None:
    seen = 0
    for i, p in enumerate(subj.passes):
        if p.get("name") == context.get("pass_name"):
            if seen == context.get("occurrence", 0):
                return i
            seen += 1
    return None


def _find_line(text: str, line: int, wanted: str) -> int | None:
    """`line` if it still reads `wanted`, else the nearest line that does, else None."""
    lines = text.splitlines()
    if 1 <= line <= len(lines) and lines[line - 1].rstrip() == wanted.rstrip():
        return line
    hits = [i + 1 for i, x in enumerate(lines) if x.rstrip() == wanted.rstrip()]
    return min(hits, key=lambda i: abs(i - line)) if hits else None


def locate(anchor: dict, context: dict, subj: Subject) -> dict | None:
    """The same anchor in another compilation's `subj`, or None when it is gone (outdated): a
    pass with that name (the same occurrence of it), the same line text (where it is now), the
    same node or kernel, a remark of that pass with the same kind and message."""
    kind = anchor.get("kind")
    if kind == "node":
        return dict(anchor) if anchor.get("node") in subj.nodes else None
    if kind in ("kernel", "code_line"):
        texts = subj.kernels.get(str(anchor.get("kernel")))
        if texts is None:
            return None
        if kind == "kernel":
            return dict(anchor)
        text = texts.get(str(anchor.get("code")))
        line = None if text is None else _find_line(text, int(anchor["line"]), str(anchor["text"]))
        return None if line is None else {**anchor, "line": line}
    index = _find_pass(subj, context)
    if index is None:
        return None
    if kind == "pass":
        return {**anchor, "pass": index}
    if kind == "ir_line":
        line = _find_line(str(subj.passes[index].get("ir", "")), int(anchor["line"]), str(anchor["text"]))
        return None if line is None else {**anchor, "pass": index, "line": line}
    remarks = subj.passes[index].get("remarks") or []
    for r, remark in enumerate(remarks):
        if remark.get("kind") == context.get("kind") and remark.get("message") == context.get("message"):
            return {**anchor, "pass": index, "remark": r}
    return None
