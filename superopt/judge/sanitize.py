"""compute-sanitizer on the candidate to keep: what a differential test cannot see.

The differential check compares outputs. Two kinds of mistakes can leave the outputs right
on the inputs it tried and still be wrong:

* **memcheck**: an access outside a buffer that does not fault and does not change a result
  (a vector load that reads a few bytes past the end of an allocation). For this the
  kernels run on buffers allocated at their exact sizes, without the check's guard zones,
  which would otherwise absorb a small overrun.
* **racecheck**: a shared-memory hazard whose outcome happened to be benign on the
  schedules the GPU ran (a barrier a rewrite dropped, a warp-synchronous step that
  assumes lock-step execution).

Baseline and candidate run once each under each tool, on the same inputs, in a GPU worker
started under ``compute-sanitizer``. A candidate fails only on errors the baseline does not
have: nvcc's own code being racy, or the spec's buffers being too small, is reported but
is not the candidate's fault. Without ``compute-sanitizer`` (or on a machine where it cannot
attach to the GPU) the result says so and nothing is rejected.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

TOOLS = ("memcheck", "racecheck")

_ERRORS = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error")
_HAZARDS = re.compile(r"RACECHECK SUMMARY:\s*\d+\s+hazards?\s+displayed\s*\((\d+)\s+errors?")
_FIRST = re.compile(r"^=+\s+(?:Invalid|Error|Race|.*hazard|.*Out of bounds).*$", re.M | re.I)
# A report's top-level lines ("========= Invalid __global__ read ...", "========= Program hit
# ..."); details below them are indented. Used when the log has no summary: a kernel that
# faults under memcheck ends its worker before the tool writes one.
_RECORD = re.compile(r"^=+ (?!COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|Target application)"
                     r"(?:Invalid|Error|Race|Program hit|Misaligned|Out of bounds|.*hazard)", re.M | re.I)


def find_sanitizer() -> str | None:
    """compute-sanitizer on PATH, else under CUDA_HOME / CUDA_PATH / /usr/local/cuda."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        # <cuda>/bin holds a link; the tool itself lives in <cuda>/compute-sanitizer
        for path in (os.path.join(root or "", "bin", "compute-sanitizer"),
                     os.path.join(root or "", "compute-sanitizer", "compute-sanitizer")):
            if root and os.access(path, os.X_OK):
                return path
    return None


@dataclass
class ToolRun:
    status: str                      # ok | not-run (why in ``detail``)
    errors: int = 0
    detail: str = ""                 # the first error line, or why the run did not happen


@dataclass
class SanitizerResult:
    status: str                      # clean | rejected | unavailable | not-judged
    reason: str
    runs: dict = field(default_factory=dict)    # tool -> {"baseline": ToolRun, "candidate": ToolRun}
    seconds: float = 0.0
    skipped: dict = field(default_factory=dict)  # tool -> why it was not run (sanitizer_tools)

    @property
    def rejected(self) -> bool:
        return self.status == "rejected"

    def to_dict(self) -> dict:
        out = {"status": self.status, "reason": self.reason, "seconds": round(self.seconds, 2),
               "runs": {t: {k: asdict(v) for k, v in r.items()} for t, r in self.runs.items()}}
        if self.skipped:
            out["skipped"] = dict(self.skipped)
        return out


# What a tool can find only where the code has it: a run of the tool on code without it costs
# two instrumented launches (seconds) and cannot report anything.
NEEDS = {"racecheck": ("shared memory", lambda text: ".shared" in text),
         "synccheck": ("barriers", lambda text: "bar." in text or "barrier." in text)}


def sanitizer_tools(baseline_ptx: str, candidate_ptx: str, spec, tools) -> tuple[tuple, dict]:
    """(the tools worth running on this pair, {tool: why it was left out})."""
    dynamic_shared = int(getattr(spec, "shared_bytes", 0) or 0) > 0
    keep, skipped = [], {}
    for tool in tools:
        need = NEEDS.get(tool)
        if need and not (need[1](baseline_ptx) or need[1](candidate_ptx)
                         or (tool == "racecheck" and dynamic_shared)):
            skipped[tool] = f"neither nvcc's code nor the candidate uses {need[0]}"
        else:
            keep.append(tool)
    return tuple(keep), skipped


def parse_log(text: str, tool: str) -> ToolRun:
    """Errors counted in a compute-sanitizer log (the summary line it prints at exit)."""
    m = _ERRORS.search(text)
    if tool == "racecheck":
        h = _HAZARDS.search(text)
        if h:
            m = h
    if not m:
        records = _RECORD.findall(text)
        if records:
            first = _FIRST.search(text)
            return ToolRun("ok", len(records), (first.group(0) if first else records[0]).strip("= ").strip()[:300])
        return ToolRun("not-run", 0, "no summary in the compute-sanitizer log" +
                       (f": {text.strip().splitlines()[-1][:200]}" if text.strip() else " (empty)"))
    n = int(m.group(1))
    first = _FIRST.search(text) if n else None
    return ToolRun("ok", n, first.group(0).strip("= ").strip()[:300] if first else "")


def run_under(tool: str, ptx: str, spec, inputs, *, sanitizer: str, timeout: float = 120.0) -> ToolRun:
    """One launch of ``ptx`` on ``inputs`` in a GPU worker started under the sanitizer."""
    from superopt.judge.backends.gpu import GpuBackend
    fd, log = tempfile.mkstemp(prefix=f"superopt-{tool}-", suffix=".log")
    os.close(fd)
    # a worker for one launch keeps no inputs on the GPU (superopt.judge.backends.resident): its
    # copies and checks would be instrumented launches for nothing; nor allocations for reuse
    # (superopt.judge.backends.alloc_pool): the tool sees one allocation per buffer and launch.
    # Nor is shared memory scrubbed before the launch: the scrub (every SM's shared memory
    # written, 2 blocks of 1024 threads per SM) makes uninitialised reads differ between the
    # differential check's runs, which the tools do not compare, and under them it is an
    # instrumented launch of millions of stores while the GPU is held
    cmd = ["env", "SUPEROPT_GPU_RESIDENT_BYTES=0", "SUPEROPT_GPU_POOL_BYTES=0", sanitizer, "--tool", tool, "--log-file", log,
           "--print-limit", "5", sys.executable, "-m", "superopt.judge.backends._gpu_worker"]
    be = GpuBackend(worker_cmd=cmd, startup_timeout=timeout, run_step="sanitize", scrub_shared=False)
    try:
        ok, why = be.available()
        if not ok:
            return ToolRun("not-run", 0, why)
        res = be.run_many(ptx, spec, [inputs], timeout=timeout, guards=False)[0]
        be.close(wait=timeout)               # the summary is written when the worker exits
        with open(log, errors="replace") as f:
            text = f.read()
        run = parse_log(text, tool)
        if res.status != "ok" and run.errors == 0:
            # no report, yet the launch failed: that says nothing about memory or races
            return ToolRun("not-run", 0, f"the launch under {tool} did not complete: {res.status} "
                                         f"{res.error or ''}; log: {text.strip()[-200:]}".strip())
        return run
    finally:
        be.close()
        try:
            os.unlink(log)
        except OSError:
            pass


def candidate_runs(tools, ptx: str, spec, inputs, *, sanitizer: str, timeout: float) -> dict:
    """The candidate's run under each tool: at once, one process per tool, when there are
    several (a run is mostly the sanitizer's own start-up and instrumentation on the host, so two
    tools in turn took twice the wall time of one); in turn when this thread cannot hand its GPU
    to others (superopt.judge.devices.in_thread)."""
    from superopt.judge import devices
    from superopt.judge.phases import in_context

    def one(tool):
        return run_under(tool, ptx, spec, inputs, sanitizer=sanitizer, timeout=timeout)
    runner = devices.in_thread(one) if len(tools) > 1 else None
    if runner is None:
        return {t: one(t) for t in tools}
    from superopt.judge.at_once import run_at_once
    runner = in_context(runner)
    runs = run_at_once([lambda t=t: runner(t) for t in tools], name="superopt-sanitize")
    return dict(zip(tools, runs))


def sanitize_pair(baseline_ptx: str, candidate_ptx: str, spec, *, tools=TOOLS, seed: int | None = None,
                  timeout: float = 120.0, sanitizer: str | None = None) -> SanitizerResult:
    """Run baseline and candidate under each tool on the same (small) input set."""
    from superopt.judge.inputs import fresh_seed, make_input_set, make_rng, size_variants
    t0 = time.monotonic()
    sanitizer = sanitizer or find_sanitizer()
    if sanitizer is None:
        return SanitizerResult("unavailable", "compute-sanitizer is not installed here (not run)")
    seed = fresh_seed() if seed is None else seed
    # A size that is not a multiple of the block and covers one or two blocks: the edges are
    # where overruns happen, and instrumented launches are slow.
    variants = size_variants(spec, 3, make_rng(seed, 0x5A))
    inputs = make_input_set(spec, seed, 2, scalars=variants[-1])
    runs: dict[str, dict[str, ToolRun]] = {}
    # The candidate first: when it has no error, nvcc's code cannot have fewer, and its run
    # (half of the cost: a process under the tool) is not needed.
    cand = candidate_runs(tools, candidate_ptx, spec, inputs, sanitizer=sanitizer, timeout=timeout)
    for tool in tools:
        c = cand[tool]
        if c.status == "ok" and c.errors == 0:
            runs[tool] = {"candidate": c,
                          "baseline": ToolRun("not-run", 0, "not needed: the candidate has no error")}
            continue
        b = run_under(tool, baseline_ptx, spec, inputs, sanitizer=sanitizer, timeout=timeout)
        runs[tool] = {"baseline": b, "candidate": c}
        if b.status != "ok":
            # e.g. a sandbox where the sanitizer cannot attach to the device: not the candidate's fault
            return SanitizerResult("unavailable", f"{tool} could not run nvcc's code: {b.detail}", runs,
                                   time.monotonic() - t0)
        if c.status != "ok":
            return SanitizerResult("not-judged", f"{tool} could not run the candidate: {c.detail}", runs,
                                   time.monotonic() - t0)
        if c.errors > b.errors:
            return SanitizerResult("rejected", f"compute-sanitizer {tool}: {c.errors} error(s) in the candidate, "
                                               f"{b.errors} in nvcc's code ({inputs.label}): {c.detail}",
                                   runs, time.monotonic() - t0)
    noted = [f"{t}: nvcc's code has {r['baseline'].errors}" for t, r in runs.items() if r["baseline"].errors]
    return SanitizerResult("clean", "no compute-sanitizer error beyond nvcc's code's"
                           + (f" ({'; '.join(noted)})" if noted else ""), runs, time.monotonic() - t0)
