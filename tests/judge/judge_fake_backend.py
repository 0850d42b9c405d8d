"""A CPU stand-in for the GPU backend: "PTX" texts name numpy implementations of
judge_kernel (tests/judge/kernels/judge.cu) and of its planted cheats. It lays buffers out
with guards exactly like the GPU worker and reuses the GPU backend's unpacking, so the
checker's logic (poison, guards, input hashing, determinism, state across launches) can be
tested without a GPU."""
from __future__ import annotations

import re

import numpy as np

from superopt.judge.backends.base import Backend, RunResult
from superopt.judge.backends.gpu import pack_sets, unpack_result
from superopt.specs.launch_spec import Buffer

SIGNATURE = (".visible .entry judge_kernel(\n .param .u64 p0,\n .param .u64 p1,\n .param .u64 p2,\n"
             " .param .f32 p3,\n .param .u32 p4\n)\n")


def fake_ptx(impl: str, signature: str = SIGNATURE) -> str:
    return f".version 9.0\n.target sm_90\n.address_size 64\n// impl: {impl}\n{signature}{{\n ret;\n}}\n"


class Hang(Exception):
    pass


class Crash(Exception):
    pass


class Mem:
    """Typed access to one allocation by logical index (may run into the guards)."""

    def __init__(self, raw: np.ndarray, dtype, guard: int):
        self.raw = raw
        self.full = raw.view(dtype)
        self.off = guard // np.dtype(dtype).itemsize

    def load(self, idx):
        idx = np.asarray(idx) + self.off
        if idx.size and (idx.min() < 0 or idx.max() >= self.full.size):
            raise Crash("illegal address")
        return self.full[idx]

    def store(self, idx, vals):
        idx = np.asarray(idx) + self.off
        if idx.size and (idx.min() < 0 or idx.max() >= self.full.size):
            raise Crash("illegal address")
        self.full[idx] = vals


def judge(mem, sc, grid, state, variant="baseline", rng=None):
    n = int(sc["n"])
    a = np.float32(sc["a"])
    bs = 256
    total = grid[0] * bs
    i = np.arange(total)
    if variant == "noop":
        return
    if variant == "hang":
        raise Hang()
    if variant == "cache" and state.get("done"):
        return
    valid = (i <= n) if variant == "off_by_one" else (i < n)
    if variant == "block0":
        valid &= i < bs
    v = np.zeros(total, np.float32)
    v[valid] = mem["x"].load(i[valid])
    j = (i // bs) * bs + (bs - 1 - i % bs)
    w = v[j]
    with np.errstate(all="ignore"):
        if variant == "fma":
            r = (np.float64(a) * w[valid].astype(np.float64) + mem["y"].load(i[valid]).astype(np.float64)).astype(np.float32)
        elif variant == "ignore_input":
            r = a * w[valid]
        elif variant == "noisy":
            r = a * w[valid] + mem["y"].load(i[valid])
            r = r + np.float32(rng.standard_normal()) * np.float32(1e-3)
        elif variant == "tiny_noise":
            r = a * w[valid] + mem["y"].load(i[valid])
            flip = np.isfinite(r) & (r != 0)
            r = np.where(flip, (r.view(np.uint32) ^ np.uint32(rng.integers(0, 2))).view(np.float32), r)
        else:
            r = a * w[valid] + mem["y"].load(i[valid])
    r = np.asarray(r, np.float32)
    if variant == "last_lane":
        lane = (i[valid] % bs) == 255
        r = r.copy()
        r[lane] = (r[lane].view(np.uint32) ^ np.uint32(1)).view(np.float32)
    if variant == "nan_payload":
        r = r.copy()
        nan = np.isnan(r)
        r[nan] = np.array([0x7FC01234], np.uint32).view(np.float32)[0]
    if variant == "accumulate":          # reads its (declared out) output before writing
        r = r + mem["out"].load(i[valid])
    mem["out"].store(i[valid], r)
    if variant == "writes_input":
        mem["x"].store(i[valid], np.float32(0))
    if variant == "cache":
        state["done"] = True
    if variant == "crash":
        raise Crash("illegal address")


class FakeBackend(Backend):
    name = "fake"

    def __init__(self, available: bool = True):
        self._available = available
        self.calls = 0
        self.rng = np.random.default_rng()

    def available(self):
        return (True, "fake") if self._available else (False, "fake backend switched off")

    def run_many(self, ptx, spec, input_sets, *, timeout=None):
        self.calls += 1
        m = re.search(r"// impl: (\w+)", ptx)
        variant = m.group(1) if m else "baseline"
        state: dict = {}                   # module state: persists across the sets of one call
        results = []
        fatal = False
        for s in input_sets:
            if fatal:
                results.append(RunResult(status="not_run"))
                continue
            wire = pack_sets(spec, [s])
            packed = wire["sets"][0]
            g = packed["guard"]
            mem, raws = {}, []
            bufs = [p for p in s.spec.params if isinstance(p, Buffer)]
            items = [it for it in packed["params"] if it[0] == "b"]
            for p, (_, idx, front, back) in zip(bufs, items):
                raw = np.concatenate([np.frombuffer(front, np.uint8), wire["blobs"][idx], np.frombuffer(back, np.uint8)])
                mem[p.name] = Mem(raw, p.elem.dtype, g)
                raws.append((raw, wire["blobs"][idx]))
            try:
                judge(mem, s.scalars, s.spec.grid, state, variant, self.rng)
            except Hang:
                results.append(RunResult(status="timeout", error=f"no completion within {timeout} s"))
                fatal = True
                continue
            except Crash as e:
                results.append(RunResult(status="crash", error=f"kernel: CUDA_ERROR_ILLEGAL_ADDRESS ({e})"))
                fatal = True
                continue
            out = []
            for raw, blob in raws:
                data = raw[g:len(raw) - g]
                out.append((None if np.array_equal(data, blob) else data, raw[:g].tobytes(), raw[len(raw) - g:].tobytes()))
            raw = {"status": "ok", "elapsed": 1e-5, "buffers": out}
            results.append(unpack_result(spec, s, raw))
        return results
