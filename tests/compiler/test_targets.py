"""Targets: names, triples, CPUs, runnability here, refusal of levels the host lacks."""

from __future__ import annotations

import dataclasses

import pytest

from compiler.errors import CompileError
from compiler.targets import CODE_ONLY, check_runnable, get_target, host_features, list_targets


def test_list_targets_shape() -> None:
    ts = list_targets()
    assert [t["name"] for t in ts] == ["host", "x86-64-v2", "x86-64-v3", "x86-64-v4", "aarch64", "riscv64"]
    for t in ts:
        assert set(t) == {"name", "triple", "cpu", "features", "runnable", "note"}
    host = ts[0]
    assert host["runnable"] and host["cpu"] and host["triple"]


def test_cross_targets_are_code_only() -> None:
    a, r = get_target("aarch64"), get_target("riscv64")
    assert a.triple.startswith("aarch64") and a.cpu == "neoverse-v1" and not a.runnable and a.note == CODE_ONLY
    assert r.triple.startswith("riscv64") and r.cpu == "generic-rv64" and "+v" in r.features.split(",")
    assert not r.runnable and r.note == CODE_ONLY
    check_runnable(a)  # code only: not refused


def test_x86_levels_follow_host_features() -> None:
    v4 = get_target("x86-64-v4")
    assert v4.runnable == ({"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"} <= host_features())
    assert v4.vector_width_f32 == 16 and get_target("x86-64-v3").vector_width_f32 == 8


def test_unrunnable_level_is_refused_before_any_work() -> None:
    fake = dataclasses.replace(get_target("x86-64-v4"), runnable=False, note="host lacks avx512f")
    with pytest.raises(CompileError) as ei:
        check_runnable(fake)
    assert ei.value.stage == "request" and "avx512f" in ei.value.message


def test_unknown_target() -> None:
    with pytest.raises(CompileError) as ei:
        get_target("sparc")
    assert ei.value.stage == "request" and "riscv64" in ei.value.message
