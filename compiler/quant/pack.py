"""Compile-time packing of integer weights for the INT8 micro-kernels (``compiler.schedule.int8``).

A weight matrix ``W[m, k]`` (int32 values ``w - w_zero_point``; m = output channel or column) is packed
``G`` consecutive k per 32-bit word, little-endian: ``G = 4`` signed bytes for ``vpdpbusd`` (u8
activation x s8 weight), ``G = 2`` signed 16-bit halves for ``vpdpwssd`` / ``pmaddwd``. K is zero-padded
to a multiple of G (a zero weight adds nothing whatever the activation there).

With ``G = 4`` the activation operand is unsigned: an int8 activation ``x`` is fed as ``x + 128`` (its
byte with the top bit flipped) and a zero point ``z`` is not subtracted from it, so the accumulator
holds ``sum (x + off) w`` and the true ``sum (x - z) w`` is that minus ``(z + off) * sum_k w``: the
*compensation*, a per-channel int32 folded into the bias here (oneDNN's and ONNX Runtime's s8s8 scheme).
"""

from __future__ import annotations

import numpy as np

I16_PAIR_LIMIT = 128  # 255 * 128 = 32640 <= 32767 and -255 * 128 = -32640 >= -32768; 129 leaves int16


def pairs_fit_i16(w: np.ndarray) -> bool:
    """True when no pair of weights that ``vpmaddubsw`` sums in int16 can saturate it, whatever the
    unsigned activation bytes (0..255): for every row and every byte pair (k = 2p, 2p + 1) of the
    packed words, the positive weights sum to at most 128 and the negative ones to at least -128
    (``w`` [M, K] int, values ``w - w_zero_point``). Holds for any 7-bit weights in [-64, 63]
    (``quantize{reduce-range=true}``, ONNX Runtime's ``reduce_range``); full-range int8 weights
    usually have a pair that fails, and those kernels keep the exact 16-bit ``pmaddwd`` step."""
    m, k = w.shape
    padded = np.zeros((m, k + (k % 2)), np.int64)
    padded[:, :k] = w
    pos, neg = np.maximum(padded, 0), np.minimum(padded, 0)
    return bool((pos[:, 0::2] + pos[:, 1::2]).max(initial=0) <= I16_PAIR_LIMIT
                and (neg[:, 0::2] + neg[:, 1::2]).min(initial=0) >= -I16_PAIR_LIMIT)


def choose_group(w: np.ndarray, vnni: bool, avx2: bool = False) -> int:
    """4 (u8 x s8 words: ``vpdpbusd``) when ``w`` (values ``w - w_zero_point``) fits int8 and the target has
    VNNI, or has AVX2 and :func:`pairs_fit_i16` (``vpmaddubsw`` + ``vpmaddwd``, exact only then); else 2
    (s16 x s16 words: ``pmaddwd``, exact for any int8 or uint8 weights)."""
    fits8 = int(w.min(initial=0)) >= -128 and int(w.max(initial=0)) <= 127
    return 4 if fits8 and (vnni or (avx2 and pairs_fit_i16(w))) else 2


def pack_words(w: np.ndarray, group: int) -> np.ndarray:
    """``w`` [M, K] (int) as int32 words [M, ceil(K / group)], ``group`` values per word (see module)."""
    m, k = w.shape
    kp = -(-k // group) * group
    padded = np.zeros((m, kp), np.int8 if group == 4 else np.int16)
    padded[:, :k] = w
    return np.ascontiguousarray(padded).view(np.int32).reshape(m, kp // group)


def pack_bf16(w: np.ndarray) -> np.ndarray:
    """``w`` [M, K] (float32 on the bfloat16 grid) as int32 words [M, ceil(K / 2)] of two bfloat16 (the top
    16 bits of each value; k even in the low half), K zero-padded: ``vdpbf16ps``'s operand."""
    m, k = w.shape
    padded = np.zeros((m, -(-k // 2) * 2), np.float32)
    padded[:, :k] = w
    halves = (np.ascontiguousarray(padded).view(np.uint32) >> 16).astype(np.uint16)
    return np.ascontiguousarray(halves).view(np.int32).reshape(m, -1)


def pack_any(w: np.ndarray, group: int, fmt: str | None) -> np.ndarray:
    """:func:`pack_bf16` for ``fmt="bf16"``, else :func:`pack_words`."""
    return pack_bf16(w) if fmt == "bf16" else pack_words(w, group)


def compensation(w: np.ndarray, x_zero_point: int, x_signed: bool, group: int) -> np.ndarray:
    """Per-row int32 to add to the accumulator: ``-(z + off) * sum_k w`` for ``group = 4`` (``off`` = 128
    for an int8 activation), 0 for ``group = 2`` (the activation is stored as ``x - z`` exactly)."""
    if group == 2:
        return np.zeros(w.shape[0], np.int64)
    off = 128 if x_signed else 0
    return -(int(x_zero_point) + off) * w.astype(np.int64).sum(axis=1)


def tile_rows(words: np.ndarray, mr: int) -> np.ndarray:
    """Words [M, KG] as [M / mr, KG, mr] (the broadcast operand of a register tile of mr rows)."""
    m, kg = words.shape
    return np.ascontiguousarray(words.reshape(m // mr, mr, kg).transpose(0, 2, 1))


def tile_cols(words: np.ndarray, nr: int) -> np.ndarray:
    """Words [N, KG] (one row per output column) as zero-padded panels [ceil(N / nr), KG, nr]."""
    n, kg = words.shape
    tiles = -(-n // nr)
    padded = np.zeros((tiles * nr, kg), np.int32)
    padded[:n] = words
    return np.ascontiguousarray(padded.reshape(tiles, nr, kg).transpose(0, 2, 1))


def multiplier(x_scale: float, w_scale: np.ndarray, y_scale: float, alpha: float = 1.0) -> np.ndarray:
    """The float32 requantization multipliers ``(x_scale * w_scale) / y_scale`` per channel, computed in
    float32 left to right as ONNX Runtime does (``compiler.loops.ops_qlinear``)."""
    xs = np.float32(x_scale) * np.float32(alpha) if alpha != 1.0 else np.float32(x_scale)
    return ((xs * np.asarray(w_scale, np.float32)) / np.float32(y_scale)).astype(np.float32)
