"""Float-atomic logging: a PTX -> PTX instrumentation that records every floating-point
atomic add of one kernel, so the judge can compare contributions instead of final sums.

Why: ``atomicAdd(double*)`` reductions (ddot, norms, residuals, histograms of floats) end
in a value that depends on the order in which blocks add their partials, which a GPU does
not fix. nvcc's own code is then not deterministic and nothing could be judged exactly.
But if a candidate makes exactly the same multiset of (target, added value) contributions
as nvcc's code and writes everything else bit-identically, the set of results it can
produce is the same set nvcc's code can produce. :mod:`superopt.judge.atomic_judge`
compares those multisets; this module makes the kernel write them down.

What :func:`instrument` does to ``.entry kernel`` (nothing else in the module changes):

* the entry gains one trailing ``.param .u64`` (the log pointer);
* at the start, thread (0,0,0) of block (0,0,0) writes a header: a marker, then the value
  of every 8-byte word of the entry's parameters that may hold a pointer (``.u64``/``.b64``
  /``.s64`` params, and the words of ``.align 8`` byte arrays, i.e. structs passed by
  value), so that the host can turn each logged absolute address into (buffer, offset)
  whatever addresses a run got;
* every floating-point atomic add to global memory (``atom``/``red``, ``.global`` or
  generic, scalar ``.f16``/``.bf16``/``.f32``/``.f64``, any ``.sem``/``.scope``/cache
  qualifiers) is KEPT -- code that reads the target still sees real values -- and
  followed, under the same guard predicate, by a record: ``atom.global.add.u64`` on the
  log's counter gives the record's index; when it is below the capacity the thread
  stores the address it added to (``+offset`` included, the type code in bits 60..63),
  the value's bits and the old value the atomic returned (zero-extended to 64 bits).
  The old value lets the host check that each target went from its initial to its final
  value through exactly these adds (a chain), i.e. that nothing else wrote it. A ``red``
  (or an ``atom`` into ``_``) becomes an ``atom`` into a fresh register for that.

It refuses (:class:`Refused`, with the reason) what it cannot make order-free: an atomic
whose returned value the kernel reads (order-dependent), float atomics other than add
(min/max/exch/cas), vector float atomics (``.v2``, ``.f16x2``), float reductions by other
instructions (``multimem``, ``cp.reduce.async.bulk``, ``red.async``), calls to functions
that contain float atomics, and 32-bit addressing. Atomics on ``.shared`` memory are
block-local and are not logged (their effects show in outputs, compared exactly).

Log layout (u64 words): ``[0]`` record counter, ``[1]`` marker ``MARKER | header words``,
``[2 .. 2+H)`` the parameter words, then ``capacity`` records of :data:`RECORD_WORDS` words.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache

import ptx_ir
from ptx_ir.nodes import Addr, Guard, Imm, Instruction, Label, Reg, Sink, Sym, VarDecl

__all__ = ["Instrumented", "Refused", "instrument", "float_atomic_sites", "has_float_atomics",
           "LOG_BUFFER", "RECORD_WORDS", "FIXED_HEADER_WORDS", "MARKER", "TYPE_CODES", "TYPE_SHIFT",
           "ADDRESS_MASK"]

LOG_BUFFER = "__atomic_log"          # the name the log buffer has in specs and messages
RECORD_WORDS = 3                      # address|type, value bits, old value bits
FIXED_HEADER_WORDS = 2                # counter, marker
MARKER = 0xA70C_0000_0000_0000       # word 1 = MARKER | number of parameter words
TYPE_CODES = {".f16": 1, ".bf16": 2, ".f32": 3, ".f64": 4}
TYPE_SHIFT = 60                       # device addresses are far below 2**60 (49-bit VAs)
ADDRESS_MASK = (1 << TYPE_SHIFT) - 1

FLOAT_TYPES = frozenset({".f16", ".bf16", ".f32", ".f64", ".f16x2", ".bf16x2", ".e4m3x2", ".e5m2x2"})
SHARED_SPACES = frozenset({".shared", ".shared::cta", ".shared::cluster"})
ATOMIC_OPS = (".add", ".min", ".max", ".exch", ".cas", ".inc", ".dec", ".and", ".or", ".xor")
POINTER_TYPES = frozenset({".u64", ".b64", ".s64"})
VALUE_REG_TYPE = {".f16": ".b16", ".bf16": ".b16", ".f32": ".f32", ".f64": ".f64"}


@dataclass(frozen=True)
class Refused:
    """The kernel's float atomics cannot be logged order-free; ``reason`` says why."""
    reason: str

    def __bool__(self) -> bool:          # `if instrument(...)` reads as "did it work"
        return False


@dataclass(frozen=True)
class Instrumented:
    """The instrumented module and what the host needs to read its log."""
    ptx: str
    kernel: str
    capacity: int                         # records the log holds
    header: tuple                         # (param index, byte offset) of each parameter word
    sites: int                            # float atomics that write records
    log_param: str                        # the name of the added .param

    @property
    def record_start(self) -> int:
        """Index (in u64 words) of record 0."""
        return FIXED_HEADER_WORDS + len(self.header)

    @property
    def words(self) -> int:
        """Length of the log buffer in u64 words."""
        return self.record_start + RECORD_WORDS * self.capacity


# --------------------------------------------------------------------------- classification

def _op(inst: Instruction) -> str | None:
    return next((m for m in inst.modifiers if m in ATOMIC_OPS), None)


def _is_float_atomic(inst: Instruction) -> bool:
    return inst.opcode in ("atom", "red") and any(t in FLOAT_TYPES for t in inst.types)


def _logged(inst: Instruction) -> bool:
    """A float atomic this module logs or refuses (everything but shared-memory ones)."""
    return _is_float_atomic(inst) and inst.space not in SHARED_SPACES


def _other_float_reduction(inst: Instruction) -> bool:
    """Float reductions into memory by instructions other than atom/red (multimem.red,
    cp.reduce.async.bulk): order-dependent too, and not logged."""
    if not any(t in FLOAT_TYPES for t in inst.types):
        return False
    if inst.opcode == "multimem":
        return ".red" in inst.modifiers or ".ld_reduce" in inst.modifiers
    return inst.opcode == "cp" and ".reduce" in inst.modifiers


def _callee(inst: Instruction) -> str | None:
    """Name of a direct call's target; None for an indirect call."""
    for op in inst.operands:
        if isinstance(op, Sym):
            return op.name
    return None


def _call_into_float_atomics(fn, tainted: set[str]) -> Instruction | None:
    """The first call of ``fn`` that may reach a function in ``tainted`` (an indirect call may
    reach any), or None."""
    for i in fn.instructions:
        if i.opcode == "call":
            c = _callee(i)
            if c in tainted or (c is None and tainted):
                return i
    return None


def _functions_with_float_atomics(module) -> set[str]:
    """Names of .func bodies that (transitively) contain float atomics to memory."""
    funcs = {f.name: f for f in module.functions if not f.is_entry and f.body is not None}
    tainted = {n for n, f in funcs.items()
               if any(_logged(i) or _other_float_reduction(i) for i in f.instructions)}
    changed = True
    while changed:
        changed = False
        for n, f in funcs.items():
            if n not in tainted and _call_into_float_atomics(f, tainted) is not None:
                tainted.add(n)
                changed = True
    return tainted


def float_atomic_sites(fn) -> list[Instruction]:
    """The float atomics of ``fn`` to global (or generic) memory, in body order."""
    return [i for i in fn.instructions if _logged(i)]


_FLOAT_ATOMIC_TEXT = re.compile(r"\b(?:atom|red|multimem|cp\.reduce)\.\S*?\.(?:b?f16(?:x2)?|f32|f64)\b")


@lru_cache(maxsize=16)
def has_float_atomics(ptx: str, kernel: str) -> bool:
    """Does ``.entry kernel`` contain float atomics to global/generic memory (or call a
    function that does)? Cheap text test first: most modules have no float atomic at all.
    Cached: a search asks about one baseline for every candidate."""
    if not _FLOAT_ATOMIC_TEXT.search(ptx):
        return False
    try:
        module = ptx_ir.parse(ptx, fragment=True)
        fn = module.function(kernel)
    except (ptx_ir.ParseError, KeyError):
        return False
    if fn.body is None:
        return False
    if float_atomic_sites(fn) or any(_other_float_reduction(i) for i in fn.instructions):
        return True
    return _call_into_float_atomics(fn, _functions_with_float_atomics(module)) is not None


def _refusal(module, fn, module_address_size) -> str | None:
    """Why ``fn``'s float atomics cannot be logged order-free, or None."""
    if module_address_size == 32:
        return "32-bit addressing (.address_size 32) is not supported by the float-atomic log"
    sites = float_atomic_sites(fn)
    for inst in fn.instructions:
        if _other_float_reduction(inst):
            return f"`{inst.name}` is a float reduction the float-atomic log cannot record"
    call = _call_into_float_atomics(fn, _functions_with_float_atomics(module))
    if call is not None:
        c = _callee(call)
        what = f"function {c}" if c else "a function through a pointer"
        return (f"the kernel calls {what}, which contains float atomics (only atomics in the "
                f"kernel itself are logged)")
    du = fn.def_use if sites else None
    for inst in sites:
        op = _op(inst)
        if op != ".add":
            return (f"`{inst.name}` is a float atomic other than add ({(op or '?')[1:]}): its result "
                    f"depends on the order of the atomics in other ways than a sum's rounding")
        if inst.vector_width != 1 or inst.type not in TYPE_CODES:
            return f"`{inst.name}` is a vector float atomic; only scalar f16/bf16/f32/f64 adds are logged"
        if inst.opcode == "atom":
            if len(inst.operands) < 3:
                return f"`{inst.name}` has an unexpected operand list"
            dest = inst.operands[0]
            if isinstance(dest, Reg) and du.users(inst):
                user = du.users(inst)[0]
                at = f" (line {inst.line})" if inst.line else ""
                return (f"the value returned by `{inst.name}`{at} is read afterwards (by `{user.name}`): it "
                        f"depends on the order of the atomics, so contributions alone do not fix what the "
                        f"kernel computes")
            if not isinstance(dest, (Reg, Sink)):
                return f"`{inst.name}` has an unexpected destination {dest}"
        elif len(inst.operands) < 2:
            return f"`{inst.name}` has an unexpected operand list"
        addr = inst.operands[1] if inst.opcode == "atom" else inst.operands[0]
        if not isinstance(addr, Addr) or addr.extra or not isinstance(addr.base, (Reg, Sym)):
            return f"`{inst.name}`: address {addr} is not [register+offset] or [variable+offset]"
    return None


# --------------------------------------------------------------------------- instrumentation

def _imm_bits(imm: Imm, t: str) -> int:
    """Bits of a literal value operand of type ``t``."""
    text = imm.text
    if text[:2].lower() in ("0f", "0d") or not imm.is_float:
        v = imm.value
        return int(v) & ((1 << (8 * {".f16": 2, ".bf16": 2, ".f32": 4, ".f64": 8}[t])) - 1)
    x = float(text)
    if t == ".f64":
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    if t == ".f32":
        return struct.unpack("<I", struct.pack("<f", x))[0]
    if t == ".f16":
        return struct.unpack("<H", struct.pack("<e", x))[0]
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16     # bf16, truncated (exact literals)


class _Regs:
    """Scratch registers of the instrumentation, declared once per function."""

    def __init__(self, fn):
        self.fn = fn
        self._have: dict = {}

    def get(self, key: str, type_name: str) -> Reg:
        if key not in self._have:
            self._have[key] = self.fn.new_register(type_name)
        return self._have[key]


def _bits64(regs: _Regs, value, t: str, key: str) -> tuple[list[Instruction], object]:
    """Instructions putting the bits of ``value`` (type ``t``) zero-extended into a .b64."""
    out = regs.get(key, ".b64")
    if isinstance(value, Imm):
        return [Instruction("mov", (".b64",), (out, Imm(str(_imm_bits(value, t)))))], out
    if t == ".f64":
        return [Instruction("mov", (".b64",), (out, value))], out
    if t == ".f32":
        w = regs.get(key + "32", ".b32")
        return [Instruction("mov", (".b32",), (w, value)),
                Instruction("cvt", (".u64", ".u32"), (out, w))], out
    w = regs.get(key + "16", ".b16")
    return [Instruction("mov", (".b16",), (w, value)),
            Instruction("cvt", (".u64", ".u16"), (out, w))], out


def _record(fn, regs: _Regs, inst: Instruction, log: Reg, record_start: int, capacity: int) -> list:
    """The (possibly rewritten) atomic followed by the code that logs it."""
    t = inst.type
    ops = list(inst.operands)
    if inst.opcode == "red":
        old = regs.get("old" + t, VALUE_REG_TYPE[t])
        atom = inst.with_(opcode="atom", operands=(old, *ops))
        ops = [old, *ops]
    elif isinstance(ops[0], Sink):
        old = regs.get("old" + t, VALUE_REG_TYPE[t])
        ops[0] = old
        atom = inst.with_(operands=ops)
    else:
        atom, old = inst, ops[0]
    addr, value = ops[1], ops[2]
    skip = fn.new_label("alog")
    code: list = [atom]
    if inst.guard is not None:
        code.append(Instruction("bra", (), (Sym(skip),),
                                Guard(inst.guard.reg, negated=not inst.guard.negated)))
    idx, full = regs.get("idx", ".b64"), regs.get("full", ".pred")
    rec, a = regs.get("rec", ".b64"), regs.get("addr", ".b64")
    code += [
        Instruction("atom", (".global", ".add", ".u64"), (idx, Addr(log), Imm("1"))),
        Instruction("setp", (".ge", ".u64"), (full, idx, Imm(str(capacity)))),
        Instruction("bra", (), (Sym(skip),), Guard(full)),
        Instruction("mad", (".lo", ".s64"), (rec, idx, Imm(str(8 * RECORD_WORDS)), log)),
    ]
    if isinstance(addr.base, Sym):
        code.append(Instruction("mov", (".u64",), (a, addr.base)))
        base = a
    else:
        base = addr.base
    if addr.offset:
        code.append(Instruction("add", (".s64",), (a, base, Imm(str(addr.offset)))))
        base = a
    code.append(Instruction("or", (".b64",), (a, base, Imm(str(TYPE_CODES[t] << TYPE_SHIFT)))))
    vcode, vbits = _bits64(regs, value, t, "val")
    ocode, obits = _bits64(regs, old, t, "old")
    at = 8 * record_start
    code += vcode + ocode + [
        Instruction("st", (".global", ".u64"), (Addr(rec, at), a)),
        Instruction("st", (".global", ".u64"), (Addr(rec, at + 8), vbits)),
        Instruction("st", (".global", ".u64"), (Addr(rec, at + 16), obits)),
        Label(skip),
    ]
    return code


def _header_words(fn) -> list[tuple[int, int]]:
    """(param index, byte offset) of every 8-byte parameter word that may hold a pointer."""
    out = []
    for k, p in enumerate(fn.params):
        if p.type in POINTER_TYPES and not p.dims and not p.vector:
            out.append((k, 0))
        elif p.dims and p.size and (p.align or 1) >= 8 and p.size >= 8:
            out.extend((k, off) for off in range(0, p.size - 7, 8))
    return out


def _header(fn, regs: _Regs, log: Reg, log_param: str, words: list) -> list[Instruction]:
    """Load the log pointer; thread (0,0,0) of block (0,0,0) writes the header."""
    first, acc, pv = regs.get("t", ".b32"), regs.get("acc", ".b32"), regs.get("pv", ".b64")
    lead = regs.get("lead", ".pred")
    code = [Instruction("ld", (".param", ".u64"), (log, Addr(Sym(log_param)))),
            Instruction("cvta", (".to", ".global", ".u64"), (log, log)),
            Instruction("mov", (".u32",), (acc, Reg("%tid.x")))]
    for sreg in ("%tid.y", "%tid.z", "%ctaid.x", "%ctaid.y", "%ctaid.z"):
        code += [Instruction("mov", (".u32",), (first, Reg(sreg))),
                 Instruction("or", (".b32",), (acc, acc, first))]
    code += [Instruction("setp", (".eq", ".u32"), (lead, acc, Imm("0"))),
             Instruction("mov", (".b64",), (pv, Imm(str(MARKER | len(words))))),
             Instruction("st", (".global", ".u64"), (Addr(log, 8), pv), Guard(lead))]
    for k, (pi, off) in enumerate(words):
        code += [Instruction("ld", (".param", ".u64"), (pv, Addr(Sym(fn.params[pi].name), off or None))),
                 Instruction("st", (".global", ".u64"), (Addr(log, 8 * (FIXED_HEADER_WORDS + k)), pv),
                             Guard(lead))]
    return code


def instrument(ptx: str, kernel: str, capacity: int) -> Instrumented | Refused:
    """``ptx`` with ``.entry kernel``'s float atomics logged into a buffer of ``capacity``
    records passed as a new trailing parameter, or :class:`Refused` with the reason."""
    try:
        module = ptx_ir.parse(ptx, fragment=True)
        fn = module.function(kernel)
    except ptx_ir.ParseError as e:
        return Refused(f"the PTX does not parse ({e})")
    except KeyError:
        return Refused(f"no kernel {kernel!r} in the PTX")
    if not fn.is_entry or fn.body is None:
        return Refused(f"{kernel} is not a kernel with a body")
    why = _refusal(module, fn, module.address_size)
    if why:
        return Refused(why)
    taken = {p.name for p in fn.params}
    log_param = f"{kernel}_param_atomic_log"
    while log_param in taken:
        log_param += "_"
    words = _header_words(fn)
    fn.params.append(VarDecl(space=".param", type=".u64", name=log_param))
    regs = _Regs(fn)
    log = regs.get("log", ".b64")
    record_start = FIXED_HEADER_WORDS + len(words)
    sites = float_atomic_sites(fn)
    for inst in sites:
        fn.replace(inst, _record(fn, regs, inst, log, record_start, capacity))
    first = next(s for s in fn.body if isinstance(s, (Instruction, Label)))
    fn.insert_before(first, _header(fn, regs, log, log_param, words))
    return Instrumented(ptx=ptx_ir.emit(module), kernel=kernel, capacity=int(capacity),
                        header=tuple(words), sites=len(sites), log_param=log_param)
