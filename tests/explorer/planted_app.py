"""The explorer's Celery app, in a worker whose compilations plant failures into models with planted
names (tests/explorer/planted_lowering.py), in the pool process and in the compiling child it starts
(`PRISM_COMPILE_CHILD_IMPORTS`). Every other model compiles as in a plain worker.
For tests/explorer/test_stack_crashes.py only: `celery -A tests.explorer.planted_app worker`."""

from __future__ import annotations

import os

import tests.explorer.planted_lowering  # noqa: F401 - patches the lowering of this process
from explorer.celery import app

os.environ["PRISM_COMPILE_CHILD_IMPORTS"] = "tests.explorer.planted_lowering"
__all__ = ["app"]
