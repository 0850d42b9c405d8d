"""One module's optimization in progress: the records in kernel order, the module as decided
so far, where decisions are stored (cache, lockfile), messages and statistics.

The decision sources write into it; :mod:`superopt.optimize` makes it, asks the sources, and
turns it into a :class:`ModuleResult` (also when interrupted: what was decided before stands).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import ptx_ir
from superopt.config.resolved import Settings, SettingError
from superopt.decide.job import KernelJob, SearchOutcome
from superopt.search.candidates import Step, apply_plan, text_hash
from superopt.search.options import SearchOptions
from superopt.search.rules import all_pass_names
from superopt.search.progress import Notifier
from superopt.store import record as rec
from superopt.store.cache import DecisionCache, configured_max_size
from superopt.store.cache_stats import CacheStats
from superopt.store.keys import DecisionKey
from superopt.store.lockfile import Lockfile, find_lockfile
from superopt.store.record import Fate, Status


@dataclass
class ModuleResult:
    ptx: str
    changed: bool
    records: dict
    messages: list[str] = field(default_factory=list)
    # lines true of the whole build, not of this module (no GPU and no lockfile, an invalid
    # [kernels] table): the driver says each once per build (nvcc_plus.once)
    build_notes: list[str] = field(default_factory=list)


def globals_text(module: ptx_ir.Module) -> str:
    """The module's globals as text: part of every kernel's decision key."""
    return ptx_ir.emit(ptx_ir.Module(module.version, module.target, module.address_size,
                                     [i for i in module.items if isinstance(i, ptx_ir.VarDecl)]))


def toolchain_identity() -> str:
    """The toolchain part of a cache key: ptxas's version, and the model when one proposes (a
    decision made with a model is cached under that model)."""
    from superopt.judge.ptxas import ptxas_version
    from superopt.model.base import model_identity
    tool = ptxas_version()
    model = model_identity()
    return f"{tool} model={model}" if model else tool


class ModuleRun:
    def __init__(self, ptx: str, module: ptx_ir.Module, *, target: str, source: str | None,
                 settings: Settings, options: SearchOptions, kernels: list[str] | None = None,
                 deadline: float | None = None, progress=None, unit: str | None = None,
                 restrict_variant=None):
        self.ptx, self.module, self.target, self.source = ptx, module, target, source
        # () -> the same unit's PTX compiled with -kernel-params-are-restrict, or None (the
        # driver's, memoized there); asked only when a kernel to be searched could use it
        self.restrict_variant = restrict_variant
        self._restrict_module: list = []
        self.unit = unit              # the preprocessed translation unit (launch blocks), or None
        self.settings, self.options, self.deadline = settings, options, deadline
        self.records = rec.module_record(source=source, target=target, mode="optimize")
        self.messages: list[str] = []
        self.build_notes: list[str] = []
        self.pass_names = options.passes if options.passes is not None else all_pass_names()
        self.tool = toolchain_identity()
        self.globals_text = globals_text(module)
        try:
            self.cache = DecisionCache(max_bytes=configured_max_size(settings))
        except ValueError as exc:
            raise SettingError(str(exc)) from None
        self.stats = {"hits": 0, "misses": 0, "locked": 0, "searches": 0, "search_s": 0.0, "saved_s": 0.0}
        self.notify = Notifier(progress)
        self.lock_dir = Path(source).parent if source else None
        self.lock_path = find_lockfile(self.lock_dir)
        self.lock = Lockfile(self.lock_path) if self.lock_path else None
        self.write_lock = settings.text("NVCC_PLUS_LOCK") == "write"
        self.verbose = settings.flag("NVCC_PLUS_VERBOSE")
        self.result_module = module
        self.changed = False
        self.in_flight: str | None = None        # the kernel being decided
        self.searching: set[str] = set()         # kernels searched in other threads (LocalSearch)
        self.todo = [fn for fn in module.kernels if not kernels or fn.name in kernels]
        self._explicit_possible: bool | None = None
        self.timed_out: list[str] = []
        self.no_free_gpu: list[str] = []
        self.capture = self._load_capture()

    def _load_capture(self):
        from superopt.specs.capture.format import CaptureError
        from superopt.specs.sources import load_configured_capture
        try:
            return load_configured_capture(self.settings)
        except (CaptureError, OSError, ValueError) as exc:
            self.messages.append(f"capture not used: {exc}")
            return None

    # ---- kernels ---------------------------------------------------------------------
    def jobs(self, by_expected_gain: bool = False):
        """The kernels to decide: in module order, or (when they will be searched) where the
        expected gain is first (superopt.decide.priority)."""
        from superopt.specs.sources import explicit_specs_key
        order = self.todo
        if by_expected_gain:
            from superopt.decide.priority import search_order
            order = search_order(self.todo, self.capture)
        for index, fn in enumerate(order, 1):
            self.in_flight = fn.name
            text = ptx_ir.printer.emit_function(fn)
            # The user's explicit launch spec is part of the key: a decision verified with one
            # spec is not reused after the spec changes.
            problems: list[str] = []
            explicit = explicit_specs_key(self.module, fn.name, source=self.source, settings=self.settings,
                                          problems=problems) if self._may_have_explicit_specs() else None
            for p in problems:
                self.note_for_build(p)          # an incomplete [kernels] table: said once per build
            key = DecisionKey(text, self.globals_text, self.target, self.tool, self.options.policy,
                              tuple(self.pass_names), explicit=explicit, min_gain=self.options.min_gain)
            yield KernelJob(fn, index, len(self.todo), text, key)

    def _may_have_explicit_specs(self) -> bool:
        """Whether any kernel could have explicit launch specs: a ``[kernels]`` table in
        nvcc-plus.toml or a ``nvcc-plus:`` comment in the source. Without either there is nothing
        to parse, and a build applying stored decisions does not load the spec machinery."""
        if self._explicit_possible is None:
            from superopt.specs.sources import source_text_of
            text = source_text_of(self.source) or ""
            self._explicit_possible = bool(self.settings.document.get("kernels")) or "nvcc-plus:" in text
        return self._explicit_possible

    # ---- facts of the module a search gives the passes (LAUNCH_FACTS beside the launch's) ---
    def options_for(self, kernel: str) -> SearchOptions:
        """The run's search options for ``kernel``, with its module facts (``restrict_body``)."""
        from dataclasses import replace
        facts = self.kernel_facts(kernel)
        return replace(self.options, facts={**self.options.facts, **facts}) if facts else self.options

    def kernel_facts(self, kernel: str) -> dict:
        """``{"restrict_body": PTX text}`` when the restrict-compiled unit can give ``kernel`` a
        different body that versioning can use; else ``{}``. The variant is asked for only here,
        so a build that searches no kernel that could use it never compiles it."""
        if self.restrict_variant is None or "restrict-body" not in self.pass_names:
            return {}
        try:
            fn = self.module.function(kernel)
        except KeyError:
            return {}
        roles = [r for r in fn.param_roles if r.pointer]
        if len(roles) < 2 or not any(r.written for r in roles):
            return {}                  # nothing restrict could tell cicc
        restrict = self.restrict_module()
        if restrict is None:
            return {}
        try:
            fast = restrict.function(kernel)
        except KeyError:
            return {}
        from ptx_ir.printer import emit_function
        from superopt.passes._versioning import refusal, same_code
        if fast.is_declaration or same_code(fn, fast):
            return {}
        why = refusal(fn, fast, fast_module=restrict, base_module=self.module)
        if why:
            if self.verbose:
                self.messages.append(f"{kernel}: restrict-compiled body not used: {why}")
            return {}
        return {"restrict_body": emit_function(fast)}

    def restrict_module(self) -> ptx_ir.Module | None:
        """The restrict-compiled unit, parsed once (None when the driver could not make it)."""
        if not self._restrict_module:
            module = None
            try:
                text = self.restrict_variant()
                if text:
                    module = ptx_ir.parse(text)
            except Exception as exc:  # noqa: BLE001 - a variant that fails only loses an idea
                self.messages.append(f"restrict-compiled PTX not used: {type(exc).__name__}: {exc}")
            self._restrict_module.append(module)
        return self._restrict_module[0]

    def note_for_build(self, line: str) -> None:
        """A line true of the whole build (see ModuleResult.build_notes), once per module."""
        if line not in self.build_notes:
            self.build_notes.append(line)

    def add(self, kr: dict | None) -> int:
        """Append a kernel record (None: a place for one that comes later); its slot."""
        self.records["kernels"].append(kr)
        return len(self.records["kernels"]) - 1

    def skip(self, job: KernelJob, reason: str, status=Status.KEPT_BASELINE, notes=(), slot: int | None = None,
             **extra) -> None:
        """Record a kernel that keeps nvcc's code without a search, and why (at ``slot``: a
        place :meth:`add` kept for it; else at the end)."""
        kr = {"kernel": job.kernel, "signature": job.signature, "status": status, "decision": None,
              "reason": reason, **extra, "candidates": [], "notes": list(notes)}
        if slot is None:
            self.add(kr)
        else:
            self.records["kernels"][slot] = kr

    # ---- a search's outcome ----------------------------------------------------------
    def settle(self, job: KernelJob, outcome: SearchOutcome, slot: int) -> bool:
        """Record a search's outcome, apply its winning plan and store the decision (cache, and
        the lockfile with NVCC_PLUS_LOCK=write). False when the plan gives other PTX than the
        worker reported (nothing applied or stored then)."""
        kr = outcome.record
        chosen = job.choices[outcome.chosen] if outcome.chosen is not None else None
        if chosen is None:
            kr["reason"] = f"not verifiable: {job.why_none}"
        else:
            kr["spec_origin"] = chosen.origin
        if job.share is not None:
            kr["capture_share"] = job.share
        kr.setdefault("notes", [])
        kr["notes"] = list(kr["notes"]) + job.notes + list(outcome.tried) + (chosen.notes if chosen else [])
        key = job.key if outcome.gpu is None else job.key.on_gpu(outcome.gpu)
        if chosen is not None and chosen.origin == "captured":
            # A decision made at the program's real launches must not be shadowed by one made
            # at guessed sizes: captured specs are part of the cache key.
            key = key.at_captured(chosen.key)
        entry = {"kernel": job.kernel, "plan": [], "ptx_hash": None, "status": kr["status"],
                    "decision": kr.get("decision"), "spec_origin": kr.get("spec_origin")}
        if outcome.seconds is not None:
            entry["search_s"] = round(outcome.seconds, 3)
        if outcome.searched_on:
            entry["searched_on"] = outcome.searched_on
        if outcome.plan:
            new_module, _ = apply_plan(self.result_module, job.kernel, outcome.plan)
            got = text_hash(ptx_ir.printer.emit_function(new_module.function(job.kernel)))
            if outcome.expect_hash is not None and got != outcome.expect_hash:
                self.records["kernels"][slot] = {
                    "kernel": job.kernel, "signature": job.signature, "status": Status.KEPT_BASELINE,
                    "decision": None,
                    "reason": f"the worker's plan gives other PTX here ({got} != {outcome.expect_hash}); "
                              f"nvcc's code kept", "candidates": [], "notes": kr["notes"]}
                return False
            self.result_module = new_module
            self.changed = True
            entry["plan"] = [s.to_dict() for s in outcome.plan]
            entry["ptx_hash"] = got
        if outcome.gpu is not None:
            entry["gpu"] = outcome.gpu or "?"
        self.records["kernels"][slot] = kr
        if kr["status"] in (Status.OPTIMIZED, Status.KEPT_BASELINE) and kr.get("decision") != "estimate" \
                and outcome.store and measured(kr):
            keys = {"cache": key.digest(), "cache_file": str(self.cache.path(key.digest())),
                    "lock": job.key.lock_digest(), "lockfile": None}
            try:
                self.cache.put(key.digest(), entry)
            except OSError as exc:
                self.messages.append(f"decision not cached ({exc.filename or self.cache.root}: "
                                     f"{exc.strerror or exc})")
            if self.write_lock:
                from superopt.store.locations import lockfile_to_write
                target_lock = self.lock or Lockfile(lockfile_to_write(self.lock_dir, self.settings.config_path))
                target_lock.record(job.key.lock_digest(), entry)
                keys["lockfile"] = str(target_lock.path)
            # where the decision is stored: `superopt tune` reverts it there when the program
            # shows the kernel slower (superopt.specs.capture.tune)
            kr["decision_keys"] = keys
        return True

    # ---- the end -----------------------------------------------------------------------
    def result(self) -> ModuleResult:
        self.records["kernels"] = [r for r in self.records["kernels"] if r is not None]
        try:
            CacheStats(self.cache.root).add(**self.stats)
        except OSError as exc:
            self.messages.append(f"cache statistics not updated ({exc.filename or self.cache.root}: "
                                 f"{exc.strerror or exc})")
        if self.timed_out:
            self.messages.append(f"time limit reached: {len(self.timed_out)} kernel(s) not searched, nvcc's "
                                 f"code kept ({_names(self.timed_out)})")
        if self.no_free_gpu:
            self.messages.append(f"no GPU became free in time: {len(self.no_free_gpu)} kernel(s) not searched, "
                                 f"nvcc's code kept ({_names(self.no_free_gpu)})")
        return ModuleResult(self._text(), self.changed, self.records, self.messages, self.build_notes)

    def partial(self, exc: BaseException) -> ModuleResult:
        """The module as decided up to an interruption: the kernels searched (or applied from
        the cache and lockfile) before it keep their outcome; the one in flight and the rest keep
        nvcc's code, their records say why."""
        records = self.records
        records["kernels"] = [k for k in records["kernels"] if k is not None]
        done = {k["kernel"] for k in records["kernels"]}
        records["kernels"].extend(
            {"kernel": k.name, "signature": k.signature, "status": Status.KEPT_BASELINE, "decision": None,
             "reason": ("interrupted while being searched" if k.name == self.in_flight or k.name in self.searching
                        else "not searched")
                       + f": {type(exc).__name__}: {exc}", "candidates": [], "notes": []}
            for k in self.todo if k.name not in done)
        return ModuleResult(self._text(), self.changed, records, self.messages + [
            f"interrupted in {', '.join(sorted((self.searching | {self.in_flight}) - {None})) or 'the search'} "
            f"({type(exc).__name__}); the decisions made "
            "before it are kept"], self.build_notes)

    def _text(self) -> str:
        return ptx_ir.emit(self.result_module, faithful=True) if self.changed else self.ptx


def _names(kernels: list[str]) -> str:
    return ", ".join(kernels[:3]) + (", ..." if len(kernels) > 3 else "")


def measured(kr: dict) -> bool:
    """A decision worth storing: something was measured, or nothing was left unjudged (a
    GPU that failed under every candidate must not leave "keep nvcc's code" for good)."""
    if kr["status"] == Status.OPTIMIZED:
        return True
    fates = {c.get("fate") for c in kr.get("candidates", [])}
    if fates & {Fate.FASTER, Fate.NOT_FASTER, Fate.NOT_CONFIRMED, Fate.SLOWER_ELSEWHERE, Fate.BELOW_MIN_GAIN,
                 Fate.WINNER}:
        return True
    return not fates & {Fate.NOT_JUDGED, Fate.ERROR, Fate.SKIPPED_BUDGET, Fate.NOT_TIMED}


def plan_of(dicts) -> list[Step] | None:
    return [Step.from_dict(s) for s in dicts] if dicts else None
