"""Tuning tasks: a model's kernels grouped by workload, each with its search space.

:func:`extract_tasks` compiles a model through the graph passes (the one driver, ``backend=False``),
lowers every schedule step with the default schedule inside a knobs context
(``compiler.schedule.knobs``: the decisions the schedule asks are the search space, their defaults the
default trace) and groups the steps by workload key (``compiler.tune.workload``): a ResNet-50's 58
kernels are 32 workloads. A step is not a task when its schedule asks no knob with more than one
choice, when it cannot be described as a workload, or when one of its runtime inputs is not a float
tensor (indices drawn at random could fall out of range; such kernels keep the default).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..driver.lower import (
    SKIP_OPS,
    _kernel_name,  # the driver's kernel names: tasks name the kernels a compilation has
    graph_opset,
    lower_node,
)
from ..driver.stages import run_stages
from ..driver.state import Compilation, Request
from ..events import EventStream
from ..frontend import ModelSource
from ..ir import Graph
from ..schedule.knobs import Knob
from ..schedule.parallel import estimated_us
from ..targets import Target
from .source import kernel_source
from .workload import Untunable, describe, key_of, summary


@dataclass
class Task:
    """One workload of a model to tune.

    Attributes:
        workload, desc, summary: its key, description and one-line summary (``compiler.tune.workload``).
        kernel: the first kernel of the model with this workload; kernels: all of them.
        node: that kernel's schedule step (graph IR); opset: the model's default-domain opset.
        knobs: the decisions its default schedule asked (name, default, choices), in order.
        estimated_us: the default schedule's single-thread estimate (``flops``/``bytes``, µs) x kernels.
    """

    workload: str
    desc: dict[str, Any]
    summary: str
    kernel: str
    node: Any
    opset: int
    knobs: list[Knob]
    estimated_us: float
    kernels: list[str] = field(default_factory=list)
    _source: dict[str, Any] | None = None

    @property
    def space_size(self) -> int:
        return math.prod(len(k.choices) for k in self.knobs)

    @property
    def default_trace(self) -> dict[str, Any]:
        return {k.name: k.default for k in self.knobs}

    def source(self) -> dict[str, Any]:
        """The kernel source of its measurement requests (``compiler.tune.source``), made once."""
        if self._source is None:
            self._source = kernel_source(self.node, self.opset, self.kernel)
        return self._source


def compile_graph(model: ModelSource, *, target: str = "host", pipeline: str = "O2",
                  input_shapes: Mapping[str, Sequence[Any]] | None = None) -> tuple[Graph, Target]:
    """``model`` through the driver's stages up to the graph passes: (graph IR, target). Raises
    CompileError as the driver does."""
    req = Request(model, target=target, pipeline=pipeline, input_shapes=input_shapes, verify=False, benchmark=False,
                  backend=False, kernel_events=False)
    comp = Compilation(req, EventStream(None))
    run_stages(comp)
    if comp.graph is None or comp.target is None:
        raise ValueError("the model is compiled in parts (run-time control flow or a dim range): not tunable")
    return comp.graph, comp.target


def _float_inputs(node: Any) -> bool:
    return all(v is None or v.const is not None or (v.type is not None and v.type.short in ("f32", "f64"))
               for v in node.inputs)


def extract_tasks(graph: Graph, target: Target) -> tuple[list[Task], int]:
    """The tasks of ``graph`` (module docstring), largest ``estimated_us`` first, and the number of
    kernels of the model."""
    opset = graph_opset(graph)
    used: set[str] = set()
    tasks: dict[str, Task] = {}
    n = 0
    for node in graph.nodes:
        if node.op_type in SKIP_OPS:
            continue
        name = _kernel_name(node, used)
        n += 1
        lk, ctx = lower_node(node, name, opset, target)
        knobs = [k for k in ctx.seen.values() if len(k.choices) > 1]
        if not knobs or not _float_inputs(node):
            continue
        try:
            desc = describe(node, target)
        except Untunable:
            continue
        key = key_of(desc)
        est = estimated_us(lk.func)
        if key in tasks:
            tasks[key].kernels.append(name)
            tasks[key].estimated_us += est
            continue
        tasks[key] = Task(key, desc, summary(desc), name, node, opset, knobs, est, [name])
    return sorted(tasks.values(), key=lambda t: -t.estimated_us), n


__all__ = ["Task", "compile_graph", "extract_tasks"]
