"""Optimize one PTX module: per kernel, a locked/cached decision or a fresh search.

This is what :func:`superopt.api.optimize_ptx` runs in ``optimize`` mode and what
``superopt optimize`` runs on a file.
"""
from __future__ import annotations

import os
import subprocess
import time
import tempfile
from dataclasses import dataclass, field, replace
from contextlib import nullcontext
from pathlib import Path

import ptx_ir
from superopt.store import record as rec
from superopt.progress import Notifier
from superopt.store.cache import DecisionCache, configured_max_size, decision_key
from superopt.store.cache_stats import CacheStats
from superopt.search.candidates import Step, apply_plan, text_hash
from superopt.store.lockfile import Lockfile, find_lockfile
from superopt.passes import registry
from superopt.judge.ptxas import ptxas_version
from superopt.judge.devices import GpuBusy, NoDevice
from superopt.model.proposer import model_identity, search_with_model
from superopt.judge import BackendJudge, Judge
from superopt.search.loop import SearchOptions
from superopt.search.stored import apply_stored, recheck_stored, specs_in_force
from superopt.store.record import Fate, Status
from superopt.setting_checks import SettingError, check_settings   # SettingError: re-exported
from superopt.specs.capture.format import CaptureError
from superopt.specs.sources import (SpecChoice, candidates_in_order, explicit_or_inferred,
                                    explicit_specs_key, load_configured_capture, specs_key)


@dataclass
class ModuleResult:
    ptx: str
    changed: bool
    records: dict
    messages: list[str] = field(default_factory=list)


class PtxSourceError(RuntimeError):
    """nvcc could not make PTX of a .cu file."""


def ptx_from_file(path: Path, arch: str, nvcc_args: tuple | list = ()) -> str:
    """PTX text of a .ptx file, or of a .cu file compiled with the real nvcc (``-arch=arch -O3``
    unless ``nvcc_args`` give their own; ``nvcc_args`` are the user's compiler flags: ``-I``,
    ``-D``, ``-std``, ...); raises :class:`PtxSourceError` with nvcc's messages when it fails."""
    path = Path(path)
    if path.suffix == ".ptx":
        return path.read_text()
    args = [a for a in nvcc_args if a not in ("-c", "--compile")]
    defaults = []
    if not _gives(args, ("-arch", "--gpu-architecture", "-gencode", "--generate-code")):
        defaults.append(f"-arch={arch}")
    if not _gives(args, ("-O", "--optimize")):
        defaults.append("-O3")
    with tempfile.TemporaryDirectory(prefix="superopt-") as tmp:
        out = Path(tmp) / "x.ptx"
        cmd = [os.environ.get("NVCC_PLUS_REAL_NVCC", "nvcc"), *defaults, *args, "-ptx", str(path),
               "-o", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        except OSError as exc:
            raise PtxSourceError(f"cannot run {cmd[0]} for {path}: {exc.strerror}; set NVCC_PLUS_REAL_NVCC") from None
        if proc.returncode != 0:
            raise PtxSourceError(f"nvcc failed on {path} ({' '.join(cmd[1:-2])}):\n{proc.stderr.strip()}")
        return out.read_text()


def _gives(args, names) -> bool:
    """Whether the user's nvcc flags set an option (``-O2``, ``-arch=sm_80``, ``-arch sm_80``)."""
    for a in args:
        for n in names:
            if a == n or a.startswith(n + "=") or (n == "-O" and len(a) == 3 and a.startswith("-O")):
                return True
    return False


def options_from_config(config: dict | None) -> SearchOptions:
    """The search options: ``config["overrides"]`` (a command's options) > environment >
    nvcc-plus.toml (``config``) > defaults, as :func:`superopt.settings.resolve` orders them."""
    from superopt.settings import resolve
    cfg = dict(config or {})
    flags = cfg.get("overrides") or {}
    check_settings(cfg)            # the settings read deep in the judge and the lockfile mode

    def get(env_name: str):
        return resolve(env_name, config=cfg, flags=flags)[0]

    opts = SearchOptions()
    budget = get("NVCC_PLUS_BUDGET")
    if budget is not None:
        try:
            opts.budget_s = float(budget)
        except (TypeError, ValueError):
            raise SettingError(f"budget (NVCC_PLUS_BUDGET) must be a number of seconds, not {budget!r}") from None
    opts.policy = str(get("NVCC_PLUS_POLICY") or opts.policy)
    opts.backend = str(get("NVCC_PLUS_BACKEND") or opts.backend)
    opts.no_gpu = str(get("NVCC_PLUS_NO_GPU") or opts.no_gpu)
    _validate(opts)
    sanitize = get("NVCC_PLUS_SANITIZE")
    if sanitize is not None:
        items = sanitize if isinstance(sanitize, list) else str(sanitize).split(",")
        tools = tuple(t.strip() for t in items if t.strip() and t.strip() != "off")
        unknown = [t for t in tools if t not in ("memcheck", "racecheck", "initcheck", "synccheck")]
        if unknown:
            raise ValueError(f"NVCC_PLUS_SANITIZE: unknown compute-sanitizer tool(s) {unknown} "
                             f"(memcheck, racecheck, initcheck, synccheck, or off)")
        opts.sanitize = tools
    passes = get("NVCC_PLUS_PASSES")
    if passes:
        opts.passes = passes if isinstance(passes, list) else [p.strip() for p in str(passes).split(",") if p.strip()]
    return opts


def search_minor(config: dict | None) -> bool:
    from superopt.settings import resolve
    v, _ = resolve("NVCC_PLUS_SEARCH_MINOR", config=config or {})
    return v is True or str(v).strip().lower() in ("1", "true", "yes", "on")


def _validate(opts: SearchOptions) -> None:
    import math
    from superopt.judge.check import Policy
    if not (math.isfinite(opts.budget_s) and opts.budget_s >= 0):
        raise SettingError(f"budget (NVCC_PLUS_BUDGET) must be a number of seconds >= 0, not {opts.budget_s}")
    if opts.backend not in ("auto", "gpu", "emulator"):
        raise SettingError(f"backend (NVCC_PLUS_BACKEND) must be auto, gpu or emulator, not {opts.backend!r}")
    if opts.no_gpu not in ("locked", "estimate"):
        raise SettingError(f"no_gpu (NVCC_PLUS_NO_GPU) must be locked or estimate, not {opts.no_gpu!r}")
    try:
        Policy.parse(opts.policy)
    except ValueError as exc:
        raise SettingError(f"policy (NVCC_PLUS_POLICY) {opts.policy!r}: {exc}") from None


def find_spec(module, kernel: str, *, source: str | None, config: dict | None) -> tuple[list | None, str]:
    """The launch specs for ``kernel`` (a list: one per launch shape): explicit (toml, source
    comment) or inferred, and where they came from; None and the reason if neither."""
    choice, why_not = explicit_or_inferred(module, kernel, source=source, config=config)
    return (list(choice.specs), choice.origin) if choice else (None, why_not)


def _globals_text(module: ptx_ir.Module) -> str:
    return ptx_ir.emit(ptx_ir.Module(module.version, module.target, module.address_size,
                                     [i for i in module.items if isinstance(i, ptx_ir.VarDecl)]))


def optimize_module(ptx: str, *, target: str | None = None, source: str | None = None,
                    config: dict | None = None, kernels: list[str] | None = None,
                    judge: Judge | None = None, spec_for=None) -> ModuleResult:
    module = ptx_ir.parse(ptx)
    target = target or (module.target[0] if module.target else "sm_75")
    options = options_from_config(config)
    records = rec.module_record(source=source, target=target, mode="optimize")
    messages: list[str] = []
    pass_names = options.passes if options.passes is not None else list(registry())
    tool = ptxas_version()
    model = model_identity()
    if model:
        tool += f" model={model}"      # a decision made with a model is cached under that model
    globals_text = _globals_text(module)
    try:
        cache = DecisionCache(max_bytes=configured_max_size(config))
    except ValueError as exc:
        raise SettingError(str(exc)) from None
    stats = {"hits": 0, "misses": 0, "locked": 0, "searches": 0, "search_s": 0.0, "saved_s": 0.0}
    notify = Notifier((config or {}).get("progress"))
    lock_path = find_lockfile(Path(source).parent if source else None)
    lock = Lockfile(lock_path) if lock_path else None
    write_lock = os.environ.get("NVCC_PLUS_LOCK") == "write"
    cluster = None
    address = cluster_address(config)
    if address and judge is None:
        # Searches go to the cluster's GPU workers; decisions come back, are cached and locked here.
        from superopt.cluster import shared
        cluster = shared(address)
    elif judge is None and os.environ.get("NVCC_PLUS_JUDGE"):
        from superopt.cluster import worker_judge
        judge = worker_judge(options)          # developer hook (the CPU tests, bench/scale --dry-run)
    verbose = _verbose(config)

    deadline = (config or {}).get("deadline")
    timed_out: list[str] = []
    no_free_gpu: list[str] = []
    capture = None
    try:
        capture = load_configured_capture(config)
    except (CaptureError, OSError, ValueError) as exc:
        messages.append(f"capture not used: {exc}")

    state = _ModuleState(module, records, cache, lock, lock_path, write_lock, messages,
                         lock_dir=Path(source).parent if source else None,
                         config_path=(config or {}).get("config_path"))
    sent: list = []                    # (Submitted, _Pending) of searches sent to the cluster
    todo = [fn for fn in module.kernels if not kernels or fn.name in kernels]
    try:
        for index, fn in enumerate(todo, 1):
            state.in_flight = fn.name
            kernel_text = ptx_ir.printer.emit_function(fn)
            lock_key = decision_key(kernel_text=kernel_text, globals_text=globals_text, target=target,
                                    tool="", policy=options.policy, passes=pass_names)
            # The user's explicit launch spec is part of the key: a decision verified with one
            # spec is not reused after the spec changes.
            explicit = explicit_specs_key(module, fn.name, source=source, config=config)
            kernel_tool = f"{tool} explicit={explicit}" if explicit else tool
            cache_key = decision_key(kernel_text=kernel_text, globals_text=globals_text, target=target,
                                     tool=kernel_tool, policy=options.policy, passes=pass_names)
            stored = (lock.get(lock_key) if lock else None)
            origin, where = "locked", str(lock_path)
            if stored is not None and capture is not None and stored.get("spec_origin") != "captured" \
                    and (cluster is not None or _can_time(judge, options)):
                stored = None                # searched at guessed sizes before: search again at the captured ones
            if stored is None:
                stored, origin, where = cache.get(cache_key), "cached", str(cache.path(cache_key))
            if stored is None and capture is not None and cluster is None:
                stored, captured_key = _captured_cache_entry(cache, module, fn.name, capture, kernel_text,
                                                             globals_text, target, kernel_tool, options, pass_names)
                if captured_key is not None:
                    where = str(cache.path(captured_key))
            if stored is None and cluster is not None:
                stored, cluster_key = _cluster_cache_entry(cluster, cache, module, fn.name, capture, kernel_text,
                                                           globals_text, target, kernel_tool, options, pass_names)
                if cluster_key is not None:
                    where = str(cache.path(cluster_key))
            if origin == "cached" and stored is None:
                stats["misses"] += 1
            if stored is not None:
                applied = apply_stored(state.result_module, fn.name, stored, origin, records, messages,
                                        recheck_stored(options, source, config, capture, judge),
                                        where=where, verbose=verbose,
                                        specs_in_force=specs_in_force(module, fn.name, source, config, capture))
                if applied is not None:
                    state.result_module, did_change = applied
                    state.changed |= did_change
                    if origin == "cached":
                        stats["hits"] += 1
                        stats["saved_s"] += _number(stored.get("search_s"))
                    else:
                        stats["locked"] += 1
                    continue
                if origin == "cached":
                    stats["misses"] += 1         # stored, but it no longer applies: searched again
            if cluster is None:
                if judge is None:
                    judge = BackendJudge(options.backend, options.policy, options.check_sets, options.timing_reps)
                if not judge.can_time and options.no_gpu == "locked":
                    # Nothing found here could be applied: do not spend a build's time searching.
                    records["kernels"].append({
                        "kernel": fn.name, "signature": fn.signature, "status": Status.KEPT_BASELINE,
                        "decision": None,
                        "reason": "no GPU and no locked or cached decision: nvcc's code kept "
                                  "(NVCC_PLUS_NO_GPU=estimate searches with the emulator and a static estimate)",
                        "candidates": [], "notes": []})
                    continue
            left = _time_left(deadline)
            if left is not None and left < MIN_SEARCH_S:
                timed_out.append(fn.name)
                records["kernels"].append(_not_searched(fn, "not searched: the optimizer's time limit "
                                                            "(NVCC_PLUS_TIMEOUT / build budget) was reached"))
                continue
            choices, share, skip, notes, why_none = _spec_choices(module, fn.name, source, config, capture,
                                                                  options, spec_for)
            if skip:
                records["kernels"].append({
                    "kernel": fn.name, "signature": fn.signature, "status": Status.KEPT_BASELINE, "decision": None,
                    "reason": skip, "capture_share": share, "candidates": [], "notes": notes})
                continue
            pending = _Pending(fn.name, fn.signature, choices, share, notes, why_none, cache_key, lock_key,
                               kernel_text, kernel_tool)
            if cluster is not None:
                if not choices:
                    # nothing to judge with: the record says so without a trip to the cluster
                    records["kernels"].append({
                        "kernel": fn.name, "signature": fn.signature, "status": Status.NOT_VERIFIABLE,
                        "decision": None, "reason": f"not verifiable: {why_none}", "candidates": [],
                        "notes": notes})
                    continue
                payload = {"ptx": ptx, "kernel": fn.name, "target": target, "choices": choices, "share": share,
                           "options": options}
                sub = cluster.submit(payload, cluster.limit_for(options, deadline))
                records["kernels"].append(None)           # its place, filled when the answer comes
                sent.append((sub, pending, len(records["kernels"]) - 1))
                continue
            # One GPU for the whole search of this kernel (a free one of those visible; waiting
            # for one is bounded by the deadline, and the search's budget starts once it is held).
            hold = getattr(judge, "hold", None)
            notify("kernel_started", fn.signature or fn.name, index, len(todo), options.budget_s)
            search_t0 = time.monotonic()
            try:
                with (hold(_gpu_wait_deadline(deadline)) if hold else nullcontext()) as device:
                    kr, winner, chosen_index, tried = search_choices(
                        module, fn.name, choices, options=options, deadline=deadline, share=share, judge=judge,
                        target=target)
                    if device is not None:
                        kr["device"] = {"name": device.name, "uuid": device.uuid, "ordinal": device.ordinal}
            except GpuBusy:
                no_free_gpu.append(fn.name)
                records["kernels"].append(_not_searched(fn, "not searched: no GPU became free before the "
                                                            "optimizer's time limit"))
                continue
            except NoDevice as exc:
                records["kernels"].append(_not_searched(fn, f"not searched: {exc}"))
                if str(exc) not in messages:
                    messages.append(f"{exc}; nvcc's code kept")
                continue
            search_s = time.monotonic() - search_t0
            stats["searches"] += 1
            stats["search_s"] += search_s
            notify("kernel_finished", fn.signature or fn.name, str(kr.get("status")), search_s)
            chosen = choices[chosen_index] if chosen_index is not None else None
            records["kernels"].append(None)
            _finish(state, pending, kr, winner.plan if winner is not None else None, chosen, tried,
                    slot=len(records["kernels"]) - 1, target=target, tool=kernel_tool, options=options,
                    pass_names=pass_names, globals_text=globals_text,
                    store=judge.can_time, model_tool=None, search_s=search_s,
                    searched_on=_searched_on(kr, judge))
        if sent:
            failed: list[str] = []
            outcomes = cluster.gather([s for s, _, _ in sent])
            for (sub, pending, slot), outcome in zip(sent, outcomes):
                if outcome.answer is None or not _cluster_answer_applies(outcome.answer, pending):
                    why = outcome.failure or "the worker's answer does not match this kernel"
                    failed.append((pending.kernel, why))
                    records["kernels"][slot] = {
                        "kernel": pending.kernel, "signature": pending.signature, "status": Status.KEPT_BASELINE,
                        "decision": None, "reason": f"cluster search failed, nvcc's code kept: {why}",
                        "candidates": [], "notes": list(pending.notes)}
                    continue
                ans = outcome.answer
                kr = ans["record"]
                kr["cluster"] = {"address": cluster.address, "worker": ans.get("worker"), "gpu": ans.get("gpu"),
                                 "seconds": ans.get("seconds")}
                plan = [Step.from_dict(s) for s in ans["plan"]] if ans.get("plan") else None
                idx = ans.get("chosen")
                chosen = pending.choices[idx] if isinstance(idx, int) and 0 <= idx < len(pending.choices) else None
                ok = _finish(state, pending, kr, plan, chosen, list(ans.get("tried") or []), slot=slot,
                             target=target, tool=pending.kernel_tool, options=options, pass_names=pass_names,
                             globals_text=globals_text, store=bool(ans.get("can_time")),
                             model_tool=_cluster_tool(pending.kernel_tool, ans.get("gpu")),
                             expect_hash=ans.get("ptx_hash"), search_s=ans.get("seconds"),
                             searched_on=ans.get("gpu"))
                if not ok:
                    failed.append((pending.kernel, "its plan gives other PTX here than on the worker "
                                                   "(another nvcc-plus version?)"))
            if failed:
                names = ", ".join(k for k, _ in failed[:3]) + (", ..." if len(failed) > 3 else "")
                messages.append(f"{failed[0][1]}; {len(failed)} kernel(s) keep nvcc's code ({names})")
    except BaseException as exc:
        # A hard stop (the driver's NVCC_PLUS_TIMEOUT alarm) or a failure in the middle of a
        # kernel: what was decided before it is verified and measured; the exception carries
        # that partial result, and the caller decides whether to use it.
        if not isinstance(exc, (KeyboardInterrupt, SystemExit)):
            exc.partial = _partial_result(ptx, state, todo, exc)
        raise
    records["kernels"] = [r for r in records["kernels"] if r is not None]
    try:
        CacheStats(cache.root).add(**stats)
    except OSError as exc:
        messages.append(f"cache statistics not updated ({exc.filename or cache.root}: {exc.strerror or exc})")
    if timed_out:
        messages.append(f"time limit reached: {len(timed_out)} kernel(s) not searched, nvcc's code kept "
                        f"({', '.join(timed_out[:3])}{', ...' if len(timed_out) > 3 else ''})")
    if no_free_gpu:
        messages.append(f"no GPU became free in time: {len(no_free_gpu)} kernel(s) not searched, nvcc's code "
                        f"kept ({', '.join(no_free_gpu[:3])}{', ...' if len(no_free_gpu) > 3 else ''})")
    text = ptx_ir.emit(state.result_module, faithful=True) if state.changed else ptx
    return ModuleResult(text, state.changed, records, messages)


def _partial_result(ptx: str, state: "_ModuleState", todo: list, exc: BaseException) -> ModuleResult:
    """The module as decided up to an interruption: the kernels searched (or applied from the
    cache and lockfile) before it keep their outcome; the one in flight and the rest keep nvcc's
    code, their records say why."""
    records = state.records
    records["kernels"] = [k for k in records["kernels"] if k is not None]
    done = {k["kernel"] for k in records["kernels"]}
    records["kernels"].extend(
        {"kernel": k.name, "signature": k.signature, "status": Status.KEPT_BASELINE, "decision": None,
         "reason": ("interrupted while being searched" if k.name == state.in_flight else "not searched")
                   + f": {type(exc).__name__}: {exc}", "candidates": [], "notes": []}
        for k in todo if k.name not in done)
    text = ptx_ir.emit(state.result_module, faithful=True) if state.changed else ptx
    return ModuleResult(text, state.changed, records, state.messages + [
        f"interrupted in {state.in_flight or 'the search'} ({type(exc).__name__}); the decisions made before it "
        "are kept"])


def cluster_address(config: dict | None) -> str | None:
    from superopt.cluster import address_from
    return address_from(config)


def _gpu_wait_deadline(deadline) -> float | None:
    """Until when a kernel may wait for a free GPU: while a search could still start."""
    return None if deadline is None else float(deadline) - MIN_SEARCH_S


def _not_searched(fn, reason: str) -> dict:
    return {"kernel": fn.name, "signature": fn.signature, "status": Status.KEPT_BASELINE, "decision": None,
            "reason": reason, "candidates": [], "notes": []}


@dataclass
class _Pending:
    """A kernel to search: what the search and the storing of its decision need."""
    kernel: str
    signature: str | None
    choices: list
    share: float | None
    notes: list
    why_none: str | None
    cache_key: str
    lock_key: str
    kernel_text: str
    kernel_tool: str = ""


@dataclass
class _ModuleState:
    module: object
    records: dict
    cache: DecisionCache
    lock: Lockfile | None
    lock_path: Path | None
    write_lock: bool
    messages: list
    lock_dir: Path | None = None           # where a new lockfile goes (store.locations decides)
    config_path: str | None = None
    result_module: object = None
    changed: bool = False
    in_flight: str | None = None           # the kernel being searched

    def __post_init__(self):
        if self.result_module is None:
            self.result_module = self.module


def search_choices(module, kernel: str, choices, *, options: SearchOptions, deadline, share, judge, target):
    """The search of one kernel with its spec sources in order (the next source only when nvcc's
    code could not be judged with one): (record, winner or None, index of the choice used or
    None, notes on the sources tried). This is what a cluster worker runs, too."""
    kr, result, chosen = None, None, None
    tried: list[str] = []
    for i, choice in enumerate(choices or [None]):
        specs = choice.specs if choice else None
        kernel_options = _kernel_options(options, choice, deadline, share)
        # The model proposer adds candidates when a model is configured; otherwise this is
        # exactly the rule search.
        result = search_with_model(module, kernel, specs, target=target, options=kernel_options, judge=judge)
        kr, chosen = result.record, (i if choice is not None else None)
        unjudged = _baseline_unjudgeable(kr)
        if result.winner is not None or not unjudged or i == len(choices or [None]) - 1:
            break
        tried.append(f"specs from {choice.origin} could not be judged ({unjudged}); tried the next source")
    return kr, result.winner, chosen, tried


def _finish(state: _ModuleState, p: _Pending, kr: dict, plan, chosen, tried: list, *, slot: int, target: str,
            tool: str, options: SearchOptions, pass_names, globals_text: str, store: bool,
            model_tool: str | None, expect_hash: str | None = None, search_s: float | None = None,
            searched_on: str | None = None) -> bool:
    """Record a search's outcome, apply its winning plan and store the decision (cache, and the
    lockfile with NVCC_PLUS_LOCK=write). ``model_tool``: the cache key's tool part for a decision
    measured elsewhere (a cluster worker's GPU model). False when the plan gives other PTX than
    ``expect_hash`` (nothing applied or stored then)."""
    records, messages = state.records, state.messages
    if chosen is None:
        kr["reason"] = f"not verifiable: {p.why_none}"
    else:
        kr["spec_origin"] = chosen.origin
    if p.share is not None:
        kr["capture_share"] = p.share
    kr.setdefault("notes", [])
    kr["notes"] = list(kr["notes"]) + p.notes + tried + (chosen.notes if chosen else [])
    key_tool = model_tool or tool
    cache_key = p.cache_key if model_tool is None else decision_key(
        kernel_text=p.kernel_text, globals_text=globals_text, target=target, tool=key_tool,
        policy=options.policy, passes=pass_names)
    if chosen is not None and chosen.origin == "captured":
        # A decision made at the program's real launches must not be shadowed by one made
        # at guessed sizes: captured specs are part of the cache key.
        cache_key = decision_key(kernel_text=p.kernel_text, globals_text=globals_text, target=target,
                                 tool=f"{key_tool} spec={chosen.key}", policy=options.policy, passes=pass_names)
    decision = {"kernel": p.kernel, "plan": [], "ptx_hash": None, "status": kr["status"],
                "decision": kr.get("decision"), "spec_origin": kr.get("spec_origin")}
    if search_s is not None:
        decision["search_s"] = round(search_s, 3)
    if searched_on:
        decision["searched_on"] = searched_on
    if plan:
        new_module, _ = apply_plan(state.result_module, p.kernel, plan)
        got = text_hash(ptx_ir.printer.emit_function(new_module.function(p.kernel)))
        if expect_hash is not None and got != expect_hash:
            records["kernels"][slot] = {
                "kernel": p.kernel, "signature": p.signature, "status": Status.KEPT_BASELINE, "decision": None,
                "reason": f"the worker's plan gives other PTX here ({got} != {expect_hash}); nvcc's code kept",
                "candidates": [], "notes": kr["notes"]}
            return False
        state.result_module = new_module
        state.changed = True
        decision["plan"] = [s.to_dict() for s in plan]
        decision["ptx_hash"] = got
    if model_tool is not None:
        decision["gpu"] = model_tool.rpartition(" gpu=")[2]
    records["kernels"][slot] = kr
    if kr["status"] in (Status.OPTIMIZED, Status.KEPT_BASELINE) and kr.get("decision") != "estimate" \
            and store and _measured(kr):
        try:
            state.cache.put(cache_key, decision)
        except OSError as exc:
            messages.append(f"decision not cached ({exc.filename or state.cache.root}: {exc.strerror or exc})")
        if state.write_lock:
            from superopt.store.locations import lockfile_to_write
            target_lock = state.lock or Lockfile(lockfile_to_write(state.lock_dir, state.config_path))
            target_lock.record(p.lock_key, decision)
    return True


def _cluster_tool(tool: str, gpu: str | None) -> str:
    """The tool part of a cluster decision's cache key: the GPU model it was measured on is part of it."""
    return f"{tool} gpu={gpu or '?'}"


def _cluster_answer_applies(ans: dict, p: _Pending) -> bool:
    kr = ans.get("record")
    return isinstance(kr, dict) and kr.get("kernel") == p.kernel and "status" in kr


def _cluster_cache_entry(cluster, cache, module, kernel, capture, kernel_text, globals_text, target, tool,
                         options, pass_names):
    """A decision the cluster made for this kernel earlier, on one of its GPU models, and its key."""
    for gpu in cluster.models():
        key_tool = _cluster_tool(tool, gpu)
        key = decision_key(kernel_text=kernel_text, globals_text=globals_text, target=target,
                           tool=key_tool, policy=options.policy, passes=pass_names)
        found = cache.get(key)
        if found is None and capture is not None:
            found, key = _captured_cache_entry(cache, module, kernel, capture, kernel_text, globals_text, target,
                                               key_tool, options, pass_names)
        if found is not None:
            return found, key
    return None, None


def _number(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _measured(kr: dict) -> bool:
    """A decision worth storing: something was measured, or nothing was left unjudged (a
    GPU that failed under every candidate must not leave "keep nvcc's code" for good)."""
    if kr["status"] == Status.OPTIMIZED:
        return True
    fates = {c.get("fate") for c in kr.get("candidates", [])}
    if fates & {Fate.FASTER, Fate.NOT_FASTER, Fate.NOT_CONFIRMED, Fate.WINNER}:
        return True
    return not fates & {Fate.NOT_JUDGED, Fate.ERROR, Fate.SKIPPED_BUDGET, Fate.NOT_TIMED}


MIN_SEARCH_S = 2.0          # a search given less time than this is not started


def _time_left(deadline) -> float | None:
    return None if deadline is None else float(deadline) - time.time()


def _can_time(judge, options) -> bool:
    if judge is not None:
        return judge.can_time
    return options.backend == "gpu" or (options.backend == "auto" and BackendJudge.gpu_usable()[0])


MAJOR_SHARE = 0.05          # a captured kernel with this share of GPU time gets twice the budget


def _staging_block(choice) -> tuple | None:
    """The block stage-stores and stage-loads specialise for: the first (timed) spec's. Any
    spec's block is safe, since each rewrite tests %ntid at run time and runs nvcc's code for
    any other block.
    None beside dynamic shared memory (its static arrays would add to the launch's)."""
    specs = list(getattr(choice, "specs", None) or [])
    def field(s, name, default=None):
        return s.get(name, default) if isinstance(s, dict) else getattr(s, name, default)
    if not specs or any(field(s, "shared_bytes", 0) for s in specs):
        return None
    block = field(specs[0], "block")
    try:
        return tuple(int(d) for d in block)
    except (TypeError, ValueError):
        return None


def _kernel_options(options: SearchOptions, choice, deadline, share=None) -> SearchOptions:
    out = options
    if share is not None and share >= MAJOR_SHARE:
        # Where the program spends its time is where the search spends its own.
        out = replace(out, budget_s=2 * out.budget_s)
    if choice is not None and str(choice.origin).startswith(("toml", "comment", "file", "captured")):
        # An explicit or captured spec is the program's launch contract: occupancy knobs may
        # rely on its block.
        biggest = max((s.block for s in choice.specs), key=lambda b: b[0] * b[1] * b[2])
        out = replace(out, extra_params={**out.extra_params, "occupancy": {"block": tuple(biggest)}})
    staged_block = _staging_block(choice)
    if staged_block is not None:
        out = replace(out, extra_params={**out.extra_params, "stage-stores": {"block": staged_block},
                                         "stage-loads": {"block": staged_block}})
    left = _time_left(deadline)
    if left is not None:
        out = replace(out, budget_s=max(0.0, min(out.budget_s, left - MIN_SEARCH_S)))
    return out


def _spec_choices(module, kernel, source, config, capture, options, spec_for):
    """(choices in order, capture share, reason to skip, notes, reason when there is none)."""
    if spec_for is not None:
        specs, origin_or_reason = spec_for(module, kernel)
        if not specs:
            return [], None, None, [], origin_or_reason
        return [SpecChoice(list(specs), origin_or_reason)], None, None, [], None
    found = candidates_in_order(module, kernel, source=source, config=config, capture=capture,
                                search_minor=search_minor(config))
    return found.choices, found.share, found.skip, list(found.notes), found.reason


def _baseline_unjudgeable(kr: dict) -> str | None:
    """The reason when nvcc's own code could not be judged with the specs (every candidate
    that reached the check on every launch shape was not judged), else None. Candidates the
    search left unchecked at its costly shapes (``launch_shapes_unchecked``: not kept, so never
    checked at the captured size) say nothing about those shapes and are not counted."""
    judged = (Fate.NOT_JUDGED, Fate.REJECTED_CHECK, Fate.VERIFIED, Fate.FASTER, Fate.NOT_FASTER,
              Fate.NOT_CONFIRMED, Fate.NOT_TIMED, Fate.WINNER, Fate.ESTIMATE_WINNER)
    fates = [c for c in kr.get("candidates", [])
             if c.get("fate") in judged and not c.get("launch_shapes_unchecked")]
    if fates and all(c.get("fate") == Fate.NOT_JUDGED for c in fates):
        return fates[0].get("reason") or "not judged"
    return None


def _captured_cache_entry(cache, module, kernel, capture, kernel_text, globals_text, target, tool,
                          options, pass_names):
    """The cached decision made at this kernel's captured launches, if any (no inference:
    the key is that of the captured specs alone)."""
    from superopt.specs.capture.specs import captured_specs
    found = captured_specs(capture, module, kernel)
    if not found.specs:
        return None, None
    key = decision_key(kernel_text=kernel_text, globals_text=globals_text, target=target,
                       tool=f"{tool} spec={specs_key(found.specs)}", policy=options.policy, passes=pass_names)
    return cache.get(key), key


def _verbose(config: dict | None) -> bool:
    """NVCC_PLUS_VERBOSE as the driver resolved it (``verbose`` in the config it hands over:
    flag > environment > nvcc-plus.toml), else the environment."""
    cfg = config or {}
    value = cfg["verbose"] if "verbose" in cfg else os.environ.get("NVCC_PLUS_VERBOSE", "")
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _searched_on(kr: dict, judge) -> str | None:
    """The GPU the decision was measured on (its name, from the timings), else the backend."""
    for c in kr.get("candidates", []):
        name = ((c.get("timing") or {}).get("device") or {}).get("name")
        if name:
            return str(name)
    return getattr(judge, "backend", None)
