"""legalize-narrow-types: narrow element types (float16, bfloat16, float8, float4, int4, int2 ...)
as storage types computed in a wider compute type, on the ONNX model (level ``onnx``).

The code generator computes in float32/float64 and 8..64-bit integers. Like XLA's float
normalization and TVM's BF16 legalization, every tensor of a narrow type gets its compute type
(float32; int8/uint8 for int4/int2), initializers and ``Constant`` values are decoded exactly, and
each node output whose ONNX type is narrow is followed by a ``prism.NarrowCast`` rounding it to the
format (float16 is rounded once, where it leaves the graph). The rules are
``compiler.frontend.narrow_types``'s. A model without narrow types is left as it is. The pass changes
the graph inputs' and outputs' types: the driver feeds and compares them in their storage types
(``compiler.runtime.narrow_io``), and ``ctx.artifacts.rounding_steps`` counts the rounding steps.
"""

from __future__ import annotations

from collections import Counter

from onnx import ModelProto

from ..frontend.narrow_types import legalize, uses_narrow_types
from ..ops.narrow import BY_ELEM, DOMAIN, OP
from .base import ModelPass, ModelPassResult, PassContext, register


def narrow_values(model: ModelProto) -> Counter[str]:
    """Graph inputs, outputs, value_infos and initializers of a narrow type, per type name."""
    g = model.graph
    elems = [vi.type.tensor_type.elem_type for vi in [*g.input, *g.output, *g.value_info]
             if vi.type.WhichOneof("value") == "tensor_type"] + [t.data_type for t in g.initializer]
    return Counter(BY_ELEM[e] for e in elems if e in BY_ELEM)


@register
class LegalizeNarrowTypes(ModelPass):
    """Compute narrow storage types in wider compute types (see module docstring)."""

    name = "legalize-narrow-types"
    changes_interface = True

    def run(self, model: ModelProto, ctx: PassContext) -> ModelPassResult:
        if not uses_narrow_types(model):
            return ModelPassResult(False, model=model)
        found = narrow_values(model)
        out = legalize(model)
        steps = sum(1 for n in out.graph.node if n.op_type == OP and n.domain == DOMAIN)
        ctx.artifacts.rounding_steps = steps
        kinds = ", ".join(f"{k} ×{v}" for k, v in sorted(found.items()))
        remark = self.remark("applied", f"legalized narrow storage types ({kinds or 'in node attributes'}) to their "
                             f"compute types with {steps} prism.NarrowCast rounding step(s)", [],
                             types=dict(found), rounding_steps=steps)
        return ModelPassResult(True, [remark], {"rounding_steps": steps}, model=out)
