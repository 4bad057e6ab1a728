"""The one error type a user of the compiler sees.

Every failure a user can cause (a bad model, an unsupported op or attribute, a shape that cannot be
specialized, an unknown pass, a crash in generated code) becomes a :class:`CompileError`: the stage
it happened in, a one-line message, and where known the node, op, pass, kernel and attribute.
Its :meth:`CompileError.to_dict` is the payload of a ``compile.failed`` event (DESIGN.md "Events").
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any

from .events.schema import FAILURE_STAGES

#: set by the command line (compiler.cli.main): a hint in a message names its options (``--input-shape
#: x=1,3``); else, for the API and the explorer's form, the request's fields (``input_shapes={...}``)
CLI_SYNTAX: ContextVar[bool] = ContextVar("prism_cli_syntax", default=False)


def syntax(cli: str, api: str) -> str:
    """``cli`` under the command line (:data:`CLI_SYNTAX`), else ``api``: the form a hint suggests."""
    return cli if CLI_SYNTAX.get() else api


# terminal escape sequences (colour codes ONNX Runtime and LLVM print) and other control characters
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x1f\x7f-\x9f]")


def one_line(text: object) -> str:
    """``text`` as one line of plain text: escape sequences and control characters removed,
    whitespace runs (newlines included) made one space."""
    return " ".join(_CONTROL.sub(" ", str(text)).split())

#: the stages a CompileError names: the ``compile.failed`` stages of the event schema
STAGES = FAILURE_STAGES


class CompileError(Exception):
    """A failure the user can act on.

    Args:
        stage: one of :data:`STAGES`.
        message: one line, naming what is wrong (node, op, attribute, limit).
        node, op, pass_name, kernel, attribute: the place, where known.

    ``str(err)`` is the one-line message prefixed with the stage, as the CLI prints it.
    """

    def __init__(
        self,
        stage: str,
        message: str,
        *,
        node: str | None = None,
        op: str | None = None,
        pass_name: str | None = None,
        kernel: str | None = None,
        attribute: str | None = None,
    ) -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
        self.stage = stage
        self.message = one_line(message)  # always one line, no control characters
        self.node = node
        self.op = op
        self.pass_name = pass_name
        self.kernel = kernel
        self.attribute = attribute
        super().__init__(f"{stage}: {self.message}")

    def to_dict(self) -> dict[str, Any]:
        """The ``compile.failed`` payload: ``stage``, ``message`` and the known places."""
        out: dict[str, Any] = {"stage": self.stage, "message": self.message}
        for key, val in (
            ("pass", self.pass_name),
            ("node", self.node),
            ("op", self.op),
            ("kernel", self.kernel),
            ("attribute", self.attribute),
        ):
            if val is not None:
                out[key] = val
        return out
