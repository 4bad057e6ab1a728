"""Scan unrolled at compile time: its body inlined once per step (``inline-control-flow``).

A ``Scan`` whose scan inputs have a static length along their scan axes (at most
``MAX_UNROLL_STEPS`` steps for Scan-9+; opset 8's batched form without ``sequence_lens`` too) becomes
its body inlined once per step: the states carried from step to step, each scan input sliced with
``Gather`` (honouring ``scan_input_axes`` and ``scan_input_directions``), each scan output stacked
with ``Unsqueeze`` + ``Concat`` (honouring ``scan_output_axes`` and ``scan_output_directions``).
:func:`scan_plan` decides (``compiler.frontend.inline_control.decide`` calls it); :func:`_scan`
rewrites. Semantics: the ONNX Scan spec (opsets 8 and 9+).
"""

from __future__ import annotations

import numpy as np
from onnx import GraphProto, NodeProto, helper

from ..errors import CompileError
from .control_flow import MAX_UNROLL_STEPS, _attr, _Ctx, _stack, inline_body
from .origin import control_place


def _unroll_steps(ctx: _Ctx, node: NodeProto, state: list[str], scans: list[str], axes: list[int],
                  dirs: list[int], steps: int, nodes: list[NodeProto], row: int | None = None
                  ) -> tuple[list[str], list[list[str]]]:
    """Inline ``node``'s body once per time step: the states carried from step to step, each scan input
    sliced at ``t`` (``steps - 1 - t`` when its direction is reverse) along its axis; each copy
    records its step (and batch ``row``, Scan-8) for errors (``origin.control_place``). Returns
    the final states and, per scan output, its per-step values in step order."""
    body: GraphProto = _attr(node, "body")
    n_state = len(state)
    collected: list[list[str]] = [[] for _ in range(len(body.output) - n_state)]
    for t in range(steps):
        bind = {body.input[i].name: state[i] for i in range(n_state)}
        for j, s in enumerate(scans):
            idx = steps - 1 - t if dirs[j] else t
            sl = ctx.fresh("scan_in")
            nodes.append(helper.make_node("Gather", [s, ctx.const(np.array(idx, np.int64))], [sl], axis=axes[j]))
            bind[body.input[n_state + j].name] = sl
        where = ("" if row is None else f"batch row {row}, ") + f"step {t} of {steps}, unrolled"
        body_nodes, outs = inline_body(ctx, body, bind, control_place(node, where))
        nodes.extend(body_nodes)
        state = outs[:n_state]
        for j, values in enumerate(collected):
            values.append(outs[n_state + j])
    return state, collected


def _scan8(ctx: _Ctx, node: NodeProto, shapes: dict[str, list[int]]) -> list[NodeProto] | None:
    """Scan-8: inputs ``[sequence_lens, states..., scans...]`` with a leading batch axis and time on
    axis 1; unrolled per batch row and time step (only without ``sequence_lens``)."""
    body: GraphProto = _attr(node, "body")
    m = int(_attr(node, "num_scan_inputs"))
    if node.input[0]:
        return None
    ins = list(node.input[1:])
    n_state = len(ins) - m
    dirs = list(_attr(node, "directions", [0] * m))
    scans = ins[n_state:]
    if any(s not in shapes for s in scans) or not scans:
        return None
    batch, steps = shapes[scans[0]][0], shapes[scans[0]][1]
    k = len(body.output) - n_state
    nodes: list[NodeProto] = []
    final: list[list[str]] = [[] for _ in range(n_state)]
    per_out: list[list[str]] = [[] for _ in range(k)]
    for b in range(batch):
        def row(x: str, b: int = b) -> str:
            out = ctx.fresh("scan8_row")
            nodes.append(helper.make_node("Gather", [x, ctx.const(np.array(b, np.int64))], [out], axis=0))
            return out
        rows = [row(x) for x in scans]  # time is axis 0 of a batch row
        state, collected = _unroll_steps(ctx, node, [row(x) for x in ins[:n_state]], rows, [0] * m, dirs,
                                         steps, nodes, b)
        for i in range(n_state):
            final[i].append(state[i])
        for j in range(k):
            st = ctx.fresh("scan8_out")
            _stack(ctx, collected[j], 0, st, nodes)
            per_out[j].append(st)
    for i in range(n_state):
        if node.output[i]:
            _stack(ctx, final[i], 0, node.output[i], nodes)
    for j in range(k):
        if n_state + j < len(node.output) and node.output[n_state + j]:
            _stack(ctx, per_out[j], 0, node.output[n_state + j], nodes)
    return nodes


def scan_plan(ctx: _Ctx, node: NodeProto, shapes: dict[str, list[int]], max_steps: int = MAX_UNROLL_STEPS
              ) -> int | str:
    """Whether a Scan unrolls: its step count (Scan-8: batch rows times time steps), or the reason
    it stays a Scan (words): a Scan-9+ of more than ``max_steps`` steps runs at run time."""
    m = int(_attr(node, "num_scan_inputs"))
    if ctx.opset < 9:
        if node.input[0]:
            return "it is a Scan-8 with sequence_lens (per-row lengths are data)"
        scans = list(node.input[1:])[len(node.input) - 1 - m:]
        if not scans or any(s not in shapes for s in scans):
            return "a scan input has no static shape"
        return int(shapes[scans[0]][0]) * int(shapes[scans[0]][1])
    n_state = len(node.input) - m
    scans = list(node.input[n_state:])
    missing = [s for s in scans if s not in shapes]
    if missing:
        return f"scan input %{missing[0]} has no static shape"
    in_axes = list(_attr(node, "scan_input_axes", [0] * m))
    lengths = {shapes[s][a % len(shapes[s])] for s, a in zip(scans, in_axes, strict=True)}
    if len(lengths) != 1:
        return f"its scan inputs have different lengths {sorted(lengths)}"
    steps = int(lengths.pop())
    if steps > max_steps:
        return f"its {steps} steps are over the unroll limit {max_steps} (the runtime runs it)"
    return steps


def _scan(ctx: _Ctx, node: NodeProto, shapes: dict[str, list[int]]) -> list[NodeProto] | None:
    if ctx.opset < 9:
        return _scan8(ctx, node, shapes)
    body: GraphProto = _attr(node, "body")
    m = int(_attr(node, "num_scan_inputs"))
    n_state = len(node.input) - m
    in_axes = list(_attr(node, "scan_input_axes", [0] * m))
    in_dirs = list(_attr(node, "scan_input_directions", [0] * m))
    k = len(body.output) - n_state
    out_axes = list(_attr(node, "scan_output_axes", [0] * k))
    out_dirs = list(_attr(node, "scan_output_directions", [0] * k))
    scans = list(node.input[n_state:])
    if any(s not in shapes for s in scans):
        return None
    ranks = [len(shapes[s]) for s in scans]
    in_axes = [a % r for a, r in zip(in_axes, ranks, strict=True)]
    lengths = {shapes[s][a] for s, a in zip(scans, in_axes, strict=True)}
    if len(lengths) != 1:
        return None
    steps = lengths.pop()
    if steps > MAX_UNROLL_STEPS and ctx.opset >= 9:
        return None
    if steps == 0:
        return _no_steps(ctx, node, body, n_state, out_axes)
    nodes: list[NodeProto] = []
    state, collected = _unroll_steps(ctx, node, list(node.input[:n_state]), scans, in_axes, in_dirs, steps, nodes)
    for i in range(n_state):
        if node.output[i]:
            nodes.append(helper.make_node("Identity", [state[i]], [node.output[i]]))
    for j in range(k):
        o = node.output[n_state + j] if n_state + j < len(node.output) else ""
        if not o:
            continue
        parts = collected[j][::-1] if out_dirs[j] else collected[j]
        rank = len(body.output[n_state + j].type.tensor_type.shape.dim) + 1
        _stack(ctx, parts, out_axes[j] % rank if rank else 0, o, nodes)
    return nodes


def _no_steps(ctx: _Ctx, node: NodeProto, body: GraphProto, n_state: int, out_axes: list[int]) -> list[NodeProto]:
    """A Scan whose scan inputs have length 0 along their scan axes runs its body zero times (ONNX
    Scan spec): its final states are its initial states, each scan output the stack of zero per-step
    values, of the body output's declared per-step shape with a 0-length axis inserted at its
    ``scan_output_axes`` entry. The body is never inlined, so one that would not compile at these
    shapes does not matter. Raises CompileError(stage="shape") naming the Scan when a scan output's
    per-step shape or element type is not declared (an empty result could not be shaped)."""
    label = node.name or node.output[0]
    nodes = [helper.make_node("Identity", [x], [o]) for x, o in zip(node.input[:n_state], node.output, strict=False) if o]
    for j, vi in enumerate(body.output[n_state:]):
        o = node.output[n_state + j] if n_state + j < len(node.output) else ""
        if not o:
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim] if tt.HasField("shape") else None
        if dims is None or -1 in dims or not tt.elem_type:
            raise CompileError("shape", f"Scan {label!r} runs zero steps (its scan inputs have length 0) and its scan "
                               f"output %{o} has no declared per-step shape (body output {vi.name!r}): the empty "
                               "result cannot be shaped", node=label, op="Scan")
        axis = out_axes[j] % (len(dims) + 1)
        empty = np.zeros([*dims[:axis], 0, *dims[axis:]], helper.tensor_dtype_to_np_dtype(tt.elem_type))
        nodes.append(helper.make_node("Identity", [ctx.const(empty, "scan_empty")], [o]))
    return nodes
