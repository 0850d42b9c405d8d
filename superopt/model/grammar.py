"""Rewrite mode: the PTX grammar (``ptx.ebnf``) and the per-kernel grammar made from it.

The file ``ptx.ebnf`` next to this module is the grammar kept in the repository: one
kernel function in ptx_ir's canonical layout, restricted to what ptx_ir parses. For a
given kernel, :func:`kernel_grammar` pins the function's header (linkage, name,
parameters, performance directives) as a literal, so a constrained model can only write
the body, and a rewrite can never change the launch contract.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

GRAMMAR_FILE = Path(__file__).with_name("ptx.ebnf")


@functools.lru_cache(maxsize=1)
def grammar_text() -> str:
    """The repository's PTX grammar (xgrammar / GBNF EBNF), comments included."""
    return GRAMMAR_FILE.read_text()


def ebnf_literal(text: str) -> str:
    """``text`` as an EBNF string literal."""
    out = ['"']
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def split_function_text(text: str) -> tuple[str, str]:
    """(header up to and including the line ``{``, the rest) of a printed function."""
    m = re.search(r"^\{\n", text, re.M)
    if m is None:
        raise ValueError("no line '{' opening the function body")
    return text[:m.end()], text[m.end():]


def function_header(fn) -> str:
    """The canonical header of ``fn`` as ptx_ir prints it, ending with ``{\\n``."""
    from ptx_ir.printer import emit_function
    return split_function_text(emit_function(fn))[0]


SHORT_IDENT = 32       # short_ident in ptx.ebnf covers names up to this length


def known_names(fn, module=None) -> list[str]:
    """The long names a rewrite of ``fn`` may need: parameters, the module's globals and
    functions, and every name the kernel's body declares or mentions."""
    import ptx_ir
    names = {p.name for p in fn.params}
    if module is not None:
        names.update(f.name for f in module.functions)
        names.update(g.name for g in module.globals)
    for s in fn.body or []:
        if isinstance(s, (ptx_ir.Label, ptx_ir.VarDecl)):
            names.add(s.name)
        elif isinstance(s, ptx_ir.Instruction):
            for op in s.operands:
                for x in ptx_ir.nodes.walk_operand(op):
                    if isinstance(x, ptx_ir.Sym):
                        names.add(x.name)
    return sorted(n for n in names if len(n) > SHORT_IDENT and re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", n))


def kernel_grammar(fn, *, module=None, max_statements: int | None = None) -> str:
    """The grammar for a rewrite of ``fn``: its header verbatim, then a body of at most
    ``max_statements`` statements (each scope likewise; None: unbounded), then ``}``.
    Long identifiers are limited to the names ``fn`` and ``module`` define."""
    base = grammar_text()
    root = f"root ::= {ebnf_literal(function_header(fn))} body \"}}\\n\"\n"
    rules = re.sub(r"^root ::= .*$", "", base, count=1, flags=re.M)
    long_names = known_names(fn, module)
    known = " | ".join(ebnf_literal(n) for n in long_names) if long_names else "short_ident"
    rules = re.sub(r"^known_ident ::= .*$", lambda m: f"known_ident ::= {known}", rules, count=1, flags=re.M)
    if max_statements is not None:
        n = max(1, int(max_statements))
        rules = _replace_rule(rules, "body ::= statement*", f"body ::= statement{{0,{n}}}")
        rules = _replace_rule(rules, 'scope ::= "\\t{\\n" flat_statement* "\\t}\\n"',
                              f'scope ::= "\\t{{\\n" flat_statement{{0,{n}}} "\\t}}\\n"')
    return root + rules


def _replace_rule(text: str, old: str, new: str) -> str:
    if old not in text:
        raise ValueError(f"ptx.ebnf has no rule {old!r} (the file and grammar.py disagree)")
    return text.replace(old, new, 1)


def accepts(grammar: str, text: str) -> bool:
    """Whether ``grammar`` admits ``text`` exactly (needs xgrammar; for tests and checks)."""
    import xgrammar as xgr
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)
    matcher = xgr.GrammarMatcher(compiler.compile_grammar(grammar), terminate_without_stop_token=True)
    return bool(matcher.accept_string(text)) and matcher.is_terminated()
