"""Which ONNX nodes each loop-IR statement computes (issue 15 item 2: provenance line by line).

Lowering a group (``compiler.loops.lower``) inlines elementwise nodes into their consumers, so one
statement may compute several ONNX nodes; it records, per buffer the lowering writes, the nodes
inlined into what is stored there (``LoweredKernel.writes``: a group output ``outN``, a materialized
intermediate ``tmpN``, a sequential op's output), and which nodes reduce (``LoweredKernel.anchors``:
Conv, MatMul, pools, reductions, sequential ops). Schedules then rebuild the loop nests (split,
vectorize, micro-kernels with accumulators, im2col and packing buffers) but keep the buffers the
lowering named, so after scheduling:

- a :class:`~compiler.loops.ir.Store` into a buffer the lowering wrote computes that buffer's nodes
  (a Conv's epilogue store into ``out0``: the Conv, its bias Add and the Relu);
- a store into any other buffer (a schedule's accumulator, packed panel, im2col or padding buffer;
  a reduction's running value) is work of the group's reducing nodes (the Conv alone), or of all the
  group's nodes when it has none;
- a loop, ``if`` or allocation computes what the statements inside it compute.

:func:`line_nodes` gives that per line of the kernel's printed loop IR (``print_func``), the text the
debug locations of its LLVM IR and assembly point at (``compiler.codegen.debuginfo``), so every
instruction maps through its loop-IR line to ONNX nodes. Model: Compiler Explorer's source-to-asm
line colouring, with ONNX nodes as the source.
"""

from __future__ import annotations

from .ir import Allocate, For, If, PrimFunc, Seq, Stmt, Store
from .printer import print_func, statement_lines


def statement_nodes(func: PrimFunc, writes: dict[str, set[int]], anchors: set[int], n_nodes: int
                    ) -> dict[int, set[int]]:
    """id(statement) -> indices (into the kernel's ``n_nodes`` ONNX nodes) of the nodes it computes,
    for every statement of ``func.body`` (rules in the module docstring)."""
    fallback = set(anchors) if anchors else set(range(n_nodes))
    out: dict[int, set[int]] = {}

    def walk(s: Stmt) -> set[int]:
        if isinstance(s, Store):
            got = set(writes.get(s.buf.name, fallback))
        elif isinstance(s, Seq):
            got = set().union(*(walk(x) for x in s.stmts))
        elif isinstance(s, For | Allocate):
            got = walk(s.body)
        elif isinstance(s, If):
            got = walk(s.then)
        else:
            raise TypeError(type(s))
        out[id(s)] = got
        return got

    walk(func.body)
    return out


def line_nodes(func: PrimFunc, writes: dict[str, set[int]], anchors: set[int], n_nodes: int) -> list[list[int]]:
    """Per line of ``print_func(func)`` (the same count of lines as its ``split("\\n")``), the sorted
    indices of the ONNX nodes that line's statement computes; ``[]`` for the header and comment
    lines, which are no statement."""
    text = print_func(func).split("\n")
    out: list[list[int]] = [[] for _ in text]
    nodes = statement_nodes(func, writes, anchors, n_nodes)
    for sid, line in statement_lines(func).items():
        out[line - 1] = sorted(nodes.get(sid, set()))
    return out


__all__ = ["line_nodes", "statement_nodes"]
