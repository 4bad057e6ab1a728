"""How much of a GEMM's B operand one column block keeps in L2 (``compiler.schedule.gemm.gemm_nest``'s
``block_bytes``), from the target's L2 size (``Target.l2_bytes``, read from sysfs) and the operands' sizes."""

from __future__ import annotations


def l2_block_bytes(l2_bytes: int) -> int:
    """Bytes of the K x block slice of B a column block keeps in L2: a quarter of the core's L2
    (``Target.l2_bytes``; 512 KiB of a 2 MiB L2, 128 KiB of a 512 KiB one), leaving room for the packed
    A operand, C and the next block's prefetch."""
    return l2_bytes // 4


def column_block_bytes(l2_bytes: int, a_bytes: int, b_bytes: int, panel_bytes: int) -> int:
    """The budget (bytes) of a GEMM's K x block slice of B: the whole of B (one column block) when A
    does not fit in L2 (``a_bytes``, e.g. a Conv's weights) and all of B (``b_bytes``) plus two MR x K
    panels of A (``panel_bytes`` each: the one in use and the next) fits in L2; else
    :func:`l2_block_bytes`. Each column block streams all of A once, from beyond L2 when A is larger
    than L2, so a split B costs ``nblocks x a_bytes`` of L3/DRAM traffic; when B is small it is cheaper
    kept whole (1x1 Conv 1024->2048 stride 2 at 14x14 here: 2 blocks 13.7 ms, 1 block 6.3 ms, ORT 5.0)."""
    if a_bytes > l2_bytes and b_bytes + 2 * panel_bytes <= l2_bytes:
        return b_bytes
    return l2_block_bytes(l2_bytes)
