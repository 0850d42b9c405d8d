"""CPU emulator backend: runs PTX kernels with :mod:`superopt.judge.emulator` (numpy, SIMT).

Same contract as the GPU backend (:class:`superopt.judge.backends.base.Backend`): the module is
loaded once per :meth:`EmulatorBackend.run_many`, every input set gets fresh allocations
laid out ``[front guard][data][back guard]`` (cudaMalloc alignment, so pointer alignment
matches the GPU backend's), and misbehaviour comes back as a status, never an exception:

* ``unsupported``: an instruction (or a use of one) the emulator does not reproduce
  bit-exactly, or undefined behaviour (e.g. a shuffle reading an exited lane); the error
  says which;
* ``crash``: what faults on a GPU (out-of-range or misaligned address, trap, assert);
* ``timeout``: the launch ran past its time limit, or its threads wait forever;
* ``launch_error``: unparsable PTX, unknown kernel, impossible launch shape.

``RunResult.elapsed`` is the emulation's wall time (not GPU time): the judge only uses it
to scale the candidate's time limit. Registers, shared and local memory start with random
bits on every launch (a fresh seed per launch), so a kernel reading them uninitialised gives
different results per run; on the second (fourth, ...) launch of the same input set in one
call the registers start at zero instead, so code right only for nonzero garbage fails too. ``RunResult.guard_reads`` lists, per buffer, loads that touched
bytes outside the buffer's data (its guard zones or the padding after them).
"""
from __future__ import annotations

import copy
import math
import os
import time

import numpy as np

from superopt.judge.backends.base import Backend, RunResult, check_guards
from superopt.judge.inputs import alias_geometry, union_bytes
from superopt.judge.phases import measured

__all__ = ["EmulatorBackend"]

DEFAULT_LAUNCH_TIMEOUT = 120.0      # seconds of emulation per launch
MAX_SHARED_BYTES = 227 * 1024       # per block, as on sm_90


def _pack_scalar(p) -> bytes:
    et = p.elem
    if et.name == "bf16":
        from superopt.judge.inputs import _cast_floats
        return _cast_floats(np.array([float(p.value)]), et).tobytes()
    return np.array([p.value], dtype=et.dtype).tobytes()


def _cap(var: str, default: int) -> int:
    try:
        from superopt.config.settings import env_value
        return max(1, int(float(env_value(var) or default)))
    except ValueError:
        return default


def _over_caps(input_sets: list) -> str | None:
    """Why these sets are too large for the emulator (memory and time grow with both), or
    None. Caps: NVCC_PLUS_EMULATOR_MAX_MB of buffers per set (default 256) and
    NVCC_PLUS_EMULATOR_MAX_THREADS per launch (default 4M). A larger spec is refused with
    this reason, not run for minutes (an explicit n = 50M once took 99 s and 7.3 GB)."""
    max_bytes = _cap("NVCC_PLUS_EMULATOR_MAX_MB", 256) << 20
    max_threads = _cap("NVCC_PLUS_EMULATOR_MAX_THREADS", 4 << 20)
    for s in input_sets:
        nbytes = sum(int(getattr(a, "nbytes", 0)) for a in s.data.values())
        threads = math.prod(int(g) for g in s.spec.grid) * math.prod(int(b) for b in s.spec.block)
        if nbytes > max_bytes:
            return (f"too large for the emulator: {nbytes / 2**20:.0f} MB of buffers in {s.label} "
                    f"(cap NVCC_PLUS_EMULATOR_MAX_MB={max_bytes >> 20}); judge it on a GPU or with a smaller spec")
        if threads > max_threads:
            return (f"too large for the emulator: {threads} threads in {s.label} "
                    f"(cap NVCC_PLUS_EMULATOR_MAX_THREADS={max_threads}); judge it on a GPU or with a smaller spec")
    return None


# A serial schedule runs the same warp of every block of a chunk together, so its cost grows
# with the issues (warps per block x instructions), hardly with the blocks: a launch of at most
# SERIAL_MAX_WARPS warps runs every block serially, a larger one a sample of blocks, about
# SERIAL_SAMPLE_WARPS warps (the first, the last, random ones).
SERIAL_MAX_WARPS = 256
SERIAL_SAMPLE_WARPS = 256
# ... in the first SERIAL_LARGE_SETS input sets (each such launch runs every schedule on its
# sample; smaller launches, tails among them, run serially in every set)
SERIAL_LARGE_SETS = 2
# the serial schedules of a set's second launch, from (set index) mod 5 in this rotation: its
# serial blocks run in SERIAL_PER_LAUNCH groups, one per schedule (a launch of fewer blocks runs
# the first ones only), so two consecutive sets run all five
SERIAL_PER_LAUNCH = 3
SERIAL_ROTATION = ("warps-up", "quarters-up", "interleave", "quarters-down", "warps-down")
BLOCK_ORDER_ROTATION = ("up", "down", "random")
ORDER_MIN_CHUNKS = 4        # blocks run in at least this many groups when their order may matter


# the schedules that keep the lanes of a warp in step (a baseline that relies on that: see
# EmulatorBackend.lanes_in_step)
IN_STEP_ROTATION = tuple(s for s in SERIAL_ROTATION if not s.startswith("quarters"))


def launch_plan(set_index: int, fill: str, across_warps: bool, cross_block: bool, grid, block,
                lane_splits: bool = True) -> dict:
    """The emulator's schedule for one launch, as keyword arguments of
    :meth:`superopt.judge.emulator.LoadedModule.launch`.

    * Warps: every second launch of an input set (the judge's repeat, ``fill == "zero"``) of a
      kernel whose warps share memory or barriers runs serially: every block when the launch
      has at most :data:`SERIAL_MAX_WARPS` warps, else, in the first :data:`SERIAL_LARGE_SETS`
      sets, a sample (the first and last block and random ones, about
      :data:`SERIAL_SAMPLE_WARPS` warps; the rest min-PC), in groups of
      blocks taking the schedules of :data:`SERIAL_ROTATION` in turn from position
      ``set_index``, :data:`SERIAL_PER_LAUNCH` of them per launch of that many blocks or more
      (two consecutive sets run all five): one warp at a time up or down, quarter warps up or
      down (lanes of a warp out of step), warps interleaved at every store. A candidate that dropped a ``bar.sync`` or ``__syncwarp``, or leaves a shared
      value briefly wrong, then differs, where the in-step min-PC schedule hides it.
    * Blocks: a kernel that may read global data other threads write (``cross_block``: the
      static race check, :mod:`superopt.judge.race_check`) runs its blocks down and in a
      random order, in at least :data:`ORDER_MIN_CHUNKS` groups, in two of every three launches
      (by set and launch; the first launch of set 0 keeps the natural order), so a block
      reading what another block wrote sees it unwritten in some launch.

    nvcc's own code gets the same schedules, so a kernel whose results depend on the schedule
    shows as non-deterministic, as it would on a GPU. ``lane_splits=False`` leaves out the
    quarter-warp schedules (:meth:`EmulatorBackend.lanes_in_step`)."""
    i = int(set_index or 0)
    kw: dict = {"schedule": "min-pc"}
    warps = math.prod(grid) * -(-math.prod(block) // 32)
    if fill == "zero" and across_warps and (warps <= SERIAL_MAX_WARPS or i < SERIAL_LARGE_SETS):
        rotation = SERIAL_ROTATION if lane_splits else IN_STEP_ROTATION
        k = i % len(rotation)
        kw["schedule"] = rotation[k:] + rotation[:k]
        kw["serial_chunks"] = SERIAL_PER_LAUNCH
        if warps > SERIAL_MAX_WARPS:
            kw["serial_warps"] = SERIAL_SAMPLE_WARPS
    if cross_block:
        order = BLOCK_ORDER_ROTATION[(i + (1 if fill == "zero" else 0)) % len(BLOCK_ORDER_ROTATION)]
        if order != "up":
            # "up" in one group is the natural schedule (the first launch of set 0 has it)
            kw["block_order"] = order
            kw["min_chunks"] = ORDER_MIN_CHUNKS
    return kw


# The schedules of an aliased set's launches, in turn by launch (superopt.judge.inputs.aliased_set):
# whatever the kernel's shared memory, a global store through one view may be what another
# thread loads through the other, so nvcc's own runs there vary the warp schedule (lanes of a
# warp out of step too) and the block order, and a race the overlap creates shows as results
# that differ between its runs (the check then drops the layout). nvcc's first two runs are one
# warp at a time up with the blocks up, then down with the blocks down: the first block's first
# warp runs wholly before, then wholly after, the last block's last warp, so a race between the
# two ends of the grid (a written buffer's first element on an input's last) shows every time.
ALIAS_SCHEDULES = ("warps-up", "warps-down", "min-pc", "quarters-up", "interleave", "quarters-down")


def alias_launch_plan(run: int, lane_splits: bool = True) -> dict:
    """The emulator's schedule for the ``run``-th launch (1, 2, ...) of an aliased set in one call:
    :data:`ALIAS_SCHEDULES` in turn (without the quarter warps when ``lane_splits`` is False), and
    the blocks up, down and in random order in turn. Odd launches read through the non-coherent
    path (``ld.global.nc``, ``ldu``) memory as it was when the launch began (``nc_stale``), even
    ones memory as it is: where the overlap makes such a read see the launch's own writes (one
    pointer written, another that is the same memory read through ``.nc`` after it) PTX leaves
    the value undefined, and a GPU's read-only cache may hold either. nvcc's runs then differ
    (the layout is no behaviour to keep: dropped), and a candidate that reads ``.nc`` where nvcc's
    code reads coherently differs from nvcc's results on its first launch (rejected)."""
    rot = ALIAS_SCHEDULES if lane_splits else tuple(s for s in ALIAS_SCHEDULES if not s.startswith("quarters"))
    k = (int(run) - 1) % len(rot)
    kw: dict = {"schedule": rot[k], "nc_stale": int(run) % 2 == 1}
    order = BLOCK_ORDER_ROTATION[(int(run) - 1) % len(BLOCK_ORDER_ROTATION)]
    if order != "up":
        kw["block_order"] = order
        kw["min_chunks"] = ORDER_MIN_CHUNKS
    return kw


def _schedule(set_index: int, fill: str, across_warps: bool, grid, block) -> str:
    """The first serial schedule of a launch (:func:`launch_plan`), or ``"min-pc"``."""
    s = launch_plan(set_index, fill, across_warps, False, grid, block)["schedule"]
    return s if isinstance(s, str) else s[0]


def _cross_block(ptx: str, kernel: str) -> bool:
    """Whether some global load of ``kernel`` may read what another thread of the launch
    writes (superopt.judge.race_check, cached per PTX text); no analysis says yes."""
    from superopt.judge import race_check
    r = race_check.analyze_ptx(ptx, kernel)
    return True if r is None else r.cross_block


class EmulatorBackend(Backend):
    name = "emulator"
    aliasing = True

    def __init__(self, *, fma_contraction: str = "auto", chunk_lanes: int | None = None,
                 default_timeout: float = DEFAULT_LAUNCH_TIMEOUT, stand_ins: bool = False):
        self.fma_contraction = fma_contraction
        # approximate float instructions by stand-ins (superopt.judge.emulator.runner.LoadedModule):
        # only where nvcc's code is compared with itself (superopt.judge.alias_check.emulator_race)
        self.stand_ins = stand_ins
        self.chunk_lanes = chunk_lanes
        self.default_timeout = default_timeout
        self.lane_splits = True

    def lanes_in_step(self) -> "EmulatorBackend | None":
        """This backend without the schedules that run the lanes of a warp out of step, or None
        when it has none. Legacy warp-synchronous code (a ``volatile`` shared-memory reduction
        with no ``__syncwarp``, as CUDA samples before Volta wrote it) relies on a warp's lanes
        running together; on such code the quarter-warp schedules make nvcc's own results
        differ between runs, and there would be nothing to judge. The judge then checks the
        baseline and every candidate under warp-granular schedules only (it says so in the
        verdict): a candidate may rely on what nvcc's code relies on, no more — a dropped
        ``bar.sync`` between warps still shows."""
        if not self.lane_splits:
            return None
        other = copy.copy(self)
        other.lane_splits = False
        return other

    def available(self) -> tuple[bool, str]:
        return True, "CPU emulator (numpy SIMT)"

    def alias_plan(self, run: int) -> dict:
        """The schedule of the ``run``-th launch of an aliased set in one call
        (:func:`alias_launch_plan`; a test's stand-in for a GPU fixes it instead)."""
        return alias_launch_plan(run, self.lane_splits)

    def large_target(self):
        """The CPU's large set (indices past 2^17), within this emulator's size caps."""
        from dataclasses import replace
        from superopt.judge.inputs import CPU_LARGE
        return replace(CPU_LARGE, max_bytes=min(CPU_LARGE.max_bytes, _cap("NVCC_PLUS_EMULATOR_MAX_MB", 256) << 20),
                       max_threads=min(CPU_LARGE.max_threads, _cap("NVCC_PLUS_EMULATOR_MAX_THREADS", 4 << 20)))

    def describe(self) -> dict:
        quarters = "quarter warps up or down, " if self.lane_splits else ""
        return {"backend": self.name, "name": "CPU emulator (numpy SIMT)", "numpy": np.__version__,
                "fma_contraction": self.fma_contraction,
                "schedule": ("threads at the smallest PC together; every input set's second launch of a "
                             f"kernel with shared memory or barriers serially (warps up or down, {quarters}"
                             f"warps interleaved at every store; every block up to {SERIAL_MAX_WARPS} "
                             f"warps, else a sample of about {SERIAL_SAMPLE_WARPS} warps); blocks up, down and in "
                             "random order where a block may read what another writes"),
                "elapsed": "emulation wall time, not GPU time"}

    @measured("emulator")
    def run_many(self, ptx: str, spec, input_sets: list, *, timeout: float | None = None) -> list[RunResult]:
        from ptx_ir.errors import ParseError
        from superopt.judge.emulator import (Deadlock, KernelFault, LoadedModule, RunTimeout,
                                       UndefinedBehavior, Unsupported)
        from superopt.judge.emulator.program import BAR
        from superopt.specs.launch_spec import Bytes, Scalar

        n = len(input_sets)
        too_big = _over_caps(input_sets)
        if too_big:
            return [RunResult("unsupported", error=too_big) for _ in range(n)]
        try:
            dev = LoadedModule(ptx, fma_contraction=self.fma_contraction, stand_ins=self.stand_ins)
        except ParseError as e:
            return [RunResult("launch_error", error=f"PTX does not parse: {e}") for _ in range(n)]
        except Unsupported as e:
            return [RunResult("unsupported", error=str(e)) for _ in range(n)]
        except Exception as e:  # noqa: BLE001 - a bug must not take the judge down
            return [RunResult("unsupported", error=f"emulator error loading the module: {type(e).__name__}: {e}")
                    for _ in range(n)]
        try:
            prog = dev.program(spec.kernel)
            across_warps = prog.uses_shared or any(i.kind == BAR for i in prog.insts)
            cross_block = _cross_block(ptx, spec.kernel)
        except KeyError as e:
            return [RunResult("launch_error", error=f"no kernel {spec.kernel!r}: {e}") for _ in range(n)]
        except Unsupported as e:
            return [RunResult("unsupported", error=str(e)) for _ in range(n)]
        except Exception as e:  # noqa: BLE001
            return [RunResult("unsupported", error=f"emulator error compiling {spec.kernel}: {type(e).__name__}: {e}")
                    for _ in range(n)]

        results = []
        limit = float(timeout or self.default_timeout)
        # every set's buffers are freed after it and allocated again for the next, at the
        # same addresses where sizes allow (as cudaFree/cudaMalloc tend to): a kernel that
        # caches results keyed on a pointer sees a known pointer with new contents
        mark = dev.heap.top
        seen: dict = {}
        for k, s in enumerate(input_sets):
            dev.heap.top = mark
            # registers start as random bits, except on every second launch of the same input
            # set (the judge runs each set twice), where they start at zero: code that is right
            # only while garbage is nonzero, or only while it is zero, fails one of the two
            seen[s.index] = seen.get(s.index, 0) + 1
            fill = "zero" if seen[s.index] % 2 == 0 else "random"
            if results and results[-1].status in ("timeout", "crash"):
                # as on a GPU, a hang or a fault ends the run (module state is suspect)
                results.extend(RunResult("not_run", error=f"not run after a {results[-1].status} of an earlier set")
                               for _ in input_sets[k:])
                break
            rs = s.spec
            r = RunResult("ok")
            try:
                grid, block = tuple(int(g) for g in rs.grid), tuple(int(b) for b in rs.block)
                if math.prod(block) > 1024 or min(grid + block) < 1 or grid[1] > 65535 or grid[2] > 65535:
                    results.append(RunResult("launch_error", error=f"invalid launch shape grid={grid} block={block}"))
                    continue
                if dev.static_smem_aligned() + int(rs.shared_bytes) > MAX_SHARED_BYTES:
                    results.append(RunResult("launch_error", error="too much shared memory for one block"))
                    continue
                params, allocs, watch, addresses = [], [], [], {}
                # an aliased set (superopt.judge.inputs.aliased_set): `alias.onto`'s allocation holds
                # the union of both views, guarded around the union; `alias.buffer` is a view in it
                alias = s.alias
                geom = alias_geometry(s) if alias is not None else None
                for p in rs.params:
                    if isinstance(p, (Scalar, Bytes)) or (geom is not None and p.name == alias.buffer):
                        continue
                    union = geom is not None and p.name == alias.onto
                    data = (union_bytes(s, geom) if union
                            else np.ascontiguousarray(s.data[p.name]).view(np.uint8).reshape(-1))
                    front, back = s.guards[p.name]
                    g = len(front)
                    base = dev.alloc(data.size + 2 * g, 256)
                    dev.heap.write(base, front)
                    if data.size:
                        dev.heap.write(base + g, data)
                    dev.heap.write(base + g + data.size, back)
                    allocs.append((p, base, data, g))
                    zone_end = base + (-(-(data.size + 2 * g) // 256) * 256)
                    watch.append((p.name, base, zone_end, base + g, base + g + data.size))
                    addresses[p.name] = base + g + (geom.at[p.name] if union else 0)
                if geom is not None:
                    addresses[alias.buffer] = addresses[alias.onto] - geom.at[alias.onto] + geom.at[alias.buffer]
                for p in rs.params:
                    if isinstance(p, Scalar):
                        params.append(_pack_scalar(p))
                    elif isinstance(p, Bytes):
                        params.append(p)           # packed below, once its buffers have addresses
                    elif not p.embedded:
                        params.append(addresses[p.name])
                params = [v.packed(addresses) if isinstance(v, Bytes) else v for v in params]
                seed = int.from_bytes(os.urandom(8), "little")
                t0 = time.perf_counter()
                kw = {"chunk_lanes": self.chunk_lanes} if self.chunk_lanes else {}
                if alias is not None:
                    kw.update(self.alias_plan(seen[s.index]))
                else:
                    kw.update(launch_plan(s.index, fill, across_warps, cross_block, grid, block, self.lane_splits))
                stats = dev.launch(spec.kernel, grid, block, params, shared_bytes=int(rs.shared_bytes),
                                   timeout=limit, seed=seed, watch=watch, register_fill=fill, **kw)
                r.guard_reads = stats.get("guard_reads", {})
                r.taint = stats.get("taint", {})
                r.elapsed = time.perf_counter() - t0
                if stats.get("printf"):
                    r.log = f"{len(stats['printf'])} printf calls (not printed)"
                for p, base, data, g in allocs:
                    raw = dev.heap.read(base, data.size + 2 * g)
                    front, back = s.guards[p.name]
                    ok, why = check_guards(front, back, raw[:g].tobytes(), raw[g + data.size:].tobytes())
                    names = [p.name]
                    if geom is not None and p.name == alias.onto:
                        names.append(alias.buffer)
                        if not ok:
                            why = f"around the union of {alias.onto!r} and {alias.buffer!r} ({alias.describe()}): {why}"
                    for name in names:
                        q = rs.param(name)
                        lo = g + (geom.at[name] if len(names) > 1 else 0)
                        out = raw[lo:lo + q.nbytes]
                        same = np.array_equal(out, np.ascontiguousarray(s.data[name]).view(np.uint8).reshape(-1))
                        r.outputs[name] = s.data[name] if same else out.view(q.elem.dtype).copy()
                        r.inputs_unchanged[name] = bool(same)
                        r.guards_intact[name] = ok
                    if not ok:
                        r.guard_damage[p.name] = why
            except Unsupported as e:
                r = RunResult("unsupported", error=str(e))
            except UndefinedBehavior as e:
                r = RunResult("unsupported", error=f"undefined behaviour: {e}")
            except KernelFault as e:
                r = RunResult("crash", error=str(e))
            except (RunTimeout, Deadlock) as e:
                r = RunResult("timeout", error=f"{type(e).__name__}: {e}")
            except (ValueError, OverflowError) as e:
                r = RunResult("launch_error", error=f"{type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001
                r = RunResult("unsupported", error=f"emulator error: {type(e).__name__}: {e}")
            results.append(r)
        return results
