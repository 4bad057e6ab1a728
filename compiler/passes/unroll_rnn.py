"""unroll-rnn: LSTM, GRU and RNN nodes unrolled over their static sequence length into standard
ONNX ops, on the ONNX model (level ``onnx``).

A recurrence is not one loop-IR kernel (step ``t`` reads the state step ``t - 1`` wrote), so each
recurrent node becomes, per direction and time step, the Gemms of the step input with ``W`` and of
the previous hidden state with ``R``, the bias, the gate slices, the activations and the state
update, the step outputs stacked with ``Unsqueeze`` + ``Concat``; fuse-ops then fuses each step's
elementwise tail into its Gemm. The ONNX specs' equations term by term (``compiler.frontend.
unroll_rnn`` lists the attributes it honours). Left alone, with a ``missed`` remark: a node whose X,
W or R shape is not static. An unsupported attribute (``input_forget=1``, ``sequence_lens`` with a
reverse direction) fails the compilation naming the node.
"""

from __future__ import annotations

from typing import Any

from onnx import ModelProto

from ..errors import CompileError
from ..frontend.unroll_rnn import unroll_rnns
from .base import ModelPass, ModelPassResult, PassContext, register


@register
class UnrollRnn(ModelPass):
    """Unroll LSTM/GRU/RNN over their static sequence length (see module docstring)."""

    name = "unroll-rnn"

    def run(self, model: ModelProto, ctx: PassContext) -> ModelPassResult:
        decisions: list[dict[str, Any]] = []
        try:
            out = unroll_rnns(model, decisions)
        except ValueError as exc:
            raise CompileError("import", str(exc)) from None
        remarks = []
        for d in decisions:
            node = d.pop("node")
            if d["unrolled"]:
                dirs = f"{d['directions']} direction{'s' if d['directions'] > 1 else ''}"
                remarks.append(self.remark(
                    "applied", f"unrolled {d['op']} '{node}': {d['steps']} steps, {dirs} ({d['direction']}), "
                    f"hidden size {d['hidden_size']}, batch {d['batch']}: {d['new_nodes']} nodes", [node], **d))
            else:
                remarks.append(self.remark("missed", f"{d['op']} '{node}' not unrolled: {d['reason']}", [node], **d))
        return ModelPassResult(out is not model, remarks, {"unrolled": sum(bool(d["unrolled"]) for d in decisions)},
                               model=out)
