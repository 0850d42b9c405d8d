"""Replay a recorded golden case on the CPU emulator (shared by test_golden.py and tools)."""
from __future__ import annotations

import json
import os

import numpy as np

import golden_cases as G

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "golden", "fixtures")
GUARD = 256
GUARD_BYTE = 0xAB


def load_fixture(name: str) -> dict:
    with np.load(os.path.join(FIXTURES, f"{name}.npz")) as z:
        return {k: z[k] for k in z.files}


def replay(c: G.Case, fx: dict, chunk_lanes: int | None = None, fma_contraction: str = "auto"):
    """Run the case on the emulator from the fixture's initial contents.

    Returns (final arrays by buffer name, guards intact by buffer name, stats).
    """
    from superopt.judge.emulator import LoadedModule
    with open(os.path.join(HERE, "golden", f"{c.ptx}.ptx")) as f:
        dev = LoadedModule(f.read(), fma_contraction=fma_contraction)
    addrs = {}
    for b in c.buffers():
        raw = np.ascontiguousarray(fx["init__" + b.name]).view(np.uint8).reshape(-1)
        a = dev.alloc(raw.size + 2 * GUARD)
        dev.heap.write(a, np.full(GUARD, GUARD_BYTE, np.uint8))
        dev.heap.write(a + GUARD, raw)
        dev.heap.write(a + GUARD + raw.size, np.full(GUARD, GUARD_BYTE, np.uint8))
        addrs[b.name] = (a + GUARD, raw.size)
    params = [addrs[p.name][0] if isinstance(p, G.Buf) else G.scalar_arg(p) for p in c.params]
    kw = {} if chunk_lanes is None else {"chunk_lanes": chunk_lanes}
    stats = []
    for _ in range(c.launches):
        stats.append(dev.launch(c.kernel, c.grid, c.block, params, shared_bytes=c.shared_bytes,
                                timeout=600, **kw))
    finals, guards = {}, {}
    for b in c.buffers():
        a, n = addrs[b.name]
        dt = fx["init__" + b.name].dtype
        finals[b.name] = dev.heap.read(a, n).view(dt)
        guards[b.name] = bool((dev.heap.read(a - GUARD, GUARD) == GUARD_BYTE).all()
                              and (dev.heap.read(a + n, GUARD) == GUARD_BYTE).all())
    return finals, guards, stats


def compare(c: G.Case, fx: dict, finals: dict) -> list[str]:
    """Bit-for-bit comparison; one line per differing buffer (with the first columns)."""
    problems = []
    for b in c.buffers():
        want = fx.get("final__" + b.name)
        if want is None:
            want = fx["init__" + b.name]          # inputs must come back unchanged
        got = finals[b.name]
        wb = np.ascontiguousarray(want).view(np.uint8).reshape(-1, want.dtype.itemsize)
        gb = np.ascontiguousarray(got).view(np.uint8).reshape(-1, got.dtype.itemsize)
        bad = np.flatnonzero((wb != gb).any(axis=1))
        if bad.size:
            n = _columns_len(c)
            cols = sorted({int(i) // n for i in bad}) if n else []
            i = int(bad[0])
            problems.append(f"{b.name}: {bad.size} of {want.size} differ; columns {cols[:12]}; "
                            f"first [{i}] gpu={_hex(want, i)} emu={_hex(got, i)}")
    return problems


def _columns_len(c):
    for p in c.params:
        if isinstance(p, G.Scalar) and p.name == "n":
            return int(p.value)
    return 0


def _hex(a, i):
    v = np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")[i]
    return f"0x{int(v):0{2 * a.dtype.itemsize}x}"


def meta() -> dict:
    with open(os.path.join(FIXTURES, "meta.json")) as f:
        return json.load(f)
