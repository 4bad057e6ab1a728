"""Compile one kernel: loop IR -> LLVM IR -> optimized LLVM IR -> assembly and object code.

The LLVM IR is optimized with llvmlite's new pass manager (``PassBuilder`` with
``PipelineTuningOptions(speed_level=3)``, loop and SLP vectorization on) for the target machine
(triple, CPU, features from :class:`~compiler.targets.Target`), then emitted as assembly and, for
every target, as an ELF object. Identical kernels compile once: results are cached in-process by the
SHA-256 of the printed loop IR plus the target name, and the function symbol is derived from that
hash, so two fused groups with the same loop IR share one symbol and one object.

The cache (:func:`kernel_cache`) is a bounded LRU (``compiler.codegen.cache``) holding at most
``PRISM_KERNEL_CACHE_BYTES`` of object code and texts (default 256 MiB), shared by the threads of a
process; two threads compiling the same kernel at once compile it once. The target machines are
created once per target, under a lock.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from llvmlite import ir

from ..errors import CompileError
from ..loops.ir import PrimFunc
from ..loops.printer import ORIGIN_PREFIX, print_func
from ..targets import Target
from .cache import LRUCache, kernel_cache_limit
from .debuginfo import asm_line_map, llvm_line_map
from .llvm_codegen import KernelCodegen


@dataclass(frozen=True)
class CompiledKernel:
    """``symbol`` (function name in ``obj``), ``llvm_ir`` before and ``llvm_ir_optimized`` after
    optimization, ``asm`` (text), ``obj`` (ELF bytes), ``compile_ms`` (wall ms of the first compile),
    ``cached`` (True when this call was served from the cache); the ``*_lines`` maps give each line of
    those texts the loop-IR line (of ``print_func``'s text, 1-based; 0: none) its debug location names."""

    symbol: str
    llvm_ir: str
    llvm_ir_optimized: str
    asm: str
    obj: bytes
    compile_ms: float
    cached: bool = False
    asm_lines: tuple[int, ...] = ()  # per asm line, its loop-IR line (0: none); compiler.codegen.debuginfo
    llvm_ir_lines: tuple[int, ...] = ()  # per llvm_ir line, likewise
    llvm_ir_optimized_lines: tuple[int, ...] = ()  # per llvm_ir_optimized line, likewise


def kernel_bytes(ck: CompiledKernel) -> int:
    """What a compiled kernel holds, in bytes: its object code plus its LLVM IR, optimized LLVM IR and
    assembly texts (ASCII: one byte a character)."""
    return len(ck.obj) + len(ck.llvm_ir) + len(ck.llvm_ir_optimized) + len(ck.asm)


_KERNELS: LRUCache[CompiledKernel] | None = None
_KERNELS_LOCK = threading.Lock()
_TM = threading.local()  # per thread: {target name: TargetMachine}


def kernel_cache() -> LRUCache[CompiledKernel]:
    """The process's kernel cache, created on first use with the limit ``PRISM_KERNEL_CACHE_BYTES``
    (``compiler.codegen.cache.kernel_cache_limit``; raises ValueError for a malformed value)."""
    global _KERNELS
    with _KERNELS_LOCK:
        if _KERNELS is None:
            _KERNELS = LRUCache(kernel_cache_limit(), kernel_bytes)
        return _KERNELS


_LLVM_LOCK = threading.Lock()
_LLVM_READY: list[bool] = []


def _llvm():  # type: ignore[no-untyped-def]
    """llvmlite.binding with every target and assembly printer initialized, once per process under a
    lock: the codegen threads of a fresh process's first compilation (every compilation's, in the
    explorer's compiling child) would otherwise register LLVM's targets at the same time."""
    import llvmlite.binding as llvm  # deferred: loading LLVM costs ~100 ms, and callers that stop before codegen never need it

    with _LLVM_LOCK:
        if not _LLVM_READY:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _LLVM_READY.append(True)
    return llvm


def target_machine(target: Target):  # type: ignore[no-untyped-def]
    """The llvmlite TargetMachine for ``target`` at -O3, PIC, default code model: created once per target
    name and thread. Not shared across threads: LLVM's X86TargetMachine fills its subtarget map lazily,
    without a lock, on the first function of each attribute set (llvm/lib/Target/X86/X86TargetMachine.cpp,
    getSubtargetImpl), so two codegen threads emitting through one machine race."""
    machines = getattr(_TM, "machines", None)
    if machines is None:
        machines = _TM.machines = {}
    tm = machines.get(target.name)
    if tm is None:
        llvm = _llvm()
        t = llvm.Target.from_triple(target.triple)
        tm = machines[target.name] = t.create_target_machine(cpu=target.cpu, features=target.features, opt=3,
                                                             reloc="pic", codemodel="default")
    return tm


def emit_function_object(build_ir: Callable[[], str], target: Target, what: str) -> bytes:
    """The ELF object of the LLVM module whose text ``build_ir()`` returns, verified and emitted with
    :func:`target_machine` (no module optimization: entry, batch and loop functions are lists of calls).
    Raises CompileError(stage="codegen") naming ``what`` when building, verifying or emitting fails."""
    llvm = _llvm()
    try:
        mod = llvm.parse_assembly(build_ir(), context=llvm.create_context())  # a context per module: see _compile
        mod.verify()
        tm = target_machine(target)
        mod.data_layout = str(tm.target_data)
        return bytes(tm.emit_object(mod))
    except Exception as e:  # LLVM verifier / backend errors
        raise CompileError("codegen", f"{what}: LLVM failed: {str(e).splitlines()[0]}") from e


def has_fma(target: Target) -> bool:
    """True where the target has fused multiply-add in hardware (x86 with +fma, AArch64, RISC-V F/D)."""
    feats = set(target.features.split(","))
    if target.triple.startswith("x86_64"):
        return "+fma" in feats or "+avx512f" in feats
    return True


def kernel_key(func: PrimFunc, target: Target) -> str:
    """SHA-256 (hex) of the printed loop IR (less its bindings and origin) and the target name: the cache key."""
    text = print_func(func).replace(f"def {func.name}(", "def _(", 1)
    # bindings and origin (ONNX node names) do not change the code; the origin line's presence shifts
    # the loop-IR line numbers of the debug locations, so it stays
    text = "\n".join(line if not line.startswith("    " + ORIGIN_PREFIX) else "    # origin"
                     for line in text.splitlines() if not line.startswith("    # bind:"))
    return hashlib.sha256(f"{target.name}\n{text}".encode()).hexdigest()


def compile_kernel(func: PrimFunc, target: Target, texts: bool = True) -> CompiledKernel:
    """Compile ``func`` for ``target`` through :func:`kernel_cache` (a hit has ``cached`` True and
    ``compile_ms`` 0.0). ``texts=False`` (the tuner's measurement child, which only runs the code) emits
    the object alone: ``llvm_ir_optimized`` and ``asm`` are empty and there are no line maps (about a
    quarter of a kernel's compile time is the assembly text); such results are cached apart from the
    full ones. Raises CompileError(stage="codegen", kernel=...) when LLVM rejects it."""
    key = kernel_key(func, target)
    ck, hit = kernel_cache().get_or_create(key if texts else key + ":obj", lambda: _compile(func, target, key, texts))
    return replace(ck, compile_ms=0.0, cached=True) if hit else ck


def _compile(func: PrimFunc, target: Target, key: str, texts: bool = True) -> CompiledKernel:
    t0 = time.perf_counter()
    llvm = _llvm()
    symbol = "prism_k_" + key[:16]
    try:
        mod = ir.Module(name=func.name)
        mod.triple = target.triple
        feats = frozenset(f[1:] for f in target.features.split(",") if f.startswith("+"))
        KernelCodegen(mod, func, symbol, target.vector_width_f32, fma=has_fma(target), features=feats).emit()
        text = str(mod)
        # Its own LLVMContext: LLVM contexts are not thread-safe, and compile_all parses and optimizes two
        # kernels at a time (llvmlite's default is the one global context). The module keeps it alive.
        parsed = llvm.parse_assembly(text, context=llvm.create_context())
        parsed.verify()
        tm = target_machine(target)
        parsed.triple = target.triple
        parsed.data_layout = str(tm.target_data)
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(parsed, pb)
        opt = str(parsed) if texts else ""
        asm = tm.emit_assembly(parsed) if texts else ""
        obj = tm.emit_object(parsed)
    except CompileError:
        raise
    except Exception as e:  # LLVM verifier / backend errors
        raise CompileError("codegen", f"kernel {func.name}: LLVM failed: {str(e).splitlines()[0] if str(e) else e}",
                           kernel=func.name) from e
    ms = (time.perf_counter() - t0) * 1e3
    if not texts:
        return CompiledKernel(symbol, "", "", "", obj, ms)
    return CompiledKernel(symbol, text, opt, asm, obj, ms, asm_lines=tuple(asm_line_map(asm)),
                          llvm_ir_lines=tuple(llvm_line_map(text)), llvm_ir_optimized_lines=tuple(llvm_line_map(opt)))
