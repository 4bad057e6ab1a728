"""Code generation targets: an LLVM triple, a CPU name and its features.

A :class:`Target` says what LLVM compiles for and whether this machine can run the code. ``host``
is this CPU as LLVM sees it (``llvm.get_host_cpu_name()`` / ``get_host_cpu_features()``); the
``x86-64-v2``/``-v3``/``-v4`` psABI micro-architecture levels run only where the host has their
features (otherwise :func:`check_runnable` refuses them before any work); ``aarch64`` (Neoverse V1)
and ``riscv64`` (rv64gcv) are cross targets: LLVM IR and assembly only, not timed on this worker.

``vector_width_f32`` is the number of f32 lanes the default schedules vectorize with (16 on AVX-512,
8 on AVX2, 4 on SSE/NEON; 4 on RVV here, as LLVM's fixed-length lowering of rv64gcv's minimum VLEN
of 128 bits). Semantics of the levels: the x86-64 psABI, "Micro-architecture levels".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import CompileError

_V2 = ("cx16", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3")
_V3 = _V2 + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
CODE_ONLY = "code only: not timed on this worker"


@dataclass(frozen=True)
class Target:
    """A compilation target.

    Attributes:
        name: the name users pick (``host``, ``x86-64-v3``, ``aarch64`` ...).
        triple: the LLVM target triple.
        cpu: the LLVM CPU name.
        features: LLVM feature string (``+avx2,+fma``).
        vector_width_f32: f32 lanes per vector register the schedules use.
        runnable: True where code for this target runs on this machine.
        note: why a target is not runnable here, else ``""``.
        l2_bytes: the L2 cache of one core (bytes) the schedules size their blocks for: this machine's
            (``/sys/devices/system/cpu/cpu0/cache``) for the targets that run here, the CPU's for the
            cross targets (1 MiB on Neoverse V1), :data:`DEFAULT_L2_BYTES` where it cannot be read.
    """

    name: str
    triple: str
    cpu: str
    features: str
    vector_width_f32: int
    runnable: bool
    note: str = ""
    l2_bytes: int = 0

    def __post_init__(self) -> None:
        if self.l2_bytes <= 0:
            object.__setattr__(self, "l2_bytes", host_l2_bytes() if self.runnable else DEFAULT_L2_BYTES)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "triple": self.triple, "cpu": self.cpu, "features": self.features,
                "runnable": self.runnable, "note": self.note}


def _llvm() -> Any:
    import llvmlite.binding as llvm  # deferred: loading LLVM and its targets only when a target is resolved

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


DEFAULT_L2_BYTES = 1024 * 1024


@lru_cache(maxsize=1)
def host_l2_bytes() -> int:
    """This machine's per-core L2 cache (bytes) as Linux reports it (the level-2 data or unified cache
    of cpu0 under ``/sys/devices/system/cpu/cpu0/cache``); :data:`DEFAULT_L2_BYTES` where it cannot
    be read."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for d in sorted(base.glob("index*")):
            if (d / "level").read_text().strip() == "2" and (d / "type").read_text().strip() in ("Unified", "Data"):
                size = (d / "size").read_text().strip().upper()
                scale = {"K": 1024, "M": 1024 * 1024}.get(size[-1:], 1)
                return int(size.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return DEFAULT_L2_BYTES


@lru_cache(maxsize=1)
def host_features() -> frozenset[str]:
    """The features LLVM reports enabled on this CPU (without the ``+``)."""
    llvm = _llvm()
    try:
        feats = llvm.get_host_cpu_features()
        return frozenset(k for k, v in feats.items() if v)
    except RuntimeError:  # LLVM cannot query features on some hosts
        return frozenset()


def _width(features: set[str] | frozenset[str]) -> int:
    if "avx512f" in features:
        return 16
    if "avx" in features:
        return 8
    return 4


def _x86_level(name: str, feats: tuple[str, ...], cpu: str) -> Target:
    llvm = _llvm()
    missing = [f for f in feats if f not in host_features()]
    host_x86 = llvm.get_process_triple().startswith("x86_64")
    runnable = host_x86 and not missing
    note = "" if runnable else "host lacks " + ", ".join(missing or ["x86-64"])
    return Target(name, "x86_64-unknown-linux-gnu", cpu, ",".join("+" + f for f in feats), _width(set(feats)),
                  runnable, note)


@lru_cache(maxsize=1)
def _all() -> dict[str, Target]:
    llvm = _llvm()
    hf = host_features()
    host = Target("host", llvm.get_process_triple(), llvm.get_host_cpu_name(),
                  ",".join("+" + f for f in sorted(hf)), _width(hf), True)
    return {
        "host": host,
        "x86-64-v2": _x86_level("x86-64-v2", _V2, "x86-64-v2"),
        "x86-64-v3": _x86_level("x86-64-v3", _V3, "x86-64-v3"),
        "x86-64-v4": _x86_level("x86-64-v4", _V4, "x86-64-v4"),
        "aarch64": Target("aarch64", "aarch64-unknown-linux-gnu", "neoverse-v1", "+neon,+sve,+fullfp16", 4,
                          False, CODE_ONLY, 1024 * 1024),
        "riscv64": Target("riscv64", "riscv64-unknown-linux-gnu", "generic-rv64", "+m,+a,+f,+d,+c,+v", 4,
                          False, CODE_ONLY),
    }


def list_targets() -> list[dict[str, Any]]:
    """Every target as ``{name, triple, cpu, features, runnable, note}``, host first."""
    return [t.to_dict() for t in _all().values()]


def get_target(name: str) -> Target:
    """The target of that name. Raises CompileError(stage="request") for an unknown name."""
    targets = _all()
    if name not in targets:
        raise CompileError("request", f"unknown target {name!r} (valid: {', '.join(targets)})")
    return targets[name]


def check_runnable(target: Target) -> None:
    """Refuse an x86 level this host cannot run: CompileError(stage="request") naming the missing features.

    Cross targets (code only) pass: their code is emitted, never run.
    """
    if target.name.startswith("x86-64-v") and not target.runnable:
        raise CompileError("request", f"target {target.name} cannot run on this host: {target.note}")
