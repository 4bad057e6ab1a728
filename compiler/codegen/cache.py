"""A bounded, thread-safe LRU cache with a byte limit: the in-process cache of compiled kernels.

A long-lived worker compiles many models; without a bound its kernel cache would only grow. This one
holds entries up to ``max_bytes`` in total (each entry's size is given by the caller: for a kernel,
its object code plus its LLVM IR, optimized LLVM IR and assembly texts), evicting the least recently
used first. An entry larger than the whole limit is returned but not kept; ``max_bytes = 0`` keeps
nothing.

:meth:`LRUCache.get_or_create` is single-flight: when several threads ask for the same missing key,
one computes it and the others wait for its result (a failure is not cached: the next caller tries
again). The limit of the process-wide kernel cache is the setting ``PRISM_KERNEL_CACHE_BYTES``
(bytes, default :data:`DEFAULT_KERNEL_CACHE_BYTES`), read when the cache is first used
(:func:`kernel_cache`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")

#: 256 MiB: the kernels of about 45 models the size of light_resnet50 or light_squeezenet (5.3-5.4 MiB each
#: with their LLVM IR, optimized IR and assembly, measured)
DEFAULT_KERNEL_CACHE_BYTES = 256 * 1024 * 1024
ENV_KERNEL_CACHE_BYTES = "PRISM_KERNEL_CACHE_BYTES"


@dataclass(frozen=True)
class CacheStats:
    """Counters of one cache: ``entries``, ``bytes`` held, ``max_bytes``, ``hits``, ``misses``
    (computations started), ``evictions`` (entries dropped to stay under ``max_bytes``)."""

    entries: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int


class _Flight:
    """One ``create`` in progress: waiters block on ``done`` and then read ``value`` if ``ok``."""

    __slots__ = ("done", "ok", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False
        self.value: object = None


class LRUCache(Generic[V]):
    """Least-recently-used cache bounded by the total size of its entries, safe to share between threads.

    Args:
        max_bytes: the most bytes the entries may hold together (>= 0).
        size_of: an entry's size in bytes.
    Raises ValueError for a negative ``max_bytes``.
    """

    def __init__(self, max_bytes: int, size_of: Callable[[V], int]) -> None:
        if max_bytes < 0:
            raise ValueError(f"cache limit must be >= 0 bytes, got {max_bytes}")
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._entries: OrderedDict[str, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._pending: dict[str, _Flight] = {}
        self._hits = self._misses = self._evictions = 0

    def get(self, key: str) -> V | None:
        """The entry for ``key`` (now the most recently used), or None."""
        with self._lock:
            return self._get_locked(key)

    def _get_locked(self, key: str) -> V | None:
        item = self._entries.get(key)
        if item is None:
            return None
        self._entries.move_to_end(key)
        self._hits += 1
        return item[0]

    def put(self, key: str, value: V) -> None:
        """Keep ``value`` under ``key``, evicting least recently used entries to stay under the limit.
        A value larger than ``max_bytes`` is not kept (and evicts nothing)."""
        size = int(self._size_of(value))
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.max_bytes:
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
                self._evictions += 1

    def get_or_create(self, key: str, create: Callable[[], V]) -> tuple[V, bool]:
        """``(value, hit)``: the cached value for ``key`` (``hit`` True), or ``create()``'s result, kept.

        Single-flight: while one thread runs ``create`` for ``key``, others asking for it wait and take
        its result (``hit`` True for them: they compiled nothing); if ``create`` raises, the exception
        propagates to its caller only and one waiter runs ``create`` itself. ``create`` runs without
        the lock held, so different keys are created in parallel."""
        while True:
            with self._lock:
                hit = self._get_locked(key)
                if hit is not None:
                    return hit, True
                flight = self._pending.get(key)
                if flight is None:
                    flight = self._pending[key] = _Flight()
                    self._misses += 1
                    break
            flight.done.wait()
            if flight.ok:
                with self._lock:
                    self._hits += 1
                return flight.value, True  # type: ignore[return-value]  # set when ok
        try:
            value = create()
            flight.value, flight.ok = value, True
            self.put(key, value)
            return value, False
        finally:
            with self._lock:
                del self._pending[key]
            flight.done.set()

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def stats(self) -> CacheStats:
        """The counters now."""
        with self._lock:
            return CacheStats(len(self._entries), self._bytes, self.max_bytes, self._hits, self._misses,
                              self._evictions)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._entries


def kernel_cache_limit() -> int:
    """``PRISM_KERNEL_CACHE_BYTES`` as bytes (default :data:`DEFAULT_KERNEL_CACHE_BYTES`; 0 disables the
    cache). Raises ValueError naming the variable when it is not a non-negative integer."""
    raw = os.environ.get(ENV_KERNEL_CACHE_BYTES, "").strip()
    if not raw:
        return DEFAULT_KERNEL_CACHE_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{ENV_KERNEL_CACHE_BYTES}={raw!r}: expected a number of bytes >= 0")
    return value
