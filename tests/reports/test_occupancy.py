"""Theoretical occupancy against hand-worked CUDA occupancy calculator cases."""
from __future__ import annotations

from reports.occupancy import occupancy


def test_register_limited_block():
    # 44 regs -> 1536 per warp -> 42 warps by registers -> 10 blocks of 4 warps -> 40/64 warps
    occ = occupancy("sm_90", 128, 44)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limited_by) == (10, 40, "registers")
    assert round(occ.fraction, 3) == 0.625


def test_full_occupancy_is_limited_by_warps():
    occ = occupancy("compute_90", 256, 32)
    assert (occ.blocks_per_sm, occ.fraction, occ.limited_by) == (8, 1.0, "warps")


def test_shared_memory_limited_block_counts_the_reserved_kilobyte():
    # (48 KiB + 1 KiB reserved) per block in 228 KiB -> 4 blocks
    occ = occupancy("sm_90", 128, 32, shared_bytes=48 * 1024)
    assert (occ.blocks_per_sm, occ.limited_by) == (4, "shared memory")


def test_block_count_limit_and_unknown_targets():
    assert occupancy("sm_86", 32, 16).limited_by == "blocks"          # 16 blocks of 1 warp on an sm_86
    assert occupancy("sm_42", 128, 32) is None
    assert occupancy("sm_90", 128, None) is None
