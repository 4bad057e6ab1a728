"""Compile a model for concrete input shapes and execute it on given inputs, returning its outputs.

This is the runtime path behind :mod:`compiler.backend` (the ``onnx.backend.base.Backend``
interface) and the conformance runner. :func:`compile_program` runs the real compiler: import
(``compiler.frontend``), shape specialization from the given input shapes, the graph pipeline
(``compiler.passes``, ``O2`` by default), after statically resolvable If/Loop/Scan are inlined
or unrolled (``compiler.frontend.control_flow``), LSTM/GRU/RNN nodes are unrolled over their
static sequence length (``compiler.frontend.unroll_rnn``) and ONNX function ops without a
lowering are replaced by their schema's function body (``compiler.frontend.expand``), lowering and scheduling of every kernel
(``compiler.build.lower_graph``) and codegen to object code (``compiler.build.compile_all``). The
result is a :class:`Program`: the kernel objects, the call list with every parameter's binding
(graph input, arena value at its ``plan-memory`` offset, heap value, constant, scratch) and where
each graph output comes from (a kernel-written value, a graph input, or a constant: a graph whose
output is folded to a constant or is an input needs no kernel for it).

:func:`run_program` loads the objects into one MCJIT engine (``compiler.runtime.jit``) and calls the
kernels in order in this process; :func:`run_program_isolated` does the same in a fresh
interpreter (``python -m compiler.runtime.execute DIR``) so that a crash of generated code becomes a
``CompileError(stage="run")`` naming the kernel, as ``compiler.runtime.runner`` does for timing.

Inputs are cast to the graph inputs' dtypes; outputs are numpy arrays of the graph outputs'
dtypes and shapes (``bool`` is one byte per element in memory, as numpy's). Dtypes the code
generator handles: f32, f64, i64, i32, i8, u8, bool.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError
from .buffers import aligned as _aligned
from .buffers import running_kernel as _running

NP_DTYPES = {"f32": "float32", "f64": "float64", "i64": "int64", "i32": "int32", "i8": "int8", "u8": "uint8",
             "bool": "bool", "f16": "float16", "i16": "int16", "u16": "uint16", "u32": "uint32", "u64": "uint64"}


@dataclass
class Program:
    """A compiled model for one set of input shapes (picklable).

    Attributes:
        objects: ``{symbol: ELF object bytes}``, one per distinct kernel.
        calls: ``[{"name", "symbol", "args": [{"kind": "value", "name"} | {"kind": "const", "index"} |
            {"kind": "scratch", "dtype", "shape"}]}]`` in execution order.
        values: ``{name: {"kind": "input" | "arena" | "heap", "dtype", "shape", "offset"}}``.
        arena_bytes: size of the arena (bytes) from the memory plan.
        consts: constant arrays bound to ``const`` parameters.
        inputs: ``[(name, numpy dtype, shape)]`` of the graph inputs, in order.
        outputs: ``[(name, kind, payload)]``: kind ``value`` (written by a kernel), ``input`` (payload
            the input name) or ``const`` (payload the array).
        kernels: number of kernels; ``pipeline``: the expanded pipeline text.
    """

    objects: dict[str, bytes] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    arena_bytes: int = 0
    consts: list[np.ndarray] = field(default_factory=list)
    inputs: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)
    outputs: list[tuple[str, str, Any]] = field(default_factory=list)
    pipeline: str = ""

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


NO_EXPAND = {"Constant", "If", "Loop", "Scan", "Range"}  # folded, or run as control flow


def has_lowering(node: Any) -> bool:
    """True when ``node`` (a NodeProto) is compiled as it is: it has a lowering, is a control-flow or
    folded op, or is of another domain; else its function body (if any) replaces it."""
    from ..loops.lower import LOWERINGS

    return node.domain not in ("", "ai.onnx") or node.op_type in LOWERINGS or node.op_type in NO_EXPAND


def upgrade_opset(proto: Any, minimum: int = 7) -> Any:
    """A model of a default-domain opset below ``minimum`` converted with ONNX's version converter
    (``onnx.version_converter``: e.g. opset 6's ``broadcast``/``axis`` attributes become numpy-style
    broadcasting); other models as they are. Raises CompileError(stage="import") when it fails."""
    import onnx

    version = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), minimum)
    if version >= minimum:
        return proto
    try:
        out = onnx.version_converter.convert_version(proto, minimum)
    except Exception as e:
        raise CompileError("import", f"opset {version} could not be converted to {minimum}: {e}") from None
    return _legacy_prelu(out)


def _legacy_prelu(proto: Any) -> Any:
    """PRelu before opset 7 applied a 1-D slope of C elements along axis 1 (as Caffe and PyTorch
    export it); from opset 7 the slope broadcasts numpy-style. The converter keeps the slope as it
    is, so a constant slope of C > 1 elements is reshaped to ``[C, 1, ..., 1]`` here."""
    import onnx
    from onnx import numpy_helper

    try:
        shapes = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in
                  list(onnx.shape_inference.infer_shapes(proto).graph.value_info) + list(proto.graph.input)}
    except Exception:
        return proto
    inits = {t.name: t for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type != "PRelu" or len(n.input) < 2 or n.input[1] not in inits:
            continue
        slope = numpy_helper.to_array(inits[n.input[1]])
        rank = shapes.get(n.input[0], 0)
        if slope.ndim == 1 and slope.size > 1 and rank > 2:
            t = numpy_helper.from_array(slope.reshape((slope.size,) + (1,) * (rank - 2)), n.input[1])
            inits[n.input[1]].CopyFrom(t)
    return proto


def with_input_shapes(proto: Any, input_shapes: Mapping[str, Sequence[int]] | None) -> Any:
    """A copy of ``proto`` whose graph inputs named in ``input_shapes`` declare those static shapes."""
    if not input_shapes:
        return proto
    import onnx

    declared = {vi.name: [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
                for vi in proto.graph.input if vi.type.HasField("tensor_type")}
    if all(declared.get(n) == [int(d) for d in shape] for n, shape in input_shapes.items()):
        return proto  # already static and equal: no copy

    out = onnx.ModelProto()
    out.CopyFrom(proto)
    for vi in out.graph.input:
        if vi.name in input_shapes and vi.type.HasField("tensor_type"):
            shape = vi.type.tensor_type.shape
            del shape.dim[:]
            for d in input_shapes[vi.name]:
                shape.dim.add().dim_value = int(d)
    return out


def prepare_model(proto: Any, input_shapes: Mapping[str, Sequence[int]] | None) -> Any:
    """The ONNX-level preparation before import (a new ModelProto; ``proto`` is not modified):
    models below opset 7 upgraded (:func:`upgrade_opset`), the input shapes written into the graph
    inputs, then, repeated while anything changes (bodies may hold more): statically resolvable
    If/Loop/Scan inlined or unrolled (``compiler.frontend.control_flow``), sequence and optional
    values resolved into tensors (``compiler.frontend.sequences``), LSTM/GRU/RNN unrolled
    (``compiler.frontend.unroll_rnn``), function ops without a lowering expanded
    (``compiler.frontend.expand``). A model without any of these comes back equivalent.
    Raises CompileError(stage="import") naming the node that cannot be prepared."""
    from ..frontend.control_flow import resolve_control_flow
    from ..frontend.expand import expand_functions
    from ..frontend.sequences import resolve_sequences
    from ..frontend.unroll_rnn import unroll_rnns

    proto = upgrade_opset(proto)
    proto = with_input_shapes(proto, input_shapes)
    for _ in range(8):  # each step returns its input object when it has nothing to do
        before = proto
        try:
            proto = unroll_rnns(resolve_control_flow(resolve_sequences(proto)))
        except ValueError as e:
            raise CompileError("import", str(e)) from None
        proto = expand_functions(proto, keep=has_lowering)
        if proto is before:
            break
    return resolve_sequences(proto, final=True)


def compile_program(model: Any, input_shapes: Mapping[str, Sequence[int]] | None, *, pipeline: str = "O2",
                    target: str = "host") -> Program:
    """Compile ``model`` (ModelProto, bytes or path) for ``input_shapes`` ({input: shape}).

    Raises CompileError with the failing stage (``import``, ``shape``, ``passes``, ``lowering``,
    ``codegen``); an unexpected internal error is wrapped as CompileError with its type and message.
    """
    from ..build import compile_all, lower_graph
    from ..events import EventStream
    from ..frontend import import_model, read_model, specialize
    from ..passes import PassContext
    from ..passes.manager import run_pipeline
    from ..passes.pipeline import parse_pipeline
    from ..targets import check_runnable, get_target

    stage = "import"
    try:
        proto, _ = read_model(model)
        proto = prepare_model(proto, input_shapes)
        graph = import_model(proto)
        stage = "shape"
        specialize(graph, input_shapes)
        stage = "passes"
        pipe = parse_pipeline(pipeline)
        ctx = PassContext(target=target)
        run_pipeline(graph, pipe, ctx, EventStream(None))
        stage = "lowering"
        tgt = get_target(target)
        check_runnable(tgt)
        kernels = lower_graph(graph, tgt)
        stage = "codegen"
        compiled = compile_all(kernels, tgt, threads=1)
    except CompileError:
        raise
    except RecursionError:
        raise CompileError(stage, "internal error: recursion too deep") from None
    except Exception as e:
        raise CompileError(stage, f"internal error: {type(e).__name__}: {e}"[:500]) from e
    plan = ctx.artifacts.get("memory_plan") or graph.metadata.get("memory_plan")
    if plan is None:
        from ..passes.plan_memory import liveness, place

        plan = place(liveness(graph)[0])
    return _link(graph, kernels, compiled, plan, pipe.text())


def _link(graph: Any, kernels: list[Any], compiled: list[Any], plan: Any, pipeline: str) -> Program:
    offsets = {b.value: b.offset for b in plan.buffers} if plan is not None else {}
    prog = Program(arena_bytes=int(plan.arena_bytes) if plan is not None else 0, pipeline=pipeline)
    graph_inputs = {v.name for v in graph.inputs}
    for v in graph.inputs:
        t = v.type
        prog.inputs.append((v.name, NP_DTYPES.get(t.short, str(t.dtype)), tuple(int(d) for d in t.shape)))
    const_ids: dict[int, int] = {}
    for lk, ck in zip(kernels, compiled, strict=True):
        prog.objects.setdefault(ck.symbol, ck.obj)
        args = []
        for a in lk.args:
            if a.kind == "value":
                if a.name not in prog.values:
                    kind = "input" if a.name in graph_inputs else "arena" if a.name in offsets else "heap"
                    prog.values[a.name] = {"kind": kind, "dtype": NP_DTYPES[a.buffer.dtype],
                                           "shape": tuple(a.buffer.shape), "offset": offsets.get(a.name, 0)}
                args.append({"kind": "value", "name": a.name})
            elif a.kind == "const":
                if id(a.data) not in const_ids:
                    const_ids[id(a.data)] = len(prog.consts)
                    prog.consts.append(np.ascontiguousarray(a.data))
                args.append({"kind": "const", "index": const_ids[id(a.data)]})
            else:
                args.append({"kind": "scratch", "dtype": NP_DTYPES[a.buffer.dtype], "shape": tuple(a.buffer.shape)})
        prog.calls.append({"name": lk.name, "symbol": ck.symbol, "args": args})
    for v in graph.outputs:
        if v.name in graph_inputs:
            prog.outputs.append((v.name, "input", v.name))
        elif v.const is not None:
            prog.outputs.append((v.name, "const", np.array(v.const)))
        elif v.name in prog.values:
            prog.outputs.append((v.name, "value", v.name))
        else:
            raise CompileError("lowering", f"graph output %{v.name} is not written by any kernel")
    return prog


def _empty(dtype: str, shape: Sequence[int]) -> np.ndarray:
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    return _aligned(max(n, 1) * dt.itemsize).view(dt)[:n].reshape(tuple(shape))


def check_inputs(prog: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The inputs as C-contiguous arrays of the graph's dtypes. Raises CompileError(stage="request")
    when the count or a shape differs from what ``prog`` was compiled for."""
    if len(inputs) != len(prog.inputs):
        raise CompileError("request", f"the model takes {len(prog.inputs)} inputs, {len(inputs)} were given")
    out = []
    for (name, dt, shape), x in zip(prog.inputs, inputs, strict=True):
        arr = np.asarray(x)
        if tuple(arr.shape) != tuple(shape):
            raise CompileError("request", f"input {name!r} has shape {arr.shape}; compiled for {shape}")
        out.append(np.ascontiguousarray(arr.astype(dt, copy=False)))
    return out


def run_program(prog: Program, inputs: Sequence[np.ndarray], progress: Path | None = None) -> list[np.ndarray]:
    """Execute ``prog`` on ``inputs`` (one array per graph input, in order) in this process.

    Returns the graph outputs (fresh arrays). With ``progress``, appends ``start <kernel>`` before
    each kernel and ``done`` at the end (unbuffered), for crash attribution by a parent process.
    """
    from .jit import JitModule

    ins = dict(zip([n for n, _, _ in prog.inputs], check_inputs(prog, inputs), strict=True))
    jit = getattr(prog, "_jit", None)
    if jit is None and prog.objects:
        jit = JitModule(list(prog.objects.values()))
        prog._jit = jit  # type: ignore[attr-defined]
    arena = _aligned(max(prog.arena_bytes, 64))
    arrays: dict[str, np.ndarray] = {}
    for name, b in prog.values.items():
        if b["kind"] == "input":
            src = ins[name]
            arrays[name] = _empty(src.dtype.str, src.shape)
            arrays[name][...] = src
        elif b["kind"] == "arena":
            dt = np.dtype(b["dtype"])
            n = int(np.prod(b["shape"], dtype=np.int64))
            arrays[name] = arena[b["offset"]:b["offset"] + n * dt.itemsize].view(dt).reshape(b["shape"])
        else:
            arrays[name] = _empty(b["dtype"], b["shape"])
    consts = [_copy_aligned(c) for c in prog.consts]
    fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND) if progress is not None else None
    keep: list[np.ndarray] = []
    for call in prog.calls:
        ptrs = []
        for a in call["args"]:
            if a["kind"] == "value":
                arr = arrays[a["name"]]
            elif a["kind"] == "const":
                arr = consts[a["index"]]
            else:
                arr = _empty(a["dtype"], a["shape"])
            keep.append(arr)
            ptrs.append(arr.ctypes.data)
        if fd is not None:
            os.write(fd, f"start {call['name']}\n".encode())
        jit.function(call["symbol"], len(ptrs))(*ptrs)  # type: ignore[union-attr]
    if fd is not None:
        os.write(fd, b"done\n")
        os.close(fd)
    outs = []
    for _name, kind, payload in prog.outputs:
        if kind == "input":
            outs.append(ins[payload].copy())
        elif kind == "const":
            outs.append(np.array(payload))
        else:
            outs.append(arrays[payload].copy())
    return outs


def _copy_aligned(c: np.ndarray) -> np.ndarray:
    out = _empty(c.dtype.str, c.shape)
    out[...] = c
    return out


def run_program_isolated(prog: Program, inputs: Sequence[np.ndarray], timeout_s: float = 300.0) -> list[np.ndarray]:
    """:func:`run_program` in a fresh interpreter. A crash (signal, non-zero exit) or a timeout raises
    ``CompileError(stage="run")`` naming the kernel that was running; this process carries on."""
    check_inputs(prog, inputs)
    with tempfile.TemporaryDirectory(prefix="prism-exec-") as tmp:
        d = Path(tmp)
        with open(d / "job.pkl", "wb") as f:
            pickle.dump((prog, [np.asarray(x) for x in inputs]), f, protocol=pickle.HIGHEST_PROTOCOL)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        try:
            proc = subprocess.run([sys.executable, "-m", "compiler.runtime.execute", str(d)], env=env,
                                  capture_output=True, text=True, timeout=timeout_s, cwd=root)
        except subprocess.TimeoutExpired:
            raise CompileError("run", f"the run did not finish within {timeout_s:.0f} s", kernel=_running(d)) from None
        if proc.returncode != 0:
            kernel = _running(d)
            how = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
                   else f"exited with status {proc.returncode}")
            tail = (proc.stderr.strip().splitlines() or [""])[-1][:300]
            where = f"in kernel {kernel}" if kernel else "outside the kernels"
            raise CompileError("run", f"execution failed {where}: {how} {tail}".strip(), kernel=kernel)
        with open(d / "outputs.pkl", "rb") as f:
            return pickle.load(f)


def main(d: Path) -> int:
    """Child entry: ``DIR/job.pkl`` (program, inputs) -> ``DIR/outputs.pkl``."""
    with open(d / "job.pkl", "rb") as f:
        prog, inputs = pickle.load(f)
    outs = run_program(prog, inputs, progress=d / "progress")
    with open(d / "outputs.pkl", "wb") as f:
        pickle.dump(outs, f, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
