"""A runtime ``Loop`` whose iterations run in generated code (``compiler.codegen.loop_entry``).

:func:`loop_plan` decides at compile time whether a Loop body's Program can be driven by the
native loop function: it must be one Program with an entry function (no nested run-time control
flow), every loop-carried and scan output written by a kernel (or a carried value passed through
unchanged), its condition output written by a kernel or passed through from its ``cond`` input.
Otherwise the reason is returned and the runtime dispatches each iteration from Python
(``compiler.runtime.control``). :func:`run_native` runs the loop for one ``Loop`` step: the body
bound once with the first iteration's inputs (the captured values stay for every iteration), the
stacked scan outputs allocated for the trip count ``M`` (a loop with scan outputs and no trip count,
or one whose stacked outputs would exceed :data:`MAX_SCAN_BYTES`, runs from Python).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .program import jit_for

MAX_SCAN_BYTES = 1 << 28  # stacked scan outputs allocated up front for the trip count, at most
INT64_MAX = (1 << 63) - 1


def _nbytes(v: dict[str, Any]) -> int:
    return int(np.prod(v["shape"], dtype=np.int64)) * np.dtype(v["dtype"]).itemsize


def loop_plan(prog: Any, n_carried: int) -> dict[str, Any] | str:
    """``{"carried": [bytes or 0 (passed through)], "scans": [bytes], "cond_out": bool}`` for a Loop
    body Program ``prog`` (inputs ``[i, cond, carried..., captured...]``, outputs ``[cond, carried...,
    scans...]``), or the reason it cannot run natively (module docstring)."""
    if getattr(prog, "steps", None) is not None or not getattr(prog, "entry", ""):
        return "the body has no entry function of its own (run-time control flow inside it, or no kernels)"
    names = [n for n, _, _ in prog.inputs]
    outs = prog.outputs
    kind, payload = outs[0][1], outs[0][2]
    if kind == "value":
        cond_out = True
    elif kind == "input" and payload == names[1]:
        cond_out = False
    else:
        return "its condition output is neither computed nor its cond input passed through"
    carried = []
    for k, (_, kind, payload) in enumerate(outs[1:1 + n_carried]):
        if kind == "value":
            carried.append(_nbytes(prog.values[payload]))
        elif kind == "input" and payload == names[2 + k]:
            carried.append(0)
        else:
            return f"loop-carried output {k} is a constant or another input passed through"
    scans = []
    for j, (_, kind, payload) in enumerate(outs[1 + n_carried:]):
        if kind != "value":
            return f"scan output {j} is a constant or an input passed through"
        scans.append(_nbytes(prog.values[payload]))
    return {"carried": carried, "scans": scans, "cond_out": cond_out}


def run_native(step: Any, runner: Any, limit: int | None, carried: list[np.ndarray],
               captured: list[np.ndarray]) -> list[np.ndarray] | None:
    """Run ``step`` (a Loop whose ``attrs["native"]`` is its :func:`loop_plan` plus ``symbol``) with
    its body's ``runner`` (``compiler.runtime.control._Runner``) for at most ``limit`` iterations
    (None: until the condition) from ``carried``; the initial condition was true. Returns the final
    carried values and the stacked scan outputs, or None where this run must go through Python (scan
    outputs without a trip count, or above :data:`MAX_SCAN_BYTES`)."""
    plan = step.attrs["native"]
    scan_shapes = step.attrs["scan_shapes"]
    if plan["scans"] and (limit is None or limit * sum(plan["scans"]) > MAX_SCAN_BYTES):
        return None
    bound = runner.prepare([np.array(0, np.int64), np.array(True), *carried, *captured])
    prog = bound.prog
    names = [n for n, _, _ in prog.inputs]
    arrays = bound._arrays

    def ptr(name: str | None) -> int:
        return int(arrays[name].ctypes.data) if name is not None and name in arrays else 0

    n_c = len(plan["carried"])
    stacked = [np.empty((limit or 0, *shape), dtype) for shape, dtype in scan_shapes]
    table = [int(ctypes.addressof(bound._keep_table)), ptr(names[0]), ptr(names[1]),
             ptr(prog.outputs[0][2]) if plan["cond_out"] else 0]
    for k in range(n_c):
        out = prog.outputs[1 + k]
        table += [ptr(names[2 + k]) if plan["carried"][k] else 0, ptr(out[2]) if out[1] == "value" else 0]
    for j, dst in enumerate(stacked):
        table += [ptr(prog.outputs[1 + n_c + j][2]), int(dst.ctypes.data)]
    c_table = (ctypes.c_void_p * len(table))(*table)
    fn = runner.native_fn
    if fn is None:
        addr = jit_for(prog)._engine.get_function_address(plan["symbol"])
        fn = runner.native_fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)(addr)
    count = int(fn(ctypes.addressof(c_table), INT64_MAX if limit is None else limit))
    if count == 0:
        return [*carried, *(s[:0] for s in stacked)]
    outs = bound.outputs()
    return [*outs[1:1 + n_c], *(s[:count] for s in stacked)]


def scan_plan(prog: Any, n_state: int, attrs: dict[str, Any]) -> dict[str, Any] | str:
    """The loop function's plan for a ``Scan`` body Program ``prog`` (inputs ``[states..., slices...,
    captured...]``, outputs ``[states..., scan outputs...]``; ``attrs`` the Step's ``in_axes``,
    ``in_dirs``, ``out_axes``, ``out_dirs``), or the reason the Scan runs from Python: a body without an
    entry function, an axis other than 0 (a slice that is not contiguous), an output not written by
    a kernel (a state passed through unchanged excepted)."""
    if getattr(prog, "steps", None) is not None or not getattr(prog, "entry", ""):
        return "the body has no entry function of its own (run-time control flow inside it, or no kernels)"
    if any(attrs["in_axes"]) or any(attrs["out_axes"]):
        return "a scan axis is not 0 (its slices are not contiguous)"
    names = [n for n, _, _ in prog.inputs]
    carried = []
    for k, (_, kind, payload) in enumerate(prog.outputs[:n_state]):
        if kind == "value":
            carried.append(_nbytes(prog.values[payload]))
        elif kind == "input" and payload == names[k]:
            carried.append(0)
        else:
            return f"state output {k} is a constant or another input passed through"
    scans = []
    for j, (_, kind, payload) in enumerate(prog.outputs[n_state:]):
        if kind != "value":
            return f"scan output {j} is a constant or an input passed through"
        scans.append(_nbytes(prog.values[payload]))
    m = len(attrs["in_dirs"])
    scan_ins = [(_nbytes({"shape": shape, "dtype": dt}), bool(d))
                for (_, dt, shape), d in zip(prog.inputs[n_state:n_state + m], attrs["in_dirs"], strict=True)]
    return {"carried": carried, "scans": scans, "cond_out": False, "scan_ins": scan_ins,
            "reverse_out": [bool(d) for d in attrs["out_dirs"]]}


def run_native_scan(step: Any, runner: Any, states: list[np.ndarray], scans: list[np.ndarray],
                    captured: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``step`` (a Scan with ``attrs["native"]``, scan length >= 1) with its body's ``runner``:
    the final states and the stacked scan outputs (axis 0)."""
    a, plan = step.attrs, step.attrs["native"]
    length = scans[0].shape[0]
    scans = [np.ascontiguousarray(x) for x in scans]
    first = [x[length - 1 if d else 0] for x, d in zip(scans, a["in_dirs"], strict=True)]
    bound = runner.prepare([*states, *first, *captured])
    prog, arrays = bound.prog, bound._arrays
    names = [n for n, _, _ in prog.inputs]
    n = len(states)

    def ptr(name: str) -> int:
        return int(arrays[name].ctypes.data) if name in arrays else 0

    stacked = [np.empty((length, *shape), dtype) for shape, dtype in a["scan_shapes"]]
    table = [int(ctypes.addressof(bound._keep_table)), 0, 0, 0]
    for k in range(n):
        table += [ptr(names[k]) if plan["carried"][k] else 0, ptr(prog.outputs[k][2]) if plan["carried"][k] else 0]
    for j, dst in enumerate(stacked):
        table += [ptr(prog.outputs[n + j][2]), int(dst.ctypes.data)]
    for j, src in enumerate(scans):
        table += [int(src.ctypes.data), ptr(names[n + j])]
    c_table = (ctypes.c_void_p * len(table))(*table)
    fn = runner.native_fn
    if fn is None:
        addr = jit_for(prog)._engine.get_function_address(plan["symbol"])
        fn = runner.native_fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)(addr)
    fn(ctypes.addressof(c_table), length)
    return [*bound.outputs()[:n], *stacked]
