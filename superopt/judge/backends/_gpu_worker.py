"""The GPU runner's child process: ``python -m superopt.judge.backends._gpu_worker``.

Speaks length-prefixed pickle frames (superopt.judge.backends._proto) on stdin/stdout; anything
else printed goes to stderr. It owns the CUDA context, so a hanging kernel or a sticky
CUDA error (illegal address, trap, ...) ends only this process: after such an error it
answers, then exits, and the parent starts a fresh one.

Requests (dicts with "op"):
  run:  load the PTX once, launch the kernel for each set (fresh allocations, guards,
        initial contents given as raw bytes), return the raw final bytes of each buffer.
  time: event-timed, interleaved launches of two modules (A B / B A ...), L2 flushed
        before each launch by reading a buffer twice the L2 size.
  peak: device-to-device copy bandwidth (bytes read + written per second), measured once.
  exit.
Everything here deals in bytes; types and judging live in the parent.
"""
from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from superopt.judge.backends import _proto
from superopt.judge.backends._proto import EXPECTED
from superopt.judge.backends.resident import Kept

G_SUCCESS = 0
G_NOT_READY = 600
# The longest pause between two polls of a launch's end (Worker._wait).
POLL_PAUSE_MAX_S = 2.5e-4

# Our own helper kernels: shared-memory scrubber and L2 flusher (hand-written PTX, old
# ISA so that any driver takes it).
UTIL_PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.extern .shared .align 16 .b8 superopt_scrub_buf[];

.visible .entry superopt_scrub_smem(
    .param .u32 seed,
    .param .u32 nwords
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    ld.param.u32 %r1, [seed];
    ld.param.u32 %r2, [nwords];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %ctaid.x;
    mad.lo.u32 %r1, %r5, -1640531527, %r1;
    mov.u32 %r6, superopt_scrub_buf;
LOOP:
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 bra DONE;
    xor.b32 %r7, %r3, %r1;
    mul.lo.u32 %r7, %r7, -2048144789;
    shr.u32 %r8, %r7, 13;
    xor.b32 %r7, %r7, %r8;
    mul.lo.u32 %r7, %r7, -1028477387;
    shl.b32 %r9, %r3, 2;
    add.u32 %r10, %r6, %r9;
    st.volatile.shared.u32 [%r10], %r7;
    add.u32 %r3, %r3, %r4;
    bra LOOP;
DONE:
    ret;
}

.visible .entry superopt_flush_l2(
    .param .u64 buf,
    .param .u64 nvec,
    .param .u64 sink
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [buf];
    ld.param.u64 %rd2, [nvec];
    ld.param.u64 %rd3, [sink];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd4, %r3, %r2;
    cvt.u64.u32 %rd5, %r1;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r4, %r2;
    mov.u32 %r5, 0;
FLOOP:
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra FDONE;
    shl.b64 %rd7, %rd4, 4;
    add.u64 %rd8, %rd1, %rd7;
    ld.global.cg.v4.u32 {%r6, %r7, %r8, %r9}, [%rd8];
    xor.b32 %r5, %r5, %r6;
    xor.b32 %r5, %r5, %r7;
    xor.b32 %r5, %r5, %r8;
    xor.b32 %r5, %r5, %r9;
    add.u64 %rd4, %rd4, %rd6;
    bra FLOOP;
FDONE:
    setp.ne.u32 %p1, %r5, 1234567891;
    @%p1 bra END;
    st.global.u32 [%rd3], %r5;
END:
    ret;
}
// flag[0] = 1 when the nbytes at a and b differ (64-bit words, then the tail bytes by thread 0)
.visible .entry superopt_bytes_differ(
    .param .u64 a,
    .param .u64 b,
    .param .u64 nbytes,
    .param .u64 flag
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<24>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [nbytes];
    ld.param.u64 %rd4, [flag];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd4, %rd4;
    shr.u64 %rd13, %rd3, 3;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd5, %r3, %r2;
    cvt.u64.u32 %rd6, %r1;
    add.u64 %rd5, %rd5, %rd6;
    mov.u64 %rd14, %rd5;
    mul.wide.u32 %rd7, %r4, %r2;
    mov.u32 %r5, 0;
    // a buffer of a misaligned set starts past an 8-byte boundary: byte by byte, every thread
    or.b64 %rd20, %rd1, %rd2;
    and.b64 %rd20, %rd20, 7;
    setp.ne.u64 %p1, %rd20, 0;
    @%p1 bra DBYTES;
DLOOP:
    setp.ge.u64 %p1, %rd5, %rd13;
    @%p1 bra DTAIL;
    shl.b64 %rd8, %rd5, 3;
    add.u64 %rd9, %rd1, %rd8;
    add.u64 %rd10, %rd2, %rd8;
    ld.global.cg.u64 %rd11, [%rd9];
    ld.global.cg.u64 %rd12, [%rd10];
    setp.ne.u64 %p2, %rd11, %rd12;
    selp.u32 %r6, 1, 0, %p2;
    or.b32 %r5, %r5, %r6;
    add.u64 %rd5, %rd5, %rd7;
    bra DLOOP;
DTAIL:
    setp.ne.u64 %p1, %rd14, 0;
    @%p1 bra DFLAG;
    shl.b64 %rd15, %rd13, 3;
DTLOOP:
    setp.ge.u64 %p1, %rd15, %rd3;
    @%p1 bra DFLAG;
    add.u64 %rd9, %rd1, %rd15;
    add.u64 %rd10, %rd2, %rd15;
    ld.global.cg.u8 %r7, [%rd9];
    ld.global.cg.u8 %r8, [%rd10];
    setp.ne.u32 %p2, %r7, %r8;
    selp.u32 %r6, 1, 0, %p2;
    or.b32 %r5, %r5, %r6;
    add.u64 %rd15, %rd15, 1;
    bra DTLOOP;
DBYTES:
    setp.ge.u64 %p1, %rd5, %rd3;
    @%p1 bra DFLAG;
    add.u64 %rd9, %rd1, %rd5;
    add.u64 %rd10, %rd2, %rd5;
    ld.global.cg.u8 %r7, [%rd9];
    ld.global.cg.u8 %r8, [%rd10];
    setp.ne.u32 %p2, %r7, %r8;
    selp.u32 %r6, 1, 0, %p2;
    or.b32 %r5, %r5, %r6;
    add.u64 %rd5, %rd5, %rd7;
    bra DBYTES;
DFLAG:
    setp.eq.u32 %p1, %r5, 0;
    @%p1 bra DEND;
    st.global.u32 [%rd4], 1;
DEND:
    ret;
}

// out[0] += sum over 64-bit words w_i of w_i * (2i + 1), plus the tail bytes (thread 0), mod 2^64:
// a checksum that does not depend on the order threads add in
.visible .entry superopt_checksum(
    .param .u64 a,
    .param .u64 nbytes,
    .param .u64 out
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<24>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd3, [nbytes];
    ld.param.u64 %rd4, [out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd4, %rd4;
    shr.u64 %rd13, %rd3, 3;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd5, %r3, %r2;
    cvt.u64.u32 %rd6, %r1;
    add.u64 %rd5, %rd5, %rd6;
    mov.u64 %rd14, %rd5;
    mul.wide.u32 %rd7, %r4, %r2;
    mov.u64 %rd16, 0;
CLOOP:
    setp.ge.u64 %p1, %rd5, %rd13;
    @%p1 bra CTAIL;
    shl.b64 %rd8, %rd5, 3;
    add.u64 %rd9, %rd1, %rd8;
    ld.global.cg.u64 %rd11, [%rd9];
    shl.b64 %rd17, %rd5, 1;
    or.b64 %rd17, %rd17, 1;
    mad.lo.u64 %rd16, %rd11, %rd17, %rd16;
    add.u64 %rd5, %rd5, %rd7;
    bra CLOOP;
CTAIL:
    setp.ne.u64 %p1, %rd14, 0;
    @%p1 bra CADD;
    shl.b64 %rd15, %rd13, 3;
CTLOOP:
    setp.ge.u64 %p1, %rd15, %rd3;
    @%p1 bra CADD;
    add.u64 %rd9, %rd1, %rd15;
    ld.global.cg.u8 %rd11, [%rd9];
    add.u64 %rd18, %rd15, 1;
    shl.b64 %rd18, %rd18, 40;
    mad.lo.u64 %rd16, %rd11, %rd18, %rd16;
    add.u64 %rd15, %rd15, 1;
    bra CTLOOP;
CADD:
    // the warp's sum first (one atomic per warp, not per thread); every lane reaches here
    mov.b64 {%r8, %r9}, %rd16;
    shfl.sync.bfly.b32 %r10, %r8, 16, 31, -1;
    shfl.sync.bfly.b32 %r11, %r9, 16, 31, -1;
    mov.b64 %rd20, {%r10, %r11};
    add.u64 %rd16, %rd16, %rd20;
    mov.b64 {%r8, %r9}, %rd16;
    shfl.sync.bfly.b32 %r10, %r8, 8, 31, -1;
    shfl.sync.bfly.b32 %r11, %r9, 8, 31, -1;
    mov.b64 %rd20, {%r10, %r11};
    add.u64 %rd16, %rd16, %rd20;
    mov.b64 {%r8, %r9}, %rd16;
    shfl.sync.bfly.b32 %r10, %r8, 4, 31, -1;
    shfl.sync.bfly.b32 %r11, %r9, 4, 31, -1;
    mov.b64 %rd20, {%r10, %r11};
    add.u64 %rd16, %rd16, %rd20;
    mov.b64 {%r8, %r9}, %rd16;
    shfl.sync.bfly.b32 %r10, %r8, 2, 31, -1;
    shfl.sync.bfly.b32 %r11, %r9, 2, 31, -1;
    mov.b64 %rd20, {%r10, %r11};
    add.u64 %rd16, %rd16, %rd20;
    mov.b64 {%r8, %r9}, %rd16;
    shfl.sync.bfly.b32 %r10, %r8, 1, 31, -1;
    shfl.sync.bfly.b32 %r11, %r9, 1, 31, -1;
    mov.b64 %rd20, {%r10, %r11};
    add.u64 %rd16, %rd16, %rd20;
    and.b32 %r7, %r1, 31;
    setp.ne.u32 %p1, %r7, 0;
    @%p1 bra CEND;
    atom.global.add.u64 %rd19, [%rd4], %rd16;
CEND:
    ret;
}
"""


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two byte arrays hold the same bytes, compared in the widest words that divide
    their length (a readback is compared with its initial contents under the GPU's lock: as
    bytes, numpy makes a bool per byte, eight times the work of comparing 64-bit words)."""
    if a.nbytes != b.nbytes:
        return False
    n = a.nbytes
    for word in (np.uint64, np.uint32, np.uint16, np.uint8):
        size = np.dtype(word).itemsize
        if n % size == 0 and a.ctypes.data % size == 0 and b.ctypes.data % size == 0:
            wa, wb = a.view(word), b.view(word)
            # in chunks, so that a buffer that changed (an output against its poison, mostly)
            # costs a chunk, not a pass over all of it
            step = _COMPARE_CHUNK // size
            return all(np.array_equal(wa[k:k + step], wb[k:k + step]) for k in range(0, wa.size, step))
    return bool(np.array_equal(a, b))


_COMPARE_CHUNK = 1 << 20


def _guard_bytes(s: dict) -> int:
    """The guard bytes of a set's allocations (front and back of each)."""
    return 2 * int(s["guard"]) * sum(1 for item in s["params"] if item[0] in ("b", "e", "u"))


def _set_bytes(s: dict, blobs: list) -> int:
    """The device bytes a set's allocations take."""
    return sum(blobs[item[1]].nbytes + 2 * int(s["guard"]) for item in s["params"] if item[0] in ("b", "e", "u"))


# A request's sets are queued together (Worker._run_group) up to these: the group's
# allocations live at the same time, so sets at captured sizes go one at a time.
GROUP_BYTES = 64 << 20
GROUP_SETS = 32


def _groups(sets: list, blobs: list, together: bool = True) -> list[list[int]]:
    """Consecutive sets, in order, as groups of at most :data:`GROUP_SETS` whose allocations
    together take at most :data:`GROUP_BYTES` (a larger set alone); one set a group when not
    ``together``."""
    out: list[list[int]] = []
    size = 0
    for k, s in enumerate(sets):
        b = _set_bytes(s, blobs)
        if not out or not together or len(out[-1]) >= GROUP_SETS or size + b > GROUP_BYTES:
            out.append([])
            size = 0
        out[-1].append(k)
        size += b
    return out


class _Staging:
    """Page-locked room for a group of sets queued with no wait between them (guards in; guards
    and compare flags out) and their device flag words, handed out in order."""

    def __init__(self, room_in, room_out, flags):
        self.room_in, self.room_out, self.flags = room_in, room_out, flags
        self.at_in = self.at_out = self.at_flags = 0

    @staticmethod
    def _take(room, at: int, n: int):
        ptr, view = room
        return (ptr + at, view[at:at + n])

    def take_in(self, n: int) -> tuple[int, np.ndarray]:
        got = self._take(self.room_in, self.at_in, n)
        self.at_in += n
        return got

    def take_out(self, n: int) -> tuple[int, np.ndarray]:
        if not n:
            return 0, np.empty(0, np.uint8)
        got = self._take(self.room_out, self.at_out, n)
        self.at_out += n
        return got

    def take_flags(self, k: int) -> int:
        got = self.flags + 4 * self.at_flags
        self.at_flags += k
        return got


class CudaError(Exception):
    def __init__(self, code: int, what: str, name: str):
        super().__init__(f"{what}: {name}")
        self.code = code
        self.what = what
        self.name = name


# Errors after which the context is unusable (sticky) or the state is unknown.
STICKY = {700, 701, 702, 714, 715, 716, 717, 718, 719, 710, 999}
OUT_OF_MEMORY = 2


class Worker:
    def __init__(self, ordinal: int):
        from cuda.bindings import driver as cu
        self.cu = cu
        self._chk(cu.cuInit(0), "cuInit")
        n = self._chk(cu.cuDeviceGetCount(), "cuDeviceGetCount")
        if n < 1:
            raise RuntimeError("no CUDA device")
        if ordinal >= n:
            raise RuntimeError(f"device {ordinal} requested, {n} present")
        self.dev = self._chk(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ctx = self._chk(cu.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self._chk(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.stream = self._chk(cu.cuStreamCreate(0), "cuStreamCreate")
        A = cu.CUdevice_attribute
        att = lambda a: int(self._chk(cu.cuDeviceGetAttribute(a, self.dev), "cuDeviceGetAttribute"))  # noqa: E731
        name = self._chk(cu.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        self.info = {
            "name": bytes(name).split(b"\0")[0].decode(errors="replace"),
            "ordinal": ordinal,
            "cc": (att(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), att(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
            "sm_count": att(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            "l2_bytes": att(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            "smem_optin": att(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            "total_mem": int(self._chk(cu.cuDeviceTotalMem(self.dev), "cuDeviceTotalMem")),
            "driver_version": int(self._chk(cu.cuDriverGetVersion(), "cuDriverGetVersion")),
            "pid": os.getpid(),
        }
        try:
            from superopt.judge.devices import format_uuid
            self.info["uuid"] = format_uuid(self._chk(cu.cuDeviceGetUuid(self.dev), "cuDeviceGetUuid").bytes)
        except Exception:  # noqa: BLE001 - the UUID only confirms the lease; never fatal
            pass
        try:
            import cuda.bindings
            self.info["cuda_bindings"] = getattr(cuda.bindings, "__version__", "?")
        except Exception:  # noqa: BLE001
            pass
        self.util_mod = None
        self.scrub_fn = None
        self.flush_fn = None
        self.prepared = None            # a timing's state before its rounds (op_time_prepare)
        self.prepared_id = None
        self.flush_buf = None
        self.sink = None
        self.peak = None
        self.rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
        self.loaded_cubin = False         # whether the last load() took the cubin (else the driver's JIT)
        self.differ_fn = None
        self.checksum_fn = None
        self.word = None                 # 8 device bytes: the compare's flag, the checksum's sum
        # device words {name: (pointer, how many)}: "flags" (a group's compares, one each),
        # "sums" (kept inputs' checksums, Worker._dev_checksums)
        self.words: dict[str, tuple] = {}
        # page-locked host buffers {name: (pointer, bytes, uint8 view, page-locked)}: a set's guard
        # bytes go in and come back through them with copies queued on the stream, not one
        # synchronous copy per guard (2026-12-04, economy bench on the H200: the synchronous copies were most of
        # a check's GPU-held time, 1.9 ms per set to fill, 0.75 ms to read back)
        self.pinned: dict[str, tuple] = {}
        self.staged_in_flight = False    # copies from the "in" buffer may still be queued
        self.events: list = []           # CUDA events, two per set of a group (Worker._events)
        self.spent: dict[str, float] = {}
        # inputs kept across requests (superopt.judge.backends.resident); SUPEROPT_GPU_RESIDENT_BYTES=0
        # turns it off
        from superopt.config.settings import BY_ENV, env_value
        from superopt.judge.backends.resident import WorkerStore, worker_limit
        name = "SUPEROPT_GPU_RESIDENT_BYTES"
        want = int(env_value(name) or BY_ENV[name].default)
        free = int(self._chk(cu.cuMemGetInfo(), "cuMemGetInfo")[0]) if want > 0 else 0
        self.store = WorkerStore(min(want, worker_limit(free)), self._dev_alloc, self._dev_upload, self._dev_free,
                                 self._dev_checksum, self._dev_checksums)
        self.info["resident_limit"] = self.store.limit
        # the sets' allocations, reused by size (superopt.judge.backends.alloc_pool);
        # SUPEROPT_GPU_POOL_BYTES=0 frees each after its launch, as before
        from superopt.judge.backends.alloc_pool import AllocationPool
        name = "SUPEROPT_GPU_POOL_BYTES"
        want = int(env_value(name) or BY_ENV[name].default)
        if want > 0 and not free:
            free = int(self._chk(cu.cuMemGetInfo(), "cuMemGetInfo")[0])
        # half the kept inputs' share of free memory (1/32): with eight workers on one GPU the
        # two together stay within three quarters of it
        self.pool = AllocationPool(min(want, worker_limit(free) // 2) if want > 0 else 0, self._dev_alloc,
                                   self._dev_free)
        self.info["pool_limit"] = self.pool.limit

    # ------------------------------------------------------------------ helpers
    def _err_name(self, err) -> str:
        try:
            r = self.cu.cuGetErrorName(err)
            return r[1].decode() if r[0] == 0 else str(err)
        except Exception:  # noqa: BLE001
            return str(err)

    def _chk(self, res, what: str):
        err = res[0]
        if int(err) != G_SUCCESS:
            raise CudaError(int(err), what, self._err_name(err))
        if len(res) == 1:
            return None
        return res[1] if len(res) == 2 else res[1:]

    def load(self, ptx: str, cubin: bytes | None = None):
        """Load a module with the loader's error/info log captured: ptxas's cubin when the
        parent sent it (no JIT), else the PTX (the driver compiles it). Returns (module, log).
        A cubin the driver refuses falls back to the PTX."""
        self.loaded_cubin = False
        if cubin:
            try:
                got = self._load_image(cubin)
                self.loaded_cubin = True
                return got
            except CudaError:
                pass
        return self._load_image(ptx.encode() + b"\0")

    def _load_image(self, data: bytes):
        cu = self.cu
        O = cu.CUjit_option
        size = 1 << 16
        err_buf = bytearray(size)
        info_buf = bytearray(size)
        opts = [O.CU_JIT_ERROR_LOG_BUFFER, O.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                O.CU_JIT_INFO_LOG_BUFFER, O.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES]
        vals = [err_buf, size, info_buf, size]
        res = cu.cuModuleLoadDataEx(data, len(opts), opts, vals)
        log = (bytes(err_buf).split(b"\0")[0] + b"\n" + bytes(info_buf).split(b"\0")[0]).decode(errors="replace").strip()
        if int(res[0]) != G_SUCCESS:
            raise CudaError(int(res[0]), "cuModuleLoadDataEx", self._err_name(res[0]) + (f"\n{log}" if log else ""))
        return res[1], log

    def function(self, mod, name: str):
        return self._chk(self.cu.cuModuleGetFunction(mod, name.encode()), f"cuModuleGetFunction({name})")

    def _ensure_util(self):
        if self.util_mod is not None:
            return
        cu = self.cu
        self.util_mod, _ = self.load(UTIL_PTX)
        self.scrub_fn = self.function(self.util_mod, "superopt_scrub_smem")
        self.flush_fn = self.function(self.util_mod, "superopt_flush_l2")
        self.differ_fn = self.function(self.util_mod, "superopt_bytes_differ")
        self.checksum_fn = self.function(self.util_mod, "superopt_checksum")
        self.word = self._chk(cu.cuMemAlloc(8), "cuMemAlloc(word)")
        self._chk(cu.cuFuncSetAttribute(self.scrub_fn,
                                        cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        self.info["smem_optin"]), "cuFuncSetAttribute(scrub)")

    def _launch(self, fn, grid, block, shared, args: list[np.ndarray]):
        ptrs = np.array([a.ctypes.data for a in args], dtype=np.uint64)
        self._chk(self.cu.cuLaunchKernel(fn, *grid, *block, shared, self.stream,
                                         ptrs.ctypes.data if len(args) else 0, 0), "cuLaunchKernel")
        return ptrs

    def scrub_shared(self):
        """Fill every SM's shared memory with random words so uninitialised reads differ."""
        self._ensure_util()
        nbytes = self.info["smem_optin"]
        args = [np.array([int(self.rng.integers(0, 1 << 32))], np.uint32), np.array([nbytes // 4], np.uint32)]
        self._launch(self.scrub_fn, (2 * self.info["sm_count"], 1, 1), (1024, 1, 1), nbytes, args)

    def flush_l2(self):
        self._ensure_util()
        if self.flush_buf is None:
            nbytes = max(2 * self.info["l2_bytes"], 64 << 20)
            self.flush_buf = (self._chk(self.cu.cuMemAlloc(nbytes), "cuMemAlloc(flush)"), nbytes)
            self._chk(self.cu.cuMemsetD8(self.flush_buf[0], 0x5A, nbytes), "cuMemsetD8(flush)")
            self.sink = self._chk(self.cu.cuMemAlloc(256), "cuMemAlloc(sink)")
        buf, nbytes = self.flush_buf
        args = [np.array([int(buf)], np.uint64), np.array([nbytes // 16], np.uint64), np.array([int(self.sink)], np.uint64)]
        self._launch(self.flush_fn, (4 * self.info["sm_count"], 1, 1), (512, 1, 1), 0, args)

    def _dev_alloc(self, n: int):
        return self._chk(self.cu.cuMemAlloc(max(1, n)), "cuMemAlloc")

    def _dev_upload(self, d, host: np.ndarray):
        if host.nbytes:
            self._chk(self.cu.cuMemcpyHtoD(d, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")

    def _util_grid(self, n: int) -> tuple:
        return (max(1, min(4 * self.info["sm_count"], -(-n // (8 * 512)))), 1, 1)

    def _read_word(self, nbytes: int) -> int:
        out = np.zeros(1, np.uint64)
        self._chk(self.cu.cuMemcpyDtoH(out.ctypes.data, self.word, nbytes), "cuMemcpyDtoH(word)")
        return int(out[0]) if nbytes == 8 else int(out.view(np.uint32)[0])

    def _pinned(self, name: str, n: int) -> tuple[int, np.ndarray]:
        """(host pointer, uint8 view) of at least ``n`` page-locked bytes kept as ``name``; a
        larger request replaces the buffer (the caller has no copy queued on the old one)."""
        have = self.pinned.get(name)
        if have is None or have[1] < n:
            cu = self.cu
            size = max(1 << 16, 1 << max(0, n - 1).bit_length())
            if have is not None and have[3]:
                self._chk(cu.cuMemFreeHost(have[0]), "cuMemFreeHost")
            try:
                ptr = int(self._chk(cu.cuMemHostAlloc(size, 0), "cuMemHostAlloc"))
                import ctypes
                view = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))
                locked = True
            except CudaError as e:
                if e.code in STICKY:
                    raise
                # no page-locked memory here: the same copies from pageable memory, which the
                # driver makes synchronous (slower, as before, and as right)
                view = np.empty(size, np.uint8)
                ptr, locked = view.ctypes.data, False
            have = self.pinned[name] = (ptr, size, view, locked)
        return have[0], have[2]

    def _flag_words(self, n: int):
        """Device words for ``n`` compare flags (grown as needed)."""
        return self._words("flags", n, 4, 1024)

    def _words(self, name: str, n: int, size: int, least: int):
        """Device room for ``n`` words of ``size`` bytes kept as ``name`` (at least ``least``
        words, grown to a power of two; the stream is drained before a smaller room is freed)."""
        have = self.words.get(name)
        if have is None or have[1] < n:
            if have is not None:
                self._sync()
                self._dev_free(have[0])
            count = max(least, 1 << max(0, n - 1).bit_length())
            have = self.words[name] = (self._dev_alloc(size * count), count)
        return have[0]

    def _queue_differ(self, a, b, n: int, flag) -> None:
        """Queue the device compare of ``n`` bytes at ``a`` and ``b``: the 32-bit word at ``flag``
        (zeroed by the caller) becomes non-zero where they differ."""
        args = [np.array([int(a)], np.uint64), np.array([int(b)], np.uint64), np.array([n], np.uint64),
                np.array([int(flag)], np.uint64)]
        self._launch(self.differ_fn, self._util_grid(n), (512, 1, 1), 0, args)

    def _dev_same(self, a: int, b, n: int) -> bool:
        """Whether ``n`` device bytes at ``a`` and ``b`` are equal, compared on the device (only
        a flag crosses the bus)."""
        self._ensure_util()
        self._chk(self.cu.cuMemsetD32(self.word, 0, 2), "cuMemsetD32(word)")
        self._queue_differ(a, b, n, self.word)
        return self._read_word(4) == 0

    def _dev_checksum(self, d, n: int) -> int:
        """An order-independent checksum of ``n`` device bytes at ``d``, computed on the device."""
        self._ensure_util()
        cu = self.cu
        self._chk(cu.cuMemsetD32(self.word, 0, 2), "cuMemsetD32(word)")
        args = [np.array([int(d)], np.uint64), np.array([n], np.uint64), np.array([int(self.word)], np.uint64)]
        self._launch(self.checksum_fn, self._util_grid(n), (512, 1, 1), 0, args)
        return self._read_word(8)

    def _dev_checksums(self, where: list) -> list[int]:
        """:meth:`_dev_checksum` of each (pointer, bytes) of ``where``: all queued, one wait."""
        if not where:
            return []
        self._ensure_util()
        cu = self.cu
        words = self._words("sums", len(where), 8, 64)
        self._chk(cu.cuMemsetD32Async(words, 0, 2 * len(where), self.stream), "cuMemsetD32Async(sums)")
        for i, (d, n) in enumerate(where):
            args = [np.array([int(d)], np.uint64), np.array([n], np.uint64), np.array([int(words) + 8 * i], np.uint64)]
            self._launch(self.checksum_fn, self._util_grid(n), (512, 1, 1), 0, args)
        out = np.zeros(len(where), np.uint64)
        self._chk(cu.cuMemcpyDtoH(out.ctypes.data, words, 8 * len(where)), "cuMemcpyDtoH(sums)")
        return [int(x) for x in out]

    def _dev_free(self, d):
        try:
            self.cu.cuMemFree(d)
        except Exception:  # noqa: BLE001
            pass

    def _resident_blobs(self, req: dict, blobs: list) -> tuple[list, dict, list]:
        """The request's blobs with the inputs this worker keeps standing in as :class:`Kept`
        sizes, and {blob index: device copy} for the blobs a run fills device to device and
        compares on the device; the keys it lacks (then nothing runs: the parent sends them
        again)."""
        plan = req.get("resident") or {}
        use, keep = plan.get("use") or {}, plan.get("keep") or {}
        missing = self.store.missing(use.values())
        if missing:
            return blobs, {}, missing
        blobs = list(blobs)
        dev = {}
        for i, key in keep.items():
            try:
                self.store.keep(key, blobs[i])
            except CudaError as e:
                if e.code in STICKY:
                    raise
                # no room on the device: this input travels as before
        for i, key in list(use.items()) + list(keep.items()):
            if key in self.store:
                d, n = self.store.get(key)
                blobs[i] = Kept(n)
                dev[i] = d
        return blobs, dev, []

    def _kept_changed(self, req: dict) -> list[str]:
        """Keys of kept inputs this request used whose device copy no longer holds its bytes (a
        run wrote outside its buffers); they are dropped."""
        plan = req.get("resident") or {}
        keys = {k for part in ("use", "keep") for k in (plan.get(part) or {}).values() if k in self.store}
        bad = self.store.changed(sorted(keys))
        for k in bad:
            self.store.drop(k)
        return bad

    def _alloc_set(self, s: dict, blobs: list, dev: dict | None = None, stage: "_Staging | None" = None):
        """Allocate and fill every buffer of a set: [front guard][data][back guard].

        Items: ("s", bytes) a scalar; ("b", blob, front, back) a buffer argument; ("e", ...)
        a buffer that is not an argument (reached through a struct's pointer field); ("t",
        bytes, [(offset, buffer number)]) a struct by value whose pointer fields get the
        addresses of those buffers (numbered in order of the "b"/"e"/"u"/"v" items). An aliased
        set (two views in one allocation): ("u", blob, front, back, offset) a buffer argument
        whose blob is the union of both views, guarded around the union, its own view
        ``offset`` bytes in; ("v", buffer number, offset) a buffer argument that is a view
        ``offset`` bytes (may be negative) from that buffer's address, with no allocation.

        ``stage``: the page-locked room of a group of sets queued together (:meth:`_stage_for`);
        without one, the set gets room of its own (after the last set's copies from it are done).

        Returns (param storage arrays, allocations as (dptr, data bytes, blob index, guard))."""
        cu = self.cu
        g = int(s["guard"])
        allocs = []
        addresses = []
        views = []
        if g:
            if stage is None:
                stage = self._stage_for([s], dev, reads=False)
            stage = stage.take_in(_guard_bytes(s))
            self.staged_in_flight = True
        at_stage = 0
        try:
            for item in s["params"]:
                if item[0] in ("s", "t"):
                    continue
                if item[0] == "v":
                    views.append((len(addresses), item[1], int(item[2])))
                    addresses.append(None)
                    continue
                idx, front, back = item[1:4]
                at = int(item[4]) if item[0] == "u" else 0
                data = blobs[idx]
                n = data.nbytes
                d = self._take(n + 2 * g)
                allocs.append((d, n, idx, g))
                base = int(d)
                # every copy is queued on the stream the launch follows: the host does not wait
                # for one before the next (a pageable blob is copied out before the call returns)
                if g:
                    ptr, view = stage
                    view[at_stage:at_stage + g] = np.frombuffer(front, np.uint8)
                    view[at_stage + g:at_stage + 2 * g] = np.frombuffer(back, np.uint8)
                    self._chk(cu.cuMemcpyHtoDAsync(cu.CUdeviceptr(base), ptr + at_stage, g, self.stream),
                              "cuMemcpyHtoDAsync(guard)")
                    self._chk(cu.cuMemcpyHtoDAsync(cu.CUdeviceptr(base + g + n), ptr + at_stage + g, g,
                                                   self.stream), "cuMemcpyHtoDAsync(guard)")
                    at_stage += 2 * g
                if n and dev and idx in dev:        # a kept input: device to device
                    self._chk(cu.cuMemcpyDtoDAsync(cu.CUdeviceptr(base + g), dev[idx], n, self.stream),
                              "cuMemcpyDtoDAsync")
                elif n:
                    self._chk(cu.cuMemcpyHtoDAsync(cu.CUdeviceptr(base + g), data.ctypes.data, n, self.stream),
                              "cuMemcpyHtoDAsync")
                addresses.append(base + g + at)
            for k, host, rel in views:
                addresses[k] = addresses[host] + rel
        except BaseException:
            self._free(allocs)
            raise
        args = []
        k = 0
        for item in s["params"]:
            if item[0] == "s":
                args.append(np.frombuffer(item[1], np.uint8).copy())
            elif item[0] == "t":
                raw = bytearray(item[1])
                for off, no in item[2]:
                    raw[off:off + 8] = int(addresses[no]).to_bytes(8, "little")
                args.append(np.frombuffer(bytes(raw), np.uint8).copy())
            else:
                if item[0] in ("b", "u", "v"):
                    args.append(np.array([addresses[k]], np.uint64))
                k += 1
        return args, allocs

    def _read_set(self, s: dict, blobs: list, allocs, dev: dict | None = None) -> list:
        """Per buffer item (data or None when unchanged, front guard bytes, back guard bytes); a
        view ("v") has no allocation of its own: (None, b"", b"") (its bytes are in the union's).
        A kept input (``dev``: blob index -> its device copy) is compared on the device and read
        back only when it changed. A buffer the set expects to hold a kept blob (``expect``:
        buffer position -> blob index; the parent expects nvcc's result) is compared with it on
        the device: equal, its data is :data:`EXPECTED` and only its guards are read back.

        The compares (one flag word each), the guards and the flags are queued on the stream and
        waited for once (:meth:`_queue_read`); only a buffer that differs from both is then read
        back whole (:meth:`_finish_read`)."""
        plan = self._queue_read(s, allocs, dev)
        self._sync()
        return self._finish_read(s, blobs, plan)

    def _compares(self, s: dict, dev: dict | None) -> int:
        """How many device compares :meth:`_queue_read` queues for ``s``."""
        if not dev:
            return 0
        expect = s.get("expect") or {}
        n = 0
        pos = 0
        for item in s["params"]:
            if item[0] in ("s", "t"):
                continue
            if item[0] != "v":
                n += (expect.get(pos) in dev) + (item[1] in dev)
            pos += 1
        return n

    def _queue_read(self, s: dict, allocs, dev: dict | None = None, stage: "_Staging | None" = None) -> dict:
        """Queue what :meth:`_finish_read` needs of a launched set: the device compares, the
        guards and the flags, copied into page-locked room (``stage``'s, else room of its own).
        Nothing is waited for."""
        cu = self.cu
        g = int(s["guard"])
        kinds = [item[0] for item in s["params"] if item[0] not in ("s", "t")]
        expect = s.get("expect") or {}
        left = iter(allocs)
        plan = []                       # per position: None (a view) or (d, n, idx, flag of expect, flag of kept)
        compares = []                   # (a, b, n, flag number)
        for pos, kind in enumerate(kinds):
            if kind == "v":
                plan.append(None)
                continue
            d, n, idx, _ = next(left)
            want = expect.get(pos)
            fe = fk = None
            if dev and want in dev:
                fe = len(compares)
                compares.append((int(d) + g, dev[want], n, fe))
            if dev and idx in dev:
                fk = len(compares)
                compares.append((int(d) + g, dev[idx], n, fk))
            plan.append((d, n, idx, fe, fk))
        nbuf = sum(1 for p in plan if p is not None)
        if stage is None:
            stage = self._stage_for([s], dev, fills=False)
        ptr, view = stage.take_out(2 * g * nbuf + 4 * len(compares))
        if compares:
            self._ensure_util()
            flags = stage.take_flags(len(compares))
            self._chk(cu.cuMemsetD32Async(cu.CUdeviceptr(flags), 0, len(compares), self.stream), "cuMemsetD32Async(flags)")
            for a, b, n, k in compares:
                self._queue_differ(a, b, n, flags + 4 * k)
        at = 0
        for p in plan:
            if p is None or not g:
                continue
            d, n = int(p[0]), p[1]
            self._chk(cu.cuMemcpyDtoHAsync(ptr + at, cu.CUdeviceptr(d), g, self.stream), "cuMemcpyDtoHAsync(guard)")
            self._chk(cu.cuMemcpyDtoHAsync(ptr + at + g, cu.CUdeviceptr(d + g + n), g, self.stream), "cuMemcpyDtoHAsync(guard)")
            at += 2 * g
        if compares:
            self._chk(cu.cuMemcpyDtoHAsync(ptr + at, cu.CUdeviceptr(flags), 4 * len(compares), self.stream),
                      "cuMemcpyDtoHAsync(flags)")
        return {"plan": plan, "view": view, "guard": g, "flags_at": at, "compares": len(compares)}

    def _finish_read(self, s: dict, blobs: list, queued: dict) -> list:
        """:meth:`_read_set`'s answer from what :meth:`_queue_read` queued, once the stream has
        been waited for."""
        cu = self.cu
        g, view, flags_at = queued["guard"], queued["view"], queued["flags_at"]
        differ = view[flags_at:flags_at + 4 * queued["compares"]].view(np.uint32).copy()
        out = []
        at = 0
        for p in queued["plan"]:
            if p is None:
                out.append((None, b"", b""))
                continue
            d, n, idx, fe, fk = p
            front, back = bytes(view[at:at + g]), bytes(view[at + g:at + 2 * g])
            at += 2 * g if g else 0
            if fe is not None and differ[fe] == 0:
                # equal to the array the parent expects (nvcc's result): only the guards travel
                out.append((EXPECTED, front, back))
                continue
            if fk is not None and differ[fk] == 0:
                out.append((None, front, back))
                continue
            data = np.empty(n, np.uint8)
            if n:
                self._chk(cu.cuMemcpyDtoH(data.ctypes.data, cu.CUdeviceptr(int(d) + g), n), "cuMemcpyDtoH")
            same = not isinstance(blobs[idx], Kept) and _same_bytes(data, blobs[idx])
            out.append((None if same else data, front, back))
        return out

    def _sync(self) -> None:
        """Wait for everything queued on the stream; the page-locked room is free again."""
        self._chk(self.cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
        self.staged_in_flight = False

    def _stage_for(self, sets: list, dev: dict | None, *, fills: bool = True, reads: bool = True) -> "_Staging":
        """Page-locked room (and device flag words) for the guards and compare flags of ``sets``
        queued together with no wait between them: sized before anything is queued, so that no
        buffer is replaced while copies from or into it are pending (the stream is drained
        first when copies from the last room may be)."""
        if fills and self.staged_in_flight:
            self._sync()
        need_in = sum(_guard_bytes(s) for s in sets) if fills else 0
        compares = sum(self._compares(s, dev) for s in sets) if reads else 0
        need_out = (sum(_guard_bytes(s) for s in sets) + 4 * compares) if reads else 0
        return _Staging(self._pinned("in", need_in) if need_in else None,
                        self._pinned("out", need_out) if need_out else None,
                        int(self._flag_words(compares)) if compares else None)

    def _take(self, n: int):
        """An allocation of ``n`` bytes for a set's buffer (the pool's, else a new one); when
        the device has no room, the pool's idle allocations are freed and it is tried again."""
        try:
            return self.pool.take(n)
        except CudaError as e:
            if e.code != OUT_OF_MEMORY or not len(self.pool):
                raise
        self.pool.clear()
        return self.pool.take(n)

    def _free(self, allocs, scrub: bool = True):
        """Hand a set's allocations back (to the pool, or freed), scrubbed with a random byte
        first (asynchronously, on the stream every later use of the allocation follows)."""
        for d, n, _, g in allocs:
            try:
                if scrub:
                    self._chk(self.cu.cuMemsetD8Async(d, int(self.rng.integers(0, 256)), n + 2 * g, self.stream),
                              "cuMemsetD8Async")
                self.pool.give(d, n + 2 * g)
            except CudaError:
                self._dev_free(d)

    def _wait(self, ev, timeout: float):
        """Poll an event until done; 'ok' | 'timeout' | CudaError raised. The pause between polls
        grows to :data:`POLL_PAUSE_MAX_S`: the GPU is held while this waits, so a kernel's end
        noticed late is GPU time lost for every compilation (pauses grown to 2 ms left a kernel
        of 1.3 ms unnoticed until 2.6 ms)."""
        cu = self.cu
        t0 = time.perf_counter()
        pause = 1e-5
        while True:
            err = int(cu.cuEventQuery(ev)[0])
            if err == G_SUCCESS:
                return "ok"
            if err != G_NOT_READY:
                raise CudaError(err, "kernel", self._err_name(err))
            if time.perf_counter() - t0 > timeout:
                return "timeout"
            time.sleep(pause)
            pause = min(pause * 2, POLL_PAUSE_MAX_S)

    # ------------------------------------------------------------------ ops
    def op_run(self, req: dict) -> dict:
        """The request's runs; the reply's ``spent`` says where the worker's time went (seconds:
        load (a cubin) or jit (the driver compiling the PTX), fill, launch, readback, free, keep:
        the kept inputs' uploads and checks)."""
        self._drop_prepared()           # the timing it was for is not coming (its parent gave up on it)
        return self._with_spent(self._op_run, req)

    def _spend(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.spent[name] = self.spent.get(name, 0.0) + now - since
        return now

    def _op_run(self, req: dict) -> dict:
        cu = self.cu
        sets = req["sets"]
        t = time.perf_counter()
        blobs = _proto.read_blobs(req["blobs"])
        blobs, dev, missing = self._resident_blobs(req, blobs)
        t = self._spend("keep", t)
        if missing:
            return {"resident_missing": missing, "fatal": False}
        results = [{"status": "not_run", "error": None, "elapsed": None, "buffers": None} for _ in sets]
        try:
            mod, log = self.load(req["ptx"], req.get("cubin"))
            t = self._spend("load" if self.loaded_cubin else "jit", t)
        except CudaError as e:
            for r in results:
                r.update(status="launch_error", error=str(e))
            return {"results": results, "log": str(e), "fatal": e.code in STICKY}
        fatal = batched_fault = False
        try:
            try:
                fn = self.function(mod, req["kernel"])
                if req.get("max_shared"):
                    self._chk(cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                    int(req["max_shared"])), "cuFuncSetAttribute")
            except CudaError as e:
                for r in results:
                    r.update(status="launch_error", error=str(e))
                return {"results": results, "log": log, "fatal": False}
            together = bool(req.get("batch", True)) and self._page_locked()
            for group in _groups(sets, blobs, together=together):
                fatal = self._run_group(fn, req, [sets[k] for k in group], [results[k] for k in group], blobs, dev)
                if fatal:
                    # the sets of the group queued before the one that failed ran but were not
                    # read: the parent runs the request again one set at a time, where each set
                    # before a crash keeps its result (GpuBackend.run_many)
                    batched_fault = len(group) > 1
                    break
            if not fatal and dev:
                t = time.perf_counter()
                changed = self._kept_changed(req)
                self._spend("keep", t)
                if changed:
                    # a run wrote outside its buffers, onto a kept input: no result of this
                    # request can be trusted, and the worker starts again with nothing kept
                    why = (f"memory outside the kernel's buffers changed during these runs (the worker's "
                           f"device copy of {len(changed)} kept input(s))")
                    for r in results:
                        r.update(status="crash", error=why, buffers=None)
                    fatal = True
        finally:
            if not fatal:
                try:
                    cu.cuModuleUnload(mod)
                except Exception:  # noqa: BLE001
                    pass
        cause = next((f"set {k} before it ended in {r['status']}: {r['error']}" for k, r in enumerate(results)
                      if r["status"] in ("crash", "timeout")), None)
        for r in results:
            if r["status"] == "not_run" and r["error"] is None:
                r["error"] = f"not run: {cause}" if cause else "not run"
        if req.get("note_gpu_done") and _OUT is not None and not fatal:
            # the rest is host work (the reply): the parent lets the GPU go for it
            # (GpuBackend._send); nothing of this request may still run on the device then
            self._sync()
            _proto.send(_OUT, {"gpu_done": True})
        out_file = req.get("out_file")
        t = time.perf_counter()
        if out_file:
            # changed buffers go to a shared-memory file instead of the pipe
            off = 0
            from superopt.store.private_dir import open_private
            with os.fdopen(open_private(out_file, os.O_WRONLY, new=True), "wb") as f:
                for r in results:
                    if not r.get("buffers"):
                        continue
                    new = []
                    for data, front, back in r["buffers"]:
                        if data is not None and not isinstance(data, str):
                            f.write(memoryview(data))
                            new.append((("file", off, data.nbytes), front, back))
                            off += data.nbytes
                        else:
                            new.append((data, front, back))      # unchanged, or EXPECTED
                    r["buffers"] = new
        self._spend("reply", t)
        rep = {"results": results, "log": log, "fatal": fatal}
        if batched_fault:
            rep["batched_fault"] = True
        return rep

    def _page_locked(self) -> bool:
        """Whether the staging buffers are page-locked: a copy back into pageable memory waits
        for the stream, so sets queued behind a launch that never ends could not be read
        without waiting for ever; without page-locked memory each set is its own group."""
        return all(self._pinned(name, 1)[0] and self.pinned[name][3] for name in ("in", "out"))

    def _events(self, n: int) -> list:
        """``n`` CUDA events of this worker's (made once, recorded again by every request)."""
        while len(self.events) < n:
            self.events.append(self._chk(self.cu.cuEventCreate(0), "cuEventCreate"))
        return self.events[:n]

    def _run_group(self, fn, req: dict, sets: list, results: list, blobs: list, dev: dict) -> bool:
        """Launch ``sets`` one after the other with no wait between them: every set's fill first,
        then each set's shared-memory scrub, launch (between its two events), device compares,
        guard and flag copies, all queued on the stream; then each launch's end is waited for
        in turn (the request's timeout for each) and, once the stream is done, the sets are
        read. One wait per group instead of two per set: beside other compilations' workers,
        each wait also waits for their time slices (2026-12-07).

        The fills come before every launch because a copy from pageable host memory waits for
        the stream before it starts: queued behind a launch that never ends, it would wait for
        ever, past the request's timeout (seen on the H100, 2026-12-07: the planted ``hang``
        candidate). After the first launch only work that never waits for the stream is
        queued. Fills ``results``; True when the context can no longer be trusted (a crash, a
        timeout: the worker then ends)."""
        cu = self.cu
        stage = self._stage_for(sets, dev)
        ev = self._events(2 * len(sets))
        scrub = req.get("scrub_shared", True)
        if scrub or dev:
            self._ensure_util()         # loaded before any launch of the group
        queued = []                     # (position in the group, allocations, args, queued read or None)
        fatal = False
        t = time.perf_counter()
        try:
            for k, (s, r) in enumerate(zip(sets, results)):
                try:
                    args, allocs = self._alloc_set(s, blobs, dev, stage)
                    queued.append([k, allocs, args, None])
                except CudaError as e:
                    if e.code in STICKY:
                        r.update(status="crash", error=str(e))
                        fatal = True
                        break
                    r.update(status="launch_error", error=str(e))
            for item in queued if not fatal else ():
                k, allocs, args, _ = item
                s, r = sets[k], results[k]
                try:
                    if scrub:
                        self.scrub_shared()
                    self._chk(cu.cuEventRecord(ev[2 * k], self.stream), "cuEventRecord")
                    self._launch(fn, s["grid"], s["block"], s["shared"], args)
                    self._chk(cu.cuEventRecord(ev[2 * k + 1], self.stream), "cuEventRecord")
                    item[3] = self._queue_read(s, allocs, dev, stage)
                except CudaError as e:
                    if e.code in STICKY or e.what == "kernel":
                        r.update(status="crash", error=str(e))
                        fatal = True
                        break
                    r.update(status="launch_error", error=str(e))
            t = self._spend("fill", t)
            for k, allocs, _, read in queued if not fatal else ():
                if read is None:
                    continue
                try:
                    st = self._wait(ev[2 * k + 1], float(req["timeout"]))
                    if st == "ok":
                        results[k]["elapsed"] = self._chk(cu.cuEventElapsedTime(ev[2 * k], ev[2 * k + 1]),
                                                          "cuEventElapsedTime") / 1e3
                except CudaError as e:
                    results[k].update(status="crash", error=str(e))
                    fatal = True
                    break
                if st == "timeout":
                    results[k].update(status="timeout", error=f"no completion within {req['timeout']:.3g} s")
                    fatal = True
                    break
            t = self._spend("launch", t)
            if not fatal:
                try:
                    self._sync()
                    for k, allocs, _, read in queued:
                        if read is not None:
                            results[k].update(status="ok", buffers=self._finish_read(sets[k], blobs, read))
                except CudaError as e:
                    # our own copies and compares after the launches failed: no set of the group
                    # left unread has a result
                    for k, _, _, read in queued:
                        if read is not None and results[k]["status"] != "ok":
                            results[k].update(status="crash" if e.code in STICKY else "launch_error", error=str(e))
                    fatal = e.code in STICKY
                t = self._spend("readback", t)
        finally:
            if not fatal:
                t = time.perf_counter()
                for _, allocs, _, _ in queued:
                    self._free(allocs)
                self._spend("free", t)
        return fatal

    def op_time(self, req: dict) -> dict:
        """Interleaved event timings of A and B on separate copies of one input set. The reply's
        ``spent`` says where the worker's time went (seconds: keep, load, fill, runs, free). A
        request with a ``resident`` plan (superopt.judge.backends.resident) fills both copies of
        a kept input device to device: a search times all its candidates of a kernel on one
        input set, which then crosses the bus once, not twice per timing."""
        return self._with_spent(self._op_time, req)

    def _with_spent(self, op, req: dict) -> dict:
        """``op(req)``'s reply with ``spent``: seconds per part (:meth:`_spend`) and the total."""
        self.spent = {}
        t0 = time.perf_counter()
        rep = op(req)
        self.spent["total"] = time.perf_counter() - t0
        rep["spent"] = {k: round(v, 6) for k, v in self.spent.items()}
        return rep

    def _timing_blobs(self, req: dict) -> tuple[list, dict]:
        """The timing's blobs and {blob index: kept device copy}. Every blob of a timing is in
        its shared-memory file, so a kept input the worker no longer holds is kept again from
        there (no round trip for a resend, unlike a run request)."""
        blobs = _proto.read_blobs(req["blobs"])
        plan = req.get("resident") or {}
        if not plan:
            return blobs, {}
        use = dict(plan.get("use") or {})
        keep = dict(plan.get("keep") or {})
        for i, key in list(use.items()):
            if key not in self.store:
                keep[i] = use.pop(i)
        blobs, dev, _ = self._resident_blobs({"resident": {"use": use, "keep": keep}}, blobs)
        return blobs, dev

    def op_time_prepare(self, req: dict) -> dict:
        """The part of a timing before its rounds (kept inputs, both modules loaded, both copies
        of the set filled), kept for the ``time`` request that names it: the parent sends this
        one under a GPU step shared with other compilations' checks, so the copies in (at
        captured sizes hundreds of MB, from the host when the set is not kept) do not hold the
        GPU alone. One prepared timing at a time; a new one frees the last."""
        return self._with_spent(self._op_time_prepare, req)

    def _op_time_prepare(self, req: dict) -> dict:
        self._drop_prepared()
        self.prepared = self._time_setup(req)
        self.prepared_id = int(req["prepare_id"])
        return {"prepared": self.prepared_id}

    def _drop_prepared(self) -> None:
        state, self.prepared = self.prepared, None
        if state is not None:
            self._time_teardown(state)

    def _time_setup(self, req: dict) -> dict:
        """Kept inputs, modules, functions and the two filled copies of a timing (see op_time)."""
        cu = self.cu
        state = {"mods": [], "allocs": [], "fns": [], "args": [], "dev": {}}
        t = time.perf_counter()
        blobs, state["dev"] = self._timing_blobs(req)
        t = self._spend("keep", t)
        try:
            for ptx, cubin in ((req["ptx_a"], req.get("cubin_a")), (req["ptx_b"], req.get("cubin_b"))):
                mod, _ = self.load(ptx, cubin)
                state["mods"].append(mod)
                fn = self.function(mod, req["kernel"])
                if req.get("max_shared"):
                    self._chk(cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                    int(req["max_shared"])), "cuFuncSetAttribute")
                state["fns"].append(fn)
                t = self._spend("load", t)
                args, allocs = self._alloc_set(req["set"], blobs, state["dev"])   # separate copies for A and B
                state["args"].append(args)
                state["allocs"].append(allocs)
                t = self._spend("fill", t)
            # the copies in are queued (_alloc_set): done before the step that made them ends, so
            # that a prepared timing's copies never run beside another compilation's timing
            self._sync()
            self._spend("fill", t)
        except BaseException:
            self._time_teardown(state)
            raise
        return state

    def _time_teardown(self, state: dict) -> None:
        t = time.perf_counter()
        for allocs in state["allocs"]:
            self._free(allocs, scrub=False)
        for m in state["mods"]:
            try:
                self.cu.cuModuleUnload(m)
            except Exception:  # noqa: BLE001
                pass
        self._spend("free", t)

    def _op_time(self, req: dict) -> dict:
        cu = self.cu
        apart = req.get("prepared") is not None and self.prepared is not None \
            and self.prepared_id == int(req["prepared"])
        if apart:
            state, self.prepared = self.prepared, None      # what op_time_prepare made for it
        else:
            self._drop_prepared()       # (a worker that started again since has nothing prepared)
            state = self._time_setup(req)
        try:
            t = time.perf_counter()
            fns, argss, dev = state["fns"], state["args"], state["dev"]
            s = req["set"]
            flush = bool(req.get("flush_l2", True))

            def launches(order: list[int]) -> list[float]:
                """Milliseconds of each launch of ``order`` (0: A, 1: B), each after an L2 flush
                and between its own two events: all queued, then one wait. Waiting for each launch
                before queuing the next left the GPU idle between launches and put the host's
                launch latency inside every measured interval (2026-12-07)."""
                ev = self._events(2 * len(order))
                for j, k in enumerate(order):
                    if flush:
                        self.flush_l2()
                    self._chk(cu.cuEventRecord(ev[2 * j], self.stream), "cuEventRecord")
                    self._launch(fns[k], s["grid"], s["block"], s["shared"], argss[k])
                    self._chk(cu.cuEventRecord(ev[2 * j + 1], self.stream), "cuEventRecord")
                self._chk(cu.cuEventSynchronize(ev[2 * len(order) - 1]), "cuEventSynchronize")
                return [self._chk(cu.cuEventElapsedTime(ev[2 * j], ev[2 * j + 1]), "cuEventElapsedTime")
                        for j in range(len(order))]

            t_start = time.perf_counter()
            # warm-up: at least ``warmup_min`` pairs, then more until ``warmup_s`` seconds have
            # passed, at most ``warmup`` pairs (a kernel of milliseconds is warm after two; a
            # request without the two keys runs ``warmup`` pairs, as before); queued in runs of
            # pairs, each as many as the pairs so far say the time left needs
            warm_max = int(req.get("warmup", 10))
            warm_min = min(warm_max, int(req.get("warmup_min", warm_max)))
            warm_s = float(req.get("warmup_s", 0.0))
            warmed = 0
            while warmed < warm_max and (warmed < warm_min or time.perf_counter() - t_start < warm_s):
                if warmed < warm_min:
                    n = warm_min - warmed
                else:
                    spent = time.perf_counter() - t_start
                    n = math.ceil((warm_s - spent) / (spent / warmed))
                n = max(1, min(n, warm_max - warmed))
                launches([k for w in range(warmed, warmed + n) for k in (w % 2, 1 - w % 2)])
                warmed += n
            per_round = (time.perf_counter() - t_start) / warmed if warmed else 0.0
            times = ([], [])
            reps = int(req.get("reps", 100))
            max_s = float(req.get("max_seconds", 20.0))
            from superopt.judge.early_stop import next_look, should_stop
            rule = req.get("stop_early")
            stopped = stopped_as = None
            done = 0
            while done < reps:
                # rounds up to the rule's next look, fewer where they would take over a quarter
                # of a second (the time limit is looked at between runs of rounds)
                n = next_look(done, rule, reps) - done
                if per_round > 0:
                    n = max(1, min(n, int(0.25 / per_round)))
                order = [k for i in range(done, done + n) for k in (i % 2, 1 - i % 2)]   # A B, B A, ...
                ms = launches(order)
                for k, m in zip(order, ms):
                    times[k].append(m)
                done += n
                if time.perf_counter() - t_start > max_s and done > 10:
                    break
                why = should_stop(done, times[0], times[1], rule) if done < reps else None
                if why:
                    stopped, stopped_as = done, why
                    break
            t = self._spend("runs", t)
            if dev:
                changed = self._kept_changed(req)
                t = self._spend("keep", t)
                if changed:
                    # a launch wrote outside its buffers, onto a kept input: the worker starts
                    # again with nothing kept, and this timing is not a result
                    return {"error": f"memory outside the kernel's buffers changed during the timing (the "
                                     f"worker's device copy of {len(changed)} kept input(s))", "fatal": True}
            return {"a_ms": times[0], "b_ms": times[1], "warmup_pairs": warmed,
                    "stopped": stopped, "stopped_as": stopped_as, "prepared_apart": apart,
                    "flush_bytes": self.flush_buf[1] if (flush and self.flush_buf) else 0}
        finally:
            self._time_teardown(state)

    def op_peak(self, req: dict) -> dict:
        if self.peak is None:
            cu = self.cu
            free, _total = self._chk(cu.cuMemGetInfo(), "cuMemGetInfo")
            nbytes = int(min(1 << 30, max(64 << 20, int(free) // 8)))
            a = self._chk(cu.cuMemAlloc(nbytes), "cuMemAlloc")
            b = self._chk(cu.cuMemAlloc(nbytes), "cuMemAlloc")
            try:
                self._chk(cu.cuMemsetD8(a, 1, nbytes), "cuMemsetD8")
                ev0 = self._chk(cu.cuEventCreate(0), "cuEventCreate")
                ev1 = self._chk(cu.cuEventCreate(0), "cuEventCreate")
                best = None
                for i in range(12):
                    self._chk(cu.cuEventRecord(ev0, self.stream), "cuEventRecord")
                    self._chk(cu.cuMemcpyDtoDAsync(b, a, nbytes, self.stream), "cuMemcpyDtoDAsync")
                    self._chk(cu.cuEventRecord(ev1, self.stream), "cuEventRecord")
                    self._chk(cu.cuEventSynchronize(ev1), "cuEventSynchronize")
                    ms = self._chk(cu.cuEventElapsedTime(ev0, ev1), "cuEventElapsedTime")
                    if i >= 2:
                        best = ms if best is None else min(best, ms)
                self.peak = {"bytes_per_s": 2 * nbytes / (best / 1e3), "copy_bytes": nbytes, "best_ms": best}
            finally:
                cu.cuMemFree(a)
                cu.cuMemFree(b)
        return dict(self.peak)


def main() -> None:
    """The worker; under cProfile when SUPEROPT_GPU_WORKER_PROFILE names a folder (a diagnosis:
    ``worker-<pid>.prof`` there, written when the parent closes the worker; a killed worker
    writes none)."""
    from superopt.config.settings import env_value
    folder = env_value("SUPEROPT_GPU_WORKER_PROFILE")
    if not folder:
        return _serve()
    import cProfile
    prof = cProfile.Profile()
    try:
        prof.runcall(_serve)
    finally:
        try:
            os.makedirs(folder, exist_ok=True)
            prof.dump_stats(os.path.join(folder, f"worker-{os.getpid()}.prof"))
        except OSError:
            pass


def _serve() -> None:
    # Own the protocol fds; anything printed to stdout afterwards lands on stderr.
    global _IN, _OUT
    _IN = os.dup(0)
    _OUT = os.dup(1)
    os.dup2(2, 1)
    from superopt.config.settings import env_value
    ordinal = int(env_value("SUPEROPT_GPU_DEVICE") or "0")
    try:
        w = Worker(ordinal)
    except BaseException as e:  # noqa: BLE001
        _proto.send(_OUT, {"ok": False, "error": f"{type(e).__name__}: {e}"})
        return
    _proto.send(_OUT, {"ok": True, "info": w.info})
    while True:
        try:
            req = _proto.recv(_IN)
        except _proto.ProtocolEOF:
            return
        op = req.get("op")
        if op == "exit":
            return
        try:
            if op == "run":
                rep = w.op_run(req)
            elif op == "time":
                rep = w.op_time(req)
            elif op == "time_prepare":
                rep = w.op_time_prepare(req)
            elif op == "peak":
                rep = w.op_peak(req)
            else:
                rep = {"error": f"unknown op {op!r}"}
        except CudaError as e:
            rep = {"error": str(e), "fatal": e.code in STICKY}
        except Exception as e:  # noqa: BLE001
            rep = {"error": f"{type(e).__name__}: {e}", "fatal": False}
        _proto.send(_OUT, rep)
        if rep.get("fatal"):
            sys.stderr.flush()
            os._exit(3)


if __name__ == "__main__":
    main()
