"""Helpers: the ONNX backend node test cases as (model with inputs bound as constants, expected
output arrays). The expected outputs come from the ONNX package (the spec's reference outputs)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.case.node import collect_testcases


@functools.lru_cache(maxsize=1)
def node_cases() -> list[Any]:
    return list(collect_testcases())


def bind_inputs(model: onnx.ModelProto, inputs: list[Any]) -> onnx.ModelProto | None:
    """A copy of ``model`` whose graph inputs are initializers holding ``inputs`` (None if an input
    is not a tensor)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    if len(inputs) != len(g.input):
        return None
    for vi, val in zip(list(g.input), inputs, strict=True):
        if not isinstance(val, np.ndarray):
            return None
        g.initializer.append(numpy_helper.from_array(val, vi.name))
    del g.input[:]
    return m
