"""A spec fix checked before it is printed: nvcc's own code must run under it.

For a kernel that is not verifiable ``superopt optimize`` prints the spec to add
(:mod:`superopt.specs.template`): what the IR tells, the rest guessed. A guess can be wrong in a
way that makes the fix worse than none: for ``rowsum(float** rows, ...)`` it said ``rows:u64[n]
in``, and pasted in, every candidate failed with "baseline crash ... out-of-range global access"
(random 64-bit values are no pointers). So before it is shown, nvcc's own code runs under the
suggested spec on the CPU emulator (one small input set, a fraction of a second). If it does not
run cleanly, the fix is not printed; what is unknown is, parameter by parameter, with why:

* a parameter whose C++ type is a pointer to pointers (``float**``): its elements are addresses
  of memory a launch spec cannot describe yet;
* a buffer nvcc's code reads or writes past its guessed length (found by running again with that
  buffer alone made larger);
* a struct passed by value whose bytes were guessed (zeros: its pointer fields point nowhere).

A spec under which nvcc's code writes none of its outputs (a guessed count of zero, a struct of
zeros) runs cleanly and checks nothing: it is not printed either.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from superopt.specs.template import SpecTemplate, spec_template

CHECK_SETS = 1                 # input sets of the check (each run twice)
LAUNCH_TIMEOUT_S = 10.0        # per emulated launch
BLAME_BUDGET_S = 6.0           # the reruns that find which buffer length is too small
LENGTH_FACTOR = 16             # a buffer made this much larger for the rerun


@dataclass
class CheckedFix:
    template: SpecTemplate
    checked: bool = False              # nvcc's code ran under it on the emulator
    failure: str | None = None         # how it failed there (None: it ran cleanly, or not checked)
    not_checked: str | None = None     # why it could not be run (the emulator unavailable, ...)
    unknown: list[str] = field(default_factory=list)   # what is unknown, one item per parameter
    describable: bool = True           # a launch spec can give what is unknown (not: pointers in buffers)

    def text(self) -> str:
        t = self.template
        if t.cannot or self.failure is None:
            out = t.text()
            if self.not_checked and not t.cannot:
                out += f"\n(not checked on the emulator: {self.not_checked})"
            return out
        lines = [f"No spec is suggested: nvcc's own code does not run under the one these guesses make "
                 f"(checked on the CPU emulator: {self.failure}).", "What is unknown:"]
        lines += [f"  - {u}" for u in self.unknown]
        capture = "capture the program's own launch with its data: superopt capture --data -- ./app (docs/capture.md)"
        if self.describable:
            lines.append(f"Give them in a [kernels.\"{t.name}\"] table of nvcc-plus.toml (docs/launch-specs.md), "
                         f"or {capture}.")
        else:
            lines.append(f"Until a launch spec can, {capture}.")
        return "\n".join(lines)


def checked_fix(ptx: str, module, kernel: str, source_text: str | None = None, *,
                deadline: float | None = None) -> CheckedFix:
    """The spec template of ``kernel`` and whether nvcc's own code (``ptx``) runs under it.
    ``deadline`` (time.monotonic()): past it the fix is not checked, and says so."""
    tmpl = spec_template(module, kernel, source_text)
    out = CheckedFix(tmpl)
    if tmpl.cannot:
        return out
    if deadline is not None and time.monotonic() > deadline:
        out.not_checked = "the time for checking this file's fixes is spent"
        return out
    from superopt.judge.backends.base import BackendUnavailable, get_backend
    try:
        ok, why = get_backend("emulator").available()
    except BackendUnavailable as exc:
        ok, why = False, str(exc)
    if not ok:
        out.not_checked = why
        return out
    fn = _kernel(module, kernel)
    table = _table(tmpl)
    spec = _spec(table, fn)
    failure = _baseline_failure(ptx, spec)
    out.checked = True
    if failure is None:
        return out
    out.failure = failure
    out.unknown, out.describable = _unknown(ptx, fn, tmpl, table, deadline)
    return out


def _kernel(module, kernel: str):
    return next(k for k in module.kernels if k.name == kernel)


def _table(tmpl: SpecTemplate) -> dict:
    """The template's toml table as nvcc-plus.toml would hand it over (the text the user pastes)."""
    import tomllib
    return tomllib.loads(tmpl.toml)["kernels"][tmpl.name]


def _spec(table: dict, fn):
    from superopt.specs.inference import explicit_specs
    specs, _ = explicit_specs({"kernels": {fn.name: table}}, fn)
    return specs[0]


def _baseline_failure(ptx: str, spec) -> str | None:
    """How nvcc's code fails under ``spec`` on the emulator (a crash, a timeout, writes outside
    its buffers, a result that is not deterministic), or None when it runs cleanly."""
    from superopt.judge.check import Verdict, run_baseline
    got = run_baseline(ptx, spec, backend="emulator", sets=CHECK_SETS, launch_timeout=LAUNCH_TIMEOUT_S)
    if isinstance(got, Verdict):
        return got.reason
    if _writes_nothing(got):
        return "nvcc's code writes none of its outputs under it, so a check would compare nothing"
    return None


def _writes_nothing(runs) -> bool:
    """Whether the baseline left every output element as it was, on every set it ran (a guessed
    size of 0, a struct of zeros: the kernel returns at once)."""
    outs = [b for b in runs.spec.buffers if b.direction in ("out", "inout")]
    if not outs or not runs.valid:
        return False
    for i in runs.valid:
        for b in outs:
            if b.direction == "out":
                un = runs.unwritten.get((i, b.name))
                if un is None or not bool(un.all()):
                    return False
            elif not runs.results[i].inputs_unchanged.get(b.name, True):
                return False
    return True


def _unknown(ptx: str, fn, tmpl: SpecTemplate, table: dict, deadline: float | None) -> tuple[list[str], bool]:
    """(what is unknown, one item per parameter; whether a launch spec can give it)."""
    from superopt.specs.facts import param_infos
    infos = param_infos(fn)
    params = table["params"]
    out = []
    for info, p in zip(infos, params):
        cxx = (info.cxx or "").replace("const", "").replace(" ", "")
        if info.kind == "ptr" and cxx.count("*") >= 2:
            out.append(f"{p['name']} ({info.cxx}): its elements are pointers, to memory a launch spec cannot "
                       f"describe yet (a buffer of {p['type']} values read as addresses)")
    if out:
        return out, False
    out = _short_buffers(ptx, fn, table, deadline) or [g for g in tmpl.guessed if "'s bytes" in g or "'s value" in g]
    if out:
        return out, True
    return [f"the guesses ({'; '.join(tmpl.guessed)}) do not describe how the program launches it"], True


def _short_buffers(ptx: str, fn, table: dict, deadline: float | None = None) -> list[str]:
    """Buffers nvcc's code reads or writes past their guessed length: each run again alone made
    ``LENGTH_FACTOR`` times larger; one under which the code runs cleanly is named."""
    import copy
    out = []
    started = time.monotonic()
    for i, p in enumerate(table["params"]):
        if p.get("kind") != "buffer":
            continue
        if time.monotonic() - started > BLAME_BUDGET_S or (deadline is not None and time.monotonic() > deadline):
            break
        bigger = copy.deepcopy(table)
        bigger["params"][i]["length"] = f"{LENGTH_FACTOR}*({p['length']})"
        try:
            failure = _baseline_failure(ptx, _spec(bigger, fn))
        except Exception:  # noqa: BLE001 - a rerun that cannot be made names nothing
            continue
        if failure is None:
            out.append(f"{p['name']}'s length: nvcc's code reads or writes past the guessed {p['length']} "
                       f"elements (it runs with {LENGTH_FACTOR}x that); give its real length, an expression "
                       f"of the scalar parameters")
    return out
