"""Load a PTX module into emulated device memory and launch kernels on it.

    >>> dev = LoadedModule(ptx_text)
    >>> a = dev.alloc(4 * n); dev.heap.write(a, data)
    >>> stats = dev.launch("kernel", grid=(g, 1, 1), block=(256, 1, 1),
    ...                    params=[a, np.int32(n)])
    >>> out = dev.heap.read(a, 4 * n)

Module variables (``.global``/``.const`` with their initializers) live in the heap and keep
their values across launches, as on a GPU.
"""
from __future__ import annotations

import math
import struct
import time
from dataclasses import dataclass, field

import numpy as np

import ptx_ir
from ptx_ir.nodes import BinExpr, Brace, CallExpr, Imm, Sym, VarDecl, type_size as node_type_size
from ptx_ir.semantics import Unsupported
from ptx_ir.semantics.types import imm_bits
from superopt.judge.emulator import memory as M
from superopt.judge.emulator.executor import SERIAL, Chunk, Machine, Poison
from superopt.judge.emulator.program import Program

DEFAULT_CHUNK_LANES = 32768
SCHEDULES = ("min-pc",) + tuple(SERIAL)
BLOCK_ORDERS = ("up", "down", "random")


@dataclass
class Launch:
    grid: tuple
    block: tuple
    shared_bytes: int
    kblob: np.ndarray
    heap: M.Heap
    deadline: float
    max_steps: int
    poison_rng: object = None
    max_depth: int = 4096
    max_local: int = 1 << 20
    printf: list = field(default_factory=list)
    sreg_cache: dict = field(default_factory=dict)
    poison: object = None
    watch: object = None              # memory.GuardWatch: loads outside watched buffers
    machine: object = None            # executor.Machine: %smid, %warpid, %nsmid, clocks
    nc_views: object = None           # global memory as at the launch's start (nc_stale), by access width


class LoadedModule:
    """A PTX module loaded into emulated device memory.

    ``fma_contraction``: what to do with a float ``mul`` without rounding modifier whose
    result feeds an ``add``/``sub`` without one, which ptxas may contract into an fma
    (an H200's JIT does, in optimized code): ``"refuse"`` raises Unsupported;
    ``"separate"`` assumes ptxas keeps them apart; ``"auto"`` (default) is ``separate``
    for modules whose ``.target`` says ``debug`` (compiled without optimization: recorded
    on an H200, golden case debug_mul_add) and ``refuse`` otherwise.

    ``stand_ins``: run the approximate float instructions (``rsqrt.approx``, ``div.full`` ...)
    by deterministic stand-ins instead of refusing them: for runs compared only with runs of the
    same code (whether its threads race), never with another program's.
    """

    def __init__(self, ptx, heap: M.Heap | None = None, *, fma_contraction: str = "auto", stand_ins: bool = False):
        if fma_contraction not in ("refuse", "separate", "auto"):
            raise ValueError(f"fma_contraction must be 'auto', 'refuse' or 'separate', not {fma_contraction!r}")
        self.module = ptx_ir.parse(ptx) if isinstance(ptx, str) else ptx
        if fma_contraction == "auto":
            fma_contraction = "separate" if "debug" in self.module.target else "refuse"
        self.fma_contraction = fma_contraction
        self.stand_ins = stand_ins          # approximate float instructions by ptx_ir.semantics.stand_ins
        self.heap = heap or M.Heap()
        self.vars: dict[str, tuple] = {}
        self.func_decls = {f.name for f in self.module.functions if f.is_declaration}
        self.static_smem = 0
        self.extern_smem_offset = 0
        self.local_static = 0
        self._fn_vars: dict = {}
        self._programs: dict[str, Program] = {}
        # every function gets a fixed address (function pointers, also in initializers)
        self.func_addr = {}
        for i, f in enumerate(self.module.functions):
            self.func_addr.setdefault(f.name, M.FUNC_BASE + 16 * (i + 1))
        self._place_module_vars()

    # ------------------------------------------------------------------ module variables
    def _place_module_vars(self):
        externs = []
        inits = []
        for v in self.module.globals:
            if v.space in (".global", ".const"):
                size = v.size
                if size is None:
                    if v.init is not None and isinstance(v.init, Brace):
                        size = len(_flatten(v.init)) * node_type_size(v.type)
                    else:
                        raise Unsupported(f"unsized {v.space} variable {v.name}")
                addr = self.heap.alloc(max(size, 1), max(v.align or 1, node_type_size(v.type), 16))
                self.vars[v.name] = ("heap", addr)
                inits.append((v, addr, size))
            elif v.space in (".shared",):
                if v.size is None or ".extern" in v.linkage and v.size in (None, 0):
                    externs.append(v)
                    continue
                self._place_shared(v)
            elif v.space == ".local":
                align = v.align or node_type_size(v.type)
                self.local_static = -(-self.local_static // align) * align
                self.vars[v.name] = ("local", self.local_static)
                self.local_static += v.size or 0
            elif v.space in (".tex",):
                raise Unsupported(f"{v.space} variable {v.name}")
        # variables declared inside function bodies (.shared/.global/.const); unsized
        # (extern) shared arrays all start where the dynamic shared memory does
        fn_externs = []
        for f in self.module.functions:
            for st in f.body or ():
                if isinstance(st, VarDecl) and st.space in (".shared", ".global", ".const"):
                    if st.space == ".shared" and st.size is None:
                        fn_externs.append((f.name, st))
                    else:
                        self.place_function_var(f.name, st)
        self.local_static = -(-self.local_static // 16) * 16
        align = max([v.align or 16 for v in externs] + [d.align or 16 for _, d in fn_externs] + [16])
        self.extern_smem_offset = -(-self.static_smem // align) * align
        for v in externs:
            self.vars[v.name] = ("shared", self.extern_smem_offset)
        for fname, d in fn_externs:
            self._fn_vars[(fname, id(d))] = ("shared", self.extern_smem_offset)
        for v, addr, size in inits:
            if v.init is not None:
                self.heap.write(addr, self._init_bytes(v, size))

    def _place_shared(self, v):
        align = v.align or node_type_size(v.type)
        self.static_smem = -(-self.static_smem // align) * align
        self.vars[v.name] = ("shared", self.static_smem)
        off = self.static_smem
        self.static_smem += v.size or 0
        return ("shared", off)

    def place_function_var(self, fname, decl):
        key = (fname, id(decl))
        if key in self._fn_vars:
            return self._fn_vars[key]
        if decl.space == ".shared":
            if decl.size is None:
                r = ("shared", self.extern_smem_offset)
            else:
                saved = self.vars.get(decl.name)
                r = self._place_shared(decl)
                if saved is not None:
                    self.vars[decl.name] = saved
                else:
                    del self.vars[decl.name]
        else:
            size = decl.size or 0
            addr = self.heap.alloc(max(size, 1), max(decl.align or 1, 16))
            if decl.init is not None:
                self.heap.write(addr, self._init_bytes(decl, size))
            r = ("heap", addr)
        self._fn_vars[key] = r
        return r

    def static_smem_aligned(self):
        return self.extern_smem_offset

    def _init_bytes(self, v: VarDecl, size: int) -> bytes:
        t = v.type
        es = node_type_size(t)
        items = _flatten(v.init)
        out = bytearray(size)
        for i, it in enumerate(items):
            if i * es >= size:
                break
            val = self._init_value(it, t)
            out[i * es:(i + 1) * es] = int(val).to_bytes(es, "little")
        return bytes(out)

    def _init_value(self, it, t):
        bits = node_type_size(t) * 8
        if isinstance(it, Imm):
            return imm_bits(it.value, it.text, t if t != ".b8" else ".b8")
        if isinstance(it, Sym):
            return self._sym_addr(it.name) & ((1 << bits) - 1)
        if isinstance(it, CallExpr) and it.func in ("generic",) and len(it.args) == 1:
            return self._init_value(it.args[0], t)
        if isinstance(it, BinExpr):
            a = self._init_value(it.left, t)
            b = self._init_value(it.right, t)
            r = {"+": a + b, "-": a - b, "*": a * b}[it.op]
            return r & ((1 << bits) - 1)
        raise Unsupported(f"initializer {it}")

    def _sym_addr(self, name):
        if name in self.vars and self.vars[name][0] == "heap":
            return self.vars[name][1]
        if name in self.func_addr:
            return self.func_addr[name]
        raise Unsupported(f"address of {name} in an initializer")

    # ------------------------------------------------------------------ programs
    def program(self, kernel: str) -> Program:
        p = self._programs.get(kernel)
        if p is None:
            p = Program(self, kernel)
            self._programs[kernel] = p
        return p

    def alloc(self, nbytes: int, align: int = 256) -> int:
        return self.heap.alloc(nbytes, align)

    # ------------------------------------------------------------------ launch
    def param_blob(self, prog: Program, params) -> np.ndarray:
        blob = bytearray(-(-max(prog.kparam_size, 8) // 8) * 8)
        decls = prog.kparam_decls
        if len(params) != len(decls):
            raise ValueError(f"kernel {prog.kernel.name} takes {len(decls)} parameters, got {len(params)}")
        for d, v in zip(decls, params):
            off, size = prog.kparams[d.name]
            if isinstance(v, (bytes, bytearray)):
                raw = bytes(v)
            elif isinstance(v, np.ndarray) and v.ndim == 0 or isinstance(v, np.generic):
                raw = np.asarray(v).tobytes()
            elif isinstance(v, float):
                raw = struct.pack("<d" if size == 8 else "<f", v)
            else:
                raw = (int(v) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
            if len(raw) != size:
                raise ValueError(f"parameter {d.name}: {len(raw)} bytes given, {size} expected")
            blob[off:off + size] = raw
        return np.frombuffer(bytes(blob), np.uint8).copy()

    def launch(self, kernel: str, grid, block, params, *, shared_bytes: int = 0,
               timeout: float | None = None, max_steps: int = 1 << 40, seed: int | None = 0,
               chunk_lanes: int = DEFAULT_CHUNK_LANES, watch=None, register_fill: str = "random",
               schedule="min-pc", block_order: str = "up", serial_warps: int | None = None,
               min_chunks: int = 1, serial_chunks: int = 1, nc_stale: bool = False) -> dict:
        """Run one kernel launch to completion; returns statistics.

        Registers, shared and local memory start as random bits drawn from ``seed``
        (zeros when ``seed`` is None); ``register_fill="zero"`` starts the registers at
        zero instead (shared and local memory stay random). ``watch``: buffers as ``(name, zone_start, zone_end,
        data_start, data_end)`` absolute addresses; loads touching a zone outside its data
        are counted in ``stats["guard_reads"]`` (name -> count, farthest bytes before the
        start / past the end). ``%smid``, ``%warpid``, ``%nsmid``, ``%gridid`` and the clocks
        are drawn from ``seed`` too (:class:`~superopt.judge.emulator.executor.Machine`).

        ``schedule`` (:data:`SCHEDULES`, or a sequence of them taken in turn by the serially
        run blocks): ``"min-pc"`` runs the threads at the smallest program counter together,
        so the warps of a block move nearly in step; ``"warps-up"``/``"warps-down"`` run one
        warp at a time, the first (last) one that can run, until it waits at a barrier, exits
        or has looped a while; ``"quarters-up"``/``"quarters-down"`` the same with quarters of
        warps (lanes 0-7 of every warp, then 8-15, ...), so lanes of one warp drift apart as
        independent thread scheduling lets them (a warp-synchronous exchange without
        ``__syncwarp`` shows); ``"interleave"``
        lets warps take turns, switching after every store to shared or global memory (a
        value that is briefly wrong between two stores shows to the other warps). All are
        schedules a GPU may pick; min-PC, in step, hides what the others show.
        A serial schedule runs the same warp of every block of a chunk together (blocks in
        step with each other), so its cost does not grow with the blocks of a chunk.
        ``serial_warps``: run only a sample of blocks with the serial schedule -- the first
        and the last block, then blocks drawn from ``seed`` -- about this many warps in all
        (at least one block), the others min-PC; None: every block.
        ``block_order`` (:data:`BLOCK_ORDERS`): the order the blocks run in, ``"up"``,
        ``"down"`` or ``"random"`` (drawn from ``seed``); ``min_chunks``: blocks run min-PC
        in at least this many groups, one after another, so that the order shows between
        blocks (blocks of one group run in step); ``serial_chunks``: the serially run blocks in
        at least this many groups (each with the next schedule of the sequence, so one launch
        can run them all).

        ``nc_stale``: loads through the non-coherent path (``ld.global.nc``, ``ldu``) read global
        memory as it was when the launch began, not what the launch wrote since: one of the
        outcomes PTX allows there (it leaves such reads of data the launch writes undefined;
        the read-only cache need not see those writes). Off, they read memory as it is.

        A block shape that the kernel's ``.maxntid``/``.reqntid`` refuses is refused here as
        on a GPU (ValueError). Raises Unsupported, KernelFault, UndefinedBehavior, Deadlock or
        RunTimeout.
        """
        rotation = (schedule,) if isinstance(schedule, str) else tuple(schedule)
        for sch in rotation:
            if sch not in SCHEDULES:
                raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, not {sch!r}")
        if not rotation:
            raise ValueError("no schedule given")
        if block_order not in BLOCK_ORDERS:
            raise ValueError(f"block_order must be one of {', '.join(BLOCK_ORDERS)}, not {block_order!r}")
        prog = self.program(kernel)
        grid = _dim3(grid)
        block = _dim3(block)
        if math.prod(block) > 1024 or math.prod(block) < 1 or min(grid) < 1:
            raise ValueError(f"invalid launch shape grid={grid} block={block}")
        from superopt.judge.launch_contract import block_problem
        refused = block_problem(prog.kernel_fn, block)
        if refused:
            raise ValueError(f"launch refused: {prog.kernel_fn.name} {refused}")
        kblob = self.param_blob(prog, params)
        rng = np.random.default_rng(seed) if seed is not None else None
        deadline = time.monotonic() + (timeout if timeout else 1e9)
        L = Launch(grid, block, int(shared_bytes), kblob, self.heap, deadline, max_steps, rng)
        if register_fill not in ("random", "zero"):
            raise ValueError(f"register_fill must be 'random' or 'zero', not {register_fill!r}")
        L.poison = Poison(rng, zero_registers=register_fill == "zero")
        # a generator of its own: the poison drawn from ``seed`` stays what it always was
        order_rng = np.random.default_rng([seed, 0x5C4ED]) if seed is not None else np.random.default_rng(0)
        nblocks = math.prod(grid)
        L.machine = Machine(np.random.default_rng([seed, 0x511D]) if seed is not None else None, nblocks)
        if nc_stale and prog.uses_nc:
            snap = self.heap.buf.copy()
            L.nc_views = {w: snap.view(v.dtype) for w, v in self.heap.views.items()}
        if watch:
            hb = M.HEAP_BASE
            L.watch = M.GuardWatch([(n, zs - hb, ze - hb, ds - hb, de - hb) for n, zs, ze, ds, de in watch])
        stats: dict = {"issues": 0, "thread_instructions": 0}
        T = math.prod(block)
        Tp = -(-T // 32) * 32
        per = max(1, chunk_lanes // Tp)
        # keep register files bounded for register-hungry kernels
        regbytes = sum(dt.itemsize for dt in prog.reg_dtypes) + sum(prog.pslot_sizes)
        per = max(1, min(per, (256 << 20) // max(1, regbytes * Tp)))
        plan = _chunk_plan(nblocks, Tp // 32, per, rotation, block_order, serial_warps, max(1, int(min_chunks)),
                           order_rng, max(1, int(serial_chunks)))
        stats["schedule"] = {"block_order": block_order, "serial": sorted({s for _, s in plan if s != "min-pc"}),
                             "serial_blocks": sum(len(b) for b, s in plan if s != "min-pc"), "chunks": len(plan)}
        t0 = time.perf_counter()
        c0 = time.process_time()
        with np.errstate(all="ignore"):
            for blocks, sch in plan:
                Chunk(prog, L, int(blocks[0]), len(blocks), stats, sch, blocks=blocks).run()
        stats["seconds"] = time.perf_counter() - t0
        stats["cpu_seconds"] = time.process_time() - c0
        stats["printf"] = L.printf
        stats["guard_reads"] = dict(L.watch.reads) if L.watch is not None else {}
        return stats


def _chunk_plan(nblocks: int, warps_per_block: int, per: int, rotation: tuple, order: str,
                serial_warps: int | None, min_chunks: int, rng, serial_chunks: int = 1) -> list[tuple[np.ndarray, str]]:
    """The launch's blocks as (block indices, schedule) chunks, in the order they run.

    Blocks run in ``order``, in chunks: the serial ones (all when ``serial_warps`` is None and
    the schedule is serial, else a sample: the first and last block, then random ones up to
    about ``serial_warps`` warps) in chunks of their own, each taking the next schedule of
    ``rotation`` (the blocks of a chunk in step with each other, each one's warps serially),
    the others min-PC; a chunk holds at most ``per`` blocks, runs when it is full (the last
    ones at the end), and each kind is split into at least ``min_chunks`` chunks (the serial
    ones into at least ``serial_chunks``)."""
    if order == "up":
        seq = np.arange(nblocks, dtype=np.int64)
    elif order == "down":
        seq = np.arange(nblocks - 1, -1, -1, dtype=np.int64)
    else:
        seq = rng.permutation(nblocks).astype(np.int64)
    serial_rot = tuple(s for s in rotation if s != "min-pc")
    serial = np.zeros(nblocks, bool)
    if serial_rot:
        if serial_warps is None:
            serial[:] = True
        else:
            k = max(1, min(nblocks, int(serial_warps) // max(1, warps_per_block)))
            picks = [0, nblocks - 1][:k]
            if k > len(picks):
                rest = np.arange(1, nblocks - 1, dtype=np.int64)
                picks += rng.choice(rest, size=min(k - len(picks), rest.size), replace=False).tolist()
            serial[np.asarray(picks, np.int64)] = True
    n_plain, n_serial = int(nblocks - serial.sum()), int(serial.sum())
    size = max(1, min(per, -(-n_plain // min_chunks))) if n_plain else per
    ssize = max(1, min(per, -(-n_serial // max(min_chunks, serial_chunks)))) if n_serial else per
    plan: list = []
    runs: dict = {False: [], True: []}
    turn = [0]

    def flush(is_serial):
        run = runs[is_serial]
        if run:
            sch = serial_rot[turn[0] % len(serial_rot)] if is_serial else "min-pc"
            turn[0] += is_serial
            plan.append((np.asarray(run, np.int64), sch))
            run.clear()
    for b in seq.tolist():
        kind = bool(serial[b])
        runs[kind].append(b)
        if len(runs[kind]) >= (ssize if kind else size):
            flush(kind)
    flush(False)
    flush(True)
    return plan


def _dim3(v) -> tuple:
    if isinstance(v, (int, np.integer)):
        v = [v]
    return tuple(int(x) for x in (list(v) + [1, 1])[:3])


def _flatten(init):
    if isinstance(init, Brace):
        out = []
        for x in init.items:
            out.extend(_flatten(x))
        return out
    return [init]
