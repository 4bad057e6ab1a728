"""A failed compilation's reproducer (issue 15 item 8; as MLIR's ``--mlir-print-ir-after-failure``
and tlparse's repro scripts): the model, the pipeline up to the failing pass, and the one-line CLI
command that fails the same way.

When the failure names one node, the model is cut down to that node (:func:`node_submodel`: its
inputs become graph inputs with the types shape inference gives them, constants stay initializers,
and the values its subgraphs read from the enclosing graph become inputs too); the cut model is
used only if compiling it fails in the same stage at the same node with the same op, else the whole
model is. :func:`reproducer_zip` writes ``model.onnx``, ``command.txt`` (the command),
``failure.json`` (the ``compile.failed`` payload it reproduces) and ``README.txt``.
"""

from __future__ import annotations

import io
import json
import shlex
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import onnx
from onnx import helper

from . import api
from .artifacts import run_levels
from .driver.prepare import with_input_shapes
from .passes.pipeline import cut_after_run

EARLY_STAGES = ("request", "shape", "import", "passes")  # fail before the back end: --no-backend


def _outer_reads(graph: onnx.GraphProto) -> set[str]:
    """Names a (sub)graph reads that it does not define itself (values of the enclosing scopes)."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    reads: set[str] = set()
    for n in graph.node:
        reads |= {x for x in n.input if x and x not in defined}
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                reads |= {x for x in _outer_reads(g) if x not in defined}
        defined |= set(n.output)
    return reads | {o.name for o in graph.output if o.name not in defined}


def node_submodel(proto: onnx.ModelProto, node_name: str,
                  input_shapes: Mapping[str, Sequence[int]] | None = None) -> onnx.ModelProto | None:
    """The model cut down to the node named ``node_name``: a model with that node alone, or None when
    no node has that name or a type it needs cannot be inferred. Types come from
    ``onnx.shape_inference`` on ``proto`` with ``input_shapes`` bound."""
    node = next((n for n in proto.graph.node if n.name == node_name), None)
    if node is None:
        return None
    bound = onnx.shape_inference.infer_shapes(with_input_shapes(proto, input_shapes), data_prop=True)
    g = bound.graph
    types = {v.name: v for v in [*g.input, *g.value_info, *g.output]}
    inits = {t.name: t for t in g.initializer}
    reads = [x for x in node.input if x] + sorted(_outer_reads(helper.make_graph([node], "n", [], [])) - set(node.input))
    inputs, keep = [], []
    for name in dict.fromkeys(reads):
        if name in inits:
            keep.append(inits[name])
        elif name in types and types[name].type.tensor_type.HasField("elem_type"):
            inputs.append(types[name])
        else:
            return None
    outputs = [types.get(o) or helper.make_empty_tensor_value_info(o) for o in node.output if o]
    sub = helper.make_graph([node], f"{g.name or 'model'}_{node_name}", inputs, outputs, initializer=keep)
    model = helper.make_model(sub, opset_imports=list(proto.opset_import), ir_version=proto.ir_version)
    return model


def _command(*, target: str, pipeline: str, input_shapes: Mapping[str, Sequence[int]] | None,
             input_values: Mapping[str, Sequence[Any]] | None, stage: str, options: Mapping[str, Any]) -> str:
    parts = ["python", "-m", "compiler", "compile", "model.onnx", "--target", target, "--pipeline", pipeline or "O0"]
    for name, dims in (input_shapes or {}).items():
        parts += ["--input-shape", f"{name}={','.join(str(int(d)) for d in dims)}"]
    for name, vals in (input_values or {}).items():
        parts += ["--input-value", f"{name}={','.join(str(v) for v in vals)}"]
    if stage in EARLY_STAGES:
        parts.append("--no-backend")
    elif stage in ("run", "verify"):
        parts += [f for f, on in (("--verify", options.get("verify", True)), ("--benchmark", options.get("benchmark", True))) if on]
    return " ".join(shlex.quote(p) for p in parts)


def _same_failure(error: Mapping[str, Any] | None, failure: Mapping[str, Any]) -> bool:
    return error is not None and all(error.get(k) == failure.get(k) for k in ("stage", "node", "op"))


def reproducer_zip(model: bytes, *, failure: Mapping[str, Any], target: str, pipeline: str, failed_pass: int | None,
                   input_shapes: Mapping[str, Sequence[int]] | None = None,
                   input_values: Mapping[str, Sequence[Any]] | None = None,
                   options: Mapping[str, Any] | None = None, levels: Sequence[str] | None = None) -> bytes:
    """The reproducer of a failed compilation as zip bytes (see the module docstring).

    ``model``: the ONNX bytes compiled; ``failure``: its ``compile.failed`` payload; ``failed_pass``:
    the 0-based index of the pass run that failed (None when no pass did); ``pipeline``: expanded
    text; ``levels``: each pass run's level from the events (``compiler.passes.pipeline.cut_after_run``;
    the ONNX-level runs are counted by running them when not given)."""
    if failed_pass is None:
        truncated = pipeline
    else:
        if levels is None:
            levels = run_levels(model, target=target, pipeline=pipeline, input_shapes=input_shapes,
                                input_values=input_values)
        truncated = cut_after_run(pipeline, failed_pass, levels)
    failed_name = str(failure.get("pass") or "")
    stage = str(failure.get("stage") or "")
    opts = dict(options or {})
    data, shapes, cut = model, input_shapes, False
    if failure.get("node"):
        sub = node_submodel(onnx.load_from_string(model), str(failure["node"]), input_shapes)
        if sub is not None:
            names = {i.name for i in sub.graph.input}
            sub_values = {k: v for k, v in (input_values or {}).items() if k in names} or None
            tried = api.compile(sub.SerializeToString(), target=target, pipeline=truncated, verify=False,
                                benchmark=False, backend=stage not in EARLY_STAGES, input_values=sub_values)
            if _same_failure(tried.error, failure):
                data, shapes, cut, input_values = sub.SerializeToString(), None, True, sub_values
    command = _command(target=target, pipeline=truncated, input_shapes=shapes, input_values=input_values,
                       stage=stage, options=opts)
    where = "".join(f", {k} {failure[k]}" for k in ("pass", "node", "op", "kernel") if failure.get(k))
    readme = "\n".join([
        f"Reproducer of a Prism compilation that failed during {stage}{where}:", f"  {failure.get('message', '')}", "",
        ("model.onnx is the failing node alone (its inputs as graph inputs), which fails the same way."
         if cut else "model.onnx is the model as it was compiled."),
        f"The pipeline is cut after the failing pass ({failed_name})." if failed_pass is not None
        else "The pipeline is the compilation's own.", "", "Run from this directory, with Prism installed:", f"  {command}",
        "It exits with status 2 and prints the error on stderr.", ""])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.onnx", data)
        zf.writestr("command.txt", command + "\n")
        zf.writestr("failure.json", json.dumps(dict(failure), indent=1))
        zf.writestr("README.txt", readme)
    return buf.getvalue()
