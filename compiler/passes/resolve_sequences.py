"""resolve-sequences: sequence and optional values resolved at compile time into tensors, on the
ONNX model (level ``onnx``).

Prism's graph IR holds tensors only. As TVM's ONNX frontend does for static lists, a sequence whose
length and positions are known at compile time becomes a list of tensor names and an optional is
present or absent: ``SequenceConstruct``/``Insert``/``Erase``/``At``/``Length``, ``SplitToSequence``,
``ConcatFromSequence``, ``SequenceMap``, ``Optional``/``OptionalHasElement``/``OptionalGetElement``
become ``Identity``, ``Split``, ``Concat``, ``Constant`` or inlined bodies (``compiler.frontend.
sequences`` has the rules); a sequence graph output becomes its element outputs. Left alone, with a
``missed`` remark saying why: a sequence whose positions or length depend on the data, or on
control flow not resolved yet (inline-control-flow may resolve it in the next round). With
``final=true`` such a leftover fails the compilation naming the node and the reason. First, a Loop
that appends one tensor per iteration to a sequence stacked after it gets a scan output instead
(``compiler.frontend.loop_sequences``: the length is the run-time trip count).
"""

from __future__ import annotations

from onnx import ModelProto

from ..frontend.loop_sequences import sequence_loops_to_scans
from ..frontend.sequence_ops import SEQ_OPS, _label
from ..frontend.sequences import resolve_sequences
from .base import ModelPass, ModelPassResult, Option, PassContext, register
from .model_ir import op_counts


@register
class ResolveSequences(ModelPass):
    """Resolve compile-time sequences and optionals into tensors (see module docstring)."""

    name = "resolve-sequences"
    options = (Option("final", bool, False, "fail naming the node when a sequence or optional value is left"),)

    def run(self, model: ModelProto, ctx: PassContext) -> ModelPassResult:
        kept: dict[str, str] = {}
        scans, loops = sequence_loops_to_scans(model)
        out = resolve_sequences(scans, final=bool(self.opts["final"]), kept=kept)
        before, after = op_counts(model), op_counts(out)
        gone = {op: before[op] - after[op] for op in SEQ_OPS if before[op] > after[op]}
        remarks = [self.remark("applied", f"Loop '{n}': the sequence it appends to once per iteration and stacks "
                               "after it (ConcatFromSequence new_axis=1) became a scan output", [n]) for n in loops]
        if gone:
            what = ", ".join(f"{op} ×{k}" for op, k in gone.items())
            remarks.append(self.remark("applied", f"resolved {sum(gone.values())} sequence/optional node(s) into "
                                       f"tensors ({what})", [], resolved=gone))
        flat = [o.name for o in model.graph.output if o.type.WhichOneof("value") != "tensor_type"]
        if flat and out is not model:
            remarks.append(self.remark("applied", f"sequence/optional graph output(s) {', '.join(flat)} became their "
                                       f"element outputs ({len(out.graph.output)} tensor outputs)", flat,
                                       outputs=len(out.graph.output)))
        left = {_label(x) for x in out.graph.node}
        remarks += [self.remark("missed", f"'{n}' left in place: {why}", [n]) for n, why in kept.items() if n in left]
        return ModelPassResult(out is not model, remarks, {"resolved": sum(gone.values())}, model=out)
