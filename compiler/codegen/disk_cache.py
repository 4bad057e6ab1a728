"""The on-disk kernel object cache: the second level under the in-process LRU (``compiler.codegen.cache``).

Every compilation of the explorer runs in a fresh child process (``compiler.isolated_compile``), whose
in-process cache starts empty; this cache keeps compiled kernels in files that every process of every
Prism stack on the machine shares, so a model compiled again (or a kernel another model shares) is read,
not optimized and emitted by LLVM again.

Entries are content-addressed: the key (:func:`entry_key`) is the SHA-256 of everything that decides the
bytes LLVM produces: the kernel's LLVM IR text, the target triple, CPU name and features, the
optimization and code-generation options, the llvmlite and LLVM versions, and :data:`FORMAT_VERSION`
(bumped whenever what an entry holds changes). The same key means the same bytes for every writer, so
concurrent writers cannot disagree, only race to write the same file.

File format (``<dir>/<key[:2]>/<key>.ko``): a 48-byte header, ``b"PRISMKO2"``, the payload's length (u64
little-endian) and its SHA-256, then the payload, zlib-compressed at level 1 (the LLVM IR and assembly
texts shrink several times): the number of parts (u32), each part's length (u64), the parts' bytes. The first part is the key itself (a renamed or misplaced file is refused). A file whose
length, digest or key does not match (truncated, corrupt, written by something else) is counted in
``corrupt``, removed and treated as a miss: the caller compiles and the entry is written again. Writes go
to a temporary file in the same folder, then ``os.replace`` (atomic on POSIX): a reader sees the old
file, the new one or none, never half of one.

A cache has an index (:attr:`DiskCache.index`, in ``<dir>/index``): a cache of its own, of small entries
that name entries of the first, under keys its user chooses (``compiler.codegen.compile``: the kernel's loop
IR and the compiler's version, so that a hit needs no LLVM IR built).

Bounded: after a process has written ``max_bytes / 16`` (and at its first write) it scans the folder and,
when the entries together exceed ``max_bytes``, removes the least recently used (oldest mtime; a hit
touches its file at most once a minute) down to 90% of it, plus temporary files older than ten minutes
(left by a writer that died). Every file-system error in reading, writing and evicting is counted in
``errors`` and otherwise ignored: the cache never fails a compilation.

Settings (read on every use): ``PRISM_KERNEL_CACHE`` (``0`` disables the disk cache; the in-process one
has its own ``PRISM_KERNEL_CACHE_BYTES``), ``PRISM_KERNEL_CACHE_DIR`` (default
``$XDG_CACHE_HOME/prism/kernels``, or ``~/.cache/prism/kernels``), ``PRISM_KERNEL_CACHE_DISK_BYTES`` (the
cap in bytes, default :data:`DEFAULT_DISK_CACHE_BYTES`). Model: ccache's and Triton's on-disk caches
(hash of the inputs that decide the output, atomic rename, size-capped LRU cleanup).
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llvmlite

#: bumped whenever what an entry holds, or how it is laid out, changes
FORMAT_VERSION = 2
#: 512 MiB: about a hundred models the size of light_resnet50 (their kernels' object code, optimized
#: LLVM IR and assembly)
DEFAULT_DISK_CACHE_BYTES = 512 * 1024 * 1024
ENV_ENABLED = "PRISM_KERNEL_CACHE"
ENV_DIR = "PRISM_KERNEL_CACHE_DIR"
ENV_MAX_BYTES = "PRISM_KERNEL_CACHE_DISK_BYTES"
SUFFIX = ".ko"
INDEX_DIR = "index"
_MAGIC = b"PRISMKO2"
_HEADER = struct.Struct("<8sQ32s")
_TMP_STALE_S = 600.0
_TOUCH_AFTER_S = 60.0


@dataclass(frozen=True)
class DiskCacheStats:
    """Counters of one :class:`DiskCache` in this process: ``hits``, ``misses`` (no valid entry),
    ``writes`` (entries written), ``corrupt`` (entries refused: bad length, digest or key), ``evictions``
    (entries removed to stay under the cap), ``errors`` (file-system errors ignored)."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    corrupt: int = 0
    evictions: int = 0
    errors: int = 0


def entry_key(kind: str, llvm_ir: str, triple: str, cpu: str, features: str, options: str,
              llvm_version: str) -> str:
    """SHA-256 (hex) of what decides an entry's bytes: ``kind`` (what the entry holds, e.g. a kernel with
    its texts or an object alone), the LLVM IR text, the target ``triple``, ``cpu`` and ``features``, the
    optimization/code-generation ``options`` (a description the caller changes with them), the version of
    the LLVM that llvmlite binds (``llvm_version``, e.g. ``"15.0.7"``), llvmlite's version and
    :data:`FORMAT_VERSION`."""
    head = "\n".join((f"prism-kernel-cache {FORMAT_VERSION}", kind, triple, cpu, features, options,
                      f"llvmlite {llvmlite.__version__}", f"llvm {llvm_version}", ""))
    h = hashlib.sha256(head.encode())
    h.update(llvm_ir.encode())
    return h.hexdigest()


def encode(key: str, parts: Sequence[bytes]) -> bytes:
    """An entry's file bytes: header, then the payload of ``key`` and ``parts``, zlib-compressed (module
    docstring)."""
    items = [key.encode(), *parts]
    raw = b"".join([struct.pack("<I", len(items)), *(struct.pack("<Q", len(p)) for p in items), *items])
    payload = zlib.compress(raw, 1)
    return _HEADER.pack(_MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload


def decode(key: str, data: bytes) -> list[bytes] | None:
    """The parts of an entry's file bytes ``data`` (less the key), or None when its magic, length, digest,
    compression, layout or key does not match."""
    if len(data) < _HEADER.size:
        return None
    magic, length, digest = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if magic != _MAGIC or length != len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        raw = zlib.decompress(payload)
    except zlib.error:
        return None
    if len(raw) < 4:
        return None
    (count,) = struct.unpack_from("<I", raw)
    offset = 4 + 8 * count
    if count < 1 or offset > len(raw):
        return None
    lengths = struct.unpack_from(f"<{count}Q", raw, 4)
    if offset + sum(lengths) != len(raw):
        return None
    parts = []
    for n in lengths:
        parts.append(raw[offset:offset + n])
        offset += n
    return parts[1:] if parts[0] == key.encode() else None


class DiskCache:
    """The entries under ``root``, at most about ``max_bytes`` together (module docstring). Thread-safe; any
    number of processes may share one ``root``."""

    def __init__(self, root: Path, max_bytes: int, index: bool = True) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(DiskCacheStats.__dataclass_fields__, 0)
        self._written_since_scan: int | None = None  # None: no scan yet in this process
        #: small entries that name other entries (``compiler.codegen.compile``: a kernel's loop IR -> the key
        #: of its LLVM IR's entry), in ``root/index`` with 1/32 of the cap and counters of their own
        self.index: DiskCache = DiskCache(self.root / INDEX_DIR, max(max_bytes // 32, 1), index=False) \
            if index else self

    def path(self, key: str) -> Path:
        """Where the entry ``key`` lives."""
        return self.root / key[:2] / (key + SUFFIX)

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self._counts[what] += n

    def stats(self) -> DiskCacheStats:
        """The counters now."""
        with self._lock:
            return DiskCacheStats(**self._counts)

    def get(self, key: str) -> list[bytes] | None:
        """The parts stored under ``key`` (its file touched: recently used), or None (a miss; a corrupt
        entry is removed)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                data, mtime = f.read(), os.fstat(f.fileno()).st_mtime
        except FileNotFoundError:
            self._count("misses")
            return None
        except OSError:
            self._count("errors")
            self._count("misses")
            return None
        parts = decode(key, data)
        if parts is None:
            self._count("corrupt")
            self._count("misses")
            self._unlink(path)
            return None
        self._count("hits")
        if time.time() - mtime > _TOUCH_AFTER_S:
            try:
                os.utime(path)
            except OSError:
                self._count("errors")
        return parts

    def put(self, key: str, parts: Sequence[bytes]) -> None:
        """Store ``parts`` under ``key`` atomically (temporary file, then ``os.replace``), then evict if the
        cap calls for it. Never raises for a file-system error (counted in ``errors``)."""
        data = encode(key, parts)
        if len(data) > self.max_bytes:
            return
        path = self.path(key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{os.urandom(4).hex()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:
            self._count("errors")
            self._unlink(tmp)
            return
        self._count("writes")
        with self._lock:
            due = self._written_since_scan is None or self._written_since_scan + len(data) >= self.max_bytes // 16
            self._written_since_scan = 0 if due else (self._written_since_scan or 0) + len(data)
        if due:
            self.evict()

    def evict(self) -> None:
        """Remove the least recently used entries while they exceed ``max_bytes`` (down to 90% of it), and
        stale temporary files. Never raises."""
        try:
            entries, total = self._scan()
        except OSError:
            self._count("errors")
            return
        if total <= self.max_bytes:
            return
        goal = self.max_bytes * 9 // 10
        for _, size, path in sorted(entries):
            if total <= goal:
                break
            if self._unlink(path):
                self._count("evictions")
            total -= size

    def _scan(self) -> tuple[list[tuple[float, int, str]], int]:
        entries: list[tuple[float, int, str]] = []
        total = 0
        now = time.time()
        if not self.root.is_dir():
            return entries, 0
        for sub in os.scandir(self.root):
            if len(sub.name) != 2 or not sub.is_dir(follow_symlinks=False):
                continue  # INDEX_DIR is a cache of its own
            for e in os.scandir(sub.path):
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue  # removed meanwhile by another process
                if e.name.endswith(SUFFIX) and not e.name.startswith("."):
                    entries.append((st.st_mtime, st.st_size, e.path))
                    total += st.st_size
                elif e.name.endswith(".tmp") and now - st.st_mtime > _TMP_STALE_S:
                    self._unlink(e.path)
        return entries, total

    def _unlink(self, path: Path | str) -> bool:
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False
        except OSError:
            self._count("errors")
            return False


def default_dir() -> Path:
    """``$XDG_CACHE_HOME/prism/kernels``, or ``~/.cache/prism/kernels`` without it; for a user with no home
    (no ``HOME`` and no password entry: an arbitrary container uid), ``<tempdir>/prism-kernels-<uid>``."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if base:
        return Path(base) / "prism" / "kernels"
    try:
        return Path.home() / ".cache" / "prism" / "kernels"
    except (RuntimeError, KeyError):
        return Path(tempfile.gettempdir()) / f"prism-kernels-{os.getuid()}"


def disk_cache_limit() -> int:
    """``PRISM_KERNEL_CACHE_DISK_BYTES`` as bytes (default :data:`DEFAULT_DISK_CACHE_BYTES`). Raises
    ValueError naming the variable when it is not a non-negative integer."""
    raw = os.environ.get(ENV_MAX_BYTES, "").strip()
    if not raw:
        return DEFAULT_DISK_CACHE_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{ENV_MAX_BYTES}={raw!r}: expected a number of bytes >= 0")
    return value


_CACHES: dict[tuple[str, int], DiskCache] = {}
_CACHES_LOCK = threading.Lock()


def disk_cache() -> DiskCache | None:
    """The disk cache the settings name now (one :class:`DiskCache` per folder and cap in a process, so
    its counters add up), or None when ``PRISM_KERNEL_CACHE=0`` or the cap is 0. Raises ValueError for a
    malformed cap."""
    if os.environ.get(ENV_ENABLED, "1").strip() == "0":
        return None
    limit = disk_cache_limit()
    if limit == 0:
        return None
    root = os.environ.get(ENV_DIR, "").strip() or str(default_dir())
    with _CACHES_LOCK:
        cache = _CACHES.get((root, limit))
        if cache is None:
            cache = _CACHES[(root, limit)] = DiskCache(Path(root), limit)
        return cache
