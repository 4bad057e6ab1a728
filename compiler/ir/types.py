"""Tensor types of the graph IR: element type and shape.

Element types follow ONNX ``TensorProto.DataType`` (ONNX IR spec, "Tensor Element Types"); each has
a numpy dtype and a short name used by the printer (``f32``, ``i64``, ``bool`` ...). A dimension is
an ``int`` (static) or a ``str`` (a symbolic ``dim_param``); a shape of ``None`` means unknown rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np
import onnx
from onnx import TensorProto

from ..errors import CompileError

UNKNOWN_DIM = "?"  # a dim the model leaves unnamed and unsized

# ONNX elem type -> (short name, numpy dtype)
_ELEM: dict[int, tuple[str, np.dtype]] = {
    TensorProto.FLOAT: ("f32", np.dtype("float32")),
    TensorProto.DOUBLE: ("f64", np.dtype("float64")),
    TensorProto.FLOAT16: ("f16", np.dtype("float16")),
    TensorProto.INT8: ("i8", np.dtype("int8")),
    TensorProto.INT16: ("i16", np.dtype("int16")),
    TensorProto.INT32: ("i32", np.dtype("int32")),
    TensorProto.INT64: ("i64", np.dtype("int64")),
    TensorProto.UINT8: ("u8", np.dtype("uint8")),
    TensorProto.UINT16: ("u16", np.dtype("uint16")),
    TensorProto.UINT32: ("u32", np.dtype("uint32")),
    TensorProto.UINT64: ("u64", np.dtype("uint64")),
    TensorProto.BOOL: ("bool", np.dtype("bool")),
    TensorProto.STRING: ("str", np.dtype("object")),
}
_BY_NUMPY = {dt: code for code, (_, dt) in _ELEM.items()}
_BY_SHORT = {short: code for code, (short, _) in _ELEM.items()}

Dim = int | str
Shape = tuple[Dim, ...]


class UnsupportedDType(ValueError):
    """An element type the IR does not model (complex, and the narrow storage types bfloat16,
    float8, float4e2m1, int4 ..., which reach the IR only as their compute types after
    ``compiler.frontend.narrow_types.legalize``)."""


def elem_type_of(dtype: np.dtype | str | int) -> int:
    """The ONNX elem type code for a numpy dtype, a short name or a code. Raises UnsupportedDType."""
    if isinstance(dtype, int | np.integer):
        if int(dtype) in _ELEM:
            return int(dtype)
        name = TensorProto.DataType.Name(int(dtype)) if int(dtype) in TensorProto.DataType.values() else dtype
        raise UnsupportedDType(f"element type {name} is not supported")
    if isinstance(dtype, str) and dtype in _BY_SHORT:
        return _BY_SHORT[dtype]
    dt = np.dtype(dtype)
    if dt.kind in "OUS":
        return TensorProto.STRING
    if dt not in _BY_NUMPY:
        raise UnsupportedDType(f"element type {dt} is not supported")
    return _BY_NUMPY[dt]


@dataclass(frozen=True)
class TensorType:
    """The type of a tensor value.

    Attributes:
        elem_type: ONNX ``TensorProto.DataType`` code.
        shape: tuple of ``int`` (static) or ``str`` (symbolic) dims; ``None`` for unknown rank.
    """

    elem_type: int
    shape: Shape | None

    @staticmethod
    def of(dtype: np.dtype | str | int, shape: tuple[Dim, ...] | list[Dim] | None) -> TensorType:
        return TensorType(elem_type_of(dtype), None if shape is None else tuple(shape))

    @property
    def dtype(self) -> np.dtype:
        return _ELEM[self.elem_type][1]

    @property
    def short(self) -> str:
        return _ELEM[self.elem_type][0]

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def numel(self) -> int:
        """Element count; raises ValueError if the shape is not static."""
        if not self.is_static:
            raise ValueError(f"shape {self} is not static")
        return prod(self.shape)  # type: ignore[arg-type]

    @property
    def nbytes(self) -> int:
        """Size in bytes of a dense tensor of this type (static shapes only)."""
        return self.numel * self.dtype.itemsize

    def with_shape(self, shape: tuple[Dim, ...] | list[Dim] | None) -> TensorType:
        return TensorType(self.elem_type, None if shape is None else tuple(shape))

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.short}[*]"
        return f"{self.short}[{', '.join(str(d) for d in self.shape)}]"


def type_from_proto(tp: onnx.TypeProto, what: str) -> TensorType | None:
    """ONNX ``TypeProto`` -> TensorType; ``None`` when no type is given. Raises CompileError(stage="import")
    naming ``what`` for a non-tensor type or an element type the IR does not model."""
    kind = tp.WhichOneof("value")
    if kind is None:
        return None
    if kind != "tensor_type":
        raise CompileError("import", f"{what} has type {kind}; only tensors are supported")
    tt = tp.tensor_type
    try:
        elem = TensorType.of(int(tt.elem_type), None).elem_type
    except UnsupportedDType as exc:
        raise CompileError("import", f"{what}: {exc}") from None
    if not tt.HasField("shape"):
        return TensorType(elem, None)
    dims: list[int | str] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(UNKNOWN_DIM)
    return TensorType(elem, tuple(dims))
