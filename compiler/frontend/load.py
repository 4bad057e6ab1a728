"""Reading an ONNX model: bytes, a path or a ``ModelProto`` -> a checked ``ModelProto``.

Tensors stored as external data (ONNX IR spec, "External Tensor Data") are read relative to the
model's folder; a location that escapes that folder, a missing file or a range past the file's end
is refused. Everything a user can get wrong here raises :class:`CompileError` with stage ``import``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto, TensorProto

from ..errors import CompileError
from .validate import validate_model

ModelSource = bytes | bytearray | memoryview | str | os.PathLike | ModelProto

#: The largest model file read (bytes); larger files are refused before parsing.
MAX_MODEL_BYTES = 2 * 1024**3 - 1


def read_model(model: ModelSource) -> tuple[ModelProto, Path | None]:
    """Parse ``model`` and resolve its external data.

    Returns the ``ModelProto`` (with every tensor's data inline) and the folder it was read from
    (``None`` for bytes). Raises CompileError(stage="import") for unreadable or non-ONNX input.
    """
    base: Path | None = None
    if isinstance(model, ModelProto):
        proto = model
    else:
        if isinstance(model, str | os.PathLike):
            path = Path(model)
            if not path.is_file():
                raise CompileError("import", f"model file {str(path)!r} does not exist")
            size = path.stat().st_size
            if size > MAX_MODEL_BYTES:
                raise CompileError("import", f"model file is {size} bytes, above the limit of {MAX_MODEL_BYTES}")
            data = path.read_bytes()
            base = path.resolve().parent
        else:
            data = bytes(model)
        proto = parse_model_bytes(data)
    check_model_header(proto)
    validate_model(proto)
    resolve_external_data(proto, base)
    return proto, base


def parse_model_bytes(data: bytes) -> ModelProto:
    """Bytes -> ModelProto; raises CompileError for empty, truncated or non-protobuf bytes."""
    if not data:
        raise CompileError("import", "model is empty (0 bytes)")
    proto = ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CompileError(
            "import", f"not a valid ONNX model: the protobuf cannot be parsed ({reason}); "
            "the file is truncated or not ONNX"
        ) from None
    return proto


def check_model_header(proto: ModelProto) -> None:
    """Refuse a parsed message that is not a model (protobuf parses many byte strings)."""
    if proto.ir_version <= 0 or not proto.HasField("graph"):
        raise CompileError("import", "not an ONNX model: no ir_version or no graph (is this an ONNX file?)")
    if not proto.opset_import and proto.ir_version >= 3:
        raise CompileError("import", "model declares no opset_import")
    for what, val in [("producer_name", proto.producer_name), ("producer_version", proto.producer_version),
                      *[("opset domain", o.domain) for o in proto.opset_import]]:
        if not isinstance(val, str):
            raise CompileError("import", f"malformed model: {what} {val!r} is not valid UTF-8 text")
    check_strings(proto.graph)


def check_strings(gp: onnx.GraphProto) -> None:
    """Refuse names that protobuf could not decode as UTF-8 (it hands them over as bytes)."""
    names: list[tuple[str, object]] = [("graph name", gp.name)]
    names += [("value name", vi.name) for vi in list(gp.input) + list(gp.output) + list(gp.value_info)]
    names += [("initializer name", t.name) for t in gp.initializer]
    for i, n in enumerate(gp.node):
        names += [(f"node #{i} op_type", n.op_type), (f"node #{i} domain", n.domain), (f"node #{i} name", n.name)]
        names += [(f"node #{i} input", x) for x in n.input] + [(f"node #{i} output", x) for x in n.output]
        names += [(f"node #{i} attribute name", a.name) for a in n.attribute]
    for what, val in names:
        if not isinstance(val, str):
            raise CompileError("import", f"malformed model: {what} {val!r} is not valid UTF-8 text")


def _tensors(graph: onnx.GraphProto) -> Iterator[TensorProto]:
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for g in attr.graphs:
                yield from _tensors(g)


def resolve_external_data(proto: ModelProto, base: Path | None) -> None:
    """Load every external tensor inline, reading only files inside ``base``.

    Raises CompileError naming the tensor and location for a model given as bytes, a location
    outside the model's folder, a missing file, or an offset/length past the file's end.
    """
    for tensor in _tensors(proto.graph):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        where = f"tensor {tensor.name!r} stores its data in external file {location!r}"
        if base is None:
            raise CompileError("import", f"{where}, but the model was given as bytes; give the model path instead")
        if not location or os.path.isabs(location):
            raise CompileError("import", f"{where}: the location must be a relative path inside the model's folder")
        target = (base / location).resolve()
        if base != target and base not in target.parents:
            raise CompileError("import", f"{where}, which is outside the model's folder; refused")
        if not target.is_file():
            raise CompileError("import", f"{where}, which does not exist next to the model")
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise CompileError("import", f"{where} with a non-integer offset or length") from None
        size = target.stat().st_size
        if offset < 0 or offset > size or (length is not None and (length < 0 or offset + length > size)):
            raise CompileError(
                "import", f"{where}: offset {offset} length {length} is past the file's end ({size} bytes)"
            )
        with open(target, "rb") as f:
            f.seek(offset)
            tensor.raw_data = f.read(length if length is not None else size - offset)
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT
