"""The on-disk kernel object cache (compiler/codegen/disk_cache.py): a compile in a fresh process reads
what an earlier process wrote, a corrupt entry is refused and rewritten, the cap evicts the least recently
used, two writing processes leave one valid entry, PRISM_KERNEL_CACHE=0 turns it off. Hits are counted
through DiskCache.stats(), never by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.codegen import compile as cg
from compiler.codegen.cache import LRUCache
from compiler.codegen.disk_cache import (
    SUFFIX,
    DiskCache,
    decode,
    default_dir,
    disk_cache,
    disk_cache_limit,
    encode,
)
from compiler.loops.ir import Buffer, Float, For, Load, PrimFunc, Store, Var, add
from compiler.targets import get_target

REPO = Path(__file__).resolve().parents[3]

# compiles y[i] = x[i] + C over 64 floats in a fresh process; prints its disk counters and the kernel
_CHILD = """
import json, sys
from compiler.codegen.compile import compile_kernel
from compiler.codegen.disk_cache import disk_cache
from compiler.loops.ir import Buffer, Float, For, Load, PrimFunc, Store, Var, add
from compiler.targets import get_target
x, y, i = Buffer("x", "f32", (64,), "arena"), Buffer("y", "f32", (64,), "arena"), Var("i")
f = PrimFunc("add", [x, y], For(i, 64, Store(y, (i,), add(Load(x, (i,)), Float(float(sys.argv[1]))))))
ck = compile_kernel(f, get_target("host"))
d = disk_cache()
print(json.dumps({"stats": None if d is None else d.stats().__dict__, "cached": ck.cached, "obj": ck.obj.hex()}))
"""


def _in_fresh_process(constant: float, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(constant)], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO), **env}, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _entries(root: Path) -> list[Path]:
    """The kernel entries under ``root`` (not its index's)."""
    return sorted(root.glob("??/*" + SUFFIX))


def _kernel(constant: float) -> PrimFunc:
    x, y, i = Buffer("x", "f32", (64,), "arena"), Buffer("y", "f32", (64,), "arena"), Var("i")
    return PrimFunc(f"add_{constant:g}", [x, y], For(i, 64, Store(y, (i,), add(Load(x, (i,)), Float(constant)))))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A disk cache of its own, and an empty in-process cache: every compile here reaches the disk."""
    monkeypatch.setenv("PRISM_KERNEL_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.delenv("PRISM_KERNEL_CACHE", raising=False)
    monkeypatch.delenv("PRISM_KERNEL_CACHE_DISK_BYTES", raising=False)
    monkeypatch.setattr(cg, "_KERNELS", LRUCache(0, cg.kernel_bytes))
    return tmp_path / "kernels"


def test_a_second_compile_in_a_fresh_process_is_read_from_the_disk(cache_dir):
    env = {"PRISM_KERNEL_CACHE_DIR": str(cache_dir)}
    first = _in_fresh_process(2.5, env)
    assert first["stats"]["hits"] == 0 and first["stats"]["writes"] == 1 and not first["cached"]
    second = _in_fresh_process(2.5, env)
    assert second["stats"]["hits"] == 1 and second["stats"]["writes"] == 0 and second["cached"]
    assert second["obj"] == first["obj"]
    other = _in_fresh_process(3.5, env)  # another kernel: another entry
    assert other["stats"]["hits"] == 0 and other["stats"]["writes"] == 1
    assert len(_entries(cache_dir)) == 2 and len(_entries(cache_dir / "index")) == 2


def test_a_hit_gives_the_same_kernel_texts_and_line_maps(cache_dir):
    host = get_target("host")
    a = cg.compile_kernel(_kernel(1.0), host)
    b = cg.compile_kernel(_kernel(1.0), host)  # the in-process cache keeps nothing here: from the disk
    assert not a.cached and b.cached and b.compile_ms == 0.0
    assert (b.symbol, b.llvm_ir, b.llvm_ir_optimized, b.asm, b.obj) == (a.symbol, a.llvm_ir, a.llvm_ir_optimized,
                                                                          a.asm, a.obj)
    assert (b.asm_lines, b.llvm_ir_lines, b.llvm_ir_optimized_lines) == (a.asm_lines, a.llvm_ir_lines,
                                                                          a.llvm_ir_optimized_lines)
    objects_only = cg.compile_kernel(_kernel(1.0), host, texts=False)  # an entry of its own kind
    assert not objects_only.cached and objects_only.asm == ""
    assert cg.compile_kernel(_kernel(1.0), host, texts=False).cached
    assert disk_cache().stats().hits == 2 and disk_cache().stats().writes == 2


def test_a_corrupt_or_truncated_entry_is_ignored_and_written_again(cache_dir):
    host = get_target("host")
    good = cg.compile_kernel(_kernel(4.0), host)
    (path,) = _entries(cache_dir)
    whole = path.read_bytes()
    for bad in (whole[: len(whole) // 2], whole[:-1] + bytes([whole[-1] ^ 1]), b"", b"not an entry at all"):
        path.write_bytes(bad)
        before = disk_cache().stats()
        again = cg.compile_kernel(_kernel(4.0), host)
        after = disk_cache().stats()
        assert not again.cached and again.obj == good.obj
        assert (after.corrupt - before.corrupt, after.writes - before.writes, after.hits - before.hits) == (1, 1, 0)
        assert path.read_bytes() == whole  # rewritten whole
    assert cg.compile_kernel(_kernel(4.0), host).cached
    (index,) = _entries(cache_dir / "index")
    index.write_bytes(index.read_bytes()[:-3])  # a torn index entry: the kernel is found by its LLVM IR
    before = disk_cache().stats()
    assert cg.compile_kernel(_kernel(4.0), host).cached
    assert disk_cache().stats().hits == before.hits + 1 and disk_cache().index.stats().corrupt == 1


def test_the_index_holds_for_one_compiler_version_and_the_llvm_ir_key_for_any(cache_dir, monkeypatch):
    host = get_target("host")
    cg.compile_kernel(_kernel(4.5), host)
    assert cg.compile_kernel(_kernel(4.5), host).cached
    index = disk_cache().index.stats()
    assert (index.hits, index.misses, index.writes) == (1, 1, 1)  # the second compile built no LLVM IR
    monkeypatch.setattr(cg, "__version__", "0.1.0+another")  # the compiler's code changed
    again = cg.compile_kernel(_kernel(4.5), host)
    assert again.cached  # its LLVM IR is the same: the entry serves, and a new index entry names it
    index = disk_cache().index.stats()
    assert (index.hits, index.misses, index.writes) == (1, 2, 2) and len(_entries(cache_dir)) == 1


def test_an_entry_under_another_key_is_refused():
    data = encode("a" * 64, [b"object"])
    assert decode("a" * 64, data) == [b"object"]
    assert decode("b" * 64, data) is None  # a renamed file is not served for another kernel
    assert decode("a" * 64, data[:-1]) is None and decode("a" * 64, data + b"x") is None


def test_the_least_recently_used_entries_are_evicted_under_the_cap(tmp_path):
    blob = os.urandom(10_000)
    entry_size = len(encode("0" * 64, [blob]))
    cache = DiskCache(tmp_path, max_bytes=entry_size * 5 + entry_size // 2)  # room for five
    keys = [f"{n:02d}" + "0" * 62 for n in range(8)]
    for n, key in enumerate(keys[:5]):
        cache.put(key, [blob])
        os.utime(cache.path(key), (1_000_000 + n, 1_000_000 + n))  # written in order, a second apart
    os.utime(cache.path(keys[0]), (2_000_000, 2_000_000))  # keys[0] used last (a hit touches its file)
    for key in keys[5:]:
        cache.put(key, [blob])
        cache.evict()
    left = {p.stem for p in _entries(tmp_path)}
    total = sum(p.stat().st_size for p in _entries(tmp_path))
    assert total <= cache.max_bytes
    assert keys[0] in left and set(keys[5:]) <= left  # the recently used stay
    assert keys[1] not in left and keys[2] not in left  # the oldest went first
    assert cache.stats().evictions == 8 - len(left)


def test_an_unwritable_folder_never_fails_a_compile(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("PRISM_KERNEL_CACHE_DIR", str(blocker / "kernels"))
    monkeypatch.setattr(cg, "_KERNELS", LRUCache(0, cg.kernel_bytes))
    ck = cg.compile_kernel(_kernel(6.0), get_target("host"))
    assert ck.obj and not ck.cached
    s = disk_cache().stats()
    assert s.writes == 0 and s.errors >= 1


def test_two_processes_writing_the_same_entry_leave_a_valid_one(cache_dir):
    env = {**os.environ, "PYTHONPATH": str(REPO), "PRISM_KERNEL_CACHE_DIR": str(cache_dir)}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, "7.5"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs) and outs[0]["obj"] == outs[1]["obj"]
    assert len(_entries(cache_dir)) == 1 and len(_entries(cache_dir / "index")) == 1  # one entry each
    assert not [p for p in cache_dir.rglob("*") if p.is_file() and not p.name.endswith(SUFFIX)]  # no .tmp left
    third = _in_fresh_process(7.5, {"PRISM_KERNEL_CACHE_DIR": str(cache_dir)})
    assert third["stats"]["hits"] == 1 and third["stats"]["corrupt"] == 0 and third["obj"] == outs[0]["obj"]


def test_disabled_by_the_environment(cache_dir, monkeypatch):
    monkeypatch.setenv("PRISM_KERNEL_CACHE", "0")
    assert disk_cache() is None
    assert _in_fresh_process(8.5, {"PRISM_KERNEL_CACHE_DIR": str(cache_dir), "PRISM_KERNEL_CACHE": "0"})["stats"] is None
    cg.compile_kernel(_kernel(8.5), get_target("host"))
    assert not cache_dir.exists()  # nothing written
    monkeypatch.setenv("PRISM_KERNEL_CACHE", "1")
    monkeypatch.setenv("PRISM_KERNEL_CACHE_DISK_BYTES", "0")  # a zero cap is off too
    assert disk_cache() is None
    monkeypatch.setenv("PRISM_KERNEL_CACHE_DISK_BYTES", "lots")
    with pytest.raises(ValueError, match="PRISM_KERNEL_CACHE_DISK_BYTES"):
        disk_cache_limit()


def test_the_default_folder_follows_xdg_and_survives_a_user_without_a_home(monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/cache")
    assert default_dir() == Path("/somewhere/cache/prism/kernels")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "/home/someone")
    assert default_dir() == Path("/home/someone/.cache/prism/kernels")

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert default_dir().name == f"prism-kernels-{os.getuid()}"
