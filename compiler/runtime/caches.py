"""This machine's data caches as Linux reports them (``/sys/devices/system/cpu/cpu0/cache/index*``):
per level, the size of one instance in bytes and how many CPUs share it. The roofline's cache ceilings
(``compiler.runtime.ceilings``) size their working sets from these; the source of the figures is the
kernel's cacheinfo (``Documentation/ABI/testing/sysfs-devices-system-cpu``: ``level``, ``type``,
``size`` such as ``512K``, ``shared_cpu_list`` such as ``0-1,4``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class Cache:
    """One cache level: ``size`` bytes per instance, shared by ``shared_cpus`` logical CPUs."""

    level: int
    size: int
    shared_cpus: int


def _size(text: str) -> int:
    t = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    return int(t.rstrip("KMG")) * mult


def _cpus(text: str) -> int:
    n = 0
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def data_caches(root: Path = SYSFS) -> dict[int, Cache]:
    """Level -> :class:`Cache` for the data and unified caches of CPU 0 (``{}`` where Linux says nothing,
    e.g. another OS or a container hiding sysfs; a malformed entry is skipped)."""
    out: dict[int, Cache] = {}
    for d in sorted(root.glob("index*")) if root.is_dir() else []:
        try:
            if (d / "type").read_text().strip() not in ("Data", "Unified"):
                continue
            level = int((d / "level").read_text())
            out[level] = Cache(level, _size((d / "size").read_text()), _cpus((d / "shared_cpu_list").read_text()))
        except (OSError, ValueError):
            continue
    return out
