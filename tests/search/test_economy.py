"""Search economy (issue 23) on the CPU: the GPU is held only for GPU steps, two compilations'
steps never overlap a timing, a waiting timing is not starved, the step's wait is bounded,
every search records where its time went, compute-sanitizer runs only the tools that apply,
the search stops at the memory roofline, ptxas runs ahead of the judge, and kernels are
searched where the expected gain is first.

The GPU is faked (SUPEROPT_FAKE_GPUS) and the judge below holds it the way the GPU backend
does (superopt.judge.devices.gpu_step around each run), so the locks are the real ones."""
from __future__ import annotations

import contextlib
import fcntl
import json
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import ptx_ir
from superopt.judge import devices
from superopt.judge.gpu_lock import lock_path
from superopt.judge.phases import Phases, phase, recording
from superopt.search.options import SearchOptions
from tests.search.test_search import KERNEL, OPTS, Verdict, module

FAKE_UUID = "GPU-fake0000-0000-0000-0000-000000000000"


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "1")
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(devices, "_LAST", None)
    return tmp_path


def gpu_free_here() -> bool:
    """Whether nobody holds the fake GPU's lock right now (tried from a fresh descriptor)."""
    fd = os.open(lock_path(FAKE_UUID), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


@dataclass
class Timing:
    status: str = "ok"
    faster: bool = True
    speedup: float = 1.2
    reason: str = "scripted"
    baseline_rate: float | None = None       # bytes/s nvcc's code reaches (for the roofline)

    def to_dict(self):
        out = {"status": self.status, "faster": self.faster, "speedup": self.speedup,
               "baseline": {"median": 2e-6, "iqr": 1e-8}, "candidate": {"median": 2e-6 / self.speedup, "iqr": 1e-8},
               "device": {"name": "Fake GPU"}}
        if self.baseline_rate:
            out.update(implied_bytes_per_s={"baseline": self.baseline_rate, "candidate": self.baseline_rate},
                       peak_bytes_per_s=4.0e12)
        return out


class FakeGpuJudge:
    """Judges like the GPU backend holds the GPU: each verify is a shared ``check`` step, each
    timing an exclusive ``time`` step, on the search's assigned fake GPU."""

    backend = "gpu"
    policy = "exact"
    can_time = True

    def __init__(self, baseline_rate=None, step_s=0.002):
        self.baseline_rate, self.step_s = baseline_rate, step_s
        self.steps = 0

    def hold(self, deadline=None):
        return devices.assign(deadline=deadline)

    def _step(self, kind):
        dev = devices.current()
        assert dev is not None, "a GPU step outside the search's hold()"
        return devices.gpu_step(dev.uuid, kind)

    def verify(self, base, cand, spec, **kw):
        with phase("check"), self._step("check"), phase("gpu_check"):
            assert not gpu_free_here()
            self.steps += 1
            time.sleep(self.step_s)
        return Verdict("accepted", "bit-identical")

    def time(self, base, cand, spec, **kw):
        with phase("timing"), self._step("time"), phase("gpu_time"):
            self.steps += 1
            time.sleep(self.step_s)
        return Timing(baseline_rate=self.baseline_rate)

    def sanitize(self, *a, **kw):
        from superopt.judge.sanitize import SanitizerResult
        return SanitizerResult("clean", "scripted")


# ---------------------------------------------------------------- the GPU is held only for GPU steps

def test_the_gpu_is_not_held_while_proposing_or_assembling(fake_gpu, monkeypatch):
    import superopt.search.loop as loop
    from superopt.search.rules import RuleProposer
    seen = {"propose": [], "ptxas": []}
    real_ptxas, real_propose = loop.run_ptxas, RuleProposer.propose

    def ptxas_checked(*a, **kw):
        seen["ptxas"].append(gpu_free_here() or devices._local.__dict__.get("step") is None)
        return real_ptxas(*a, **kw)

    def propose_checked(self, module_, kernel, context):
        seen["propose"].append(gpu_free_here())
        return real_propose(self, module_, kernel, context)

    monkeypatch.setattr(loop, "run_ptxas", ptxas_checked)
    monkeypatch.setattr(RuleProposer, "propose", propose_checked)
    monkeypatch.setattr(loop.PtxasAhead, "WORKERS", 1)
    judge = FakeGpuJudge()
    with judge.hold():
        with recording() as ph:
            res = loop.search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=OPTS, judge=judge)
    assert judge.steps >= 3 and res.winner is not None
    assert seen["propose"] == [True]
    # ptxas ran for every candidate (the baseline's in this thread with the GPU free; the
    # candidates' ahead, in the pool, never inside a GPU step of their own thread)
    assert len(seen["ptxas"]) >= 3 and all(seen["ptxas"])
    d = ph.to_dict()
    assert d["lease_n"] == judge.steps and 0 < d["gpu_busy_fraction"] <= 1
    assert d["propose_s"] > 0 and d["ptxas_s"] > 0 and d["check_s"] >= d["gpu_check_s"] > 0
    assert gpu_free_here()


def test_a_whole_search_lease_is_still_there_on_request(fake_gpu, monkeypatch):
    """NVCC_PLUS_GPU_LEASE=search holds the GPU for the whole block (the old economy)."""
    from superopt.judge.judge import BackendJudge
    monkeypatch.setenv("NVCC_PLUS_GPU_LEASE", "search")
    judge = BackendJudge.__new__(BackendJudge)
    judge.backend = "gpu"
    with judge.hold() as dev:
        assert dev.uuid == FAKE_UUID and not gpu_free_here()
        with devices.gpu_step(dev.uuid, "time"):         # a step under the lease: no second lock
            assert not gpu_free_here()
    assert gpu_free_here()
    monkeypatch.setenv("NVCC_PLUS_GPU_LEASE", "sometimes")
    from superopt.config.settings import SettingError
    with pytest.raises(SettingError, match="NVCC_PLUS_GPU_LEASE"):
        with judge.hold():
            pass


# ---------------------------------------------------------------- two compilations on one GPU

def _steps(lock_dir: str, out: str, kinds: list[str], hold_s: float) -> None:
    os.environ["NVCC_PLUS_LOCK_DIR"] = lock_dir
    rows = []
    for kind in kinds:
        with devices.gpu_step(FAKE_UUID, kind):
            t0 = time.monotonic()
            time.sleep(hold_s)
            rows.append((t0, time.monotonic(), kind, os.getpid()))
    with open(out, "w") as f:
        json.dump(rows, f)


def _compilations(tmp_path, target, kinds: list[str], hold_s: float, n: int = 3) -> list:
    """Run ``n`` processes doing GPU steps of ``kinds`` on the fake GPU; their (start, end, kind,
    pid) rows."""
    lock_dir = str(tmp_path / "locks")
    ctx = mp.get_context("spawn")
    procs = []
    for i in range(n):
        p = ctx.Process(target=target, args=(lock_dir, str(tmp_path / f"{i}.json"), kinds, hold_s))
        p.start()
        procs.append(p)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return [r for i in range(n) for r in json.loads((tmp_path / f"{i}.json").read_text())]


def test_two_compilations_steps_never_overlap_a_timing(tmp_path):
    rows = _compilations(tmp_path, _steps, ["check", "time", "check", "check", "time", "check"] * 3, 0.004)
    timings = [r for r in rows if r[2] == "time"]
    assert len(timings) == 18
    for t in timings:
        overlapping = [r for r in rows if r is not t and r[0] < t[1] and t[0] < r[1]]
        assert overlapping == [], f"a timing overlapped {overlapping}"
    # checks of different compilations may share the GPU (they are not timed)
    checks = [r for r in rows if r[2] == "check"]
    assert len(checks) == 36


def _serial_steps(lock_dir: str, out: str, kinds: list[str], hold_s: float) -> None:
    os.environ["NVCC_PLUS_GPU_CHECKS"] = "serial"
    _steps(lock_dir, out, kinds, hold_s)


def test_serial_checks_never_overlap_each_other_or_a_timing_but_sanitizers_share(tmp_path):
    """NVCC_PLUS_GPU_CHECKS=serial: one differential check at a time on a GPU (no time-slicing
    of several workers' contexts); compute-sanitizer runs still overlap checks, a timing still
    overlaps nothing."""
    rows = _compilations(tmp_path, _serial_steps, ["check", "sanitize", "check", "time", "check", "sanitize"] * 3,
                         0.01)

    def overlaps(a, b):
        return a is not b and a[0] < b[1] and b[0] < a[1]
    checks = [r for r in rows if r[2] == "check"]
    assert len(checks) == 27
    assert [(a, b) for a in checks for b in checks if overlaps(a, b)] == []
    for t in (r for r in rows if r[2] == "time"):
        assert [r for r in rows if overlaps(r, t)] == []
    sanitizers = [r for r in rows if r[2] == "sanitize"]
    assert any(overlaps(a, b) for a in sanitizers for b in rows if b[2] != "time"), \
        "sanitizer steps are shared; none overlapped anything in 18 tries"


def test_a_serial_check_waits_no_longer_than_the_deadline(fake_gpu, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_GPU_CHECKS", "serial")
    fd = os.open(lock_path(f"{FAKE_UUID}-checks"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)               # another compilation is checking
    try:
        with devices.assign(deadline=time.time() + 0.3):
            t0 = time.monotonic()
            with pytest.raises(devices.GpuBusy):
                with devices.gpu_step(FAKE_UUID, "check"):
                    pass
            assert 0.25 < time.monotonic() - t0 < 2.0
            # the GPU's own lock was given back: a timing can take it
            with devices.gpu_step(FAKE_UUID, "time"):
                pass
    finally:
        os.close(fd)
    monkeypatch.setenv("NVCC_PLUS_GPU_CHECKS", "sometimes")
    from superopt.config.settings import SettingError
    with pytest.raises(SettingError, match="NVCC_PLUS_GPU_CHECKS"):
        with devices.gpu_step(FAKE_UUID, "check"):
            pass


def _hammer_checks(lock_dir: str, stop_file: str) -> None:
    os.environ["NVCC_PLUS_LOCK_DIR"] = lock_dir
    while not os.path.exists(stop_file):
        with devices.gpu_step(FAKE_UUID, "check"):
            time.sleep(0.01)


def test_a_waiting_timing_is_not_starved_by_checks(tmp_path, monkeypatch):
    lock_dir = str(tmp_path / "locks")
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", lock_dir)
    stop = tmp_path / "stop"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_hammer_checks, args=(lock_dir, str(stop))) for _ in range(3)]
    for p in procs:
        p.start()
    try:
        time.sleep(1.0)                          # the checks overlap each other continuously
        t0 = time.monotonic()
        with devices.gpu_step(FAKE_UUID, "time"):
            waited = time.monotonic() - t0
    finally:
        stop.write_text("")
        for p in procs:
            p.join(30)
    assert waited < 1.0, f"the timing waited {waited:.2f} s behind checks"


def test_a_step_waits_no_longer_than_the_searchs_deadline(fake_gpu):
    """The wait for the GPU is a limit that fires: GpuBusy (a BaseException, so no
    ``except Exception`` on the way can turn it into a candidate's failure)."""
    fd = os.open(lock_path(FAKE_UUID), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)               # another compilation is timing
    try:
        with devices.assign(deadline=time.time() + 0.3):
            t0 = time.monotonic()
            with pytest.raises(devices.GpuBusy):
                try:
                    with devices.gpu_step(FAKE_UUID, "check"):
                        pass
                except Exception:                # noqa: BLE001 - what a candidate's error handler does
                    raise AssertionError("GpuBusy was caught as an Exception")
            assert 0.25 < time.monotonic() - t0 < 2.0
    finally:
        os.close(fd)
    assert not issubclass(devices.GpuBusy, Exception)


def test_a_timing_step_inside_a_check_step_is_refused(fake_gpu):
    with devices.gpu_step(FAKE_UUID, "check"):
        with pytest.raises(RuntimeError, match="deadlock"):
            with devices.gpu_step(FAKE_UUID, "time"):
                pass


# ---------------------------------------------------------------- where the time goes

def test_every_searched_kernel_records_its_phases(fake_gpu, tmp_path, monkeypatch):
    from superopt.config.resolved import Settings
    from superopt.optimize import optimize_module
    from tests.search.test_search import DATA
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    res = optimize_module(DATA.read_text(), settings=Settings({"passes": OPTS.passes, "sanitize": "off"}),
                          kernels=[KERNEL], judge=FakeGpuJudge(), spec_for=lambda m, k: ([{"x": 1}], "test"))
    (kr,) = res.records["kernels"]
    ph = kr["phases"]
    for key in ("spec_s", "propose_s", "ptxas_s", "check_s", "gpu_check_s", "timing_s", "gpu_time_s", "lease_s",
                "gpu_busy_s", "gpu_busy_fraction"):
        assert key in ph, key
    assert ph["gpu_busy_s"] == pytest.approx(ph["gpu_check_s"] + ph["gpu_time_s"], abs=1e-3)
    from reports.load import validate
    validate(res.records)


def test_a_kernel_whose_gpu_wait_timed_out_keeps_the_phases_of_what_it_did(fake_gpu, tmp_path, monkeypatch):
    """"not searched: no GPU became free" comes after checks that held the GPU: the record keeps
    their phases, so that a build's records add up to the GPU's timeline."""
    from superopt.config.resolved import Settings
    from superopt.optimize import optimize_module
    from tests.search.test_search import DATA

    class BusyLater(FakeGpuJudge):
        def verify(self, base, cand, spec, **kw):
            if self.steps >= 2:
                raise devices.GpuBusy("the GPU stayed busy until the time limit")
            return super().verify(base, cand, spec, **kw)

    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    res = optimize_module(DATA.read_text(), settings=Settings({"passes": OPTS.passes, "sanitize": "off"}),
                          kernels=[KERNEL], judge=BusyLater(), spec_for=lambda m, k: ([{"x": 1}], "test"))
    (kr,) = res.records["kernels"]
    assert kr["reason"].startswith("not searched: no GPU became free")
    assert kr["phases"]["gpu_check_n"] >= 1 and kr["phases"]["gpu_check_s"] > 0
    from reports.load import validate
    validate(res.records)


def test_phases_refuse_an_unknown_name_and_add_up_across_threads():
    from concurrent.futures import ThreadPoolExecutor

    from superopt.judge.phases import in_context
    ph = Phases()
    with pytest.raises(KeyError):
        ph.add("lunch", 1.0)

    def work():
        with phase("ptxas"):
            time.sleep(0.05)

    with recording(ph):
        with ThreadPoolExecutor(4) as pool:
            for f in [pool.submit(in_context(work)) for _ in range(4)]:
                f.result()
    assert ph.counts["ptxas"] == 4 and ph.get("ptxas") >= 0.19
    with phase("ptxas"):                     # outside any search: recorded nowhere
        pass
    assert ph.counts["ptxas"] == 4


# ---------------------------------------------------------------- fixed costs

def test_sanitizer_runs_only_the_tools_that_apply():
    from superopt.judge.sanitize import sanitizer_tools
    plain = ".visible .entry k() { ld.global.u32 %r1, [%rd1]; }"
    shared = ".visible .entry k() { .shared .align 4 .b8 s[64]; st.shared.u32 [s], %r1; bar.sync 0; }"
    spec = type("S", (), {"shared_bytes": 0})()
    assert sanitizer_tools(plain, plain, spec, ("memcheck", "racecheck")) == \
        (("memcheck",), {"racecheck": "neither nvcc's code nor the candidate uses shared memory"})
    assert sanitizer_tools(plain, shared, spec, ("memcheck", "racecheck", "synccheck"))[0] == \
        ("memcheck", "racecheck", "synccheck")
    dyn = type("S", (), {"shared_bytes": 1024})()
    assert sanitizer_tools(plain, plain, dyn, ("racecheck",))[0] == ("racecheck",)


def test_a_judge_with_no_tool_to_run_starts_no_sanitizer(monkeypatch):
    from superopt.judge import sanitize
    from superopt.judge.judge import BackendJudge
    monkeypatch.setattr(sanitize, "sanitize_pair", lambda *a, **kw: pytest.fail("compute-sanitizer was started"))
    judge = BackendJudge.__new__(BackendJudge)
    judge.backend = "gpu"
    res = judge.sanitize(".entry k() { ret; }", ".entry k() { ret; }", type("S", (), {"shared_bytes": 0})(),
                         ("racecheck",))
    assert res.status == "clean" and "racecheck" in res.skipped and "racecheck" in res.reason


def test_the_search_stops_at_the_memory_roofline(fake_gpu):
    from superopt.search.loop import search_kernel
    judge = FakeGpuJudge(baseline_rate=3.8e12)          # 95% of the 4 TB/s peak
    with judge.hold():
        res = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=OPTS, judge=judge)
    cands = res.record["candidates"]
    timed = [i for i, c in enumerate(cands) if c.get("timing")]
    assert len(timed) == 1, "one timing shows the roofline; nothing is timed after it"
    assert cands[timed[0] + 1:] and all(c["fate"] == "skipped-roofline" for c in cands[timed[0] + 1:])
    assert any("95% of the measured peak" in n for n in res.record["notes"])
    # well below the roofline nothing is skipped
    judge = FakeGpuJudge(baseline_rate=1.0e12)
    with judge.hold():
        res = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=OPTS, judge=judge)
    assert "skipped-roofline" not in [c["fate"] for c in res.record["candidates"]]


def test_ptxas_ahead_gives_what_ptxas_gives_and_stays_within_its_window(monkeypatch):
    import superopt.search.loop as loop
    from superopt.judge.ptxas import run_ptxas
    from superopt.search.rules import rule_candidates
    cands = rule_candidates(module(), KERNEL, SearchOptions(), [])
    assert len(cands) >= 3
    started = []
    real = loop.run_ptxas

    def counting(ptx, *a, **kw):
        started.append(ptx)
        return real(ptx, *a, **kw)

    monkeypatch.setattr(loop, "run_ptxas", counting)
    ahead = loop.PtxasAhead("sm_90", cands, window=2)
    try:
        assert len(started) <= 2
        first = ahead.result(0)
        assert first.ok == run_ptxas(cands[0].ptx, "sm_90").ok and first.cubin is not None
        assert ahead.result(len(cands) + 5) is None          # nothing asked that far
    finally:
        ahead.close()


# ---------------------------------------------------------------- where the gain is first

PRIORITY_PTX = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry flat(.param .u64 p)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.global.u32 %r1, [%rd1];
    st.global.u32 [%rd1], %r1;
    ret;
}

.visible .entry looped(.param .u64 p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r2, 0;
$L_top:
    ld.global.u32 %r1, [%rd1];
    add.s32 %r2, %r2, 1;
    setp.lt.s32 %p1, %r2, 100;
    @%p1 bra $L_top;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


def test_kernels_are_searched_where_the_expected_gain_is_first():
    from superopt.decide.priority import search_order, static_weight
    m = ptx_ir.parse(PRIORITY_PTX)
    flat, looped = m.kernels
    assert static_weight(looped) > static_weight(flat) == 2
    assert [f.name for f in search_order([flat, looped], None)] == ["looped", "flat"]
    capture = {"kernels": {"flat": {"total_ms": 9.0}, "looped": {"total_ms": 1.0}}}
    assert [f.name for f in search_order([flat, looped], capture)] == ["flat", "looped"]


def test_the_report_shows_where_the_time_went(fake_gpu, tmp_path, monkeypatch):
    from reports import render
    from superopt.config.resolved import Settings
    from superopt.optimize import optimize_module
    from tests.search.test_search import DATA
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    res = optimize_module(DATA.read_text(), settings=Settings({"passes": OPTS.passes, "sanitize": "off"}),
                          kernels=[KERNEL], judge=FakeGpuJudge(), spec_for=lambda m, k: ([{"x": 1}], "test"))
    md = render.markdown([res.records])
    (line,) = [ln for ln in md.splitlines() if ln.startswith("Where the search's time went")]
    assert "GPU busy" in line and "s held (" in line and "ptxas" in line and "propose" in line
    html = render.html_report([res.records])
    assert "where the search&#39;s time went" in html or "where the search's time went" in html


def test_kept_cubins_are_what_the_gpu_loads_instead_of_the_jit():
    from superopt.judge import ptxas
    from superopt.judge.backends.gpu import GpuBackend
    text = ptx_ir.emit(module())
    res = ptxas.run_ptxas(text, "sm_90", keep_cubin=True)
    assert res.ok and ptxas.cached_cubin(text, ("sm_90",)) == res.cubin
    assert ptxas.cached_cubin(text, ("sm_80",)) is None and ptxas.cached_cubin(text + " ", ("sm_90",)) is None
    ptxas.run_ptxas(text + "\n// other", "sm_90")               # not kept: not remembered
    assert ptxas.cached_cubin(text + "\n// other", ("sm_90",)) is None
    be = GpuBackend.__new__(GpuBackend)                         # a worker that reported a 9.0 GPU
    import threading
    be._lock, be._proc, be._info = threading.RLock(), None, {"cc": (9, 0)}
    be._ensure = lambda: None
    assert be._cubin(text) == res.cubin
    be._info = {"cc": (8, 0)}
    assert be._cubin(text) is None


def test_candidates_are_timed_on_one_input_set_a_confirmation_on_its_own(monkeypatch):
    from superopt.judge import timing
    from superopt.judge.judge import BackendJudge
    from superopt.specs.launch_spec import LaunchSpec
    seen = []
    monkeypatch.setattr(timing, "time_pair", lambda *a, inputs=None, **kw: seen.append(inputs) or "timed")
    judge = BackendJudge.__new__(BackendJudge)
    judge.backend, judge.timing_reps, judge._timing_inputs, judge._prefetched = "gpu", 5, {}, {}
    monkeypatch.setattr(BackendJudge, "_on_gpu", lambda self: __import__("contextlib").nullcontext())
    spec = LaunchSpec.from_dict({"kernel": "k", "grid": [2, 1, 1], "block": [32, 1, 1], "params": [
        {"name": "x", "kind": "buffer", "type": "f32", "length": 64, "direction": "in"},
        {"name": "y", "kind": "buffer", "type": "f32", "length": 64, "direction": "out"}]})
    judge.time("base", "cand1", spec, fresh=False)
    judge.time("base", "cand2", spec, fresh=False)
    judge.time("base", "cand2", spec, fresh=True)
    judge.time("other base", "cand", spec, fresh=False)
    assert seen[0] is not None and seen[1] is seen[0]
    assert seen[2] is None                           # the confirmation makes inputs of its own
    assert seen[3] is not None and seen[3] is not seen[0]
    assert len(judge._timing_inputs) == 1            # one kernel's inputs kept at a time


def test_waiting_for_the_gpu_is_not_counted_against_the_kernels_budget(fake_gpu):
    """A search whose GPU steps wait for another compilation judges as many candidates as one
    that never waits: the per-kernel budget counts the search's own time. The wall-clock limit
    the compilation's deadline leaves still stops it."""
    from superopt.search.loop import search_kernel

    class WaitingJudge(FakeGpuJudge):
        def verify(self, base, cand, spec, **kw):
            with phase("gpu_wait"):
                time.sleep(2.0)                  # another compilation holds the GPU
            return super().verify(base, cand, spec, **kw)

    opts = SearchOptions(passes=OPTS.passes, budget_s=4.0, sanitize=())
    with recording(), WaitingJudge().hold():
        patient = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=opts, judge=WaitingJudge())
    assert "skipped-budget" not in [c["fate"] for c in patient.record["candidates"]]
    limited = SearchOptions(passes=OPTS.passes, budget_s=4.0, sanitize=(), wall_limit_s=2.5)
    with recording(), WaitingJudge().hold():
        cut = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=limited, judge=WaitingJudge())
    assert "skipped-budget" in [c["fate"] for c in cut.record["candidates"]]


# ---------------------------------------------------------------- timings share windows of the GPU alone

class WindowJudge(FakeGpuJudge):
    """A fake GPU judge with ``timing_window`` as the real one has it (one exclusive step around
    several timings); it logs the order of its calls and whether each timing ran in a window."""

    def __init__(self):
        super().__init__()
        self.events, self.windows, self._in_window = [], 0, False

    @contextlib.contextmanager
    def timing_window(self):
        self.windows += 1
        with self._step("time"):
            self._in_window = True
            try:
                assert not gpu_free_here()
                yield
            finally:
                self._in_window = False

    def verify(self, base, cand, spec, **kw):
        self.events.append(("verify", self._in_window))
        return super().verify(base, cand, spec, **kw)

    def time(self, base, cand, spec, **kw):
        self.events.append(("time", self._in_window))
        return super().time(base, cand, spec, **kw)


def test_a_rule_passes_candidates_are_timed_in_windows_the_first_at_once(fake_gpu):
    import superopt.search.loop as loop
    judge = WindowJudge()
    with judge.hold():
        res = loop.search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=SearchOptions(budget_s=60),
                                 judge=judge)
    kinds = [k for k, _ in judge.events]
    timed_singles = [e for e in res.record["candidates"] if e.get("timing") and len(e["plan"]) == 1]
    assert len(timed_singles) >= 5
    assert kinds[:2] == ["verify", "time"]                  # the first right candidate at once (roofline)
    # then runs of at most TIMING_BATCH checks, each followed by their timings in one window
    runs, k = [], 2
    while k < len(kinds) and len(runs) < 2:
        n = 0
        while kinds[k] == "verify":
            n, k = n + 1, k + 1
        m = 0
        while k < len(kinds) and kinds[k] == "time":
            m, k = m + 1, k + 1
        runs.append((n, m))
    assert runs[0] == (loop.TIMING_BATCH, loop.TIMING_BATCH)
    assert any(not w for kind, w in judge.events if kind == "time")      # the first, combinations: alone
    assert sum(1 for kind, w in judge.events if kind == "time" and w) >= 4
    assert judge.windows < len(timed_singles)               # fewer drains than timings
    assert not any(w for kind, w in judge.events if kind == "verify")    # no check inside a window
    assert gpu_free_here() and res.winner is not None


def test_a_batch_past_the_budget_grace_leaves_the_rest_untimed(fake_gpu, monkeypatch):
    import superopt.search.loop as loop
    judge = WindowJudge()
    calls = {"n": 0}
    real = loop._Search.over_budget

    def over(self, share=1.0):
        if share == loop.TIMING_GRACE:
            calls["n"] += 1
            return calls["n"] > 2                           # the third timing's turn is past the grace
        return real(self, share)

    monkeypatch.setattr(loop._Search, "over_budget", over)
    with judge.hold():
        res = loop.search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=SearchOptions(budget_s=60),
                                 judge=judge)
    skipped = [e for e in res.record["candidates"] if e["fate"] == "skipped-budget" and "verified, not timed" in e["reason"]]
    assert skipped and all("verdict" in e and "timing" not in e for e in skipped)


def test_the_backend_judges_window_holds_the_gpu_alone(fake_gpu, monkeypatch):
    """BackendJudge.timing_window takes the exclusive step under the worker's own UUID: no check
    of another compilation can start inside it."""
    from superopt.judge import judge as judge_mod
    from superopt.judge.backends import base

    class Worker:
        def available(self):
            return True, "fake"

        def gpu_uuid(self):
            return FAKE_UUID

    monkeypatch.setattr(base, "get_backend", lambda name, **kw: Worker())
    j = object.__new__(judge_mod.BackendJudge)
    j.backend = "gpu"
    def others_check_blocked() -> bool:
        fd = os.open(lock_path(FAKE_UUID), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)      # another compilation's check
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    with devices.assign():
        with j.timing_window():
            # the CPU work before the first timing (its input set) holds nothing
            assert not others_check_blocked()
            with devices.gpu_step(FAKE_UUID, "check"):       # a check before it: shared, as usual
                assert not others_check_blocked()
            assert not others_check_blocked()
            with devices.gpu_step(FAKE_UUID, "time"):
                assert others_check_blocked()
            assert others_check_blocked()                    # held alone between the window's timings
            with devices.gpu_step(FAKE_UUID, "check"):       # a no-op now
                pass
            with devices.gpu_step(FAKE_UUID, "time"):
                assert others_check_blocked()
            assert others_check_blocked()
    assert gpu_free_here() and not others_check_blocked()


def test_a_window_is_one_logged_exclusive_step_and_gives_the_gpu_back_on_an_error(fake_gpu, tmp_path, monkeypatch):
    from bench.economy.timeline import read_steps
    log = tmp_path / "steps.jsonl"
    monkeypatch.setenv("SUPEROPT_GPU_STEP_LOG", str(log))
    with devices.assign():
        with pytest.raises(ZeroDivisionError):
            with devices.exclusive_window(FAKE_UUID):
                for _ in range(3):
                    with devices.gpu_step(FAKE_UUID, "time"):
                        pass
                with devices.gpu_step(FAKE_UUID, "time"):
                    1 / 0
        assert gpu_free_here()
        with devices.exclusive_window(FAKE_UUID):
            pass                                             # no timing: nothing taken, nothing logged
    assert [r["kind"] for r in read_steps(log)] == ["time"]


def test_a_windows_whole_hold_is_lease_time(fake_gpu):
    """The lease phase is the time the GPU was held: for a window, from its first timing to its
    end, gaps between the timings included (GPU-busy ÷ lease must stay at most 1)."""
    from superopt.judge.phases import recording
    with devices.assign():
        with recording() as ph:
            with devices.exclusive_window(FAKE_UUID):
                time.sleep(0.2)                      # the input set: not held, not lease
                with devices.gpu_step(FAKE_UUID, "time"):
                    time.sleep(0.05)
                time.sleep(0.2)                      # between timings: held
                with devices.gpu_step(FAKE_UUID, "time"):
                    time.sleep(0.05)
    lease = ph.to_dict()["lease_s"]
    assert 0.3 <= lease < 0.45, lease


def test_a_windows_host_time_between_its_timings_is_its_own_phase(fake_gpu):
    """window_host: the window's hold outside its timing requests (the host's work between
    them, which every other compilation waits through)."""
    from superopt.judge.phases import phase, recording
    with devices.assign():
        with recording() as ph:
            with devices.exclusive_window(FAKE_UUID):
                time.sleep(0.1)                      # before the first timing: not held
                for _ in range(2):
                    with devices.gpu_step(FAKE_UUID, "time"), phase("gpu_time"):
                        time.sleep(0.1)
                    time.sleep(0.15)                 # the host between timings (and after the last)
    d = ph.to_dict()
    assert 0.27 <= d["window_host_s"] < 0.4, d
    assert abs(d["lease_s"] - d["window_host_s"] - d["gpu_time_s"]) < 0.02, d


def test_the_bytes_a_timing_counts_are_read_off_the_baseline_once(monkeypatch):
    """buffers_read parses the baseline once per kernel, not at every timing (inside a window
    holding the GPU alone a parse keeps every other compilation waiting)."""
    import ptx_ir
    from superopt.judge import timing
    from superopt.specs.launch_spec import LaunchSpec
    ptx = (Path(__file__).parents[1] / "judge" / "kernels" / "ptx" / "baseline.ptx").read_text()
    kernel = ptx_ir.parse(ptx).kernels[0]
    spec = LaunchSpec.from_dict({"kernel": kernel.name, "grid": [1, 1, 1], "block": [32, 1, 1], "params": [
        {"name": f"p{i}", "kind": "buffer", "type": "f32", "length": 64, "direction": "inout"}
        for i in range(len(kernel.params))]})
    parses = []
    real = ptx_ir.parse
    monkeypatch.setattr(ptx_ir, "parse", lambda *a, **kw: parses.append(1) or real(*a, **kw))
    timing._buffers_read.cache_clear()
    first = timing.buffers_read(ptx, spec)
    first.add("not a buffer")                        # the caller's copy: the cache stays as it was
    assert timing.buffers_read(ptx, spec) == first - {"not a buffer"} and first - {"not a buffer"}
    assert len(parses) == 1


# ---------------------------------------------------------------- a compilation's kernels at once

class _SlowFirstJudge(FakeGpuJudge):
    """The fake GPU judge of one search thread; the first one made (slot 0) takes longer per
    step, so the module's first kernel finishes after its second. With `meet` set, each judge's
    first check waits (at most 20 s) until the other judge is inside a check too: whether two
    searches run at once must not depend on how a loaded 2-core machine schedules its threads
    (CI once saw the two threads' checks interleave without overlapping)."""
    made: list = []
    meet = None

    def __init__(self):
        super().__init__(step_s=0.03 if not _SlowFirstJudge.made else 0.002)
        self.threads, self.spans, self.met = set(), [], False
        _SlowFirstJudge.made.append(self)

    def verify(self, base, cand, spec, **kw):
        import threading
        self.threads.add(threading.current_thread().name)
        t0 = time.monotonic()
        try:
            if self.meet is not None and not self.met:
                self.met = True
                try:                         # searched one after the other, this times out
                    self.meet.wait(timeout=20)
                except threading.BrokenBarrierError:
                    pass
            return super().verify(base, cand, spec, **kw)
        finally:
            self.spans.append((t0, time.monotonic()))


def _optimize_three(tmp_path, monkeypatch, searches: str):
    from superopt.config.resolved import Settings
    from superopt.decide.searches import LocalSearch
    from superopt.optimize import optimize_module
    from tests.search.test_search import DATA
    import threading
    _SlowFirstJudge.made = []
    _SlowFirstJudge.meet = threading.Barrier(2) if searches == "2" else None
    monkeypatch.setattr(LocalSearch, "_new_judge", lambda self: _SlowFirstJudge())
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / f"cache-{searches}"))
    kernels = ["_Z10saxpy_loopPfPKffi", "_Z7diamondPiPKii", "_Z6rowsumPfPKfii"]
    settings = Settings({"passes": OPTS.passes, "sanitize": "off", "kernel_searches": searches})
    return optimize_module(DATA.read_text(), settings=settings, kernels=kernels,
                           spec_for=lambda m, k: ([{"x": 1}], "test")), kernels


def test_a_compilations_kernels_are_searched_at_once_and_applied_in_their_order(fake_gpu, tmp_path, monkeypatch):
    """NVCC_PLUS_KERNEL_SEARCHES=2: two search threads, each with its own judge (its own GPU
    worker on a real GPU), searching at the same time; the records and the module's text are
    those of the searches one after the other, though the first kernel's ends last."""
    together, kernels = _optimize_three(tmp_path, monkeypatch, "2")
    judges = list(_SlowFirstJudge.made)
    assert len(judges) == 2 and all(j.steps for j in judges)
    assert {t for j in judges for t in j.threads} == {"superopt-search-0", "superopt-search-1"}
    slow, fast = judges
    assert not _SlowFirstJudge.meet.broken, "the two searches' checks never met"
    assert any(a0 < b1 and b0 < a1 for a0, a1 in slow.spans for b0, b1 in fast.spans), "never at the same time"
    alone, _ = _optimize_three(tmp_path, monkeypatch, "1")
    assert len(_SlowFirstJudge.made) == 1 and _SlowFirstJudge.made[0].threads == {"MainThread"}
    assert sorted(k["kernel"] for k in alone.records["kernels"]) == sorted(kernels)
    assert [k["kernel"] for k in together.records["kernels"]] == [k["kernel"] for k in alone.records["kernels"]]
    assert [(k["status"], k.get("winner")) for k in together.records["kernels"]] == \
        [(k["status"], k.get("winner")) for k in alone.records["kernels"]]
    assert together.ptx == alone.ptx and together.changed
    assert all("phases" in k and k["phases"]["gpu_check_n"] for k in together.records["kernels"])


def test_a_search_that_raises_in_its_thread_raises_in_the_compilation_and_keeps_the_others(fake_gpu, tmp_path,
                                                                                            monkeypatch):
    """An exception in a search thread reaches optimize_module's caller with the partial result:
    the kernels whose searches ended keep their outcome, the failed one keeps nvcc's code."""
    from superopt.config.resolved import Settings
    from superopt.decide.searches import LocalSearch
    from superopt.optimize import optimize_module
    from tests.search.test_search import DATA

    class Broken(FakeGpuJudge):
        def hold(self, deadline=None):
            raise ZeroDivisionError("the judge broke")
    made = []

    def new_judge(self):                # the first kernel's search ends; the second's raises
        made.append(FakeGpuJudge(step_s=0.01) if not made else Broken())
        return made[-1]
    monkeypatch.setattr(LocalSearch, "_new_judge", new_judge)
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    kernels = ["_Z10saxpy_loopPfPKffi", "_Z7diamondPiPKii"]
    settings = Settings({"passes": OPTS.passes, "sanitize": "off", "kernel_searches": "2"})
    with pytest.raises(ZeroDivisionError) as got:
        optimize_module(DATA.read_text(), settings=settings, kernels=kernels,
                        spec_for=lambda m, k: ([{"x": 1}], "test"))
    part = got.value.partial
    first, second = part.records["kernels"]
    assert first["phases"]["gpu_check_n"] and first["status"] in ("optimized", "kept-baseline")
    assert made[0].steps, "the search that ended is kept"
    assert second["reason"].startswith("interrupted while being searched: ZeroDivisionError"), second["reason"]


def test_a_time_limit_stops_a_compilation_waiting_for_its_search_threads(fake_gpu, tmp_path, monkeypatch):
    """The driver's NVCC_PLUS_TIMEOUT is an alarm raised in the compilation's thread: waiting
    for search threads does not swallow or outlast it, and what ended before it is kept."""
    import signal
    import threading

    from superopt.config.resolved import Settings
    from superopt.decide.searches import LocalSearch
    from superopt.optimize import optimize_module
    from tests.search.test_search import DATA
    release = threading.Event()

    class Stuck(FakeGpuJudge):
        def hold(self, deadline=None):
            release.wait(30)                 # a search that would outlast the limit
            return super().hold(deadline)
    made = []

    def new_judge(self):
        made.append(FakeGpuJudge() if not made else Stuck())
        return made[-1]
    monkeypatch.setattr(LocalSearch, "_new_judge", new_judge)
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))

    def alarm(signum, frame):
        raise TimeoutError("NVCC_PLUS_TIMEOUT")
    old = signal.signal(signal.SIGALRM, alarm)
    t0 = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(TimeoutError) as got:
            optimize_module(DATA.read_text(), kernels=["_Z10saxpy_loopPfPKffi", "_Z7diamondPiPKii"],
                            settings=Settings({"passes": OPTS.passes, "sanitize": "off", "kernel_searches": "2"}),
                            spec_for=lambda m, k: ([{"x": 1}], "test"))
        waited = time.monotonic() - t0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        release.set()
    assert waited < 3.0
    first, second = got.value.partial.records["kernels"]
    assert first.get("phases") and made[0].steps               # ended before the limit: kept
    assert second["reason"].startswith("interrupted while being searched: TimeoutError")
