"""The prompts: the kernel, what the IR knows about it, the pass menu, and what failed before.

A prompt is a chat (system + user message). It carries:

* the kernel's PTX in ptx_ir's canonical layout (the layout rewrite mode must answer in);
* an IR summary: parameters and their roles, loops (induction variable, trip count),
  memory accesses with their affine addresses, strides and proven alignment;
* ptxas's resource report (registers, spills, shared memory, stack) and the measured
  baseline time when a GPU measured it;
* plan mode: the pass menu (name, what it does, what it assumes, parameter values);
* earlier attempts with the judge's reasons -- ptxas errors with the offending line,
  differential mismatches (input set, buffer, first differing index, both values), plans
  that did not apply, answers that did not parse -- so repair rounds can fix them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

SYSTEM = (
    "You are the PTX super-optimizer of nvcc-plus. You propose faster versions of one CUDA kernel. "
    "Every proposal is checked before it is used: ptxas must accept it, and on random inputs "
    "(NaN, Inf, denormals, sizes that are not multiples of the block) it must write bit-identical "
    "outputs to the original kernel, and nothing outside its buffers. A proposal that fails is "
    "rejected, and you are shown why. Keep the kernel's name, parameters and launch contract. "
    "Prefer structural wins: wider (vectorized) memory accesses, fewer memory transactions, "
    "less redundant address arithmetic, warp shuffles instead of shared-memory round trips."
)

PLAN_TASK = (
    "Choose a plan: the passes to apply to this kernel, in order, each with one of its parameter "
    "values. Answer with JSON only, in the form {\"steps\": [{\"pass\": NAME, \"params\": {...}}]}."
)

REWRITE_TASK = (
    "Write this kernel again so that it runs faster and computes exactly the same results. Answer "
    "with the whole function in the same layout as shown (a tab before each statement, one statement "
    "per line, declare every register you use). The header (name, parameters, directives) must stay "
    "as it is; change the body."
)


@dataclass
class Attempt:
    """One earlier proposal and what became of it."""

    mode: str                       # plan | rewrite
    what: str                       # the plan's id, or "rewrite (round r, sample i)"
    fate: str                       # unparsed | cut-off | did-not-apply | rejected-ptxas | rejected-check | ...
    reason: str = ""
    detail: str = ""                # e.g. the PTX line ptxas complained about

    def line(self, limit: int = 400) -> str:
        text = f"{self.what}: {self.fate}"
        if self.reason:
            text += f": {self.reason}"
        if self.detail:
            text += f"\n   {self.detail}"
        return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class KernelContext:
    """What we know about the kernel besides its text."""

    target: str = "sm_90"
    resources: dict | None = None           # baseline ptxas resources (record.resources_dict)
    baseline_seconds: float | None = None   # measured median, when a GPU measured it
    roofline: str | None = None             # e.g. "62% of HBM bandwidth"
    rule_results: list[str] = field(default_factory=list)   # what the rule passes found
    attempts: list[Attempt] = field(default_factory=list)


def _short(name: str, fn) -> str:
    """Parameter names without the mangled kernel prefix (``_Z..._param_3`` -> ``param_3``)."""
    prefix = fn.name + "_"
    return name[len(prefix):] if name.startswith(prefix) else name


def _affine_text(aff, fn) -> str:
    text = str(aff)
    return text.replace(fn.name + "_", "")


def ir_summary(fn, *, max_accesses: int = 24) -> list[str]:
    """Facts from ptx_ir's analyses, one line each. Never raises (a failing analysis is skipped)."""
    lines: list[str] = []
    try:
        sig = fn.signature
        if sig:
            lines.append(f"C++ signature: {sig}")
    except Exception:   # noqa: BLE001 - a summary must not stop the proposer
        pass
    try:
        for p in fn.param_roles:
            what = p.role
            if p.pointer:
                types = ",".join(sorted(t.lstrip(".") for t in p.element_types)) or "?"
                what = f"pointer ({p.role}, elements {types}{', atomics' if p.atomic else ''})"
            cxx = f" [{p.cxx_type}]" if p.cxx_type else ""
            lines.append(f"param {_short(p.name, fn)}: {p.ptx_type.lstrip('.')}, {what}{cxx}")
    except Exception:   # noqa: BLE001
        pass
    try:
        insts = fn.instructions
        counts: dict[str, int] = {}
        for i in insts:
            counts[i.opcode] = counts.get(i.opcode, 0) + 1
        top = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:10])
        lines.append(f"instructions: {len(insts)} ({top})")
    except Exception:   # noqa: BLE001
        pass
    try:
        loops = fn.loops
        if not loops:
            lines.append("loops: none")
        for lp in loops:
            ind = lp.induction
            iv = f"induction {ind.register} from {ind.init} step {ind.step}" if ind else "no induction variable found"
            trip = f"trip count {lp.trip_count}" if lp.trip_count is not None else \
                (f"bound {lp.bound} ({lp.compare})" if lp.bound is not None else "trip count unknown")
            lines.append(f"loop at {lp.header.name}: depth {lp.depth}, {len(lp.blocks)} blocks, "
                         f"{len(lp.instructions())} instructions, {iv}, {trip}")
    except Exception:   # noqa: BLE001
        pass
    try:
        accs = [a for a in fn.memory_accesses if a.space != ".param"]
        for a in accs[:max_accesses]:
            t = (a.type or "").lstrip(".")
            vec = f".v{a.vector_width}" if a.vector_width > 1 else ""
            base = _short(a.base.split(":", 1)[-1], fn) if a.base else "?"
            if a.offset is not None:
                addr = f"{base} + {_affine_text(a.offset, fn)}"
            elif a.affine is not None:
                addr = _affine_text(a.affine, fn)
            else:
                addr = "not affine"
            rec = ""
            if a.recurrences:
                rec = "; per iteration: " + ", ".join(f"{k} += {_affine_text(step, fn)}"
                                                      for k, (init, step) in a.recurrences.items())
            lines.append(f"{a.kind} {a.space.lstrip('.')}{vec}.{t} ({a.bytes} B) at {addr}; "
                         f"aligned to {a.alignment} B{rec}")
        if len(accs) > max_accesses:
            lines.append(f"... and {len(accs) - max_accesses} more memory accesses")
    except Exception:   # noqa: BLE001
        pass
    return lines


def _resources_line(res: dict | None, target: str) -> str | None:
    if not res:
        return None
    return (f"ptxas ({target}): {res.get('registers')} registers, {res.get('spill_stores', 0)} B spill stores, "
            f"{res.get('spill_loads', 0)} B spill loads, {res.get('shared_bytes', 0)} B shared, "
            f"{res.get('stack_bytes', 0)} B stack")


def pass_menu(passes: dict) -> list[str]:
    out = []
    for info in passes.values():
        params = "; ".join(f"{k} in {list(v)}" for k, v in info.params.items()) or "no parameters"
        out.append(f"- {info.name} ({params}): {info.summary} Assumes: {info.assumes}")
    return out


def build_messages(mode: str, fn, ctx: KernelContext, *, passes: dict | None = None,
                   max_attempts: int = 8, kernel_text: str | None = None) -> list[dict]:
    """The chat for one request in ``mode`` (plan | rewrite)."""
    from ptx_ir.printer import emit_function
    kernel_text = kernel_text or emit_function(fn)
    parts = ["## Task", PLAN_TASK if mode == "plan" else REWRITE_TASK, ""]
    if mode == "plan":
        parts += ["## Passes you can use"] + pass_menu(passes or {}) + [""]
    parts += [f"## The kernel ({ctx.target})", "```ptx", kernel_text.rstrip("\n"), "```", ""]
    facts = ir_summary(fn)
    res = _resources_line(ctx.resources, ctx.target)
    if res:
        facts.append(res)
    if ctx.baseline_seconds:
        facts.append(f"measured time of this kernel: {ctx.baseline_seconds * 1e6:.2f} us (median)")
    if ctx.roofline:
        facts.append(f"roofline: {ctx.roofline}")
    if facts:
        parts += ["## What the analyses show"] + [f"- {f}" for f in facts] + [""]
    if ctx.rule_results:
        parts += ["## What the rule passes found"] + [f"- {r}" for r in ctx.rule_results[:12]] + [""]
    mine = [a for a in ctx.attempts if a.mode == mode] or []
    others = [a for a in ctx.attempts if a.mode != mode]
    shown = (mine + others)[-max_attempts:] if len(mine) < max_attempts else mine[-max_attempts:]
    failed = [a for a in shown if a.fate not in ("verified", "faster", "winner")]
    good = [a for a in shown if a.fate in ("verified", "faster", "winner")]
    if failed:
        parts += ["## Earlier attempts that failed (fix them; do not repeat them)"]
        parts += [f"{i}. {a.line()}" for i, a in enumerate(failed, 1)] + [""]
    if good:
        parts += ["## Earlier attempts that verified"] + [f"- {a.line()}" for a in good] + [""]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts).rstrip() + "\n"}]


def prompt_hash(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]
