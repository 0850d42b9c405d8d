"""The judge behind one backend (the GPU, or the CPU emulator): the differential check,
the timer and compute-sanitizer, as :class:`superopt.judge.protocol.Judge` describes them."""
from __future__ import annotations

from contextlib import ExitStack, contextmanager

from superopt.judge.cache import spec_key, text_digest
from superopt.judge.phases import phase
from superopt.judge.protocol import Judge
from superopt.specs.scaled import SCALED_SUFFIX


CAPTURED_SETS = 3
# The inputs made ahead of a check on fresh inputs (BackendJudge.prefetch_inputs) stay in host
# memory until the check takes them: not made where they would hold more than this (the
# buffers' bytes, twice per set: the inputs and the second run's outputs).
PREFETCH_MAX_BYTES = 4 << 30
# ... nor over this share of the memory the host has free when they are asked for: the sets
# stay for the rest of a search, and a build's compilations (make -j) each make theirs.
PREFETCH_FREE_SHARE = 0.125


def host_memory_free() -> int | None:
    """Bytes of host memory free for use now (Linux: MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import os
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
# A shape whose buffers hold more than this is *costly* for the aliased layouts: a candidate
# judged on them at another shape of its search is not judged on them again there. The layouts
# test how a candidate treats buffers that overlap (the launch-time no-alias check, loads moved
# past stores), which the same code shows at any size; at a captured shape of tens of MB nvcc's
# runs on six layouts (five each) and the candidate's (two each) cost more GPU time than the
# rest of the check (the economy bench's profile, 2026-12-02).
ALIASED_LAYOUTS_COSTLY_BYTES = 8 << 20
# How a verdict's ``aliasing_left_out`` starts when the layouts wait for the check on fresh inputs
# (a candidate never judged on them, at a costly shape): not accepted yet on them, only timed.
ALIASING_DEFERRED = "deferred to the check on fresh inputs"


def spec_bytes(spec) -> int | None:
    """The bytes of a spec's buffers at its sizes, or None when it cannot be resolved here."""
    try:
        return sum(b.nbytes for b in spec.resolved().buffers)
    except Exception:  # noqa: BLE001 - an unresolvable spec fails in the check itself, with its reason
        return None


class BackendJudge(Judge):
    """The differential check and the timer behind one backend."""

    def __init__(self, backend: str = "auto", policy: str = "exact", check_sets: int = 4,
                 timing_reps: int = 60):
        self.policy = policy
        self.check_sets = check_sets
        self.timing_reps = timing_reps
        self.backend = self._resolve(backend)
        self._baseline_runs: dict = {}
        # (baseline, candidate) -> the shape at which the candidate was accepted on aliased layouts
        self._aliasing_judged: dict = {}
        self._timing_inputs: dict = {}          # (baseline, spec) -> the InputSet candidates are timed on
        # (baseline, spec) -> {"check": waiter, "time": waiter}: inputs made ahead (prefetch_inputs)
        self._prefetched: dict = {}

    @staticmethod
    def gpu_usable() -> tuple[bool, str]:
        # Cheap test first: a machine without the NVIDIA driver needs no CUDA process started
        # (this runs once per compiled PTX in a build).
        from superopt.judge import devices
        if not devices.driver_present():
            return False, "no NVIDIA GPU device node on this machine (/dev/nvidiactl)"
        try:
            # Enumerated in this process (no context, no worker started): the worker is started
            # on whichever GPU a search leases.
            found = devices.allowed_devices()
        except devices.GpusSettingError:
            raise
        except Exception as exc:  # noqa: BLE001
            return False, str(exc)
        return True, "gpu: " + ", ".join(f"{d.ordinal} {d.name}" for d in found)

    def _resolve(self, backend: str) -> str:
        if backend != "auto":
            return backend
        ok, _ = self.gpu_usable()
        return "gpu" if ok else "emulator"

    @property
    def can_time(self) -> bool:
        return self.backend == "gpu"

    @contextmanager
    def hold(self, deadline: float | None = None):
        """The GPU a kernel's search runs on (superopt.judge.devices), for a block: everything
        judged in it runs on that GPU. By default (NVCC_PLUS_GPU_LEASE=step) the GPU is only
        *assigned*: each GPU step holds it (checks shared with other compilations, timing
        alone) and waits for it at most until ``deadline``; with ``search`` it is leased for
        the whole block. Yields the Device, or None for a backend that needs no GPU. Re-entrant."""
        if self.backend != "gpu":
            yield None
            return
        from superopt.judge import devices
        take = devices.lease if devices.lease_mode() == "search" else devices.assign
        with take(deadline=deadline) as dev:
            yield dev

    @contextmanager
    def _on_gpu(self):
        """A GPU for one call of verify/time/sanitize outside a search's hold(): assigned as a
        search would be (the steps inside hold it); with no GPU the call goes on and its backend
        answers "could not judge" as it always did."""
        from superopt.judge import devices
        with ExitStack() as held:
            if self.backend == "gpu" and devices.current() is None:
                try:
                    held.enter_context(devices.assign())
                except devices.NoDevice:
                    pass
            yield

    def device_name(self) -> str:
        """What runs the kernels: the leased GPU's model, or the backend's name."""
        from superopt.judge import devices
        dev = devices.current()
        if dev is not None:
            return dev.name
        if self.backend == "gpu":
            with self.hold() as dev:
                return dev.name
        return self.backend

    def verify(self, base_ptx: str, cand_ptx: str, spec, *, fresh: bool = False):
        """The differential check. The baseline's runs on one family of inputs are reused for
        the following candidates of the same baseline and spec (they do not depend on the
        candidate; at large sizes they are most of a check's time); a rejection draws fresh
        inputs for the next candidate, since its evidence shows input values. ``fresh``: a
        check on inputs drawn for this call alone (the search does that before keeping a
        candidate)."""
        with self._on_gpu(), phase("check"):
            return self._verify(base_ptx, cand_ptx, spec, fresh=fresh)

    def _sets_for(self, spec) -> int:
        # A captured spec is the program's real size (an inferred one scaled up for timing, a
        # stand-in for it): its sizes are fixed, and variation comes from the smaller shapes
        # checked beside it, so fewer sets of it suffice.
        origin = getattr(spec, "origin", None) or ""
        return min(self.check_sets, CAPTURED_SETS) \
            if origin == "captured" or origin.endswith(SCALED_SUFFIX) else self.check_sets

    def prefetch_inputs(self, base_ptx: str, spec, what: tuple = ("check", "time")) -> bool:
        """Start making, in threads beside the caller, input sets the judge will need at
        ``spec`` for ``base_ptx``, so that the calls that take them need not draw them (at a
        program's captured size drawing a set is a second or more of host work, 2026-12-07).
        ``what``, each taken once by the call it is for:

        - ``"check"``: the baseline's sets of the next check on fresh inputs
          (:func:`superopt.judge.check.prepare_baseline_inputs`; :meth:`verify` with ``fresh``);
        - ``"time"``: the set of the next confirmation timing (:meth:`time` with ``fresh``);
        - ``"timed"``: the set the search times its candidates on (:meth:`time` without
          ``fresh``, its first call for this baseline and spec).

        Drawn for the call that takes them alone, as it would have drawn them. Host work only:
        nothing runs on the GPU before that call. False where nothing was started (no GPU
        backend, made and not taken yet, over :data:`PREFETCH_MAX_BYTES` or over
        :data:`PREFETCH_FREE_SHARE` of the host memory free now)."""
        if not self.can_time:
            return False
        key = (text_digest(base_ptx), spec_key(spec))
        made = self._prefetched.get(key, {})
        what = tuple(w for w in what if w not in made)
        sets = self._sets_for(spec)
        n = spec_bytes(spec)
        # what the sets hold in host memory: a check's inputs and its second runs' outputs (at
        # most twice the buffers per set), a timing's one set
        need = sum(2 * sets if w == "check" else 1 for w in list(what) + list(made)) * (n or 0)
        if not what or n is None or need > PREFETCH_MAX_BYTES:
            return False
        free = host_memory_free()
        if free is not None and need > PREFETCH_FREE_SHARE * free:
            return False
        from superopt.judge.at_once import beside
        from superopt.judge.backends.base import BackendUnavailable, get_backend
        from superopt.judge.check import prepare_baseline_inputs
        from superopt.judge.inputs import fresh_seed, make_input_set
        from superopt.judge.phases import in_context
        try:
            be = get_backend(self.backend)          # this thread's worker (its slot), resolved here
            availability = be.available()
        except BackendUnavailable:
            return False
        if not availability[0]:
            return False
        self._prefetched = {k: v for k, v in self._prefetched.items() if k[0] == key[0]}  # one kernel at a time

        def check_inputs():
            with phase("prefetch"):
                return prepare_baseline_inputs(base_ptx, spec, backend=be, policy=self.policy, sets=sets,
                                               availability=availability)

        def timing_inputs():
            with phase("prefetch"):
                return make_input_set(spec, fresh_seed(), 0)
        makers = {"check": check_inputs, "time": timing_inputs, "timed": timing_inputs}
        entry = self._prefetched.setdefault(key, {})
        entry.update({w: beside(in_context(makers[w]), name=f"superopt-prefetch-{w}") for w in what})
        return True

    def _take_prefetched(self, base_ptx: str, spec, what: str):
        """The inputs :meth:`prefetch_inputs` made for ``what`` ("check", "time"), once; None
        where none were made or making them failed (the caller makes its own, and meets the
        failure with its reason)."""
        made = self._prefetched.get((text_digest(base_ptx), spec_key(spec)))
        wait = made.pop(what, None) if made else None
        if wait is None:
            return None
        try:
            return wait()
        except Exception:  # noqa: BLE001 - made again by the caller, which reports what fails
            return None

    def _verify(self, base_ptx: str, cand_ptx: str, spec, *, fresh: bool):
        from superopt.judge.check import ACCEPTED, BaselineInputs, BaselineRuns, Verdict, check, run_baseline
        sets = self._sets_for(spec)
        aliasing = self._aliasing(base_ptx, cand_ptx, spec, fresh)
        if fresh:
            prepared = self._take_prefetched(base_ptx, spec, "check")
            verdict = check(base_ptx, cand_ptx, spec, backend=self.backend, policy=self.policy, sets=sets,
                            aliasing=aliasing,
                            prepared=prepared if isinstance(prepared, BaselineInputs) else None)
            self._note_aliasing(base_ptx, cand_ptx, spec, verdict)
            return verdict
        key = (text_digest(base_ptx), spec_key(spec))
        runs = self._baseline_runs.get(key)
        if runs is None:
            runs = run_baseline(base_ptx, spec, backend=self.backend, policy=self.policy, sets=sets)
            if any(k[0] != key[0] for k in self._baseline_runs):
                self._baseline_runs = {}        # one kernel at a time: bounded memory
                self._aliasing_judged = {}
            self._baseline_runs[key] = runs     # every launch shape of it (captured + inferred)
        if not isinstance(runs, BaselineRuns):
            return runs          # could not judge the baseline (e.g. not deterministic): not again per candidate
        if cand_ptx == base_ptx:
            # "can nvcc's code be judged at this shape?" (the search screens shapes so): its two
            # runs per input set agreeing is the answer; a third run of the same code adds nothing
            return Verdict(ACCEPTED, f"nvcc's own code: its two runs agree on each of {len(runs.valid)} input "
                                     f"sets", str(runs.policy), dict(runs.evidence))
        verdict = check(base_ptx, cand_ptx, spec, backend=self.backend, baseline=runs, aliasing=aliasing)
        if verdict.status == "rejected":
            self._baseline_runs.pop(key, None)
        self._note_aliasing(base_ptx, cand_ptx, spec, verdict)
        return verdict

    def _aliasing(self, base_ptx: str, cand_ptx: str, spec, fresh: bool = False) -> bool | str:
        """True: judge the candidate on the aliased layouts at ``spec``; else why not. At a costly
        shape (:data:`ALIASED_LAYOUTS_COSTLY_BYTES`) they are left out when the candidate was
        judged on them at another shape, and, until then, in every check but one on fresh inputs:
        a search checks on fresh inputs only the candidate it is about to keep, so the layouts
        are run for that one, not for every candidate it times and drops."""
        n = spec_bytes(spec)
        if n is None or n <= ALIASED_LAYOUTS_COSTLY_BYTES:
            return True
        size = f"this shape's buffers hold {n / 2**20:.0f} MiB (over {ALIASED_LAYOUTS_COSTLY_BYTES >> 20} MiB)"
        where = self._aliasing_judged.get((text_digest(base_ptx), text_digest(cand_ptx)))
        if where is not None:
            return f"the candidate was judged on them at {where}; {size}"
        if not fresh:
            return (f"{ALIASING_DEFERRED}: {size}; the candidate a search keeps is judged on them in its check "
                    f"on fresh inputs")
        return True

    def _note_aliasing(self, base_ptx: str, cand_ptx: str, spec, verdict) -> None:
        """Remember a candidate accepted with aliased launches run, and at which shape."""
        from superopt.judge.check import ACCEPTED
        if verdict.status != ACCEPTED or cand_ptx == base_ptx:
            return
        info = (verdict.evidence or {}).get("aliasing") or {}
        if not info.get("candidate_launches"):
            return
        key = (text_digest(base_ptx), text_digest(cand_ptx))
        if key not in self._aliasing_judged:
            lengths = next((e.get("lengths") for e in info.get("layouts", []) if e.get("status") == "judged"), None)
            self._aliasing_judged[key] = ("another launch shape" if not lengths else
                                          "lengths " + ", ".join(f"{k}={v}" for k, v in lengths.items()))

    def sanitize(self, base_ptx: str, cand_ptx: str, spec, tools):
        """compute-sanitizer on baseline and candidate (see superopt.judge.sanitize); GPU only."""
        from superopt.judge.sanitize import SanitizerResult, sanitize_pair, sanitizer_tools
        if self.backend != "gpu":
            return SanitizerResult("unavailable", "compute-sanitizer needs the GPU backend")
        tools, skipped = sanitizer_tools(base_ptx, cand_ptx, spec, tuple(tools))
        if not tools:
            return SanitizerResult("clean", "no compute-sanitizer tool applies ("
                                   + "; ".join(f"{t}: {why}" for t, why in skipped.items()) + ")", skipped=skipped)
        with self._on_gpu(), phase("sanitize"):
            res = sanitize_pair(base_ptx, cand_ptx, spec, tools=tools)
        res.skipped = skipped
        return res

    @contextmanager
    def timing_window(self):
        """Hold the GPU alone for several timings (superopt.judge.devices.exclusive_window: taken
        at the first timing, not before; the steps after it are no-ops): other compilations'
        checks drain once for the window, not once per timing."""
        if self.backend != "gpu":
            yield
            return
        from superopt.judge import devices
        from superopt.judge.backends.base import BackendUnavailable, get_backend
        with self._on_gpu():
            try:
                be = get_backend("gpu")
                ok, _ = be.available()      # the worker's own UUID names the lock, as in its steps
                uuid = be.gpu_uuid() if ok else None
            except BackendUnavailable:
                uuid = None
            if uuid is None:
                yield                   # each timing says why it cannot run
                return
            with devices.exclusive_window(uuid):
                yield

    def time(self, base_ptx: str, cand_ptx: str, spec, *, fresh: bool = True):
        """Timing holds the GPU alone (superopt.judge.devices.gpu_step): concurrent compilations
        (make -j) never use a GPU while another times on it. Every call is a new measurement;
        the candidates of one baseline (``fresh=False``) are timed on one input set made once
        (at captured sizes making it costs more than the timing), a confirmation
        (``fresh=True``) on inputs of its own."""
        from superopt.judge.inputs import fresh_seed, make_input_set
        from superopt.judge.timing import time_pair
        with self._on_gpu(), phase("timing"):
            inputs = self._take_prefetched(base_ptx, spec, "time") if fresh else None
            if not fresh and self.can_time:
                key = (text_digest(base_ptx), spec_key(spec))
                inputs = self._timing_inputs.get(key)
                if inputs is None:
                    try:
                        inputs = self._take_prefetched(base_ptx, spec, "timed") or make_input_set(spec, fresh_seed(), 0)
                    except Exception:  # noqa: BLE001 - time_pair makes its own and reports why it cannot
                        inputs = None
                    else:
                        if any(k[0] != key[0] for k in self._timing_inputs):
                            self._timing_inputs = {}        # one kernel at a time: bounded memory
                        self._timing_inputs[key] = inputs
            # a search's first timing of a candidate may stop once it is clearly not faster or
            # clearly faster (a win is kept only after a confirmation: fresh inputs, every round)
            return time_pair(base_ptx, cand_ptx, spec, backend=self.backend, reps=self.timing_reps,
                             inputs=inputs, stop_not_faster=not fresh, stop_faster=not fresh,
                             reused=not fresh)        # a confirmation's inputs (made ahead) serve it alone
