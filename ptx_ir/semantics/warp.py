"""Warp-level semantics (shfl.sync lane selection, vote, match, redux) on (warps, 32) arrays."""
from __future__ import annotations

import numpy as np

u32 = np.uint32
_BITS = (np.uint64(1) << np.arange(32, dtype=np.uint64)).astype(np.uint64)


def shfl_source(mode: str, lane, b, c):
    """Source lane j and predicate pval for each lane (PTX ISA shfl.sync pseudocode)."""
    lane = np.asarray(lane, np.int64)
    b = np.asarray(b, np.int64) & 0xFFFFFFFF
    c = np.asarray(c, np.int64) & 0xFFFFFFFF
    bval = b & 31
    cval = c & 31
    segmask = (c >> 8) & 31
    max_lane = (lane & segmask) | (cval & ~segmask)
    min_lane = lane & segmask
    if mode == "up":
        j = lane - bval
        pval = j >= max_lane
    elif mode == "down":
        j = lane + bval
        pval = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        pval = j <= max_lane
    elif mode == "idx":
        j = min_lane | (bval & ~segmask)
        pval = j <= max_lane
    else:
        raise ValueError(mode)
    j = np.where(pval, j, lane)
    return j, pval


def pack_bits(pred2d):
    """(warps, 32) bool -> (warps,) uint32 ballot."""
    return (pred2d.astype(np.uint64) * _BITS).sum(axis=1, dtype=np.uint64).astype(u32)


def unpack_bits(mask):
    """(k,) uint32 -> (k, 32) bool."""
    m = np.asarray(mask, np.uint64)
    return ((m[..., None] >> np.arange(32, dtype=np.uint64)) & np.uint64(1)).astype(bool)


def match_any(vals2d, part2d):
    """For each lane: mask of participating lanes of its warp holding the same value."""
    eq = (vals2d[:, :, None] == vals2d[:, None, :]) & part2d[:, None, :]
    return pack_bits_3d(eq)


def pack_bits_3d(b3):
    return (b3.astype(np.uint64) * _BITS).sum(axis=2, dtype=np.uint64).astype(u32)
