"""Debug locations for generated kernels: LLVM IR ``!dbg`` pointing at loop-IR lines, and back.

Each kernel module gets one ``DICompileUnit`` (line tables only, so the object code carries a
``.debug_line`` table and no type information), one ``DIFile`` standing for the kernel's printed loop
IR (``compiler.loops.printer.print_func``) and one ``DISubprogram`` per function (the kernel and each
outlined parallel task). :class:`DebugInfo` hands :class:`~compiler.codegen.llvm_codegen.KernelCodegen`
a ``DILocation`` for the loop-IR line of the statement being emitted; LLVM carries it through its
passes onto the machine instructions, which the assembly printer marks with ``.loc 1 LINE COL``
directives (line 0: no source line, e.g. code LLVM merged from several statements).

:func:`asm_line_map` and :func:`llvm_line_map` read those locations back: for each line of the
assembly / LLVM IR text, the loop-IR line (1-based) it came from, or 0. The loop-IR line numbers are
those of ``print_func``'s text, which the loop-IR pane shows; kernels with the same cache key print
the same lines, so a cached kernel's map holds for every kernel sharing it. Model: DWARF line
tables as Compiler Explorer uses them to colour source against assembly.
"""

from __future__ import annotations

import re

from llvmlite import ir

from ..loops.ir import PrimFunc, Stmt
from ..loops.printer import statement_lines

I32 = ir.IntType(32)
LOOP_IR_FILE = "loop_ir"  # the DIFile's name: the printed loop IR of the kernel


class DebugInfo:
    """The debug metadata of one kernel module; ``scope`` is the subprogram of the function being
    emitted (:meth:`enter` switches it for an outlined task and returns the previous one)."""

    def __init__(self, module: ir.Module, func: PrimFunc, fn: ir.Function) -> None:
        self.m = module
        self.lines = statement_lines(func)  # id(stmt) -> loop-IR line
        self.file = module.add_debug_info("DIFile", {"filename": LOOP_IR_FILE, "directory": ""})
        self.cu = module.add_debug_info("DICompileUnit", {
            "language": ir.DIToken("DW_LANG_C"), "file": self.file, "producer": "prism",
            "isOptimized": True, "runtimeVersion": 0, "emissionKind": ir.DIToken("LineTablesOnly")}, is_distinct=True)
        self.type = module.add_debug_info("DISubroutineType", {"types": module.add_metadata([])})
        module.add_named_metadata("llvm.dbg.cu", self.cu)
        module.add_named_metadata("llvm.module.flags", module.add_metadata([I32(2), "Debug Info Version", I32(3)]))
        module.add_named_metadata("llvm.module.flags", module.add_metadata([I32(7), "Dwarf Version", I32(5)]))
        self.scope: ir.DIValue = self._subprogram(fn)
        self._locs: dict[tuple[int, int], ir.DIValue] = {}

    def _subprogram(self, fn: ir.Function) -> ir.DIValue:
        sp = self.m.add_debug_info("DISubprogram", {
            "name": fn.name, "file": self.file, "scope": self.file, "line": 1, "type": self.type,
            "isLocal": False, "isDefinition": True, "isOptimized": True, "unit": self.cu}, is_distinct=True)
        fn.set_metadata("dbg", sp)
        return sp

    def enter(self, fn: ir.Function) -> ir.DIValue:
        """Make ``fn`` (an outlined task) the current scope; returns the scope to restore."""
        prev, self.scope = self.scope, self._subprogram(fn)
        return prev

    def location(self, s: Stmt) -> ir.DIValue | None:
        """The ``DILocation`` of statement ``s`` in the current scope (None: not a printed statement,
        e.g. one rebuilt by codegen; the enclosing statement's location then stays in force)."""
        line = self.lines.get(id(s))
        if line is None:
            return None
        key = (line, id(self.scope))
        if key not in self._locs:
            self._locs[key] = self.m.add_debug_info("DILocation", {"line": line, "column": 1, "scope": self.scope})
        return self._locs[key]


_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+(?:"[^"]*"\s+)?"' + LOOP_IR_FILE + '"')
_LABEL = re.compile(r"^\s*[\w.$@]+:")


def is_instruction(line: str) -> bool:
    """An assembly line that is a machine instruction (not blank, a directive, a label or a comment)."""
    t = line.strip()
    return bool(t) and not t.startswith((".", "#", ";", "//")) and not _LABEL.match(t)


def asm_line_map(asm: str) -> list[int]:
    """For each line of ``asm`` (GNU assembler text with ``.loc`` directives), the loop-IR line the
    instruction on it came from: ``N`` where its ``.loc`` names line N; ``-N`` where DWARF says line 0
    (code LLVM hoisted out of a loop or merged from several statements, and the frame setup) and the
    next located instruction of the same function is at line N (else the previous one): attributed,
    not exact; 0 for non-instruction lines and a function with no located instruction at all."""
    files: set[str] = set()
    cur = 0
    out: list[int] = []
    funcs: list[list[int]] = [[]]  # indices of each function's instructions
    for i, line in enumerate(asm.split("\n")):
        m = _LOC.match(line)
        f = None if m else _FILE.match(line)
        if m:
            cur = int(m.group(2)) if m.group(1) in files else 0
        elif f:
            files.add(f.group(1))
        elif line.startswith(".Lfunc_end"):
            cur = 0
            funcs.append([])
        out.append(cur if not m and is_instruction(line) else 0)
        if out[-1] or (not m and is_instruction(line)):
            funcs[-1].append(i)
    for idx in funcs:
        _attribute(out, idx)
    return out


def _attribute(out: list[int], idx: list[int]) -> None:
    """Give the line-0 instructions at ``idx`` (one function's) -next located line (else -previous)."""
    nxt = 0
    for i in reversed(idx):
        nxt = out[i] if out[i] > 0 else nxt
        if out[i] == 0:
            out[i] = -nxt
    prev = 0
    for i in idx:
        prev = out[i] if out[i] > 0 else prev
        if out[i] == 0:
            out[i] = -prev


_DILOC = re.compile(r"^!(\d+) = (?:distinct )?!DILocation\([^)]*?\bline: (\d+)")
_DBG = re.compile(r"!dbg !(\d+)\s*$")


def llvm_line_map(text: str) -> list[int]:
    """For each line of LLVM IR ``text``, the loop-IR line of its ``!dbg`` location, or 0."""
    lines = text.split("\n")
    loc = {m.group(1): int(m.group(2)) for m in map(_DILOC.match, lines) if m}
    out = []
    for line in lines:
        m = None if line.startswith("!") else _DBG.search(line)
        out.append(loc.get(m.group(1), 0) if m else 0)
    return out
