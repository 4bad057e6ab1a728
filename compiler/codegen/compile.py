"""Compile one kernel: loop IR -> LLVM IR -> optimized LLVM IR -> assembly and object code.

The LLVM IR is optimized with llvmlite's new pass manager (``PassBuilder`` with
``PipelineTuningOptions(speed_level=3)``, loop and SLP vectorization on) for the target machine
(triple, CPU, features from :class:`~compiler.targets.Target`), then emitted as assembly and, for
every target, as an ELF object. Identical kernels compile once: results are cached in-process by the
SHA-256 of the printed loop IR plus the target name, and the function symbol is derived from that
hash, so two fused groups with the same loop IR share one symbol and one object.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass

from llvmlite import ir

from ..errors import CompileError
from ..loops.ir import PrimFunc
from ..loops.printer import print_func
from ..targets import Target
from .llvm_codegen import KernelCodegen


@dataclass(frozen=True)
class CompiledKernel:
    """``symbol`` (function name in ``obj``), ``llvm_ir`` before and ``llvm_ir_optimized`` after
    optimization, ``asm`` (text), ``obj`` (ELF bytes), ``compile_ms`` (wall ms of the first compile),
    ``cached`` (True when this call was served from the cache)."""

    symbol: str
    llvm_ir: str
    llvm_ir_optimized: str
    asm: str
    obj: bytes
    compile_ms: float
    cached: bool = False


_CACHE: dict[str, CompiledKernel] = {}
_LOCK = threading.Lock()
_TM: dict[str, object] = {}


def _llvm():  # type: ignore[no-untyped-def]
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def target_machine(target: Target):  # type: ignore[no-untyped-def]
    """The (cached) llvmlite TargetMachine for ``target`` at -O3, PIC, default code model."""
    if target.name not in _TM:
        llvm = _llvm()
        t = llvm.Target.from_triple(target.triple)
        _TM[target.name] = t.create_target_machine(cpu=target.cpu, features=target.features, opt=3, reloc="pic",
                                                   codemodel="default")
    return _TM[target.name]


def has_fma(target: Target) -> bool:
    """True where the target has fused multiply-add in hardware (x86 with +fma, AArch64, RISC-V F/D)."""
    feats = set(target.features.split(","))
    if target.triple.startswith("x86_64"):
        return "+fma" in feats or "+avx512f" in feats
    return True


def kernel_key(func: PrimFunc, target: Target) -> str:
    """SHA-256 (hex) of the printed loop IR and the target name: the cache key."""
    text = print_func(func).replace(f"def {func.name}(", "def _(", 1)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("    # bind:"))
    return hashlib.sha256(f"{target.name}\n{text}".encode()).hexdigest()


def compile_kernel(func: PrimFunc, target: Target) -> CompiledKernel:
    """Compile ``func`` for ``target`` (cached). Raises CompileError(stage="codegen", kernel=...)."""
    key = kernel_key(func, target)
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return CompiledKernel(hit.symbol, hit.llvm_ir, hit.llvm_ir_optimized, hit.asm, hit.obj, 0.0, True)
    t0 = time.perf_counter()
    llvm = _llvm()
    symbol = "prism_k_" + key[:16]
    try:
        mod = ir.Module(name=func.name)
        mod.triple = target.triple
        feats = frozenset(f[1:] for f in target.features.split(",") if f.startswith("+"))
        KernelCodegen(mod, func, symbol, target.vector_width_f32, fma=has_fma(target), features=feats).emit()
        text = str(mod)
        parsed = llvm.parse_assembly(text)
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
        opt = str(parsed)
        asm = tm.emit_assembly(parsed)
        obj = tm.emit_object(parsed)
    except CompileError:
        raise
    except Exception as e:  # LLVM verifier / backend errors
        raise CompileError("codegen", f"kernel {func.name}: LLVM failed: {str(e).splitlines()[0] if str(e) else e}",
                           kernel=func.name) from e
    out = CompiledKernel(symbol, text, opt, asm, obj, (time.perf_counter() - t0) * 1e3)
    with _LOCK:
        _CACHE[key] = out
    return out
