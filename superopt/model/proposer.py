"""The model proposer: ask, parse, hand candidates to the search, read the verdicts back,
repair, record everything.

:class:`ModelProposer` is a :class:`superopt.search.proposer.Proposer`. The one search loop
(:func:`superopt.search.loop.search_kernel`) asks the rule passes first, then the model; the
model's prompt carries the record as it stands then -- the baseline's ptxas resources, its
measured time where a GPU exists, what the rules found and which one was chosen.

Rounds (the first, then repair rounds): in each mode (plan, rewrite) one request for ``samples``
answers (best-of-N); every answer is parsed (plan: checked against the registry and applied;
rewrite: parsed by ptx_ir, name/parameters/directives/globals checked, spliced into the module)
and de-duplicated against everything seen; each new candidate is yielded to the loop, which
judges it at once (ptxas, the differential check, timing); its record entry comes back through
:meth:`ProposalContext.judged`. Every failure -- cut off, unparsable, did not apply, duplicate,
ptxas error (with the line it names), check mismatch (set, buffer, index, values), not faster --
becomes an attempt line in the next round's prompt. The model proposes; the loop decides.

Budgets: rounds, samples per request and seconds (checked before each request). Every
prompt, response and verdict is recorded under ``record["model"]``. A model that cannot
be reached or errs never fails the search: the rules' result stands and the record says why.
"""
from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field

import ptx_ir
from ptx_ir.printer import emit_function
from superopt.search.candidates import Candidate, PlanDidNotApply, plan_candidate, text_hash
from superopt.model.base import Completion, Constraint, ModelBackend, ModelConfig, ModelError, make_backend, model_identity  # noqa: F401
from superopt.model.prompt import Attempt, KernelContext, build_messages, prompt_hash
from superopt.search.proposer import ProposalContext

GOOD_FATES = ("faster", "winner", "verified", "estimate-winner")


@dataclass
class ProposerOptions:
    modes: tuple = ("plan", "rewrite")
    rounds: int = 3                 # the first round plus repair rounds
    samples: int = 4                # answers per request (n)
    budget_s: float = 300.0         # model + judging seconds per kernel
    temperature: float = 0.7
    seed: int | None = 0
    max_plan_steps: int = 4
    plan_max_tokens: int = 256
    rewrite_max_tokens: int | None = None   # default: from the kernel's size
    rewrite_token_factor: float = 1.5       # x (1 + slack) answer tokens per estimated kernel token
    rewrite_max_statements: int = 600       # larger kernels are not offered to rewrite mode
    statement_slack: float = 0.5            # grammar bound: statements <= baseline * (1 + slack) + 8
    max_attempts_in_prompt: int = 8
    stop_when_found: bool = True    # no further rounds once a round produced a good candidate

    @classmethod
    def from_config(cls, cfg: ModelConfig, **overrides) -> "ProposerOptions":
        opts = cls(modes=tuple(cfg.modes), rounds=cfg.rounds, samples=cfg.samples, budget_s=cfg.budget_s,
                   temperature=cfg.temperature, seed=cfg.seed)
        for k, v in overrides.items():
            setattr(opts, k, v)
        return opts


_PTXAS_LINE = re.compile(r"line (\d+);")


def ptxas_detail(reason: str | None, ptx: str) -> str:
    """The PTX line a ptxas error names, to show the model what it got wrong."""
    m = _PTXAS_LINE.search(reason or "")
    if not m:
        return ""
    n = int(m.group(1))
    lines = ptx.splitlines()
    if 1 <= n <= len(lines):
        return f"the line ptxas means: {lines[n - 1].strip()}"
    return ""


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of PTX tokens (symbol-heavy text: ~2.5 characters a token)."""
    return int(len(text) / 2.5) + 1


def context_from_record(record: dict, target: str) -> KernelContext:
    """The prompt context from the rule search's record: resources, measured time, rule fates."""
    ctx = KernelContext(target=target)
    ctx.resources = (record.get("baseline") or {}).get("resources")
    for e in record.get("candidates", []):
        t = e.get("timing") or {}
        base = t.get("baseline") or {}
        if base.get("median"):
            ctx.baseline_seconds = base["median"]
            implied = (t.get("implied_bytes_per_s") or {}).get("baseline")
            peak = t.get("peak_bytes_per_s")
            if implied and peak:
                ctx.roofline = (f"the baseline moves {implied / 1e9:.0f} GB/s, {100 * implied / peak:.0f}% of the "
                                f"measured peak {peak / 1e9:.0f} GB/s (buffers in the spec, each once)")
            break
    for e in record.get("candidates", []):
        prov = e.get("provenance") or {}
        if prov.get("proposer", "rules") != "rules":
            continue
        speed = f", {e['speedup']:.2f}x" if e.get("speedup") else ""
        reason = (e.get("reason") or "")[:160]
        ctx.rule_results.append(f"{e['id']}: {e.get('fate')}{speed}" + (f" ({reason})" if reason else ""))
    return ctx


@dataclass
class ProposalLog:
    backend: dict
    options: dict
    rounds: list = field(default_factory=list)
    stopped: str = ""
    seconds: float = 0.0

    def summary(self) -> dict:
        resp = [r for rd in self.rounds for r in rd.get("responses", [])]
        return {
            "requests": len(self.rounds),
            "responses": len(resp),
            "complete": sum(1 for r in resp if r.get("finish_reason") == "stop"),
            "cut_off": sum(1 for r in resp if r.get("finish_reason") == "length"),
            "parsed": sum(1 for r in resp if r.get("parsed")),
            "candidates": sum(1 for r in resp if r.get("ptx_hash") and r.get("fate") not in ("duplicate", "unchanged")),
            "verified": sum(1 for r in resp if r.get("fate") in GOOD_FATES or r.get("fate") == "not-faster"),
            "good": sum(1 for r in resp if r.get("fate") in GOOD_FATES),
        }

    def to_dict(self) -> dict:
        return {"backend": self.backend, "options": self.options, "rounds": self.rounds,
                "stopped": self.stopped, "seconds": round(self.seconds, 3), "summary": self.summary()}


class ModelProposer:
    def __init__(self, backend: ModelBackend, options: ProposerOptions | None = None, *,
                 passes: dict | None = None):
        self.backend = backend
        self.options = options or ProposerOptions()
        self._passes = passes

    # ------------------------------------------------------------------ requests
    @property
    def passes(self) -> dict:
        from superopt.model.schema import menu
        return menu(self._passes)

    def request(self, mode: str, fn, ctx: KernelContext, module=None):
        """(messages, constraint, max_tokens) for one request, or a string saying why none."""
        o = self.options
        if mode == "plan":
            from superopt.model.schema import plan_schema
            schema = plan_schema(self.passes, max_steps=o.max_plan_steps)
            if schema is None:
                return "no passes are registered, so there is nothing to plan"
            msgs = build_messages("plan", fn, ctx, passes=self.passes, max_attempts=o.max_attempts_in_prompt)
            return msgs, Constraint("json", schema), o.plan_max_tokens
        if mode == "rewrite":
            from superopt.model.grammar import kernel_grammar
            n_stmt = len(fn.body or [])
            if n_stmt > o.rewrite_max_statements:
                return f"the kernel has {n_stmt} statements (rewrite mode takes at most {o.rewrite_max_statements})"
            bound = int(n_stmt * (1 + o.statement_slack)) + 8
            text = emit_function(fn)
            # room for a body as long as the grammar allows, at the baseline's tokens per statement
            max_tokens = o.rewrite_max_tokens or min(
                16384, int(estimate_tokens(text) * (1 + o.statement_slack) * o.rewrite_token_factor) + 128)
            msgs = build_messages("rewrite", fn, ctx, max_attempts=o.max_attempts_in_prompt, kernel_text=text)
            grammar = kernel_grammar(fn, module=module, max_statements=bound)
            return msgs, Constraint("grammar", grammar), max_tokens
        raise ValueError(f"unknown mode {mode!r}")

    # ------------------------------------------------------------------ answers
    def to_candidate(self, mode: str, completion: Completion, module, kernel: str, provenance: dict) -> Candidate:
        """A candidate from one answer; raises _Reject (a fate and the reason) when it is none."""
        if not completion.complete:
            raise _Reject("cut-off", f"the answer was cut off (finish_reason={completion.finish_reason}) "
                                     f"after {completion.tokens or '?'} tokens; answer shorter")
        if mode == "plan":
            from superopt.model.schema import PlanError, parse_plan
            try:
                plan = parse_plan(completion.text, self.passes, max_steps=self.options.max_plan_steps)
            except PlanError as e:
                raise _Reject("unparsed", f"the plan is not valid: {e}") from None
            try:
                return plan_candidate(module, kernel, plan, provenance)
            except PlanDidNotApply as e:
                raise _Reject("did-not-apply", str(e), parsed=True, what=" + ".join(map(str, plan))) from None
            except Exception as e:   # noqa: BLE001 - a crashing pass is the plan's failure, not ours
                raise _Reject("did-not-apply", f"{type(e).__name__}: {e}", parsed=True,
                              what=" + ".join(map(str, plan))) from None
        from superopt.model.rewrite import RewriteError, make_rewrite_candidate
        try:
            return make_rewrite_candidate(module, kernel, completion.text, provenance)
        except RewriteError as e:
            raise _Reject(e.fate, f"the rewrite {e}", parsed=e.fate != "unparsed") from None

    # ------------------------------------------------------------------ the loop
    name = "model"
    own_budget = True      # its own seconds (ProposerOptions.budget_s); each candidate judged at once

    def propose(self, module, kernel: str, context: ProposalContext):
        """Rounds of requests (see the module's docstring); yields each distinct candidate, reads
        its verdict back from ``context``; puts the log under ``context.sections["model"]``."""
        o = self.options
        t0 = time.monotonic()
        fn = module.function(kernel)
        ctx = context_from_record(context.record, context.target)
        log = ProposalLog(self.backend.describe(), asdict(o))
        seen: dict[str, str] = {text_hash(context.baseline_ptx): "unchanged"}
        for e in context.record.get("candidates", []):
            if e.get("ptx_hash"):
                seen.setdefault(e["ptx_hash"], f"{e['id']} ({e.get('fate')})")
        candidates = 0
        stop = ""
        for rnd in range(max(1, o.rounds)):
            found = False
            for mode in o.modes:
                if time.monotonic() - t0 > o.budget_s:
                    stop = f"budget of {o.budget_s:g} s used up"
                    break
                req = self.request(mode, fn, ctx, module)
                if isinstance(req, str):
                    if rnd == 0:
                        log.rounds.append({"round": rnd, "mode": mode, "skipped": req})
                    continue
                messages, constraint, max_tokens = req
                seed = None if o.seed is None else o.seed + 1000 * rnd + (0 if mode == "plan" else 500)
                entry = {"round": rnd, "mode": mode, "prompt_hash": prompt_hash(messages), "messages": messages,
                         "constraint": {"kind": constraint.kind, "hash": text_hash(constraint.key())},
                         "n": o.samples, "max_tokens": max_tokens, "temperature": o.temperature, "seed": seed,
                         "responses": []}
                log.rounds.append(entry)
                t_req = time.monotonic()
                try:
                    answers = self.backend.complete(messages, constraint=constraint, n=o.samples,
                                                    max_tokens=max_tokens, temperature=o.temperature, seed=seed)
                except ModelError as e:
                    entry["error"] = str(e)
                    stop = f"model error: {e}"
                    break
                except Exception as e:   # noqa: BLE001 - a broken model must not break the search
                    entry["error"] = f"{type(e).__name__}: {e}"
                    stop = f"model error: {type(e).__name__}: {e}"
                    break
                entry["seconds"] = round(time.monotonic() - t_req, 3)
                for ans in answers:
                    r = {"index": ans.index, "text": ans.text, "finish_reason": ans.finish_reason,
                         "tokens": ans.tokens, "parsed": False}
                    entry["responses"].append(r)
                    what = f"{mode} (round {rnd}, sample {ans.index})"
                    prov = {"proposer": "model", "mode": mode, "model": self.backend.describe().get("model"),
                            "backend": getattr(self.backend, "kind", "?"), "prompt_hash": entry["prompt_hash"],
                            "round": rnd, "sample": ans.index, "seed": seed}
                    try:
                        cand = self.to_candidate(mode, ans, module, kernel, prov)
                    except _Reject as rej:
                        r.update(fate=rej.fate, reason=rej.reason, parsed=rej.parsed)
                        ctx.attempts.append(Attempt(mode, rej.what or what, rej.fate, rej.reason))
                        continue
                    r["parsed"] = True
                    r["candidate"] = cand.id if mode == "plan" else "model-rewrite"
                    r["ptx_hash"] = cand.hash
                    if mode == "plan":
                        what = f"plan {cand.id}"
                    if cand.hash in seen:
                        prior = seen[cand.hash]
                        fate = "unchanged" if prior == "unchanged" else "duplicate"
                        reason = ("the result is identical to the original kernel" if fate == "unchanged"
                                  else f"the result is identical to an earlier candidate: {prior}")
                        r.update(fate=fate, reason=reason)
                        ctx.attempts.append(Attempt(mode, what, fate, reason))
                        continue
                    yield cand                      # the loop judges it now
                    e = context.judged(cand) or {"fate": "error", "reason": "the search did not judge it"}
                    seen[cand.hash] = f"{what} ({e.get('fate')})"
                    candidates += 1
                    r.update(fate=e.get("fate"), reason=e.get("reason"), speedup=e.get("speedup"),
                             verdict=e.get("verdict"))
                    detail = ptxas_detail(e.get("reason"), cand.ptx) if e.get("fate") == "rejected-ptxas" else ""
                    ctx.attempts.append(Attempt(mode, what, e.get("fate") or "?", e.get("reason") or "", detail))
                    if e.get("fate") in GOOD_FATES:
                        found = True
            if stop:
                break
            if found and o.stop_when_found:
                stop = f"a good candidate was found in round {rnd}"
                break
        log.stopped = stop or f"{o.rounds} round(s) done"
        log.seconds = time.monotonic() - t0
        context.sections["model"] = log.to_dict()
        context.notes.append(f"model proposer: {candidates} distinct candidate(s) from "
                             f"{log.summary()['responses']} answer(s); {log.stopped}")


class _Reject(Exception):
    def __init__(self, fate: str, reason: str, *, parsed: bool = False, what: str | None = None):
        super().__init__(reason)
        self.fate, self.reason, self.parsed, self.what = fate, reason, parsed, what


# ---------------------------------------------------------------------- the search with a model

_BACKENDS: dict = {}


def proposer_from_env(env=None) -> ModelProposer | None:
    """The configured proposer, or None when no model is configured (then: rules only).
    The backend is made once per process (an in-process model loads once for all kernels)."""
    cfg = ModelConfig.from_env(env)
    if not cfg.enabled:
        return None
    key = (cfg.url, cfg.model, cfg.api_key, cfg.local, cfg.timeout_s)
    if key not in _BACKENDS:
        _BACKENDS[key] = make_backend(cfg)
    return ModelProposer(_BACKENDS[key], ProposerOptions.from_config(cfg))


def search_with_model(module, kernel: str, specs: list | None, *, target: str, options, judge,
                      proposer: ModelProposer | None = None):
    """:func:`superopt.search.loop.search_kernel` with the rule passes and then the model as
    proposers.

    ``proposer=None`` takes the configured one (``NVCC_PLUS_LLM_*``); with none configured
    this is exactly ``search_kernel`` (rules only).
    """
    from superopt.search.loop import search_kernel
    from superopt.search.rules import RuleProposer
    if proposer is None:
        try:
            proposer = proposer_from_env()
        except ModelError as e:
            result = search_kernel(module, kernel, specs, target=target, options=options, judge=judge)
            result.record["model"] = {"skipped": f"model configuration: {e}"}
            return result
    if proposer is None:
        return search_kernel(module, kernel, specs, target=target, options=options, judge=judge)
    result = search_kernel(module, kernel, specs, target=target, options=options, judge=judge,
                           proposers=[RuleProposer(), proposer])
    rec = result.record
    if not specs or judge is None:
        rec["model"] = {"skipped": "nothing to judge a model's proposals with "
                                   f"({'no launch spec' if not specs else 'no backend'})"}
        return result
    attach_texts(rec, module, kernel, result.judged)
    if result.winner is not None and rec.get("decision") == "measured":
        try:
            from superopt.model.dataset import save_example
            save_example(rec, target=target)
        except Exception as e:   # noqa: BLE001 - the dataset is a by-product; never fail the search for it
            rec["notes"].append(f"dataset example not saved: {type(e).__name__}: {e}")
    return result


def attach_texts(record: dict, module, kernel: str, candidates: list[Candidate]) -> None:
    """Function texts for the dataset (``ptx``, as the search writes for the baseline and the
    winner): every other verified candidate too (``candidates``: those the search judged)."""
    record.setdefault("baseline", {}).setdefault("ptx", emit_function(module.function(kernel)))
    by_hash = {c.hash: c for c in candidates}
    for e in record.get("candidates", []):
        if e.get("ptx"):
            continue
        if e.get("fate") in GOOD_FATES or e.get("fate") == "not-faster":
            c = by_hash.get(e.get("ptx_hash"))
            if c is not None:
                e["ptx"] = emit_function(ptx_ir.parse(c.ptx).function(kernel))
