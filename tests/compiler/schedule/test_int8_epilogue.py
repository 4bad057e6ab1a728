"""compiler.schedule.int8_epilogue.exact_dequantize: the fused Q -> DQ round trip becomes ``C - z`` only where
``C`` is a rounded value saturated within the 8-bit range (so the conversions were exact), else unchanged."""

from __future__ import annotations

from compiler.loops.ir import Bin, Call, Cast, Float, Int
from compiler.schedule.int8_epilogue import exact_dequantize


def _clamped(lo: float, hi: float) -> Bin:
    r = Bin("+", Call("round", (Float(1.5),)), Cast("f32", Int(127, "u8")))
    return Bin("min", Bin("max", r, Float(lo)), Float(hi))


def _round_trip(c: Bin, dt: str = "u8") -> Cast:
    return Cast("f32", Bin("-", Cast("i32", Cast(dt, c)), Cast("i32", Int(127, dt))))


def test_saturated_round_trip_becomes_a_float_subtract() -> None:
    c = _clamped(0.0, 255.0)
    assert exact_dequantize(_round_trip(c)) == Bin("-", c, Float(127.0))


def test_unsaturated_or_wider_range_is_left_alone() -> None:
    wide = _clamped(-1.0, 255.0)  # -1 does not fit uint8: the cast is not exact
    assert exact_dequantize(_round_trip(wide)) == _round_trip(wide)
    raw = Bin("min", Bin("max", Float(1.5), Float(0.0)), Float(255.0))  # not rounded: not an integer
    assert exact_dequantize(_round_trip(raw)) == _round_trip(raw)
