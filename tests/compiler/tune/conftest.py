"""Fixtures shared by the tuning tests."""

from __future__ import annotations

import pytest

from compiler.tune.tasks import compile_graph, extract_tasks
from tests.compiler.tune.models import matmul_relu


@pytest.fixture(scope="module")
def matmul_task():  # type: ignore[no-untyped-def]
    """The one tuning task of ``matmul_relu()`` (a MatMul+Relu kernel) on the host."""
    g, target = compile_graph(matmul_relu())
    tasks, _ = extract_tasks(g, target)
    return tasks[0]
