"""The generation loop: ask, parse, assemble, check against the reference, feed back, repeat.

Per round, one request for ``samples`` answers under the PTX grammar with the kernel's
header pinned. Each answer goes through, in order, and stops at the first failure:

1. complete? (an answer cut off at ``max_tokens`` is never parsed) -> ``cut-off``
2. ptx_ir parses it, the header is the pinned one, the IR is valid -> ``unparsed`` /
   ``changes-contract`` / ``invalid-ir``
3. not the same kernel as an earlier answer -> ``duplicate`` (not judged again)
4. ptxas assembles it for the target -> ``rejected-ptxas`` (with the line it names)
5. the differential check against the reference on every launch shape -> ``rejected-check``
   (first mismatch: set, scalars, buffer, index, expected and produced values, the inputs
   there) or ``not-judged`` (the backend cannot run it)
6. once more on inputs drawn for it alone -> ``accepted``

Failures become the next round's feedback, with the last failed kernel. The first accepted
kernel ends the loop; on a GPU with a CUDA reference it is then timed against the reference.

Limits (each really stops the loop, and the record says which did): ``rounds``;
``samples`` per round; ``max_tokens`` per answer (and ``max_statements`` in the grammar);
``budget_s`` of wall time for the whole generation, a hard limit (:mod:`superopt.generate.budget`):
the reference's runs, every model request, every answer's check and the timing run under a
timer that interrupts them when the budget is spent. An answer the model gave within the
budget is judged within it: a request may use the time left minus what checking its answers
takes (:func:`check_reserve`: measured on the answers checked so far, estimated from the
reference's runs before the first), so answers never arrive too late to be checked. A request
still running at its share's end is stopped (its answers are lost, the record says so).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import ptx_ir
from superopt.generate.budget import Budget, BudgetExpired
from superopt.generate.prompt import Feedback, build_generation_messages
from superopt.generate.task import GenerationTask, TaskError
from superopt.model.dataset import GENERATION_SCHEMA
from superopt.model.prompt import prompt_hash

__all__ = ["GenerateOptions", "GenerationResult", "generate", "ACCEPTED", "NOT_VERIFIED", "COULD_NOT_JUDGE",
           "RECORD_SCHEMA", "write_record"]

ACCEPTED, NOT_VERIFIED, COULD_NOT_JUDGE = "accepted", "not-verified", "could-not-judge"
EXIT_CODES = {ACCEPTED: 0, NOT_VERIFIED: 1, COULD_NOT_JUDGE: 2}
RECORD_SCHEMA = GENERATION_SCHEMA
RECORD_VERSION = 1


@dataclass
class GenerateOptions:
    rounds: int = 3                 # the first round plus repair rounds
    samples: int = 2                # answers per request
    budget_s: float = 600.0         # wall seconds for the whole generation
    max_tokens: int = 2048          # per answer
    max_statements: int = 160       # grammar bound on the body (and on each { } scope)
    temperature: float = 0.7
    seed: int | None = 0
    max_feedback: int = 8           # failed attempts shown in a prompt
    save_dataset: bool = True       # a verified generation also goes to the dataset folder

    def validate(self) -> "GenerateOptions":
        for name, low in (("rounds", 1), ("samples", 1), ("max_tokens", 16), ("max_statements", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or v < low:
                raise TaskError(f"--{name.replace('_', '-')} must be an integer >= {low}, not {v!r}")
        if not (self.budget_s > 0):
            raise TaskError(f"--budget must be a positive number of seconds, not {self.budget_s!r}")
        if not (0 <= self.temperature <= 5):
            raise TaskError(f"--temperature must be between 0 and 5, not {self.temperature!r}")
        return self


@dataclass
class GenerationResult:
    status: str                         # accepted | not-verified | could-not-judge
    task: GenerationTask | None
    record: dict
    reasons: list = field(default_factory=list)
    function_text: str | None = None    # the accepted kernel (function)
    module_ptx: str | None = None       # ... as a whole module, ready for ptxas / cuModuleLoad

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def accepted(self) -> bool:
        return self.status == ACCEPTED

    def verdict_line(self) -> str:
        name = self.task.kernel if self.task else "?"
        if self.status == ACCEPTED:
            res = self.record.get("result") or {}
            timing = res.get("timing") or {}
            speed = f"; {timing['speedup']:.2f}x the reference's speed" if timing.get("speedup") else ""
            return (f"ACCEPTED: {name} verified against {self.record['reference']['label']} on "
                    f"{res.get('checked', '?')} ({self.record['judge']['backend']}, {self.record['judge']['policy']})"
                    f"{speed}")
        head = "NOT VERIFIED" if self.status == NOT_VERIFIED else "COULD NOT JUDGE"
        return f"{head}: {name}: {self.record.get('stopped') or '; '.join(self.reasons[:1])}"


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _speak(reason: str) -> str:
    """The judge's words addressed to the model (the judge says candidate/baseline)."""
    return (reason.replace("the candidate", "your kernel").replace("The candidate", "Your kernel")
            .replace("nvcc's code", "the reference").replace("the baseline", "the reference"))


def check_feedback(verdict) -> tuple[str, str]:
    """(reason, detail) for the model from a verdict that is not *accepted*."""
    m = verdict.mismatch
    ev = verdict.evidence or {}
    if m is None:
        return _speak(verdict.reason), ""
    if m.kind == "unwritten":
        what = f"element {m.index} of {m.buffer!r} was not written (it should be {m.baseline})"
    elif m.kind == "wrote_where_baseline_did_not":
        what = (f"element {m.index} of {m.buffer!r} was written ({m.candidate}), but the reference leaves it "
                f"alone: write only what the reference writes")
    else:
        what = f"element {m.index} of {m.buffer!r} is {m.candidate} but should be {m.baseline}"
    reason = f"wrong output on {m.set_label} (launch {m.run}): {what}; {m.count} of {m.length} elements differ"
    details = []
    sets = {s.get("set"): s for s in ev.get("sets", [])}
    s = sets.get(m.set_index)
    if s:
        details.append(f"that set: scalars {s.get('scalars')}, grid {s.get('grid')}, block {s.get('block')}")
    if ev.get("inputs_at_mismatch"):
        details.append("inputs there: " + ", ".join(f"{k}[{m.index}] = {v}" for k, v in ev["inputs_at_mismatch"].items()))
    return reason, "; ".join(details)


class _Outcome(dict):
    @property
    def fate(self) -> str:
        return self["fate"]


def _judge_answer(task: GenerationTask, judge, ans, stub_module, seen: dict) -> _Outcome:
    from superopt.judge.ptxas import run_ptxas
    from superopt.model.proposer import ptxas_detail
    from superopt.model.rewrite import RewriteError, parse_function, splice
    from superopt.store.record import resources_dict
    if not ans.complete:
        return _Outcome(fate="cut-off", reason=f"the answer was cut off (finish_reason={ans.finish_reason}) after "
                                               f"{ans.tokens if ans.tokens is not None else '?'} tokens: write a "
                                               f"shorter kernel")
    try:
        fn = parse_function(ans.text, stub_module, task.kernel)
    except RewriteError as e:
        return _Outcome(fate=e.fate, reason=f"the kernel {e}")
    module = splice(stub_module, task.kernel, fn)
    ptx = ptx_ir.emit(module)
    from ptx_ir.printer import emit_function
    text = emit_function(module.function(task.kernel))
    out = _Outcome(fate="?", reason="", function_text=text, ptx_hash=_h(ptx))
    if out["ptx_hash"] in seen:
        out.update(fate="duplicate", reason=f"the same kernel as {seen[out['ptx_hash']]}")
        return out
    asm = run_ptxas(ptx, task.target)
    if not asm.ok:
        errors = [ln for ln in asm.log.splitlines() if "error" in ln.lower()] or asm.log.splitlines()
        reason = "ptxas rejects it: " + " | ".join(e.strip() for e in errors[:3])
        out.update(fate="rejected-ptxas", reason=reason[:800], detail=ptxas_detail(asm.log, ptx))
        return out
    out["resources"] = resources_dict(asm.resources.get(task.kernel))
    verdicts = []
    for i, spec in enumerate(task.specs):
        v = judge.verify(ptx, spec, i)
        verdicts.append(v.to_dict())
        if v.status != "accepted":
            reason, detail = check_feedback(v)
            out.update(fate="rejected-check" if v.status == "rejected" else "not-judged", reason=reason,
                       detail=detail, verdicts=verdicts)
            return out
    confirmations = []
    for i, spec in enumerate(task.specs):
        v = judge.verify(ptx, spec, i, fresh=True)
        confirmations.append(v.to_dict())
        if v.status != "accepted":
            reason, detail = check_feedback(v)
            out.update(fate="rejected-check" if v.status == "rejected" else "not-judged",
                       reason=f"on fresh inputs: {reason}", detail=detail, verdicts=verdicts,
                       confirmations=confirmations)
            return out
    out.update(fate=ACCEPTED, reason="identical to the reference on every launch shape, twice",
               verdicts=verdicts, confirmations=confirmations, ptx=ptx)
    return out


def new_record(task: GenerationTask, model, judge, options: GenerateOptions) -> dict:
    return {
        "schema": RECORD_SCHEMA, "version": RECORD_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "status": None,
        "kernel": task.kernel, "description": task.description, "signature": task.signature.text,
        "target": task.target, "header": task.header,
        "reference": {k: v for k, v in task.reference.describe().items()},
        "specs": [s.to_dict() for s in task.specs], "notes": list(task.notes),
        "judge": judge.describe() if judge is not None else None,
        "model": model.describe() if model is not None else None,
        "options": asdict(options),
        "rounds": [], "result": None, "reasons": [], "stopped": "", "seconds": 0.0,
    }


# How long checking one answer takes before any was checked: ptxas, then the check (the
# candidate twice per input set, the static checks) and the confirmation on fresh inputs
# (the reference again and the candidate twice), each about a reference run per set.
CHECK_RUNS_PER_REFERENCE_RUN = 6.0
PTXAS_SECONDS = 0.5


def check_reserve(samples: int, checked: list[float], reference_s: float, left: float) -> float:
    """Seconds to keep aside for checking a round's ``samples`` answers: the slowest check so
    far per answer, or before the first an estimate from the reference's runs (at most half of
    what is ``left``, so that a slow first reference run does not leave the model no time)."""
    if checked:
        per = max(checked)
    else:
        per = min(PTXAS_SECONDS + CHECK_RUNS_PER_REFERENCE_RUN * reference_s, max(left, 0.0) / (2 * samples))
    return per * samples


def generate(task: GenerationTask, model, judge, options: GenerateOptions | None = None, *,
             on_event: Callable[[str, dict], None] | None = None,
             clock: Callable[[], float] = time.monotonic) -> GenerationResult:
    """Generate ``task``'s kernel with ``model`` (a :class:`superopt.model.base.ModelBackend`),
    checked by ``judge`` (a :class:`superopt.generate.judge.ReferenceJudge`), within
    ``options.budget_s`` seconds of wall time (a hard limit: see the module's docstring)."""
    from superopt.model.base import Constraint
    from superopt.model.grammar import kernel_grammar
    options = (options or GenerateOptions()).validate()
    budget = Budget(options.budget_s, clock)
    record = new_record(task, model, judge, options)
    spent = f"the time budget of {options.budget_s:g} s"

    def emit(kind: str, **data):
        if on_event is not None:
            try:
                on_event(kind, {**data, "elapsed": budget.elapsed(), "budget": options.budget_s})
            except Exception:   # noqa: BLE001 - a broken progress display must not stop the work
                pass

    def finish(status: str, stopped: str, reasons: list[str], **kw) -> GenerationResult:
        record.update(status=status, stopped=stopped, reasons=reasons, seconds=round(budget.elapsed(), 3))
        result = GenerationResult(status, task, record, reasons, **kw)
        emit("done", status=status, line=result.verdict_line())
        return result

    # 1. the reference, on every launch shape, before any model time is spent
    emit("reference", label=task.reference.label, shapes=len(task.specs))
    t_ref = clock()
    for i, spec in enumerate(task.specs):
        try:
            with budget.hard(f"running the reference on launch shape {i + 1}"):
                bad = judge.prepare(spec, i)
        except BudgetExpired:     # a limit of the run, not a fault of the reference: exit 1
            why = f"{spent} ran out while running the reference on launch shape {i + 1}, before round 1"
            return finish(NOT_VERIFIED, why, [why])
        if bad is not None:
            why = f"the reference cannot be judged on launch shape {i + 1}: {bad.reason}"
            record["reference_verdict"] = bad.to_dict()
            return finish(COULD_NOT_JUDGE, why, [why])
        emit("reference-ok", shape=i, sets=judge.reference_sets(i))
    reference_s = clock() - t_ref
    try:
        from superopt.judge.ptxas import find_ptxas
        find_ptxas()
    except FileNotFoundError as e:
        return finish(COULD_NOT_JUDGE, str(e), [str(e)])

    stub_module = task.stub_module
    grammar = kernel_grammar(stub_module.function(task.kernel), module=stub_module,
                             max_statements=options.max_statements)
    constraint = Constraint("grammar", grammar)
    feedback: list[Feedback] = []
    last_failed: tuple[str, str] | None = None
    seen: dict[str, str] = {}
    checked: list[float] = []          # seconds each judged answer's check took
    answered = 0
    accepted: _Outcome | None = None
    stopped = ""
    for rnd in range(options.rounds):
        left = budget.left()
        reserve = check_reserve(options.samples, checked, reference_s, left)
        share = left - reserve
        if share <= 0:
            stopped = f"{spent} ran out before round {rnd + 1}"
            if left > 0:
                stopped += (f" ({left:.1f} s left, checking {options.samples} answer(s) takes about "
                            f"{reserve:.1f} s)")
            break
        messages = build_generation_messages(task, feedback, last_failed=last_failed,
                                             max_feedback=options.max_feedback)
        seed = None if options.seed is None else options.seed + rnd
        entry = {"round": rnd + 1, "prompt_hash": prompt_hash(messages), "messages": messages,
                 "n": options.samples, "max_tokens": options.max_tokens, "temperature": options.temperature,
                 "seed": seed, "model_seconds_allowed": round(share, 3), "check_seconds_kept": round(reserve, 3),
                 "responses": []}
        record["rounds"].append(entry)
        emit("request", round=rnd + 1, rounds=options.rounds, n=options.samples, max_tokens=options.max_tokens,
             allowed=share)
        t_req = clock()
        try:
            answers = budget.call(
                lambda: model.complete(messages, constraint=constraint, n=options.samples,
                                       max_tokens=options.max_tokens, temperature=options.temperature, seed=seed),
                f"the model's answer in round {rnd + 1}", share)
        except BudgetExpired:
            entry["seconds"] = round(clock() - t_req, 3)
            entry["error"] = (f"stopped after {entry['seconds']:g} s: no answer within the {share:.1f} s the "
                              f"budget left for it ({reserve:.1f} s were kept to check its answers)")
            stopped = f"{spent} ran out while the model was answering in round {rnd + 1}"
            emit("stopped", what=f"round {rnd + 1}", reason=entry["error"])
            break
        except Exception as e:   # noqa: BLE001 - ModelError or anything a backend raises: reported
            entry["error"] = f"{type(e).__name__}: {e}"
            if answered == 0:
                why = f"the model could not answer: {e}"
                return finish(COULD_NOT_JUDGE, why, [why])
            stopped = f"the model failed in round {rnd + 1}: {e}"
            break
        entry["seconds"] = round(clock() - t_req, 3)
        answered += len(answers)
        expired: str = ""                  # set when the budget ran out while checking an answer
        for ans in answers[: options.samples]:
            what = f"round {rnd + 1}, sample {ans.index}"
            r = {"index": ans.index, "text": ans.text, "finish_reason": ans.finish_reason, "tokens": ans.tokens}
            entry["responses"].append(r)
            if expired:
                r.update(fate="not-judged", reason=f"not checked: {expired}")
                emit("answer", what=what, fate=r["fate"], reason=r["reason"])
                continue
            arrived_left = budget.left()
            emit("checking", what=what)
            t_check = clock()
            try:
                with budget.hard(f"checking {what}"):
                    out = _judge_answer(task, judge, ans, stub_module, seen)
            except BudgetExpired:
                # only when a check takes longer than the slowest before it (the reserve):
                # said as it is, with the seconds it had
                expired = (f"{spent} ran out while checking {what}, which arrived with {arrived_left:.1f} s left "
                           f"({reserve:.1f} s had been kept for checking this round's answers)")
                out = _Outcome(fate="not-judged", reason=expired)
                stopped = expired
            checked.append(clock() - t_check)
            r.update({k: v for k, v in out.items() if k != "ptx"})
            emit("answer", what=what, fate=out.fate, reason=out.get("reason", ""))
            if out.get("ptx_hash") and out.fate != "duplicate":
                seen[out["ptx_hash"]] = f"{what} ({out.fate})"
            if out.fate == ACCEPTED:
                accepted = out
                accepted["what"] = what
                break
            feedback.append(Feedback(what, out.fate, out.get("reason", ""), out.get("detail", "")))
            if out.get("function_text") and out.fate not in ("duplicate",):
                last_failed = (out["function_text"], f"{out.fate}: {out.get('reason', '')}")
        if accepted is not None or stopped:
            break
    if accepted is None:
        if not stopped:
            stopped = (f"no kernel verified in {options.rounds} round(s) of {options.samples} answer(s) "
                       f"(max {options.max_tokens} tokens each)")
        reasons = [f.line(300) for f in feedback] or [stopped]
        return finish(NOT_VERIFIED, stopped, reasons)
    return _accept(task, judge, record, accepted, options, finish, emit, budget)


def _module_with_comment(task: GenerationTask, ptx: str, what: str) -> str:
    desc = " ".join(task.description.split())
    if len(desc) > 200:
        desc = desc[:197] + "..."
    return (f"//\n// Generated by `superopt generate` (nvcc-plus): {desc}\n"
            f"// {task.signature.text}; verified against {task.reference.label} ({what})\n//\n\n" + ptx)


def _accept(task, judge, record, out: _Outcome, options, finish, emit, budget: Budget) -> GenerationResult:
    result = {"what": out["what"], "ptx": out["function_text"], "ptx_hash": out["ptx_hash"],
              "resources": out.get("resources"), "verdicts": out.get("verdicts"),
              "confirmations": out.get("confirmations"),
              "checked": _checked_text(out.get("verdicts") or [], out.get("confirmations") or [])}
    if judge.can_time and budget.left() <= 0:
        result["timing"] = {"status": "not-timed", "reason": f"no time was left of the {options.budget_s:g} s budget"}
    elif judge.can_time:
        emit("timing", kernel=task.kernel)
        try:
            with budget.hard("timing the kernel"):
                t = judge.time(out["ptx"], task.specs[0])
            result["timing"] = t.to_dict()
        except BudgetExpired:
            result["timing"] = {"status": "not-timed",
                                "reason": f"the {options.budget_s:g} s budget ran out while timing it"}
        except Exception as e:   # noqa: BLE001 - no timing is a note, not a failure
            result["timing"] = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
    else:
        why = ("the reference is a numpy function" if task.reference.kind == "numpy"
               else f"the {judge.backend_name} backend does not time")
        result["timing"] = {"status": "not-timed", "reason": why}
    record["result"] = result
    module_ptx = _module_with_comment(task, out["ptx"], record["judge"]["backend"])
    res = finish(ACCEPTED, f"accepted in {out['what']}", [], function_text=out["function_text"],
                 module_ptx=module_ptx)
    if options.save_dataset:
        try:
            from superopt.model.dataset import save_generation_row
            save_generation_row(record)
        except Exception as e:   # noqa: BLE001 - the dataset is a by-product
            record["notes"].append(f"dataset row not saved: {type(e).__name__}: {e}")
    return res


def _checked_text(verdicts: list, confirmations: list) -> str:
    sets = sum(len((v.get("evidence") or {}).get("sets", [])) for v in verdicts + confirmations)
    return f"{sets} input sets over {len(verdicts)} launch shape(s), checked twice"


def write_record(rec: dict, path: Path) -> Path:
    """Write a generation record (JSON) to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1, default=str))
    return path
