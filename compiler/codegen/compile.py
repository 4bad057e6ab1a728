"""Compile one kernel: loop IR -> LLVM IR -> optimized LLVM IR -> assembly and object code.

The LLVM IR is optimized with llvmlite's new pass manager (``PassBuilder`` with
``PipelineTuningOptions(speed_level=3)``, loop and SLP vectorization on) for the target machine
(triple, CPU, features from :class:`~compiler.targets.Target`), then emitted as assembly and, for
every target, as an ELF object. Identical kernels compile once: results are cached in-process by the
SHA-256 of the printed loop IR plus the target name, and the function symbol is derived from that
hash, so two fused groups with the same loop IR share one symbol and one object.

The cache (:func:`kernel_cache`) is a bounded LRU (``compiler.codegen.cache``) holding at most
``PRISM_KERNEL_CACHE_BYTES`` of object code and texts (default 256 MiB), shared by the threads of a
process; two threads compiling the same kernel at once compile it once. Under it, a miss looks in the
on-disk cache shared by every process (``compiler.codegen.disk_cache``: keyed by the kernel's LLVM IR,
the target and the LLVM options and versions; ``PRISM_KERNEL_CACHE=0`` turns it off), so a compiling
child process (``compiler.isolated_compile``) does not optimize again what an earlier one did. Entry,
batch and loop functions (:func:`emit_function_object`) go through the disk cache too. The target
machines are created once per target and thread.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from llvmlite import ir

from ..errors import CompileError
from ..loops.ir import PrimFunc
from ..loops.printer import ORIGIN_PREFIX, print_func
from ..targets import Target
from ..version import __version__
from .cache import LRUCache, kernel_cache_limit
from .debuginfo import asm_line_map, llvm_line_map
from .disk_cache import DiskCache, disk_cache, entry_key
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


#: how kernels are optimized and emitted (:func:`target_machine`, :func:`_optimize_and_emit`): part of the disk
#: cache's key, so change it with them
KERNEL_OPTIONS = "tm opt=3 reloc=pic codemodel=default; newpm speed_level=3 loop-vectorize slp-vectorize loop-unroll"
#: likewise for :func:`emit_function_object` (no module passes)
FUNCTION_OPTIONS = "tm opt=3 reloc=pic codemodel=default; no module passes"

log = logging.getLogger(__name__)
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
    :func:`target_machine` (no module optimization: entry, batch and loop functions are lists of calls),
    or read from :func:`~compiler.codegen.disk_cache.disk_cache` (and stored there when emitted).
    Raises CompileError(stage="codegen") naming ``what`` when building, verifying or emitting fails."""
    llvm = _llvm()
    disk = disk_cache()
    try:
        text = build_ir()
        dkey = _disk_key("function", text, target, FUNCTION_OPTIONS) if disk is not None else ""
        parts = disk.get(dkey) if disk is not None else None
        if parts is not None and len(parts) == 1:
            return parts[0]
        mod = llvm.parse_assembly(text, context=llvm.create_context())  # a context per module: see _compile
        mod.verify()
        tm = target_machine(target)
        mod.data_layout = str(tm.target_data)
        obj = bytes(tm.emit_object(mod))
        if disk is not None:
            disk.put(dkey, [obj])
        return obj
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
    """``func`` compiled, or read from :func:`~compiler.codegen.disk_cache.disk_cache` (:func:`_from_disk`;
    a hit has ``cached`` True and ``compile_ms`` 0.0); a compiled one is stored there."""
    t0 = time.perf_counter()
    symbol = "prism_k_" + key[:16]
    disk = disk_cache()  # a malformed PRISM_KERNEL_CACHE_DISK_BYTES raises ValueError naming it
    try:
        text, found = _from_disk(disk, func, target, key, texts) if disk is not None else ("", None)
        cached = found is not None
        if found is not None:
            opt, asm, obj = found
        else:
            text = text or _kernel_ir(func, target, symbol)
            opt, asm, obj = _optimize_and_emit(text, target, texts)
            if disk is not None:
                _to_disk(disk, target, key, texts, text, (opt, asm, obj))
    except CompileError:
        raise
    except Exception as e:  # LLVM verifier / backend errors (llvmlite raises RuntimeError with LLVM's text)
        detail = str(e).splitlines()[0] if str(e) else repr(e)
        if not isinstance(e, RuntimeError):  # not LLVM's words: name the exception (a KeyError said only "108")
            detail = f"{type(e).__name__}: {detail}"
            log.warning("kernel %s: code generation raised %s", func.name, type(e).__name__, exc_info=True)
        raise CompileError("codegen", f"kernel {func.name}: LLVM failed: {detail}", kernel=func.name) from e
    ms = 0.0 if cached else (time.perf_counter() - t0) * 1e3
    if not texts:
        return CompiledKernel(symbol, "", "", "", obj, ms, cached=cached)
    return CompiledKernel(symbol, text, opt, asm, obj, ms, cached=cached, asm_lines=tuple(asm_line_map(asm)),
                          llvm_ir_lines=tuple(llvm_line_map(text)), llvm_ir_optimized_lines=tuple(llvm_line_map(opt)))


def _kind(texts: bool) -> str:
    return "kernel" if texts else "kernel-object"


def _index_key(target: Target, key: str, texts: bool) -> str:
    """The key of the index entry that names the disk entry of the loop-IR kernel ``key``: it holds for this
    compiler's code only (``compiler.version``: a hash of every compiler source file, the LLVM IR builder
    included) and this target's triple, CPU, features and vector width."""
    return hashlib.sha256("\n".join(("prism-kernel-index", _kind(texts), __version__, key, target.triple, target.cpu,
                                      target.features, str(target.vector_width_f32))).encode()).hexdigest()


def _from_disk(disk: DiskCache, func: PrimFunc, target: Target, key: str,
               texts: bool) -> tuple[str, tuple[str, str, bytes] | None]:
    """``(LLVM IR text, (optimized IR, assembly, object) or None)`` from the disk cache. The index (keyed by
    the loop IR and this compiler's version, :func:`_index_key`) names the entry without building the
    LLVM IR (3.5 of light_resnet50's 8.8 s of CPU with every kernel on disk, measured); without it the IR is
    built and its own key looked up. The text is "" when it was not built and no entry was found."""
    ikey, kind = _index_key(target, key, texts), _kind(texts)
    index = disk.index.get(ikey)
    named = index[0].decode() if index is not None and len(index) == 1 else ""
    parts = disk.get(named) if named else None
    if parts is None:
        text = _kernel_ir(func, target, "prism_k_" + key[:16])
        dkey = _disk_key(kind, text, target, KERNEL_OPTIONS)
        parts = disk.get(dkey) if dkey != named else None
        if parts is None:
            return text, None
        disk.index.put(ikey, [dkey.encode()])
    if len(parts) != (4 if texts else 1):
        return "", None
    if not texts:
        return "", ("", "", parts[0])
    return parts[0].decode(), (parts[1].decode(), parts[2].decode(), parts[3])


def _to_disk(disk: DiskCache, target: Target, key: str, texts: bool, text: str,
             out: tuple[str, str, bytes]) -> None:
    """Store a compiled kernel (its LLVM IR ``text`` and ``out``) and its index entry (:func:`_from_disk`)."""
    opt, asm, obj = out
    dkey = _disk_key(_kind(texts), text, target, KERNEL_OPTIONS)
    disk.put(dkey, [text.encode(), opt.encode(), asm.encode(), obj] if texts else [obj])
    disk.index.put(_index_key(target, key, texts), [dkey.encode()])


def _kernel_ir(func: PrimFunc, target: Target, symbol: str) -> str:
    """The LLVM IR text of ``func`` as the function ``symbol`` for ``target`` (before optimization)."""
    mod = ir.Module(name=func.name)
    mod.triple = target.triple
    feats = frozenset(f[1:] for f in target.features.split(",") if f.startswith("+"))
    KernelCodegen(mod, func, symbol, target.vector_width_f32, fma=has_fma(target), features=feats).emit()
    return str(mod)


def _optimize_and_emit(text: str, target: Target, texts: bool) -> tuple[str, str, bytes]:
    """``(optimized LLVM IR, assembly, object)`` of the LLVM IR ``text`` (:data:`KERNEL_OPTIONS`); the two
    texts are empty when ``texts`` is False."""
    llvm = _llvm()
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
    return opt, asm, bytes(tm.emit_object(parsed))


def _disk_key(kind: str, text: str, target: Target, options: str) -> str:
    """The disk cache's key of the LLVM IR ``text`` compiled for ``target`` with ``options``."""
    version = ".".join(map(str, _llvm().llvm_version_info))
    return entry_key(kind, text, target.triple, target.cpu, target.features, options, version)
