"""The ``check`` call of the loop IR (``compiler.runtime.faults``): ``check(value, bad, code)`` is
``value``; where ``bad`` holds in a lane that is stored (``mask``: the lane mask of the store being
emitted, None outside a masked store), ``code`` is written to the external ``i64 @prism_fault`` in a
cold block. ``value``, ``bad`` and ``code`` come evaluated, with equal lanes."""

from __future__ import annotations

from llvmlite import ir

SYMBOL = "prism_fault"  # compiler.runtime.faults.SYMBOL (codegen does not import the runtime)
I64 = ir.IntType(64)


def emit_check(m: ir.Module, B: ir.IRBuilder, value: ir.Value, bad: ir.Value, code: ir.Value,
               mask: ir.Value | None) -> ir.Value:
    if isinstance(bad.type, ir.VectorType):
        if mask is not None and mask.type == bad.type:
            bad = B.and_(bad, mask)
        lanes = bad.type.count
        bad = B.icmp_unsigned("!=", B.bitcast(bad, ir.IntType(lanes)), ir.IntType(lanes)(0))
        code = B.extract_element(code, ir.IntType(32)(0))
    word = m.globals.get(SYMBOL) or ir.GlobalVariable(m, I64, SYMBOL)
    with B.if_then(bad, likely=False):
        B.store(code if code.type == I64 else B.sext(code, I64), word)
    return value


def fault_word_ir(triple: str) -> str:
    """A module defining ``@prism_fault`` (zero), for code linked outside the runtime (a relocatable
    object or a shared library of the kernels, ``compiler.artifacts`` and ``compiler.standalone``):
    their kernels' checks write it, and a caller may read it after a run."""
    return f'target triple = "{triple}"\n@{SYMBOL} = global i64 0\n'
