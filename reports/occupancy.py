"""Theoretical occupancy from a kernel's resources, as the CUDA occupancy calculator does it.

Occupancy is what registers and shared memory cost a kernel: how many of its blocks fit on one
SM at a time, limited by warps, blocks, registers (allocated per warp in units of 256) and
shared memory (allocated per block in units of 128 bytes, plus the 1 KiB the runtime reserves
per block from sm_80 on). Shared memory is taken at the largest carveout the architecture
allows, i.e. the best case the driver can pick.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SmLimits:
    max_warps: int
    max_blocks: int
    shared_bytes: int                 # at the largest carveout
    reserved_shared: int = 0          # per block
    registers: int = 65536
    register_unit: int = 256          # registers are allocated per warp in these units
    shared_unit: int = 128
    max_registers_per_thread: int = 255


# CUDA C Programming Guide, "Technical Specifications per Compute Capability".
LIMITS: dict[int, SmLimits] = {
    70: SmLimits(64, 32, 96 * 1024),
    72: SmLimits(64, 32, 96 * 1024),
    75: SmLimits(32, 16, 64 * 1024),
    80: SmLimits(64, 32, 164 * 1024, 1024),
    86: SmLimits(48, 16, 100 * 1024, 1024),
    87: SmLimits(48, 16, 164 * 1024, 1024),
    89: SmLimits(48, 24, 100 * 1024, 1024),
    90: SmLimits(64, 32, 228 * 1024, 1024),
    100: SmLimits(64, 32, 228 * 1024, 1024),
    103: SmLimits(64, 32, 228 * 1024, 1024),
    120: SmLimits(48, 32, 100 * 1024, 1024),
}


def sm_number(target: str | None) -> int | None:
    """90 for ``sm_90``, ``compute_90``, ``sm_90a``; None for anything else."""
    m = re.fullmatch(r"(?:sm|compute)_(\d+)[a-z]?", target or "")
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    max_warps: int
    limited_by: str                   # "warps", "blocks", "registers" or "shared memory"

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps


def occupancy(target: str | None, threads_per_block: int, registers: int | None,
              shared_bytes: int = 0) -> Occupancy | None:
    """Theoretical occupancy, or None when the architecture or a resource is unknown."""
    limits = LIMITS.get(sm_number(target) or -1)
    if limits is None or registers is None or threads_per_block <= 0:
        return None
    warps = math.ceil(threads_per_block / 32)
    bounds = {"warps": limits.max_warps // warps, "blocks": limits.max_blocks}
    if registers > 0:
        per_warp = math.ceil(registers * 32 / limits.register_unit) * limits.register_unit
        bounds["registers"] = (limits.registers // per_warp) // warps
    if shared_bytes > 0:
        per_block = math.ceil((shared_bytes + limits.reserved_shared) / limits.shared_unit) * limits.shared_unit
        bounds["shared memory"] = limits.shared_bytes // per_block
    limited_by = min(bounds, key=lambda k: bounds[k])
    blocks = bounds[limited_by]
    return Occupancy(blocks, blocks * warps, limits.max_warps, limited_by)
