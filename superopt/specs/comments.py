"""Launch specs written as ``// nvcc-plus:`` comments beside a kernel in the .cu source.

Syntax (one line; several ``// nvcc-plus:`` lines in a row continue one another, and a line
that has its own ``grid=`` or ``block=`` starts another launch shape for the same kernel)::

    // nvcc-plus: grid=cdiv(n,256) block=256 x:f32[n] in y:f32[n] inout n=100000
    __global__ void saxpy(int n, float a, const float* x, float* y) { ... }

Items, separated by spaces (spaces inside parentheses or brackets are fine):

``grid=G`` / ``block=B``
    one to three dimensions, comma-separated (``grid=cdiv(w,16),cdiv(h,16)``) or
    ``16x16`` for integers. Grid dimensions are integer expressions over scalar params
    (``+ - * // %``, ``min``, ``max``, ``cdiv``); block dimensions are integers.
``shared=BYTES``
    dynamic shared memory (default 0).
``NAME:TYPE[LENGTH]`` then optionally ``in`` / ``out`` / ``inout`` and a distribution
    a buffer param: element type (``f32 f64 f16 bf16 s8 u8 s16 u16 s32 u32 s64 u64`` or a
    C spelling such as ``float``, ``int``), length in elements (an expression over scalar
    params), direction (default ``in``) and input distribution (``normal``, ``specials``,
    ``uniform``, ``uniform:LO..HI``, ``index:LO..HI``, ... see :mod:`superopt.judge.inputs`).
``NAME=VALUE`` or ``NAME:TYPE=VALUE``; ``NAME=V,V2,V3``
    a scalar param and its value; further values are other sizes the checker tries
    (``values``). The type defaults to the kernel parameter's own.
``kernel=NAME``
    the kernel the comment is for, when it is not the next ``__global__`` function.
``vary_sizes=false``
    the checker keeps the scalars as given.

Params are matched by name with the kernel's C++ parameter names; when those are not
known, the param items are taken in declaration order. Float scalars may be left out
(they get 1.0); every other param must be given. The comment goes on the lines just above
the kernel (above its ``template<...>`` line too), on the signature line, or in the first
lines of its body.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from superopt.specs.launch_spec import Buffer, LaunchSpec, Scalar, SpecError, elem_type

__all__ = ["KernelDecl", "find_kernels", "find_directives", "directives_of", "parse_directive", "split_top",
           "directive_spec"]

_DIRECTIVE = re.compile(r"//\s*nvcc-plus\s*:(.*)$", re.M)
_GLOBAL = re.compile(r"\b__global__\b")
_DISTS = {"auto", "normal", "specials", "uniform", "positive", "large", "uniform_small", "full",
          "near_bounds"}


@dataclass
class KernelDecl:
    name: str                      # unqualified function name
    params: list                   # C++ parameter names (None where unnamed)
    param_types: list              # C++ parameter declarations without the name
    start: int                     # offset of the declaration (template line included)
    sig_end: int                   # offset of the ')' closing the parameter list
    body_start: int | None         # offset of '{' (None for a declaration)
    body_end: int | None
    line: int


_LITERAL = re.compile(r"""//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|\\\Z|[^"\\])*(?:"|\Z)|'(?:\\.|\\\Z|[^'\\])*(?:'|\Z)""",
                      re.S)
_NOT_NEWLINE = re.compile(r"[^\n]")


def _blank(m) -> str:
    text = m.group(0)
    if text.startswith("//"):
        return " " * len(text)
    if text.startswith("/*"):
        return _NOT_NEWLINE.sub(" ", text)
    return text[0] + " " * (len(text) - 2) + text[0] if len(text) >= 2 else text


def _strip_comments(src: str) -> str:
    """Blank out comments and string literals (same length, so offsets stay; newlines in
    block comments stay). One regular expression pass: a 17 MB file takes a second, not a
    character loop's minutes."""
    return _LITERAL.sub(_blank, src)


def _match(text: str, i: int, open_: str, close: str) -> int:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j
    return -1


def split_top(s: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside (), [], <> and {}."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([<{":
            depth += 1
        elif ch in ")]>}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def _param_name(decl: str) -> tuple[str | None, str]:
    d = decl.split("=")[0].strip()
    d = re.sub(r"\[[^\]]*\]\s*$", "", d).strip()
    m = re.search(r"([A-Za-z_]\w*)\s*$", d)
    if not m:
        return None, d
    name = m.group(1)
    rest = d[:m.start()].strip()
    keywords = {"int", "float", "double", "char", "short", "long", "unsigned", "signed", "bool",
                "void", "const", "volatile", "__restrict__", "__restrict", "size_t", "half",
                "__half", "auto"}
    if not rest or rest.endswith("::") or name in keywords or rest in ("unsigned", "signed", "long", "const"):
        if not rest or name in keywords:
            return None, d
    return name, rest


_IDENT = re.compile(r"[^;{}()]*?([A-Za-z_]\w*)\s*(<[^;{}()]*>)?\s*\(", re.S)
_BODY_OPEN = re.compile(r"[^;{]*\{")
_TEMPLATE_TAIL = re.compile(r"template\s*<[^;{}]*>\s*$")
_ATTRIBUTES = ("__launch_bounds__", "__attribute__", "__cluster_dims__", "alignas", "__declspec", "__maxnreg__")
_SCANS: dict[str, tuple] = {}      # source text -> (kernels, directives): one scan per module
_SCANS_KEPT = 8


def find_kernels(source: str) -> list[KernelDecl]:
    """Every ``__global__`` function of a .cu source, with its C++ parameter names.

    Scanned once per source text (the optimizer asks for every kernel of a module, and a
    scan per kernel made a 600-kernel file cost minutes); the caller gets its own list."""
    return list(_scan(source)[0])


def find_directives(source: str) -> dict[str, list[str]]:
    """kernel name -> directive texts (one per launch shape) from ``// nvcc-plus:`` comments
    (scanned once per source text, as :func:`find_kernels`)."""
    return {k: list(v) for k, v in _scan(source)[1].items()}


def directives_of(source: str, kernel: str) -> list[str]:
    """The ``// nvcc-plus:`` directive texts of one kernel (no copy of the others')."""
    return list(_scan(source)[1].get(kernel, ()))


def _scan(source: str) -> tuple:
    hit = _SCANS.get(source)
    if hit is None:
        kernels = tuple(_find_kernels(source))
        hit = (kernels, _find_directives(source, kernels))
        if len(_SCANS) >= _SCANS_KEPT:
            _SCANS.pop(next(iter(_SCANS)))
        _SCANS[source] = hit
    return hit


def _find_kernels(source: str) -> list[KernelDecl]:
    """The scan behind :func:`find_kernels`: linear in the source (no slice, count or search
    from the start of the text per kernel)."""
    clean = _strip_comments(source)
    out = []
    line, counted = 1, 0                # line number of offset ``counted``
    for m in _GLOBAL.finditer(clean):
        i = m.end()
        # the first "identifier(" that is not an attribute is the name
        pos = i
        name = None
        while pos < len(clean):
            mm = _IDENT.match(clean, pos)
            if not mm:
                break
            if mm.group(1) in _ATTRIBUTES:
                close = _match(clean, mm.end() - 1, "(", ")")
                if close < 0:
                    break
                pos = close + 1
                continue
            name = mm.group(1)
            open_paren = mm.end() - 1
            break
        if name is None:
            continue
        close = _match(clean, open_paren, "(", ")")
        if close < 0:
            continue
        plist = clean[open_paren + 1:close].strip()
        params, types = [], []
        if plist and plist != "void":
            for decl in split_top(plist):
                pname, ptype = _param_name(decl)
                params.append(pname)
                types.append(ptype)
        mb = _BODY_OPEN.match(clean, close + 1)
        body_start = body_end = None
        if mb:
            body_start = mb.end() - 1
            body_end = _match(clean, body_start, "{", "}")
        # include a template<...> line just above; the template clause holds no ; { }, so
        # only the text after the last of them can hold it
        start = m.start()
        line_start = clean.rfind("\n", 0, start) + 1
        stop = max(clean.rfind(";", 0, line_start), clean.rfind("{", 0, line_start),
                   clean.rfind("}", 0, line_start)) + 1
        tm = _TEMPLATE_TAIL.search(clean[stop:line_start].rstrip())
        start = stop + tm.start() if tm else line_start
        line += source.count("\n", counted, m.start())
        counted = m.start()
        out.append(KernelDecl(name, params, types, start, close, body_start, body_end, line))
    return out


def _find_directives(source: str, kernels) -> dict[str, list[str]]:
    groups: list[tuple[int, str]] = []          # (offset, text) with continuation lines merged
    last_end = -10
    for m in _DIRECTIVE.finditer(source):
        text = m.group(1).strip()
        line_start = source.rfind("\n", 0, m.start()) + 1
        between = source[last_end:line_start].strip() if last_end >= 0 else "x"
        starts_new = bool(re.search(r"(^|\s)(grid|block)\s*=", text))
        if groups and not between and not starts_new:
            off, prev = groups[-1]
            groups[-1] = (off, prev + " " + text)
        else:
            groups.append((m.start(), text))
        last_end = m.end() + 1
    # kernels are in source order: the ones starting at or before an offset are a prefix
    starts = [k.start for k in kernels]
    reach, far = [], -1                 # reach[i]: the furthest end among kernels[:i + 1]
    for k in kernels:
        far = max(far, k.body_end or k.sig_end)
        reach.append(far)
    out: dict[str, list[str]] = {}
    for off, text in groups:
        explicit = re.search(r"(?:^|\s)kernel\s*=\s*(\S+)", text)
        target = None
        if explicit:
            target = explicit.group(1)
            text = (text[:explicit.start()] + " " + text[explicit.end():]).strip()
        else:
            line_start = source.rfind("\n", 0, off) + 1
            # in the kernel's body, or on the line where its declaration or body ends: the
            # last kernel (in source order) starting at or before the comment that reaches it
            i = bisect.bisect_right(starts, off) - 1
            while i >= 0 and reach[i] >= line_start:
                if (kernels[i].body_end or kernels[i].sig_end) >= line_start:
                    target = kernels[i].name
                    break
                i -= 1
            if target is None:
                j = bisect.bisect_left(starts, off)
                if j < len(kernels):
                    target = kernels[j].name
        if target:
            out.setdefault(target, []).append(text)
    return out


@dataclass
class _Item:
    kind: str                     # buffer | scalar
    name: str
    type: str | None = None
    length: str | None = None
    direction: str = "in"
    distribution: str = "auto"
    value: str | None = None
    values: list = field(default_factory=list)


def parse_directive(text: str) -> dict:
    """The items of one directive: {"grid", "block", "shared", "vary_sizes", "items": [...]}."""
    toks = split_top(text, " ")
    toks = [t for t in toks if t]
    out: dict = {"grid": None, "block": None, "shared": 0, "vary_sizes": True, "items": []}
    items: list[_Item] = out["items"]
    for tok in toks:
        low = tok.lower()
        if low.startswith(("grid=", "block=")):
            key, _, val = tok.partition("=")
            out[key.lower()] = _dims(val, key.lower())
            continue
        if low.startswith(("shared=", "smem=", "shared_bytes=")):
            out["shared"] = int(tok.partition("=")[2], 0)
            continue
        if low.startswith(("vary_sizes=", "vary=")):
            out["vary_sizes"] = tok.partition("=")[2].strip().lower() in ("1", "true", "yes", "on")
            continue
        if low in ("in", "out", "inout"):
            if not items or items[-1].kind != "buffer":
                raise SpecError(f"nvcc-plus comment: {tok!r} does not follow a buffer")
            items[-1].direction = low
            continue
        if low.startswith(("index:", "uniform:")) or low in _DISTS or low.startswith("dist="):
            if not items or items[-1].kind != "buffer":
                raise SpecError(f"nvcc-plus comment: distribution {tok!r} does not follow a buffer")
            items[-1].distribution = tok.partition("=")[2] if low.startswith("dist=") else tok
            continue
        m = re.fullmatch(r"([A-Za-z_]\w*)\s*:\s*([A-Za-z_]\w*)\s*\[(.+)\]", tok, re.S)
        if m:
            items.append(_Item("buffer", m.group(1), m.group(2), m.group(3).strip()))
            continue
        m = re.fullmatch(r"([A-Za-z_]\w*)\s*(?::\s*([A-Za-z_]\w*))?\s*=\s*(.+)", tok, re.S)
        if m:
            vals = split_top(m.group(3))
            items.append(_Item("scalar", m.group(1), m.group(2), value=vals[0], values=vals[1:]))
            continue
        raise SpecError(f"nvcc-plus comment: cannot read {tok!r}")
    return out


def _dims(val: str, what: str) -> list:
    val = val.strip()
    if val.startswith("(") and val.endswith(")") and _match(val, 0, "(", ")") == len(val) - 1:
        val = val[1:-1]
    if re.fullmatch(r"\d+(x\d+){1,2}", val):
        parts = val.split("x")
    else:
        parts = split_top(val)
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise SpecError(f"nvcc-plus comment: {what}={val!r} needs one to three dimensions")
    return [int(p) if re.fullmatch(r"\d+", p) else p for p in parts]


def directive_spec(text: str, kernel: str, params: list, cxx_names: list | None) -> LaunchSpec:
    """A LaunchSpec from one directive for a kernel whose params are ``params``
    (:class:`superopt.specs.facts.ParamInfo`) with C++ names ``cxx_names`` (or None)."""
    d = parse_directive(text)
    if d["grid"] is None or d["block"] is None:
        raise SpecError("nvcc-plus comment: grid= and block= are required")
    items = d["items"]
    by_name = {it.name: it for it in items}
    if len(by_name) != len(items):
        raise SpecError("nvcc-plus comment: a param is given twice")
    names = list(cxx_names) if cxx_names and all(cxx_names) and len(cxx_names) == len(params) else None
    if names is not None and not set(by_name) <= set(names):
        # names given in the comment are not the C++ ones: fall back to order
        names = None
    if names is None:
        if len(items) == len(params):
            names = [it.name for it in items]
        else:
            names = [None] * len(params)
            for i, it in enumerate(items):
                if i < len(params):
                    names[i] = it.name
    out = []
    for p, name in zip(params, names):
        it = by_name.get(name) if name else None
        if it is None:
            if p.kind == "float":
                out.append(Scalar(name=name or f"p{p.index}", type=p.scalar_type, value=1.0))
                continue
            raise SpecError(f"nvcc-plus comment does not give parameter {p.index}"
                            + (f" ({name})" if name else ""))
        if it.kind == "buffer":
            if p.kind != "ptr":
                raise SpecError(f"nvcc-plus comment: {it.name} is a buffer but parameter {p.index} is not a pointer")
            out.append(Buffer(name=it.name, type=elem_type(it.type).name, length_expr=_int_or_expr(it.length),
                              direction=it.direction, distribution=it.distribution))
        else:
            if p.kind == "ptr":
                raise SpecError(f"nvcc-plus comment: {it.name} is a scalar but parameter {p.index} is a pointer")
            t = elem_type(it.type).name if it.type else p.scalar_type
            out.append(Scalar(name=it.name, type=t, value=it.value, values=it.values or None))
    extra = set(by_name) - {n for n in names if n}
    if extra:
        raise SpecError(f"nvcc-plus comment names unknown parameters: {', '.join(sorted(extra))}")
    return LaunchSpec(kernel=kernel, grid=d["grid"], block=d["block"], params=out,
                      shared_bytes=d["shared"], vary_sizes=d["vary_sizes"], origin="comment")


def _int_or_expr(s: str):
    s = s.strip()
    return int(s) if re.fullmatch(r"\d+", s) else s
