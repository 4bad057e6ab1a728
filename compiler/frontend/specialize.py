"""Shape specialization: bind every symbolic or unknown input dim, then infer every type.

``input_shapes`` maps an input name to its full shape (``{"images": [1, 3, 320, 320]}``); a given
dim must agree with a static dim the model declares. Afterwards every value of the graph has a
static type (``compiler.ops.infer``), or the model's data-dependent output shapes stay symbolic
(e.g. NonZero). Raises CompileError(stage="shape") for an unbound dim (listing every input with
its symbolic dims and how to bind them), a rank or dim mismatch, an unknown input name, or a tensor
above the element limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import CompileError, syntax
from ..ir import Graph, TensorType
from ..ops.infer import MAX_ELEMENTS, ShapeEnv, infer_graph

InputShapes = Mapping[str, Sequence[int]]


def parse_input_shape(text: str) -> tuple[str, list[int | str]]:
    """``"images=1,3,320,320"`` -> ``("images", [1, 3, 320, 320])``; a dim may be a name given a range
    with ``--dim-range`` (``"images=N,3,224,224"``: ``compiler.frontend.dim_range``). Raises
    CompileError(stage="request")."""
    name, sep, dims = text.rpartition("=")
    if not sep or not name:
        raise CompileError("request", f"--input-shape {text!r}: expected NAME=D1,D2,... (e.g. images=1,3,320,320)")
    shape: list[int | str] = []
    for d in dims.split(",") if dims.strip() else []:
        d = d.strip()
        if d.isidentifier():
            shape.append(d)
            continue
        try:
            shape.append(int(d))
        except ValueError:
            raise CompileError("request", f"--input-shape {text!r}: dims must be integers (or a dim name with "
                               "--dim-range) separated by commas") from None
    return name, shape


def unbound_inputs(graph: Graph, input_shapes: InputShapes | None = None) -> list[tuple[str, TensorType | None]]:
    """Inputs that still have a symbolic or unknown dim after ``input_shapes``."""
    given = input_shapes or {}
    return [(v.name, v.type) for v in graph.inputs
            if v.name not in given and (v.type is None or not v.type.is_static)]


def _hint(graph: Graph, input_shapes: InputShapes | None) -> str:
    parts = []
    examples_cli, examples_py = [], []
    for v in graph.inputs:
        shape = v.type.shape if v.type is not None else None
        if shape is None:
            parts.append(f"{v.name}: rank unknown")
            example = ["<dims>"]
        else:
            syms = [f"dim {i} ({d})" for i, d in enumerate(shape) if not isinstance(d, int)]
            if not syms or (input_shapes and v.name in input_shapes):
                continue
            parts.append(f"{v.name}: [{', '.join(str(d) for d in shape)}] with unbound " + ", ".join(syms))
            example = [str(d) if isinstance(d, int) else f"<{d if d != '?' else f'dim{i}'}>"
                       for i, d in enumerate(shape)]
        examples_cli.append(f"--input-shape {v.name}={','.join(example)}")
        examples_py.append(f'"{v.name}": [{", ".join(example)}]')
    return "; ".join(parts) + ". Bind them with " + syntax(" ".join(examples_cli), f"input_shapes={{{', '.join(examples_py)}}}")


def bind_input_shapes(graph: Graph, input_shapes: InputShapes | None, *, stage: str = "shape") -> dict[str, list[int]]:
    """Check ``input_shapes`` against the inputs and return every input's full static shape.

    Does not modify the graph. Raises CompileError (with ``stage``) as described in the module.
    """
    given = dict(input_shapes or {})
    names = [v.name for v in graph.inputs]
    for name in given:
        if name not in names:
            const = " (it is an initializer, a constant)" if name in graph.constants else ""
            raise CompileError(stage, f"input_shapes names {name!r}, which is not a model input{const}; "
                               f"inputs: {', '.join(names) or 'none'}")
    bound: dict[str, list[int]] = {}
    for v in graph.inputs:
        declared = v.type.shape if v.type is not None else None
        if v.name in given:
            shape = [int(d) for d in given[v.name]]
            if declared is not None and len(declared) != len(shape):
                raise CompileError(stage, f"input {v.name!r} has rank {len(declared)} "
                                   f"[{', '.join(str(d) for d in declared)}], but input_shapes gives {shape}")
            for i, d in enumerate(shape):
                if d < 0:
                    raise CompileError(stage, f"input {v.name!r}: dim {i} is {d}; dims must be >= 0")
                if declared is not None and isinstance(declared[i], int) and declared[i] != d:
                    raise CompileError(stage, f"input {v.name!r}: dim {i} is {declared[i]} in the model, "
                                       f"but input_shapes gives {d}")
            bound[v.name] = shape
        elif declared is not None and all(isinstance(d, int) for d in declared):
            bound[v.name] = [int(d) for d in declared]  # type: ignore[arg-type]
    if len(bound) != len(graph.inputs):
        raise CompileError(stage, "unbound input dims: " + _hint(graph, given))
    for name, shape in bound.items():
        n = 1
        for d in shape:
            n *= d
        if n > MAX_ELEMENTS:
            raise CompileError(stage, f"input {name!r} of shape {shape} has {n} elements, above the limit of "
                               f"{MAX_ELEMENTS} per tensor")
    return bound


def specialize(graph: Graph, input_shapes: InputShapes | None = None) -> ShapeEnv:
    """Bind the input shapes (see :func:`bind_input_shapes`) and infer every type, in place."""
    bound = bind_input_shapes(graph, input_shapes)
    for v in graph.inputs:
        assert v.type is not None or v.name in bound
        elem = v.type.elem_type if v.type is not None else 1
        v.type = TensorType(elem, tuple(bound[v.name]))
    return infer_graph(graph)
