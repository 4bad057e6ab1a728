"""The op registry (``registry``), its entries (one module per op family) and graph-wide type
inference (``infer``). Importing this package fills the registry."""

from . import (  # noqa: F401
           control,
           detection,
           elementwise,
           generators,
           lookup,
           misc,
           narrow,
           nchwc,
           nn,
           qlinear,
           reduce,
           shape_ops,
)
from .infer import MAX_ELEMENTS, ShapeEnv, evaluate_node, infer_graph, infer_node
from .registry import KINDS, REGISTRY, InferContext, OpDef, op_kind

__all__ = ["KINDS", "MAX_ELEMENTS", "REGISTRY", "InferContext", "OpDef", "ShapeEnv", "evaluate_node",
           "infer_graph", "infer_node", "op_kind"]
