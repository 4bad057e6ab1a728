"""Prism's graph IR: :class:`Graph`, :class:`Node`, :class:`FusedGroup`, :class:`Value`,
:class:`TensorType`, and the one printer :func:`print_graph`."""

from .graph import FusedGroup, Graph, IRError, Node, Value, as_text, implicit_inputs
from .printer import print_graph
from .types import TensorType, UnsupportedDType, elem_type_of

__all__ = [
    "FusedGroup",
    "Graph",
    "IRError",
    "Node",
    "TensorType",
    "UnsupportedDType",
    "Value",
    "as_text",
    "elem_type_of",
    "implicit_inputs",
    "print_graph",
]
