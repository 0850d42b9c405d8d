"""Rewrite mode: turn a model's function text into a candidate module, or say why not.

A rewrite is accepted as a *candidate* (not yet as correct: the judge decides that) only if

* it parses with ptx_ir (under the grammar it always does; a server that ignored the
  grammar, or a planted model, may send anything);
* it is one function, with the same kind, linkage, name, parameters and performance
  directives as the kernel it replaces, and declares no module-level variables, so the
  module's globals stay as they were.

The rewrite is spliced into a clone of the baseline module in place of the kernel.

Rewrites are also a pseudo-pass, ``model-rewrite``, whose one parameter is the function
text: a rewrite winner is then an ordinary plan ``[model-rewrite(function=...)]`` that the
decision cache and the lockfile store and re-apply like any other (and re-applying checks
the header again). The pass never fires without that parameter, so the rule search, which
tries every pass with its declared values (none), never produces anything from it.
"""
from __future__ import annotations

import re

import ptx_ir
from ptx_ir.printer import emit_decl, emit_directive, emit_function
from superopt.search.candidates import Candidate, Step
from superopt.passes import Change, register

PASS_NAME = "model-rewrite"


class RewriteError(ValueError):
    """A model's text that cannot be a candidate. ``fate``: ``unparsed`` (ptx_ir cannot parse
    it), ``changes-contract`` (name, parameters, directives or globals differ) or
    ``invalid-ir`` (parses, but uses an undeclared register or a missing label)."""

    def __init__(self, message: str, fate: str = "unparsed"):
        super().__init__(message)
        self.fate = fate


_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.S)


def extract_function_text(text: str) -> str:
    """The function in a model's answer: the text itself, or the inside of a ``` fence."""
    m = _FENCE.search(text)
    if m:
        text = m.group(1)
    return text.strip("\n") + "\n"


def _header_facts(fn) -> dict:
    return {
        "kind": fn.kind,
        "linkage": tuple(fn.linkage),
        "name": fn.name,
        "params": [emit_decl(p) for p in fn.params],
        "directives": [emit_directive(d) for d in fn.directives],
    }


def parse_function(text: str, module: ptx_ir.Module, kernel: str) -> ptx_ir.Function:
    """The function a rewrite defines, checked against ``kernel`` of ``module``."""
    body = extract_function_text(text)
    head = [f".version {module.version}"]
    if module.target:
        head.append(f".target {', '.join(module.target)}")
    if module.address_size is not None:
        head.append(f".address_size {module.address_size}")
    src = "\n".join(head) + "\n\n" + body
    try:
        parsed = ptx_ir.parse(src)
    except ptx_ir.ParseError as e:
        line = getattr(e, "line", None)
        if isinstance(line, int) and line > len(head) + 1:
            where = f"line {line - len(head) - 1}, column {e.column} of the function"
            shown = f": {e.source_line.strip()}" if e.source_line else ""
            raise RewriteError(f"does not parse: {where}: {e.message} (at {e.token!r}){shown}") from None
        raise RewriteError(f"does not parse: {e}") from None
    funcs = parsed.functions
    others = [i for i in parsed.items if not isinstance(i, ptx_ir.Function)]
    if others:
        raise RewriteError("declares module-level items (globals must stay as they are): "
                           + ", ".join(type(i).__name__ for i in others[:3]), "changes-contract")
    if len(funcs) != 1:
        raise RewriteError(f"defines {len(funcs)} functions; a rewrite is exactly one function", "changes-contract")
    new = funcs[0]
    if new.is_declaration:
        raise RewriteError("is a declaration without a body", "changes-contract")
    old = module.function(kernel)
    want, got = _header_facts(old), _header_facts(new)
    for key in ("name", "kind", "linkage", "params", "directives"):
        if want[key] != got[key]:
            raise RewriteError(f"changes the kernel's {key}: {want[key]} -> {got[key]}", "changes-contract")
    try:
        new.validate()
    except Exception as e:   # noqa: BLE001 - any IR inconsistency is a reason to reject
        raise RewriteError(f"is not valid IR: {e}", "invalid-ir") from None
    return new


def splice(module: ptx_ir.Module, kernel: str, new_fn: ptx_ir.Function) -> ptx_ir.Module:
    """A clone of ``module`` with ``kernel`` replaced by ``new_fn``."""
    clone = module.clone()
    fn = clone.function(kernel)
    fn.body = list(new_fn.body)
    fn.invalidate()
    return clone


def _diff_summary(old_fn, new_fn) -> list[str]:
    a = [ptx_ir.printer.emit_statement(s) for s in old_fn.body]
    b = [ptx_ir.printer.emit_statement(s) for s in new_fn.body]
    sa, sb = set(a), set(b)
    removed = sum(1 for x in a if x not in sb)
    added = sum(1 for x in b if x not in sa)
    return [f"{PASS_NAME}: body rewritten by a model ({len(a)} -> {len(b)} statements, "
            f"{added} new, {removed} removed)"]


def make_rewrite_candidate(module: ptx_ir.Module, kernel: str, text: str,
                           provenance: dict | None = None) -> Candidate:
    """A candidate from a model's rewrite text; raises RewriteError when it cannot be one."""
    new_fn = parse_function(text, module, kernel)
    new_module = splice(module, kernel, new_fn)
    fn_text = emit_function(new_module.function(kernel))
    changes = _diff_summary(module.function(kernel), new_module.function(kernel))
    return Candidate(kernel, [Step(PASS_NAME, {"function": fn_text})], ptx_ir.emit(new_module), changes,
                     dict(provenance or {"proposer": "model", "mode": "rewrite"}))


@register(
    name=PASS_NAME,
    summary="Replace the kernel's body with a rewrite proposed by a language model (never tried by the rule search).",
    assumes="Nothing: the rewrite is judged like any candidate. Re-applied from a cache or lockfile only if the "
            "kernel's header (name, parameters, directives) is unchanged.",
    params={},
    source="superopt.model.rewrite",
    carries_code=True,
)
def model_rewrite(fn, *, function: str = "") -> list[Change]:
    if not function:
        return []
    module = ptx_ir.Module(version="9.0", target=[], address_size=64, items=[fn])
    try:
        new = parse_function(function, module, fn.name)
    except RewriteError:
        return []
    if [ptx_ir.printer.emit_statement(s) for s in new.body] == \
            [ptx_ir.printer.emit_statement(s) for s in fn.body]:
        return []
    fn.body = list(new.body)
    fn.invalidate()
    return [Change(f"body replaced by a model's rewrite ({len(new.body)} statements)")]
