"""The workload of a kernel: what a tuning record is keyed by.

A workload is the kernel's computation as the schedule sees it: the ops of its schedule step (a fused
group's body, or a lone node) in order, their attributes, how they are wired (body inputs by position,
node outputs by producer and index), every value's element type and shape, which inputs are constants
(with the digest of small constants, whose values can change the lowering: a Reshape's shape, a Clip's
bounds), and the target (LLVM triple, CPU name, feature string). The values of large float constants
(weights) are not part of it: schedules do not depend on them, so the same Conv shape in two models is
one workload (TVM's ``workload_key`` of a task: the compute and its shapes, not the weights).

The key is the first 16 hex digits of the SHA-256 of the description's canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from ..ir import FusedGroup, Graph, Value
from ..ir.printer import digest
from ..targets import Target

SMALL_CONST = 64  # elements: a constant this small is described by its digest, a larger float one by its type only
KEY_VERSION = 1


class Untunable(ValueError):
    """The schedule step cannot be described as a workload (a control-flow body, a symbolic shape)."""


def _type(v: Value | None) -> list[Any] | None:
    if v is None or v.type is None:
        return None
    if not v.type.is_static:
        raise Untunable(f"value %{v.name} has the non-static type {v.type}")
    return [v.type.short, list(v.type.shape or ())]


def _const(v: Value) -> list[Any]:
    data = np.asarray(v.const)
    small = data.size <= SMALL_CONST or data.dtype.kind not in "fc"
    return ["const", _type(v), digest(data) if small else None]


def _attr(value: Any) -> Any:
    if isinstance(value, Graph):
        raise Untunable("a node with a subgraph attribute (If/Loop/Scan)")
    if isinstance(value, np.ndarray):
        return ["array", value.dtype.str, list(value.shape), digest(value)]
    if isinstance(value, list | tuple):
        return [_attr(x) for x in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, float | int | str | bool) or value is None:
        return value
    return repr(value)


def describe(node: Any, target: Target) -> dict[str, Any]:
    """The workload description of schedule step ``node`` for ``target`` (module docstring).
    Raises Untunable for a node with a subgraph attribute or a non-static value type."""
    if isinstance(node, FusedGroup):
        body_nodes, inner_in, inner_out = list(node.body.nodes), list(node.body.inputs), list(node.body.outputs)
    else:
        body_nodes, inner_in, inner_out = [node], list(node.inputs), list(node.outputs)
    refs: dict[int, Any] = {}
    inputs = []
    for k, (outer, inner) in enumerate(zip(node.inputs, inner_in, strict=False)):
        if inner is None:
            continue
        refs[id(inner)] = ["in", k]
        inputs.append(_const(outer) if outer is not None and outer.const is not None else ["input", _type(outer)])
    ops = []
    for j, n in enumerate(body_nodes):
        args: list[Any] = []
        for v in n.inputs:
            if v is None:
                args.append(None)
            elif id(v) in refs:
                args.append(refs[id(v)])
            elif v.const is not None:
                args.append(_const(v))
            else:
                raise Untunable(f"{n.label}: input %{v.name} comes from outside the schedule step")
        for i, o in enumerate(n.outputs):
            refs[id(o)] = ["node", j, i]
        attrs = {k: _attr(v) for k, v in sorted(n.attrs.items()) if k not in ("kernel",)}
        ops.append([n.domain, n.op_type, attrs, args, [_type(o) for o in n.outputs]])
    outputs = [refs.get(id(v)) if v is not None else None for v in inner_out]
    by_name = {n.name: j for j, n in enumerate(body_nodes) if n.name}
    group = {k: ["node", by_name[v]] if isinstance(v, str) and v in by_name else _attr(v)
             for k, v in sorted(node.attrs.items()) if k != "kernel"} if isinstance(node, FusedGroup) else {}
    return {"version": KEY_VERSION, "kind": node.kind if isinstance(node, FusedGroup) else "node", "group": group,
            "inputs": inputs, "ops": ops, "outputs": outputs,
            "target": {"triple": target.triple, "cpu": target.cpu, "features": target.features}}


def key_of(desc: dict[str, Any]) -> str:
    """The workload key of a description: 16 hex digits of the SHA-256 of its canonical JSON."""
    text = json.dumps(desc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def workload_key(node: Any, target: Target) -> str:
    """``key_of(describe(node, target))``; raises Untunable as :func:`describe`."""
    return key_of(describe(node, target))


def summary(desc: dict[str, Any]) -> str:
    """One line for people: ``Conv+Relu f32[1,64,56,56] -> f32[1,64,56,56]``."""
    ops = "+".join(o[1] for o in desc["ops"])
    ins = ", ".join(f"{t[0]}{t[1]}" for kind, t, *_ in desc["inputs"] if kind == "input" and t)
    outs = [desc["ops"][r[1]][4][r[2]] for r in desc["outputs"] if r and r[0] == "node"]
    return f"{ops} {ins} -> {', '.join(f'{t[0]}{t[1]}' for t in outs if t)}"


__all__ = ["Untunable", "describe", "key_of", "summary", "workload_key"]
