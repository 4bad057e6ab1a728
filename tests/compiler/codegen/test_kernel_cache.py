"""The kernel cache: a bounded LRU by bytes (compiler/codegen/cache.py), safe under threads, single
flight per key, with its limit from PRISM_KERNEL_CACHE_BYTES; and the target-machine table."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from compiler.codegen import compile as cg
from compiler.codegen.cache import DEFAULT_KERNEL_CACHE_BYTES, LRUCache, kernel_cache_limit
from compiler.loops.ir import Buffer, Float, For, Load, PrimFunc, Store, Var, add
from compiler.targets import get_target


def _cache(limit: int) -> LRUCache[str]:
    return LRUCache(limit, len)


def test_least_recently_used_entries_go_first_to_stay_under_the_byte_limit():
    c = _cache(100)
    c.put("a", "x" * 40)
    c.put("b", "y" * 40)
    assert c.get("a") == "x" * 40  # a is now the most recently used
    c.put("c", "z" * 40)  # 120 > 100: b (least recently used) goes
    assert "b" not in c and "a" in c and "c" in c
    s = c.stats()
    assert (s.entries, s.bytes, s.evictions) == (2, 80, 1)
    c.put("d", "w" * 90)  # needs 90 of 100: both others go
    assert list(k for k in "abcd" if k in c) == ["d"] and c.stats().bytes == 90 and c.stats().evictions == 3


def test_replacing_a_key_counts_its_new_size_once():
    c = _cache(100)
    c.put("a", "x" * 60)
    c.put("a", "x" * 30)
    assert c.stats().bytes == 30 and len(c) == 1


def test_an_entry_larger_than_the_limit_is_returned_but_not_kept():
    c = _cache(50)
    c.put("small", "s" * 10)
    value, hit = c.get_or_create("big", lambda: "b" * 51)
    assert (value, hit) == ("b" * 51, False)
    assert "big" not in c and "small" in c and c.stats().bytes == 10


def test_a_zero_limit_keeps_nothing():
    c = _cache(0)
    calls = []
    for _ in range(3):
        assert c.get_or_create("k", lambda: calls.append(1) or "v") == ("v", False)
    assert len(calls) == 3 and len(c) == 0
    with pytest.raises(ValueError, match=">= 0"):
        _cache(-1)


def test_one_create_per_key_while_threads_ask_at_once():
    c = _cache(10_000)
    created: dict[str, int] = {}
    lock = threading.Lock()
    start = threading.Barrier(16)

    def create(key: str) -> str:
        with lock:
            created[key] = created.get(key, 0) + 1
        time.sleep(0.05)  # long enough that the other threads arrive while it runs
        return key * 10

    def ask(i: int) -> tuple[str, bool]:
        start.wait()
        key = "abcd"[i % 4]
        return c.get_or_create(key, lambda: create(key))

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(ask, range(16)))
    assert created == {"a": 1, "b": 1, "c": 1, "d": 1}
    assert [v for v, _ in results] == ["abcd"[i % 4] * 10 for i in range(16)]
    assert sum(not hit for _, hit in results) == 4
    s = c.stats()
    assert (s.misses, s.hits) == (4, 12)


def test_a_failed_create_is_not_cached_and_a_waiter_retries():
    c = _cache(1000)
    attempts = []
    entered = threading.Event()

    def failing() -> str:
        attempts.append("fail")
        entered.set()
        time.sleep(0.05)
        raise RuntimeError("LLVM said no")

    def waiter() -> tuple[str, bool]:
        entered.wait()
        return c.get_or_create("k", lambda: attempts.append("ok") or "value")

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(c.get_or_create, "k", failing)
        second = pool.submit(waiter)
        with pytest.raises(RuntimeError, match="LLVM said no"):
            first.result()
        assert second.result() == ("value", False)
    assert attempts == ["fail", "ok"] and c.get("k") == "value"


def test_concurrent_puts_and_gets_keep_the_byte_bound():
    c = _cache(1000)

    def churn(t: int) -> None:
        for i in range(400):
            c.put(f"{t}-{i % 37}", "v" * (1 + (i * 7 + t) % 90))
            c.get(f"{(t + 1) % 8}-{i % 37}")
            assert c.stats().bytes <= 1000

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(churn, range(8)))
    s = c.stats()
    held = sum(len(c.get(k) or "") for k in [f"{t}-{i}" for t in range(8) for i in range(37)])
    assert s.bytes == held <= 1000 and s.evictions > 0


def test_the_limit_comes_from_prism_kernel_cache_bytes(monkeypatch):
    monkeypatch.delenv("PRISM_KERNEL_CACHE_BYTES", raising=False)
    assert kernel_cache_limit() == DEFAULT_KERNEL_CACHE_BYTES
    monkeypatch.setenv("PRISM_KERNEL_CACHE_BYTES", "4096")
    assert kernel_cache_limit() == 4096
    for bad in ("lots", "-5", "1.5"):
        monkeypatch.setenv("PRISM_KERNEL_CACHE_BYTES", bad)
        with pytest.raises(ValueError, match="PRISM_KERNEL_CACHE_BYTES"):
            kernel_cache_limit()


def _kernel(constant: float) -> PrimFunc:
    """y[i] = x[i] + constant over 64 floats: a distinct kernel per constant."""
    x, y, i = Buffer("x", "f32", (64,), "arena"), Buffer("y", "f32", (64,), "arena"), Var("i")
    return PrimFunc(f"add_{constant:g}", [x, y], For(i, 64, Store(y, (i,), add(Load(x, (i,)), Float(constant)))))


def test_compiled_kernels_are_evicted_by_bytes(monkeypatch):
    monkeypatch.setenv("PRISM_KERNEL_CACHE", "0")  # the in-process cache alone (the disk one would serve evictions)
    host = get_target("host")
    first = cg.compile_kernel(_kernel(1.0), host)
    size = cg.kernel_bytes(first)
    assert size > len(first.obj) > 0
    monkeypatch.setattr(cg, "_KERNELS", LRUCache(int(size * 2.5), cg.kernel_bytes))  # room for two
    a = cg.compile_kernel(_kernel(1.0), host)
    assert not a.cached and a.compile_ms > 0
    b = cg.compile_kernel(_kernel(1.0), host)
    assert b.cached and b.compile_ms == 0.0 and (b.symbol, b.obj, b.asm) == (a.symbol, a.obj, a.asm)
    cg.compile_kernel(_kernel(2.0), host)
    cg.compile_kernel(_kernel(3.0), host)  # the third distinct kernel evicts the least recently used
    assert not cg.compile_kernel(_kernel(1.0), host).cached
    assert cg.kernel_cache().stats().bytes <= int(size * 2.5)


def test_threads_compiling_the_same_kernel_compile_it_once(monkeypatch):
    monkeypatch.setenv("PRISM_KERNEL_CACHE", "0")  # an earlier test's kernel on disk would count as no compile
    host = get_target("host")
    monkeypatch.setattr(cg, "_KERNELS", LRUCache(1 << 26, cg.kernel_bytes))
    barrier = threading.Barrier(4)

    def go(_: int) -> cg.CompiledKernel:
        barrier.wait()
        return cg.compile_kernel(_kernel(5.0), host)

    with ThreadPoolExecutor(4) as pool:
        out = list(pool.map(go, range(4)))
    assert sum(not k.cached for k in out) == 1 and len({k.obj for k in out}) == 1


def test_one_target_machine_per_target_and_thread(monkeypatch):
    monkeypatch.setattr(cg, "_TM", threading.local())
    host = get_target("host")
    barrier = threading.Barrier(6)

    def go(_: int) -> tuple[int, int]:
        barrier.wait()
        first = cg.target_machine(host)
        return id(first), id(cg.target_machine(host))  # the same thread asks again: the same machine

    with ThreadPoolExecutor(6) as pool:
        pairs = list(pool.map(go, range(6)))
    assert all(a == b for a, b in pairs) and len({a for a, _ in pairs}) == 6  # none shared across threads
