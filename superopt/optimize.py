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
from pathlib import Path

import ptx_ir
from superopt.store import record as rec
from superopt.store.cache import DecisionCache, decision_key
from superopt.search.candidates import PlanDidNotApply, Step, apply_plan, text_hash
from superopt.store.lockfile import Lockfile, find_lockfile
from superopt.passes import registry
from superopt.judge.ptxas import ptxas_version
from superopt.model.proposer import model_identity, search_with_model
from superopt.judge import BackendJudge, Judge
from superopt.search.loop import SearchOptions
from superopt.store.record import Fate, Status
from superopt.specs.capture.format import CaptureError
from superopt.specs.sources import (SpecChoice, candidates_in_order, explicit_or_inferred,
                                    load_configured_capture, specs_key)


@dataclass
class ModuleResult:
    ptx: str
    changed: bool
    records: dict
    messages: list[str] = field(default_factory=list)


class PtxSourceError(RuntimeError):
    """nvcc could not make PTX of a .cu file."""


def ptx_from_file(path: Path, arch: str) -> str:
    """PTX text of a .ptx file, or of a .cu file compiled with the real nvcc (``-arch=arch -O3``);
    raises :class:`PtxSourceError` with nvcc's messages when it fails."""
    path = Path(path)
    if path.suffix == ".ptx":
        return path.read_text()
    with tempfile.TemporaryDirectory(prefix="superopt-") as tmp:
        out = Path(tmp) / "x.ptx"
        cmd = [os.environ.get("NVCC_PLUS_REAL_NVCC", "nvcc"), f"-arch={arch}", "-O3", "-ptx",
               str(path), "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise PtxSourceError(f"nvcc failed on {path}:\n{proc.stderr.strip()}")
        return out.read_text()


def options_from_config(config: dict | None) -> SearchOptions:
    cfg = dict(config or {})
    env = os.environ
    opts = SearchOptions()
    budget = cfg.get("budget", env.get("NVCC_PLUS_BUDGET"))
    if budget is not None:
        try:
            opts.budget_s = float(budget)
        except (TypeError, ValueError):
            raise SettingError(f"budget (NVCC_PLUS_BUDGET) must be a number of seconds, not {budget!r}") from None
    opts.policy = str(cfg.get("policy", env.get("NVCC_PLUS_POLICY", opts.policy)))
    opts.backend = str(cfg.get("backend", env.get("NVCC_PLUS_BACKEND", opts.backend)))
    opts.no_gpu = str(cfg.get("no_gpu", env.get("NVCC_PLUS_NO_GPU", opts.no_gpu)))
    _validate(opts)
    sanitize = cfg.get("sanitize", env.get("NVCC_PLUS_SANITIZE"))
    if sanitize is not None:
        items = sanitize if isinstance(sanitize, list) else str(sanitize).split(",")
        tools = tuple(t.strip() for t in items if t.strip() and t.strip() != "off")
        unknown = [t for t in tools if t not in ("memcheck", "racecheck", "initcheck", "synccheck")]
        if unknown:
            raise ValueError(f"NVCC_PLUS_SANITIZE: unknown compute-sanitizer tool(s) {unknown} "
                             f"(memcheck, racecheck, initcheck, synccheck, or off)")
        opts.sanitize = tools
    passes = cfg.get("passes", env.get("NVCC_PLUS_PASSES"))
    if passes:
        opts.passes = passes if isinstance(passes, list) else [p.strip() for p in str(passes).split(",") if p.strip()]
    return opts


class SettingError(ValueError):
    """A setting with a value nvcc-plus does not know; the message names the setting."""


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
    cache = DecisionCache()
    lock_path = find_lockfile(Path(source).parent if source else None)
    lock = Lockfile(lock_path) if lock_path else None
    write_lock = os.environ.get("NVCC_PLUS_LOCK") == "write"
    verbose = _verbose(config)

    deadline = (config or {}).get("deadline")
    timed_out: list[str] = []
    capture = None
    try:
        capture = load_configured_capture(config)
    except (CaptureError, OSError, ValueError) as exc:
        messages.append(f"capture not used: {exc}")

    result_module = module
    changed = False
    for fn in module.kernels:
        if kernels and fn.name not in kernels:
            continue
        kernel_text = ptx_ir.printer.emit_function(fn)
        lock_key = decision_key(kernel_text=kernel_text, globals_text=globals_text, target=target,
                                tool="", policy=options.policy, passes=pass_names)
        cache_key = decision_key(kernel_text=kernel_text, globals_text=globals_text, target=target,
                                 tool=tool, policy=options.policy, passes=pass_names)
        stored = (lock.get(lock_key) if lock else None)
        origin, where = "locked", str(lock_path)
        if stored is not None and capture is not None and stored.get("spec_origin") != "captured" \
                and _can_time(judge, options):
            stored = None                # searched at guessed sizes before: search again at the captured ones
        if stored is None:
            stored, origin, where = cache.get(cache_key), "cached", str(cache.path(cache_key))
        if stored is None and capture is not None:
            stored, captured_key = _captured_cache_entry(cache, module, fn.name, capture, kernel_text,
                                                         globals_text, target, tool, options, pass_names)
            if captured_key is not None:
                where = str(cache.path(captured_key))
        if stored is not None:
            applied = _apply_stored(result_module, fn.name, stored, origin, records, messages,
                                    _recheck_stored(options, source, config, capture, judge),
                                    where=where, verbose=verbose,
                                    specs_in_force=_specs_in_force(module, fn.name, source, config, capture))
            if applied is not None:
                result_module, did_change = applied
                changed |= did_change
                continue
        if judge is None:
            judge = BackendJudge(options.backend, options.policy, options.check_sets, options.timing_reps)
        if not judge.can_time and options.no_gpu == "locked":
            # Nothing found here could be applied: do not spend a build's time searching.
            records["kernels"].append({
                "kernel": fn.name, "signature": fn.signature, "status": Status.KEPT_BASELINE, "decision": None,
                "reason": "no GPU and no locked or cached decision: nvcc's code kept "
                          "(NVCC_PLUS_NO_GPU=estimate searches with the emulator and a static estimate)",
                "candidates": [], "notes": []})
            continue
        left = _time_left(deadline)
        if left is not None and left < MIN_SEARCH_S:
            timed_out.append(fn.name)
            records["kernels"].append({
                "kernel": fn.name, "signature": fn.signature, "status": Status.KEPT_BASELINE, "decision": None,
                "reason": "not searched: the optimizer's time limit (NVCC_PLUS_TIMEOUT / build budget) was reached",
                "candidates": [], "notes": []})
            continue
        choices, share, skip, notes, why_none = _spec_choices(module, fn.name, source, config, capture,
                                                              options, spec_for)
        if skip:
            records["kernels"].append({
                "kernel": fn.name, "signature": fn.signature, "status": Status.KEPT_BASELINE, "decision": None,
                "reason": skip, "capture_share": share, "candidates": [], "notes": notes})
            continue
        kr, result, chosen = None, None, None
        tried: list[str] = []
        for choice in choices or [None]:
            specs = choice.specs if choice else None
            kernel_options = _kernel_options(options, choice, deadline, share)
            # The model proposer adds candidates when a model is configured; otherwise this is
            # exactly the rule search.
            result = search_with_model(module, fn.name, specs, target=target, options=kernel_options, judge=judge)
            kr, chosen = result.record, choice
            unjudged = _baseline_unjudgeable(kr)
            if result.winner is not None or not unjudged or choice is choices[-1]:
                break
            tried.append(f"specs from {choice.origin} could not be judged ({unjudged}); tried the next source")
        if chosen is None:
            kr["reason"] = f"not verifiable: {why_none}"
        else:
            kr["spec_origin"] = chosen.origin
        if share is not None:
            kr["capture_share"] = share
        kr.setdefault("notes", [])
        kr["notes"] = list(kr["notes"]) + notes + tried + (chosen.notes if chosen else [])
        if chosen is not None and chosen.origin == "captured":
            # A decision made at the program's real launches must not be shadowed by one made
            # at guessed sizes: captured specs are part of the cache key.
            cache_key = decision_key(kernel_text=kernel_text, globals_text=globals_text, target=target,
                                     tool=f"{tool} spec={chosen.key}", policy=options.policy, passes=pass_names)
        records["kernels"].append(kr)
        decision = {"kernel": fn.name, "plan": [], "ptx_hash": None, "status": kr["status"],
                    "decision": kr.get("decision"), "spec_origin": kr.get("spec_origin"),
                    "searched_on": _searched_on(kr, judge)}
        if result.winner is not None:
            new_module, _ = apply_plan(result_module, fn.name, result.winner.plan)
            result_module = new_module
            changed = True
            decision["plan"] = [s.to_dict() for s in result.winner.plan]
            decision["ptx_hash"] = text_hash(ptx_ir.printer.emit_function(new_module.function(fn.name)))
        if kr["status"] in (Status.OPTIMIZED, Status.KEPT_BASELINE) and kr.get("decision") != "estimate" \
                and judge.can_time and _measured(kr):
            try:
                cache.put(cache_key, decision)
            except OSError as exc:
                messages.append(f"decision not cached ({exc.filename or cache.root}: {exc.strerror or exc})")
            if write_lock:
                target_lock = lock or Lockfile(Path(lock_path or (Path.cwd() / "nvcc-plus.lock")))
                target_lock.record(lock_key, decision)
    if timed_out:
        messages.append(f"time limit reached: {len(timed_out)} kernel(s) not searched, nvcc's code kept "
                        f"({', '.join(timed_out[:3])}{', ...' if len(timed_out) > 3 else ''})")
    text = ptx_ir.emit(result_module, faithful=True) if changed else ptx
    return ModuleResult(text, changed, records, messages)


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
                                search_minor=bool((config or {}).get("search_minor")))
    return found.choices, found.share, found.skip, list(found.notes), found.reason


def _baseline_unjudgeable(kr: dict) -> str | None:
    """The reason when nvcc's own code could not be judged with the specs (every candidate
    that reached the check was not judged), else None."""
    judged = (Fate.NOT_JUDGED, Fate.REJECTED_CHECK, Fate.VERIFIED, Fate.FASTER, Fate.NOT_FASTER,
              Fate.NOT_CONFIRMED, Fate.NOT_TIMED, Fate.WINNER, Fate.ESTIMATE_WINNER)
    fates = [c for c in kr.get("candidates", []) if c.get("fate") in judged]
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


# Steps whose parameters carry code (a model's function body): a lockfile or cache entry is
# data anyone could have written, so such a step is applied only after the judge accepts
# the result against nvcc's code here.
UNTRUSTED_PASSES = ("model-rewrite",)


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


def _provenance(stored: dict) -> str:
    """Where a stored decision came from, in words."""
    parts = []
    if stored.get("decision") == "estimate":
        parts.append("a static estimate (no GPU)")
    elif stored.get("searched_on"):
        parts.append(f"searched on {stored['searched_on']}")
    spec = stored.get("spec_origin")
    if spec == "captured":
        parts.append("at the program's captured launches")
    elif spec:
        parts.append(f"with launch specs from {spec}")
    return ", ".join(parts) or "origin not recorded"


def _specs_in_force(module, kernel, source, config, capture):
    """The kernel's launch-spec choices here (explicit, captured, inferred), computed once and
    only when a stored entry changes a block bound."""
    memo: list = []

    def get():
        if not memo:
            memo.append(candidates_in_order(module, kernel, source=source, config=config,
                                            capture=capture).choices)
        return memo[0]
    return get


def _apply_stored(module, kernel: str, stored: dict, origin: str, records: dict, messages: list[str],
                  recheck=None, *, where: str | None = None, verbose: bool = False, specs_in_force=None):
    entry = f"{where}: {kernel}" if where else kernel
    try:
        plan = [Step.from_dict(s) for s in stored.get("plan", [])]
    except (KeyError, TypeError, AttributeError) as exc:
        messages.append(f"{entry}: {origin} decision is malformed ({exc!r}); searching again")
        return None
    kr = {"kernel": kernel, "status": origin, "decision": origin, "plan": stored.get("plan", []),
          "reason": f"{origin} decision applied", "candidates": [], "notes": [],
          "stored": {"file": where, "provenance": _provenance(stored)}}
    announce = (f"{entry}: applied the {origin} entry: plan "
                f"{' + '.join(map(str, plan)) or 'keep nvcc code'}; {_provenance(stored)}")
    if not plan:
        kr["reason"] = f"{origin} decision: keep nvcc's code"
        records["kernels"].append(kr)
        if verbose:
            messages.append(announce)
        return module, False
    try:
        new_module, _ = apply_plan(module, kernel, plan)
    except (PlanDidNotApply, KeyError, ValueError, TypeError) as exc:
        # a pass refusing the stored parameters (maxnreg=5, block="x") is a stale or tampered entry
        messages.append(f"{entry}: {origin} decision no longer applies ({exc}); searching again")
        return None
    got = text_hash(ptx_ir.printer.emit_function(new_module.function(kernel)))
    if stored.get("ptx_hash") and got != stored["ptx_hash"]:
        messages.append(f"{entry}: {origin} decision gives different PTX than recorded "
                        f"({got} != {stored['ptx_hash']}); searching again")
        return None
    from superopt.judge.launch_contract import contract_problem
    problem = contract_problem(module.function(kernel), new_module.function(kernel),
                               specs_in_force or (lambda: []))
    if problem:
        # A launch that fails is a broken program: never applied; nvcc's code unless a search
        # (with a GPU, or NVCC_PLUS_NO_GPU=estimate) finds something better.
        messages.append(f"{entry}: {origin} decision not applied: {problem}; nvcc's code is used "
                        f"unless a search (GPU or NVCC_PLUS_NO_GPU=estimate) finds better")
        return None
    if any(s.pass_name in UNTRUSTED_PASSES for s in plan):
        verdict = recheck(module, new_module, kernel) if recheck else "no judge available"
        if verdict != "accepted":
            messages.append(f"{entry}: {origin} decision carries code ({', '.join(UNTRUSTED_PASSES)}) that "
                            f"could not be re-checked against nvcc's code here ({verdict}); not applied")
            kr.update(status=Status.KEPT_BASELINE, decision=None,
                      reason=f"{origin} decision not applied: its code was not re-checked ({verdict})")
            records["kernels"].append(kr)
            return module, False
        kr["notes"].append(f"{origin} code re-checked against nvcc's code: accepted")
    records["kernels"].append(kr)
    if verbose:
        messages.append(announce)
    return new_module, True


def _recheck_stored(options: SearchOptions, source, config, capture, judge):
    """Judge a stored rewrite against nvcc's code with whatever can judge here (the GPU, else
    the emulator); returns "accepted" or why not."""
    def recheck(module, new_module, kernel) -> str:
        found = candidates_in_order(module, kernel, source=source, config=config, capture=capture)
        if not found.choices:
            return f"no launch spec: {found.reason}"
        j = judge if judge is not None else BackendJudge(options.backend, options.policy, options.check_sets,
                                                         options.timing_reps)
        base, cand = ptx_ir.emit(module), ptx_ir.emit(new_module)
        for spec in found.choices[-1].specs:          # the small shapes (inferred or explicit)
            v = j.verify(base, cand, spec, fresh=True)
            if v.status != "accepted":
                return f"{v.status}: {v.reason}"
        return "accepted"
    return recheck
