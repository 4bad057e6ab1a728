"""The static shapes and dtypes of a model's values, from Prism's own import and specialization
(``compiler.frontend.importer``, ``compiler.frontend.specialize``), which knows values (``Shape`` of a
static tensor, constants) that ``onnx.shape_inference`` does not."""

from __future__ import annotations

from typing import Any

from onnx import ModelProto

from ..ir import Graph
from .importer import import_model
from .specialize import specialize


def static_types(graph: Graph) -> tuple[dict[str, list[int]], dict[str, Any]]:
    """``({value: static shape}, {value: numpy dtype})`` of ``graph``'s statically typed values."""
    typed = [v for v in graph.values() if v.type is not None and v.type.is_static]
    return ({v.name: [int(d) for d in v.type.shape] for v in typed},  # type: ignore[union-attr]
            {v.name: v.type.dtype for v in typed})  # type: ignore[union-attr]


def value_types(proto: ModelProto) -> dict[str, tuple[list[Any], Any]]:
    """``{value: (shape, numpy dtype)}`` of every value of ``proto`` with a known rank (dims int, or
    str where symbolic); the inputs' shapes are those the model declares (``compiler.driver.prepare``
    writes the request's into it)."""
    graph = import_model(proto)
    specialize(graph, None)
    return {v.name: (list(v.type.shape), v.type.dtype) for v in graph.values()
            if v.type is not None and v.type.shape is not None}
