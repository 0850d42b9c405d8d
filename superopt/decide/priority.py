"""Which kernels of a module are searched first: where the expected gain is.

Under a time limit (the driver's NVCC_PLUS_TIMEOUT, a build budget) the kernels searched first
are the ones that get searched at all. With a capture, the program says where its GPU time
goes: kernels by their share of it. Without one, a static guess from the PTX alone (no graph
analysis, so it costs nothing on builds that do not search): global memory instructions inside
loops weigh eight times those outside, since a kernel's time is mostly its memory traffic and
loops repeat it. Ties keep module order.
"""
from __future__ import annotations

import ptx_ir


def static_weight(fn) -> int:
    """Global memory instructions, those between a label and a branch back to it eight times."""
    body = list(fn.body)
    labels = {s.name: i for i, s in enumerate(body) if isinstance(s, ptx_ir.Label)}
    looped = [False] * len(body)
    for i, s in enumerate(body):
        if isinstance(s, ptx_ir.Instruction) and s.opcode == "bra":
            target = next((str(o) for o in s.operands), "")
            j = labels.get(target)
            if j is not None and j < i:
                for k in range(j, i + 1):
                    looped[k] = True
    weight = 0
    for i, s in enumerate(body):
        if isinstance(s, ptx_ir.Instruction) and s.opcode in ("ld", "st", "atom", "red") \
                and s.space in (".global", None):
            weight += 8 if looped[i] else 1
    return weight


def search_order(kernels: list, capture: dict | None) -> list:
    """``kernels`` (ptx_ir functions) in the order to search them."""
    if capture is not None:
        from superopt.specs.capture.format import kernel_share
        share = kernel_share(capture)
        return sorted(kernels, key=lambda fn: -share.get(fn.name, 0.0))
    return sorted(kernels, key=lambda fn: -static_weight(fn))
