"""The driver's first two stages: ``request`` (target and pipeline) and ``read`` (the model).

``read`` parses the model (bytes, a path, a ``ModelProto`` or a sample name), checks its opset,
describes its inputs and outputs, notes its narrow storage types (``legalize-narrow-types``
legalizes it; see :func:`legalize_model`) and emits ``compile.started``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

from onnx import ModelProto

from .. import samples, targets
from ..errors import CompileError
from ..frontend import ModelSource, describe_io, read_model
from ..frontend.importer import check_opset, default_opset
from ..frontend.input_values import bind_input_values
from ..frontend.narrow_types import legalize, uses_narrow_types
from ..ops.narrow import DOMAIN, OP
from ..passes.pipeline import parse_pipeline
from ..runtime.narrow_io import describe_storage, storage_io
from ..runtime.pool import check_threads
from ..version import __version__
from .state import Compilation


def check_request(comp: Compilation) -> None:
    """Stage ``request``: the target exists and runs here (for a back end that runs code), and the
    pipeline parses, and ``threads`` is within 1..the CPUs this process may use, and a tuning database
    (``schedules``) can be read. Raises CompileError(stage="request") naming the unknown target, pass
    or option, the thread limit or the database."""
    req = comp.request
    check_threads(req.threads)
    comp.target = targets.get_target(req.target)
    targets.check_runnable(comp.target)
    comp.pipeline = parse_pipeline(req.pipeline)
    if req.schedules is not None:  # a tuning database (compiler.tune.apply): opened and read here
        req.schedules.check()


def resolve_model(model: ModelSource) -> ModelSource:
    """A sample name (``compiler.samples``) that is not an existing path -> the sample's file
    (fetched and cached on first use); anything else unchanged."""
    if isinstance(model, str) and not os.path.exists(model) and model in samples.SAMPLES:
        return str(samples.fetch(model))
    return model


def model_bytes(model: ModelSource) -> tuple[ModelSource, str]:
    """``model`` as :func:`compiler.frontend.read_model` takes it, and the SHA-256 of its bytes.
    Raises CompileError(stage="import") for a path that does not exist (naming the samples when it
    looks like a sample name)."""
    if isinstance(model, ModelProto):
        return model, hashlib.sha256(model.SerializeToString()).hexdigest()
    if isinstance(model, str | os.PathLike):
        p = Path(model)
        if not p.is_file():
            hint = "" if p.suffix or os.sep in str(p) else \
                f" and is not a sample (samples: {', '.join(samples.SAMPLES)})"
            raise CompileError("import", f"model file {str(p)!r} does not exist{hint}")
        return model, hashlib.sha256(p.read_bytes()).hexdigest()
    data = bytes(model)
    return data, hashlib.sha256(data).hexdigest()


def legalize_model(model: ModelProto) -> tuple[ModelProto, dict[str, Any]]:
    """``model`` (with narrow element types) legalized, and its storage types.

    The model is rewritten by :func:`compiler.frontend.narrow_types.legalize`: computed in float32,
    int8 or uint8, with explicit ``prism.NarrowCast`` rounding steps. The graph IR built from it has
    compute-type graph inputs and outputs. Returns ``(legalized model, {"io": {"inputs": {name: elem},
    "outputs": {name: elem}}, "summary": {"values": [{"name", "role", "storage", "compute"}], "notes":
    [str]}})``: the declared storage types of the narrow graph inputs and outputs
    (``compiler.runtime.narrow_io``), in which the runner feeds ONNX Runtime and to which it encodes
    Prism's outputs before comparing; ``summary`` is ``model["storage"]`` of the result.
    """
    io = storage_io(model)
    legal = legalize(model)
    steps = sum(1 for n in legal.graph.node if n.op_type == OP and n.domain == DOMAIN)
    return legal, {"io": io, "summary": describe_storage(io, steps)}


def read(comp: Compilation) -> None:
    """Stage ``read``: ``comp.proto``, ``comp.model`` (the ``compile.started`` model payload), and for
    a model with narrow element types ``comp.storage`` (its storage types, as :func:`legalize_model`
    describes them; the ``legalize-narrow-types`` pass rewrites the model and its remark counts the
    rounding steps). Inputs bound to values (``request.input_values``) become initializers of
    ``comp.proto`` (``compiler.frontend.input_values``; listed in the model payload's ``input_values``)
    and leave ``request.input_shapes``. Emits ``compile.started``. Raises CompileError(stage="import") for a model that cannot be read or
    whose opset is outside 7..latest (below 7 is accepted with ``request.upgrade_opset``)."""
    req = comp.request
    src, sha = model_bytes(resolve_model(req.model))
    proto, _ = read_model(src)
    opset = default_opset(proto)
    if not (req.upgrade_opset and opset < 7):
        check_opset(opset)
    ins, outs = describe_io(proto)
    comp.model = {"name": proto.graph.name or "model", "sha256": sha, "opset": opset, "inputs": ins, "outputs": outs}
    proto, comp.input_values = bind_input_values(proto, req.input_values, req.input_shapes)
    if comp.input_values:  # bound inputs are constants now: their shapes are no longer bound as inputs'
        comp.model["input_values"] = {k: v.reshape(-1).tolist() for k, v in comp.input_values.items()}
        shapes = {k: v for k, v in (req.input_shapes or {}).items() if k not in comp.input_values}
        comp.request = req = dataclasses.replace(req, input_shapes=shapes or None)
    comp.proto = proto
    if uses_narrow_types(proto):  # narrow storage, wider compute: the legalize-narrow-types pass
        io = storage_io(proto)
        comp.storage = {"io": io, "summary": describe_storage(io, 0)}
        comp.model["storage"] = comp.storage["summary"]
    assert comp.pipeline is not None
    comp.events.emit("compile.started", model=comp.model, target=req.target, pipeline=comp.pipeline.text(),
                     compiler_version=__version__)
