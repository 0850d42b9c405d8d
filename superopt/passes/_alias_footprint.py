"""Launch footprints of a kernel's pointer parameters, computed at launch, and the no-alias check.

:func:`alias_check` builds an :class:`~superopt.passes._alias_check.AliasCheck` for a kernel:
instructions, placed at its entry, that compute for every pointer parameter the byte range
``[lo, hi)`` its global accesses can reach over the whole grid, and a predicate that is true when
every written range is disjoint from every other accessed range.

How the ranges are found (interval analysis, evaluated by the emitted code itself):

* every integer register gets an interval ``[lo, hi]`` of signed 64-bit values over all its
  definitions in the function (flow-insensitive: a hull over every path and every thread);
  ``%tid`` is ``[0, %ntid-1]``, ``%ctaid`` ``[0, %nctaid-1]``, a parameter its value; values are
  ``reg + k`` with static bounds where known, so offsets fold and equal computations are shared;
* a loop recurrence ``r = init; ... r += s`` (also through nvcc's chained pointer bumps
  ``a = r + s; b = a + s; r = b + s``) is ``init + [0, s * U]`` where ``U`` bounds how many times
  the update runs per ``init``: the product of the trip-count bounds of the loops around the
  update that do not re-run an init on every iteration. A loop's bound comes from a counted exit
  (``do { ...; c += s } while (c CMP B)``, or one conjunct of an ``and.pred`` exit test):
  ``1 + ceil((B - c0) / s)`` at most, ``(B - c0) / s`` for a ``ne`` test after the update (zero
  when the loop is not entered);
* where a register is read refines what it holds there: before any of its updates can have run,
  its initial values; before its update in the same iteration, one update fewer (an empty range
  when the loop never runs); under a dominating branch on it (``if (i < n)``, ``if (i >= n)
  return``), that bound; a value that is one value for the whole launch stays one value through
  ``and`` with a constant (nvcc's ``n & 3`` remainders);
* the bounds are symbolic, so the code computes them: the check's instructions read only the
  kernel's parameters and ``%ntid``/``%nctaid``, and every thread computes the same predicate.

What is not proven statically is checked at run time and joins the predicate. A 32-bit register
holds its value modulo ``2**32`` (add, sub, mul.lo and shl are ring operations), so where one is
read as a number (a widening, a comparison, a shift right, min/max, a division) its exact value
must lie in the type's range; an unsigned reading must see no negative value; products must stay
far inside 64 bits. If any of these fails, the predicate is false and nvcc's code runs. Assumed,
not checked: a ``ne``-tested loop counter reaches its bound (the loop terminates; nvcc's code
would run away otherwise), and a generic pointer to global memory equals its ``cvta.to.global``
value (true on every GPU PTX targets).

Refused (no check; the kernel keeps nvcc's code): an address that depends on loaded data, a
global access whose pointer is not a parameter (a pointer inside a struct, a global variable),
a register defined in a cycle other than a recurrence, a loop around an address update without a
counted exit, and operations the interval arithmetic does not model.
"""
from __future__ import annotations

from dataclasses import dataclass

from ptx_ir import isa
from ptx_ir.nodes import Addr, Imm, Instruction, Reg, Sym, type_size
from superopt.passes._alias_check import AliasCheck
from superopt.passes._check_formulas import bound_text, formulas
from superopt.passes._loop_tools import I, reachable_blocks, register_type

S32_MIN, S32_MAX = -(1 << 31), (1 << 31) - 1
MUL_LIMIT = 1 << 31            # |operand| bound for register x register products
MAX_CHECK_INSTRUCTIONS = 400   # a check longer than this costs more than it can save

_COMPARES = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs")
_INVERT = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "lo": "hs", "hs": "lo", "ls": "hi",
           "hi": "ls", "eq": "ne", "ne": "eq"}
_SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "lo": "hi", "hi": "lo", "ls": "hs",
         "hs": "ls", "eq": "eq", "ne": "ne"}
_SPECIAL_RANGES = {"%tid": "%ntid", "%ctaid": "%nctaid"}
_SPECIAL_VALUES = ("%ntid", "%nctaid")


class Refused(Exception):
    """The footprint cannot be bounded; the message says why."""


@dataclass(frozen=True)
class V:
    """A value of the check: ``reg + k`` (``reg`` None: the constant ``k``), with static
    bounds where known (``lo``/``hi`` None: unknown), so constant offsets fold and conditions
    the launch limits already imply cost nothing."""

    reg: Reg | None
    k: int = 0
    lo: int | None = None
    hi: int | None = None

    @property
    def const(self) -> int | None:
        return self.k if self.reg is None else None

    def __str__(self) -> str:
        if self.reg is None:
            return str(self.k)
        return self.reg.name + (f"{self.k:+d}" if self.k else "")


def _v(x) -> V:
    return x if isinstance(x, V) else V(None, x, x, x)


def _add_bounds(a, b):
    return None if a is None or b is None else a + b


@dataclass(frozen=True)
class Interval:
    lo: V
    hi: V

    def __post_init__(self):
        object.__setattr__(self, "lo", _v(self.lo))
        object.__setattr__(self, "hi", _v(self.hi))

    def __str__(self) -> str:
        return f"[{self.lo}, {self.hi}]"


class _Code:
    """Emits the check's instructions (signed 64-bit arithmetic on :class:`V` values), folding
    constants and offsets, reusing equal computations, and collects the run-time conditions the
    predicate needs."""

    def __init__(self, fn):
        self.fn = fn
        self.out: list[Instruction] = []
        self.conditions: list[Reg] = []
        self.required: dict = {}
        self.cse: dict = {}
        self.counts: dict[str, int] = {}
        taken = {d.name for d in fn.reg_decls}
        self.prefix = "%npac"
        while any(n.startswith(self.prefix) for n in taken):
            self.prefix += "_"

    def reg(self, t=".s64") -> Reg:
        """A register of the check. Declared in ``fn`` only by :meth:`declare`, at the end: a
        declaration now would invalidate the analyses the footprint is reading."""
        n = self.counts.get(t, 0)
        self.counts[t] = n + 1
        return Reg(f"{self.prefix}{t.strip('.')}_{n}")

    def declare(self) -> None:
        from ptx_ir.nodes import VarDecl
        decls = [VarDecl(space=".reg", type=t, name=f"{self.prefix}{t.strip('.')}_", range=n)
                 for t, n in sorted(self.counts.items())]
        first = next((i for i, s in enumerate(self.fn.body) if isinstance(s, VarDecl) and s.space == ".reg"), 0)
        self.fn.body[first:first] = decls
        self.fn.invalidate()

    def emit(self, *insts) -> None:
        self.out.extend(insts)

    def value(self, reg: Reg, lo=None, hi=None) -> V:
        return V(reg, 0, lo, hi)

    def _op(self, opcode: str, mods: str, *args) -> Reg:
        key = (opcode, mods, *[a.name if isinstance(a, Reg) else a for a in args])
        if key not in self.cse:
            d = self.reg()
            self.emit(I(opcode, mods, d, *args))
            self.cse[key] = d
        return self.cse[key]

    def operand(self, x):
        """``x`` as one instruction operand: an immediate or a register holding it all."""
        x = _v(x)
        if x.reg is None:
            return x.k
        if x.k == 0:
            return x.reg
        return self._op("add", ".s64", x.reg, x.k)

    def add(self, a, b) -> V:
        a, b = _v(a), _v(b)
        lo, hi = _add_bounds(a.lo, b.lo), _add_bounds(a.hi, b.hi)
        if a.reg is None or b.reg is None:
            return V(a.reg or b.reg, a.k + b.k, lo, hi)
        r = self._op("add", ".s64", *sorted((a.reg, b.reg), key=lambda r: r.name))
        return V(r, a.k + b.k, lo, hi)

    def neg(self, a) -> V:
        a = _v(a)
        lo = None if a.hi is None else -a.hi
        hi = None if a.lo is None else -a.lo
        if a.reg is None:
            return V(None, -a.k, lo, hi)
        return V(self._op("neg", ".s64", a.reg), -a.k, lo, hi)

    def sub(self, a, b) -> V:
        a, b = _v(a), _v(b)
        if a.reg is not None and a.reg == b.reg:
            return _v(a.k - b.k)
        if b.reg is None:
            return self.add(a, -b.k)
        lo = None if a.lo is None or b.hi is None else a.lo - b.hi
        hi = None if a.hi is None or b.lo is None else a.hi - b.lo
        if a.reg is None:
            n = self.neg(b)
            return V(n.reg, a.k + n.k, lo, hi)
        return V(self._op("sub", ".s64", a.reg, b.reg), a.k - b.k, lo, hi)

    def mul(self, a, b) -> V:
        a, b = _v(a), _v(b)
        if a.const is not None and b.const is not None:
            return _v(a.k * b.k)
        if a.const is None and b.const is not None:
            a, b = b, a
        ends = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)] \
            if None not in (a.lo, a.hi, b.lo, b.hi) else None
        lo, hi = (min(ends), max(ends)) if ends else (None, None)
        if a.const is not None:             # constant times b: the offset scales too
            k = a.k
            if k == 0:
                return _v(0)
            if k == 1:
                return b
            return V(self._op("mul", ".lo.s64", b.reg, k), b.k * k, lo, hi)
        return V(self._op("mul", ".lo.s64", *sorted((self.operand(a), self.operand(b)),
                                                    key=lambda r: r.name)), 0, lo, hi)

    def _pick(self, a: V, b: V, smaller: bool) -> V | None:
        if a.reg == b.reg:
            keep = a if (a.k <= b.k) == smaller else b
            return keep
        if a.hi is not None and b.lo is not None and a.hi <= b.lo:
            return a if smaller else b
        if b.hi is not None and a.lo is not None and b.hi <= a.lo:
            return b if smaller else a
        return None

    def min(self, a, b) -> V:
        a, b = _v(a), _v(b)
        picked = self._pick(a, b, True)
        if picked is not None:
            return picked
        lo = None if a.lo is None or b.lo is None else min(a.lo, b.lo)
        hi = a.hi if b.hi is None else b.hi if a.hi is None else min(a.hi, b.hi)
        return V(self._op("min", ".s64", self.operand(a), self.operand(b)), 0, lo, hi)

    def max(self, a, b) -> V:
        a, b = _v(a), _v(b)
        picked = self._pick(a, b, False)
        if picked is not None:
            return picked
        hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
        lo = a.lo if b.lo is None else b.lo if a.lo is None else max(a.lo, b.lo)
        return V(self._op("max", ".s64", self.operand(a), self.operand(b)), 0, lo, hi)

    def shr(self, a, k: int) -> V:
        a = _v(a)
        if a.const is not None:
            return _v(a.k >> k)
        lo = None if a.lo is None else a.lo >> k
        hi = None if a.hi is None else a.hi >> k
        return V(self._op("shr", ".s64", self.operand(a), k), 0, lo, hi)

    def div(self, a, k: int) -> V:
        a = _v(a)
        if a.const is not None:
            return _v(int(a.k / k))            # PTX div truncates toward zero
        lo = None if a.lo is None else int(a.lo / k)
        hi = None if a.hi is None else int(a.hi / k)
        return V(self._op("div", ".s64", self.operand(a), k), 0, lo, hi)

    def require(self, cmp: str, a, bound: int, why: str) -> None:
        """A run-time condition ``a CMP bound`` (signed) the predicate must include, unless the
        static bounds already decide it."""
        a = _v(a)
        if cmp == "ge" and a.lo is not None and a.lo >= bound:
            return
        if cmp == "le" and a.hi is not None and a.hi <= bound:
            return
        if a.reg is None or (cmp == "ge" and a.hi is not None and a.hi < bound) \
                or (cmp == "le" and a.lo is not None and a.lo > bound):
            raise Refused(why)
        key = (cmp, a.reg.name, bound - a.k)
        if key in self.required:
            return
        self.required[key] = why
        p = self.reg(".pred")
        self.emit(I("setp", f".{cmp}.s64", p, a.reg, bound - a.k))
        self.conditions.append(p)

    def special(self, name: str, lo: int, hi: int) -> V:
        key = ("special", name)
        if key not in self.cse:
            r32, r = self.reg(".u32"), self.reg()
            self.emit(I("mov", ".u32", r32, Reg(name)), I("cvt", ".s64.u32", r, r32))
            self.cse[key] = r
        return V(self.cse[key], 0, lo, hi)


def _special_bounds(name: str) -> tuple[int, int]:
    if name.startswith("%ntid"):
        return 1, 1024
    return 1, (1 << 31) - 1 if name.endswith(".x") else 65535


def _bits(type_name: str | None) -> int | None:
    if not type_name or type_name == ".pred" or type_name[1] == "f":
        return None
    return type_size(type_name) * 8


class FootprintAnalysis:
    """The intervals of a function's integer registers, as emitted code (see the module doc)."""

    def __init__(self, fn):
        self.fn = fn
        self.code = _Code(fn)
        self.defs: dict[str, list[Instruction]] = {}
        self.block_of: dict[int, object] = {}
        for block in fn.blocks:
            for inst in block.instructions:
                self.block_of[id(inst)] = block
                for r in isa.defs(inst):
                    self.defs.setdefault(r.name, []).append(inst)
        self.loops = fn.loops
        self.memo: dict[str, Interval] = {}
        self.init_memo: dict[str, Interval] = {}
        self.trip_memo: dict[int, object] = {}
        self.params: dict[tuple, Reg] = {}
        self.active: set[str] = set()
        self.root_sets: dict[str, set] | None = None
        self.pointer_params = {p.name for p in fn.params if p.type in (".u64", ".b64", ".s64")}

    # ----------------------------------------------------------------- pointers
    def root(self, name: str) -> str | None:
        """The pointer parameter a register's value is an offset from, None for a plain
        integer; raises Refused for a mix (a pointer chosen between two parameters, a sum of
        two pointers, a scaled pointer)."""
        if self.root_sets is None:
            self.root_sets = self._pointer_roots()
        roots = self.root_sets.get(name, set())
        if len(roots) > 1:
            raise Refused(f"{name} points into several buffers ({', '.join(sorted(roots))})")
        return next(iter(roots)) if roots else None

    def _pointer_roots(self) -> dict[str, set]:
        """A fixpoint over every definition (loops make the registers' roots cyclic)."""
        roots: dict[str, set] = {}
        insts = [i for b in self.fn.blocks for i in b.instructions]
        changed = True
        while changed:
            changed = False
            for inst in insts:
                found = self._root_of(inst, roots)
                if not found:
                    continue
                for d in isa.defs(inst):
                    have = roots.setdefault(d.name, set())
                    if not found <= have:
                        have |= found
                        changed = True
        return roots

    def _root_of(self, inst: Instruction, roots: dict) -> set:
        op, ops = inst.opcode, inst.operands
        if op == "ld" and inst.space == ".param" and isinstance(ops[1], Addr) \
                and isinstance(ops[1].base, Sym) and not ops[1].offset \
                and ops[1].base.name in self.pointer_params:
            return {ops[1].base.name}
        if isa.touches_memory(inst) or not ops:
            return set()
        sources = [roots.get(o.name, set()) if isinstance(o, Reg) else set() for o in ops[1:]]
        found = set().union(*sources) if sources else set()
        if not found:
            return set()
        if op in ("mov", "cvta") or (op == "cvt" and all(type_size(t) == 8 for t in inst.types)):
            return found
        with_root = [x for x in sources if x]
        if op == "add" and len(with_root) == 1:
            return found
        if op == "sub" and sources[0] and not sources[1]:
            return found
        if op == "selp" and len(ops) == 4 and not sources[2]:
            return found
        raise Refused(f"`{inst}` computes with a pointer in a way the footprint does not model")

    # ----------------------------------------------------------------- registers
    def interval(self, name: str, at: Instruction | None = None) -> Interval:
        """The values ``name`` can hold where ``at`` reads it (anywhere, without ``at``): a use
        inside a loop that runs before the register's update in that iteration sees one update
        fewer."""
        key = name
        if at is not None and name in self.defs:
            _, updates = self._updates(name)
            if updates and not any(self._reaches_from(u, at) for u, _ in updates):
                key = (name, "before any update")
            elif updates:
                key = (name, tuple(self._before(u, at) for u, _ in updates))
        if key == (name, "before any update"):
            if key not in self.memo:
                self.memo[key] = self.init_interval(name)
            return self.memo[key]
        if key in self.memo:
            result = self.memo[key]
        else:
            result = self._interval(name, key[1] if isinstance(key, tuple) else None)
            self.memo[key] = result
        if at is not None and key == name:
            guards = tuple(i for i, g in enumerate(self._guards()) if self._guarded(name, at, g))
            if guards:
                gkey = (name, "guards", guards)
                if gkey not in self.memo:
                    self.memo[gkey] = self._refine(name, result, [self._guards()[i] for i in guards])
                result = self.memo[gkey]
        return result

    # ----------------------------------------------------------------- guards
    def _guards(self) -> list:
        """``(edge block, branch block, predicate, its value on the edge)`` for every edge of
        a conditional branch into a block that has no other way in: code dominated by that
        block runs only where the predicate had that value (``if (i < n)``, ``if (i >= n)
        return``)."""
        if getattr(self, "_guard_list", None) is None:
            graph = self.fn.cfg
            out = []
            for block in self.fn.blocks:
                term = block.terminator
                if term is None or term.opcode != "bra" or term.guard is None:
                    continue
                taken = not term.guard.negated
                for succ in graph.successors(block):
                    if graph.in_degree(succ) != 1 or len(list(graph.successors(block))) != 2:
                        continue
                    kind = graph.edges[block, succ].get("kind")
                    value = taken if kind == "branch" else (not taken if kind == "fallthrough" else None)
                    if value is not None:
                        out.append((succ, block, term.guard.reg.name, value))
            self._guard_list = out
        return self._guard_list

    def _guarded(self, name: str, at: Instruction, guard) -> bool:
        succ, block, pred, value = guard
        defs = self.defs.get(name, [])
        ab = self.block_of.get(id(at))
        if len(defs) != 1 or ab is None or self._loops_around(defs[0]):
            return False            # one value, made once: the branch saw the value `at` reads
        dom = self.fn.dominance
        if not (dom.dominates(self.block_of[id(defs[0])], block) and dom.dominates(succ, ab)):
            return False
        return bool(self._constraints(block, pred, value, name, 0))

    def _constraints(self, block, pred: str, value: bool, name: str, depth: int) -> list:
        """``[(cmp, bound operand, setp)]``: what ``pred == value`` says of ``name`` (signed
        integer comparisons, through and/or/not of predicates)."""
        d = next((i for i in reversed(block.instructions)
                  if isa.defs(i) and isa.defs(i)[0].name == pred), None)
        if d is None or d.guard is not None or depth > 4:
            return []
        if d.opcode == "not" and len(d.operands) == 2 and isinstance(d.operands[1], Reg):
            return self._constraints(block, d.operands[1].name, not value, name, depth + 1)
        if d.opcode in ("and", "or") and len(d.operands) == 3 and \
                all(isinstance(o, Reg) for o in d.operands[1:]):
            if (d.opcode == "and") != value:
                return []           # one of the two may be what made it so
            return [c for o in d.operands[1:]
                    for c in self._constraints(block, o.name, value, name, depth + 1)]
        if d.opcode != "setp" or len(d.operands) != 3 or not d.types or d.types[0][1] != "s":
            return []
        cmp = next((m[1:] for m in d.modifiers if m[1:] in ("lt", "le", "gt", "ge")), None)
        if cmp is None:
            return []
        a, b = d.operands[1], d.operands[2]
        if isinstance(a, Reg) and a.name == name:
            bound = b
        elif isinstance(b, Reg) and b.name == name:
            bound, cmp = a, _SWAP[cmp]
        else:
            return []
        if not value:
            cmp = _INVERT[cmp]
        return [(cmp, bound, d)]

    def _refine(self, name: str, iv: Interval, guards: list) -> Interval:
        c = self.code
        lo, hi = iv.lo, iv.hi
        for succ, block, pred, value in guards:
            for cmp, bound_op, setp in self._constraints(block, pred, value, name, 0):
                width = type_size(setp.types[0]) * 8
                if width == 32:       # the comparison saw the 32-bit value: it is the number
                    self.exact32(iv, True, f"`{setp}`")
                bound = self.read(bound_op, setp, width, True) if width == 32 else \
                    self.operand(bound_op, setp, width)
                if cmp == "lt":
                    hi = c.min(hi, c.sub(bound.hi, 1))
                elif cmp == "le":
                    hi = c.min(hi, bound.hi)
                elif cmp == "gt":
                    lo = c.max(lo, c.add(bound.lo, 1))
                else:
                    lo = c.max(lo, bound.lo)
        return Interval(lo, hi)

    def _reaches_from(self, update: Instruction, at: Instruction) -> bool:
        """Can ``at`` run after ``update`` (any path, loops included)?"""
        ub, ab = self.block_of.get(id(update)), self.block_of.get(id(at))
        if ub is None or ab is None:
            return True
        if ub is ab and ub.instructions.index(update) < ub.instructions.index(at):
            return True
        cache = self.__dict__.setdefault("_reach_cache", {})
        if id(ub) not in cache:
            cache[id(ub)] = reachable_blocks(self.fn, self.fn.cfg.successors(ub))
        return ab in cache[id(ub)]

    def _before(self, update: Instruction, at: Instruction) -> bool:
        """Does ``at`` run before ``update`` in every iteration of the innermost loop around
        ``update`` that holds ``at`` (not reachable from it without taking a back edge)?"""
        ub, ab = self.block_of.get(id(update)), self.block_of.get(id(at))
        if ub is None or ab is None:
            return False
        loops = [l for l in self._loops_around(update) if ab in l.blocks]
        if not loops:
            return False
        loop = min(loops, key=lambda l: len(l.blocks))
        if ab is ub:
            insts = ub.instructions
            if insts.index(at) > insts.index(update):
                return False
        graph = self.fn.cfg
        seen, stack = set(), [s for s in graph.successors(ub)]
        while stack:
            node = stack.pop()
            if node in seen or node not in loop.blocks or node is loop.header:
                continue
            if node is ab:
                return False
            seen.add(node)
            stack.extend(graph.successors(node))
        return True

    def _interval(self, name: str, before) -> Interval:
        base = name.split(".")[0]
        if base in _SPECIAL_RANGES:
            limit = _SPECIAL_RANGES[base] + name[len(base):]
            n = self.code.special(limit, *_special_bounds(limit))
            result = Interval(0, self.code.sub(n, 1))
        elif base in _SPECIAL_VALUES:
            n = self.code.special(name, *_special_bounds(name))
            result = Interval(n, n)
        elif base == "%laneid":
            result = Interval(0, 31)
        elif name.startswith("%") and base in {"%warpid", "%smid", "%nsmid", "%clock", "%clock64",
                                                "%globaltimer", "%lanemask_lt"}:
            raise Refused(f"an address depends on {name}")
        else:
            if name in self.active:
                raise Refused(f"{name} is defined in a cycle that is not a loop recurrence")
            self.active.add(name)
            try:
                result = self._register(name, before)
            finally:
                self.active.discard(name)
        return result

    def _updates(self, name: str) -> tuple[list, list]:
        """(init definitions, recurrence updates ``(inst, step operand, sign)``) of ``name``."""
        inits, updates = [], []
        for inst in self.defs.get(name, []):
            steps = self.chain(inst, name)
            if steps is None:
                inits.append(inst)
            else:
                updates.append((inst, steps))
        return inits, updates

    def chain(self, inst: Instruction, name: str, depth: int = 0):
        """``[(operand, sign), ...]`` when ``inst`` computes ``name + sum(sign * operand)``,
        directly (``add r, r, s``) or through single-definition adds (nvcc's unrolled pointer
        bumps: ``add a, r, s; add b, a, s; add r, b, s``); None otherwise."""
        ops = inst.operands
        if inst.opcode not in ("add", "sub") or len(ops) != 3 or inst.guard is not None \
                or (inst.types and inst.types[0][1] == "f"):
            return None
        a, b = ops[1], ops[2]
        tries = [(a, b, 1 if inst.opcode == "add" else -1)]
        if inst.opcode == "add":
            tries.append((b, a, 1))
        for x, y, sign in tries:
            if not isinstance(x, Reg) or (isinstance(y, Reg) and y.name == name):
                continue
            if x.name == name:
                return [(y, sign)]
            defs = self.defs.get(x.name, [])
            if depth < 16 and len(defs) == 1 and defs[0] is not inst:
                inner = self.chain(defs[0], name, depth + 1)
                if inner is not None:
                    return inner + [(y, sign)]
        return None

    def init_interval(self, name: str) -> Interval:
        """The hull of the values ``name`` gets from its definitions other than its updates."""
        if name in self.init_memo:
            return self.init_memo[name]
        inits, _ = self._updates(name)
        if not inits:
            raise Refused(f"{name} is read before any definition")
        hull = None
        for inst in inits:
            iv = self._definition(inst, name)
            hull = iv if hull is None else Interval(self.code.min(hull.lo, iv.lo), self.code.max(hull.hi, iv.hi))
        self.init_memo[name] = hull
        return hull

    def _register(self, name: str, before=None) -> Interval:
        bits = _bits(register_type(self.fn, name))
        if bits is None:
            raise Refused(f"an address depends on {name}, which is not an integer register")
        inits, updates = self._updates(name)
        if not updates:
            result = self.init_interval(name)
        else:
            start = self.init_interval(name)
            lo, hi = start.lo, start.hi
            for n, (inst, steps) in enumerate(updates):
                count = self.update_count(inst, name, inits)
                step = Interval(0, 0)
                for op, sign in steps:
                    v = self.operand(op, inst, bits)
                    if sign > 0:
                        step = Interval(self.code.add(step.lo, v.lo), self.code.add(step.hi, v.hi))
                    else:
                        step = Interval(self.code.sub(step.lo, v.hi), self.code.sub(step.hi, v.lo))
                c = self.code
                if before and before[n]:
                    # read before the update: updates 0 .. count-1 have run; none when the loop
                    # never runs (count 0: an inverted, empty range for a step of known sign)
                    count = c.sub(count, 1)
                    up = step.lo.lo is not None and step.lo.lo >= 0
                    down = step.hi.hi is not None and step.hi.hi <= 0
                    if not (up or down):
                        count = c.max(count, 0)
                    self._bounded_product_operands(step, count)
                    if up:
                        hi = c.add(hi, c.mul(step.hi, count))
                        continue
                    if down:
                        lo = c.add(lo, c.mul(step.lo, count))
                        continue
                self._bounded_product_operands(step, count)
                lo = c.add(lo, c.min(0, c.mul(step.lo, count)))
                hi = c.add(hi, c.max(0, c.mul(step.hi, count)))
            result = Interval(lo, hi)
        return result

    def exact32(self, iv: Interval, signed: bool, what: str) -> None:
        """A 32-bit register holds its exact value mod 2**32 (add, sub, mul.lo and shl are ring
        operations); where an operation reads it as a number (a widening, a comparison, a
        shift right, min/max) that reading is exact only inside the type's range."""
        lo, hi = (S32_MIN, S32_MAX) if signed else (0, (1 << 32) - 1)
        self.code.require("ge", iv.lo, lo, f"{what} may wrap around 32 bits")
        self.code.require("le", iv.hi, hi, f"{what} may wrap around 32 bits")

    def read(self, op, at: Instruction, bits: int, signed: bool = True) -> Interval:
        """An operand read as a number (not as an element of the 2**bits ring)."""
        iv = self.operand(op, at, bits)
        if bits == 32:
            self.exact32(iv, signed, f"`{at}`")
        return iv

    def _bounded_product_operands(self, a: Interval, count) -> None:
        """Keep ``a * count`` inside signed 64 bits: both within 2**31 in magnitude."""
        for v in (a.lo, a.hi, _v(count)):
            self.code.require("ge", v, -MUL_LIMIT, "a bound may overflow 64 bits")
            self.code.require("le", v, MUL_LIMIT, "a bound may overflow 64 bits")

    # ----------------------------------------------------------------- operands
    def operand(self, op, at: Instruction, bits: int) -> Interval:
        if isinstance(op, Imm):
            if op.is_float:
                raise Refused(f"a float immediate in an address ({at})")
            v = op.value
            if bits == 32 and v > S32_MAX:
                v -= 1 << 32          # the s32 reading of the bits (see the module doc)
            return Interval(v, v)
        if isinstance(op, Reg):
            return self.interval(op.name, at)
        raise Refused(f"an address depends on {op} in `{at}`")

    def _definition(self, inst: Instruction, name: str) -> Interval:
        op = inst.opcode
        ops = inst.operands
        types = inst.types
        t = types[0] if types else None
        dst_bits = _bits(register_type(self.fn, name)) or 64
        src = lambda i, bits=dst_bits: self.operand(ops[i], inst, bits)   # noqa: E731
        c = self.code
        if op == "ld" and inst.space == ".param" and isinstance(ops[1], Addr) \
                and isinstance(ops[1].base, Sym):
            if t is None or t[1] not in "usb" or type_size(t) not in (4, 8):
                raise Refused(f"a {t} parameter in an address")
            key = (ops[1].base.name, ops[1].offset or 0, t)
            if key not in self.params:
                raw = c.reg(t if type_size(t) == 8 else ".u32")
                c.emit(Instruction("ld", (".param", t), (raw, Addr(ops[1].base, ops[1].offset))))
                if type_size(t) == 8:
                    v = c.value(raw)
                else:
                    r = c.reg()
                    c.emit(I("cvt", ".s64.s32", r, raw))    # the s32 reading
                    v = c.value(r, S32_MIN, S32_MAX)
                self.params[key] = v
            v = self.params[key]
            return Interval(v, v)
        if isa.touches_memory(inst):
            raise Refused(f"an address depends on data loaded by `{inst}`")
        if op in ("mov", "cvta") and len(ops) == 2:
            if op == "cvta" and ".shared" in inst.modifiers:
                raise Refused("a shared-memory address in a global access")
            return src(1)
        if op == "cvt" and len(ops) == 2 and len(types) == 2:
            dt, st = types
            if dt[1] not in "usb" or st[1] not in "usb" or ".sat" in inst.modifiers:
                raise Refused(f"`{inst}` in an address")
            if type_size(dt) > type_size(st):
                if type_size(st) != 4:
                    raise Refused(f"`{inst}` in an address")
                return self.read(ops[1], inst, 32, signed=st[1] == "s")
            return self.operand(ops[1], inst, type_size(st) * 8)     # a ring operation
        if op in ("add", "sub") and len(ops) == 3:
            a, b = src(1), src(2)
            if op == "add":
                return Interval(c.add(a.lo, b.lo), c.add(a.hi, b.hi))
            return Interval(c.sub(a.lo, b.hi), c.sub(a.hi, b.lo))
        if op in ("mul", "mad") and (".lo" in inst.modifiers or ".wide" in inst.modifiers):
            if ".wide" in inst.modifiers:
                signed = t is not None and t[1] == "s"
                a, b = self.read(ops[1], inst, 32, signed), self.read(ops[2], inst, 32, signed)
            else:
                a, b = src(1), src(2)
            prod = self._product(a, b)
            if op == "mad":
                if len(ops) != 4:
                    raise Refused(f"`{inst}`")
                d = src(3, dst_bits)
                prod = Interval(c.add(prod.lo, d.lo), c.add(prod.hi, d.hi))
            return prod
        if op == "shl" and len(ops) == 3 and isinstance(ops[2], Imm) and 0 <= ops[2].value < 62:
            return self._product(src(1), Interval(1 << ops[2].value, 1 << ops[2].value))
        if op == "shr" and len(ops) == 3 and isinstance(ops[2], Imm) and 0 <= ops[2].value < 63:
            signed = t is not None and t[1] == "s"
            a = self.read(ops[1], inst, dst_bits, signed)
            if not signed:
                c.require("ge", a.lo, 0, "a logical shift of a negative value")
            return Interval(c.shr(a.lo, ops[2].value), c.shr(a.hi, ops[2].value))
        if op == "and" and len(ops) == 3:
            for mask, other in ((ops[2], ops[1]), (ops[1], ops[2])):
                if isinstance(mask, Imm) and not mask.is_float and 0 <= mask.value <= S32_MAX:
                    # the register's values anywhere: a single value is exact at every use
                    x = self.interval(other.name) if isinstance(other, Reg) else None
                    if x is not None and x.lo == x.hi and x.lo.reg is not None:
                        # one value for the whole launch: compute it (the low bits of the
                        # s64 reading are the register's bits)
                        r = c._op("and", ".b64", c.operand(x.lo), mask.value)
                        v = V(r, 0, 0, mask.value)
                        return Interval(v, v)
                    return Interval(0, mask.value)
            raise Refused(f"`{inst}` in an address")
        if op in ("min", "max") and len(ops) == 3:
            signed = t is not None and t[1] == "s"
            a, b = self.read(ops[1], inst, dst_bits, signed), self.read(ops[2], inst, dst_bits, signed)
            if not signed:
                c.require("ge", a.lo, 0, "an unsigned min/max of a negative value")
                c.require("ge", b.lo, 0, "an unsigned min/max of a negative value")
            f = c.min if op == "min" else c.max
            return Interval(f(a.lo, b.lo), f(a.hi, b.hi))
        if op == "selp" and len(ops) == 4:
            a, b = src(1), src(2)
            return Interval(c.min(a.lo, b.lo), c.max(a.hi, b.hi))
        if op in ("div", "rem") and len(ops) == 3 and isinstance(ops[2], Imm) and ops[2].value > 0:
            signed = t is not None and t[1] == "s"
            a, k = self.read(ops[1], inst, dst_bits, signed), ops[2].value
            if not signed:
                c.require("ge", a.lo, 0, "an unsigned division of a negative value")
            if op == "div":
                return Interval(c.div(a.lo, k), c.div(a.hi, k))
            return Interval(0 if not signed else -(k - 1), k - 1)
        raise Refused(f"`{inst}` in an address is not modelled")

    def _product(self, a: Interval, b: Interval) -> Interval:
        c = self.code
        for x, other in ((a, b), (b, a)):
            k = x.lo.const
            if k is not None and x.hi.const == k:
                bound = (1 << 61) // max(1, abs(k))
                c.require("ge", other.lo, -bound, "a product may overflow 64 bits")
                c.require("le", other.hi, bound, "a product may overflow 64 bits")
                lo, hi = c.mul(other.lo, k), c.mul(other.hi, k)
                return Interval(lo, hi) if k >= 0 else Interval(hi, lo)
        for v in (a.lo, a.hi, b.lo, b.hi):
            c.require("ge", v, -MUL_LIMIT, "a product may overflow 64 bits")
            c.require("le", v, MUL_LIMIT, "a product may overflow 64 bits")
        if a.lo.lo is not None and a.lo.lo >= 0 and b.lo.lo is not None and b.lo.lo >= 0:
            return Interval(c.mul(a.lo, b.lo), c.mul(a.hi, b.hi))      # both non-negative
        ends = [c.mul(p, q) for p in (a.lo, a.hi) for q in (b.lo, b.hi)]
        lo, hi = ends[0], ends[0]
        for e in ends[1:]:
            lo, hi = c.min(lo, e), c.max(hi, e)
        return Interval(lo, hi)

    # ----------------------------------------------------------------- loops
    def _loops_around(self, inst: Instruction) -> list:
        block = self.block_of[id(inst)]
        return [loop for loop in self.loops if block in loop.blocks]

    def update_count(self, update: Instruction, name: str, inits: list):
        """How many times ``update`` can run between two runs of an init of ``name``."""
        count = _v(1)
        for loop in self._loops_around(update):
            if self._reinitialised_each_iteration(loop, update, inits):
                continue
            count = self.code.mul(count, self.trip_bound(loop))
        return count

    def _reinitialised_each_iteration(self, loop, update: Instruction, inits: list) -> bool:
        """True when, within one iteration of ``loop``, every path from its header to
        ``update`` runs an unguarded init of the register first."""
        target = self.block_of[id(update)]
        for init in inits:
            if init.guard is not None:
                continue
            blk = self.block_of[id(init)]
            if blk not in loop.blocks:
                continue
            if blk is target:
                insts = blk.instructions
                if insts.index(init) < insts.index(update) and not self._reaches(loop, target, blk):
                    return True
                continue
            if not self._reaches(loop, target, blk):
                return True
        return False

    def _reaches(self, loop, target, avoid) -> bool:
        """Is ``target`` reachable from the loop's header inside one iteration, not through
        ``avoid``?"""
        graph = self.fn.cfg
        start = loop.header
        if start is avoid:
            return False
        seen, stack = {start}, [start]
        while stack:
            node = stack.pop()
            if node is target:
                return True
            for succ in graph.successors(node):
                if succ in loop.blocks and succ is not loop.header and succ is not avoid \
                        and succ not in seen:
                    seen.add(succ)
                    stack.append(succ)
        return False

    def trip_bound(self, loop):
        """An upper bound on the iterations of ``loop`` per entry, from a counted exit."""
        key = id(loop)
        if key in self.trip_memo:
            if self.trip_memo[key] is None:
                raise Refused(f"the loop at {loop.header.name} has no counted exit")
            return self.trip_memo[key]
        self.trip_memo[key] = None
        labels = {l for b in loop.blocks for l in b.labels}
        reasons = []
        for block, _outside in loop.exits:
            term = block.terminator
            if term is None or term.guard is None or term.opcode != "bra":
                continue
            try:
                bound = self._counted_exit(loop, block, term, labels)
            except Refused as exc:
                reasons.append(str(exc))
                continue
            if bound is not None:
                self.trip_memo[key] = bound
                return bound
        raise Refused(f"the loop at {loop.header.name} has no counted exit"
                      + (f" ({reasons[0]})" if reasons else ""))

    def _counted_exit(self, loop, block, term: Instruction, labels: set):
        stays = term.operands[0].name in labels     # the taken branch keeps looping
        if term.guard.negated:
            stays = not stays
        return self._bound_from(loop, block, term.guard.reg.name, stays, 0)

    def _bound_from(self, loop, block, pred: str, stays_when_true: bool, depth: int):
        """A trip bound from the predicate of a loop's exit branch: a ``setp`` on a counter, or
        one conjunct of ``and.pred`` (the loop stays only while both hold: either bounds it),
        or one disjunct of ``or.pred`` when the branch leaves on true."""
        d = next((i for i in reversed(block.instructions)
                  if isa.defs(i) and isa.defs(i)[0].name == pred), None)
        if d is None or d.guard is not None or depth > 4:
            return None
        if d.opcode in ("and", "or") and len(d.operands) == 3 and \
                all(isinstance(o, Reg) for o in d.operands[1:]):
            if (d.opcode == "and") == stays_when_true:
                for o in d.operands[1:]:
                    got = self._bound_from(loop, block, o.name, stays_when_true, depth + 1)
                    if got is not None:
                        return got
            return None
        if d.opcode != "setp" or len(d.operands) != 3:
            return None
        setp = d
        cmp = next((m[1:] for m in setp.modifiers if m[1:] in _COMPARES), None)
        if cmp is None:
            return None
        a, b = setp.operands[1], setp.operands[2]
        for var, bound, swapped in ((a, b, False), (b, a, True)):
            if not isinstance(var, Reg):
                continue
            found = self._counter(loop, var.name, block, setp)
            if found is None:
                continue
            counter, step, after = found
            if self._defined_in(loop, bound):
                continue
            test = _SWAP[cmp] if swapped else cmp
            if not stays_when_true:
                test = _INVERT[test]
            return self._iterations(loop, counter, step, after, test, bound, setp)
        return None

    def _defined_in(self, loop, op) -> bool:
        if not isinstance(op, Reg):
            return False
        return any(self.block_of[id(d)] in loop.blocks for d in self.defs.get(op.name, []))

    def _counter(self, loop, name: str, block, setp: Instruction):
        """(counter register, constant step, compared after its update) when ``name`` is a
        recurrence of ``loop`` with one constant-step update, or that update's result."""
        defs = self.defs.get(name, [])
        inside = [d for d in defs if self.block_of[id(d)] in loop.blocks]
        if len(inside) == 1:
            steps = self.chain(inside[0], name)
            if steps is not None and all(isinstance(o, Imm) and not o.is_float for o, _ in steps):
                step = (sum(o.value * sg for o, sg in steps), 1)
                upd = inside[0]
                after = self.block_of[id(upd)] is block and \
                    block.instructions.index(upd) < block.instructions.index(setp)
                if self.block_of[id(upd)] is not block and not self._dominates(upd, setp):
                    return None
                return name, step[0], after
            d = inside[0]
            if d.opcode == "add" and d.guard is None and len(d.operands) == 3 \
                    and isinstance(d.operands[1], Reg) and isinstance(d.operands[2], Imm):
                inner = self._counter(loop, d.operands[1].name, block, setp)
                if inner is not None and inner[1] == d.operands[2].value and not inner[2]:
                    return inner[0], inner[1], True
        return None

    def _dominates(self, a: Instruction, b: Instruction) -> bool:
        ba, bb = self.block_of[id(a)], self.block_of[id(b)]
        return self.fn.dominance.dominates(ba, bb)

    def _iterations(self, loop, counter: str, step: int, after: bool, test: str, bound_op, setp):
        """``1 + max(0, ceil((B - a) / s))`` with ``a`` the first tested value."""
        c = self.code
        if step == 0:
            raise Refused("a loop counter with step 0")
        bits = 64 if (setp.types and type_size(setp.types[0]) == 8) else 32
        unsigned = test in ("lo", "ls", "hi", "hs") or setp.types[0][1] == "u"
        start = self.init_interval(counter)
        bound = self.operand(bound_op, setp, bits)
        if bits == 32:
            self.exact32(start, not unsigned, f"the counter of `{setp}`")
            self.exact32(bound, not unsigned, f"the bound of `{setp}`")
        if unsigned:
            c.require("ge", start.lo, 0, "an unsigned loop test on a negative counter")
            c.require("ge", bound.lo, 0, "an unsigned loop test on a negative bound")
            test = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}.get(test, test)
        k = abs(step)
        if test == "ne" and after:
            # do { ...; c += s } while (c != B): (B - c0) / s iterations when it ends (assumed, see
            # the module doc); none when it is not entered (entered with c0 == B it would run away)
            span = c.sub(bound.hi, start.lo) if step > 0 else c.sub(start.hi, bound.lo)
            span = c.max(span, 0)
            if k > 1:
                span = c.add(span, k - 1)
                span = c.shr(span, k.bit_length() - 1) if k & (k - 1) == 0 else c.div(span, k)
            return span
        if step > 0 and test in ("lt", "le", "ne"):
            first = c.add(start.lo, step if after else 0)
            limit = c.add(bound.hi, 1 if test == "le" else 0)
            span = c.sub(limit, first)
        elif step < 0 and test in ("gt", "ge", "ne"):
            first = c.add(start.hi, step if after else 0)
            limit = c.sub(bound.lo, 1 if test == "ge" else 0)
            span = c.sub(first, limit)
        else:
            raise Refused(f"a loop whose counter steps {step} while its test is `{test}`")
        span = c.max(span, 0)
        if k > 1:
            span = c.add(span, k - 1)
            span = c.shr(span, k.bit_length() - 1) if k & (k - 1) == 0 else c.div(span, k)
        return c.add(span, 1)

    # ----------------------------------------------------------------- addresses
    def address(self, inst: Instruction, a: Addr) -> Interval:
        if not isinstance(a.base, Reg) or a.extra:
            raise Refused(f"`{inst}` addresses memory through {a.base}")
        iv = self.interval(a.base.name, inst)
        off = a.offset or 0
        return Interval(self.code.add(iv.lo, off), self.code.add(iv.hi, off))


@dataclass
class Footprint:
    param: str
    written: bool
    lo: object
    hi: object               # exclusive
    accesses: int


def _global_accesses(fn, analysis: "FootprintAnalysis"):
    """(access, param name) for every access that may reach global memory; raises Refused
    for one whose buffer is not a pointer parameter."""
    out = []
    for acc in fn.memory_accesses:
        if acc.space in (".shared", ".local", ".param", ".const"):
            continue
        base = acc.address.base
        if isinstance(base, Sym):
            if acc.space == "generic":
                continue       # a generic access to a kernel-local variable
            raise Refused(f"`{acc.inst}` reaches a global variable")
        if not isinstance(base, Reg):
            raise Refused(f"`{acc.inst}` has an address the footprint does not model")
        param = analysis.root(base.name)
        if param is None:
            raise Refused(f"`{acc.inst}` reaches a buffer that is not a pointer parameter")
        out.append((acc, param))
    return out


def footprints(fn, code: FootprintAnalysis | None = None) -> tuple[FootprintAnalysis, list[Footprint]]:
    """Every pointer parameter's launch footprint, as emitted code (raises :class:`Refused`)."""
    analysis = code or FootprintAnalysis(fn)
    c = analysis.code
    by_param: dict[str, Footprint] = {}
    for acc, param in _global_accesses(fn, analysis):
        if acc.bytes <= 0:
            raise Refused(f"`{acc.inst}` has no known width")
        iv = analysis.address(acc.inst, acc.address)
        hi = c.add(iv.hi, acc.bytes)
        fp = by_param.get(param)
        written = acc.kind in ("store", "atomic")
        if fp is None:
            by_param[param] = Footprint(param, written, iv.lo, hi, 1)
        else:
            fp.lo, fp.hi = c.min(fp.lo, iv.lo), c.max(fp.hi, hi)
            fp.written = fp.written or written
            fp.accesses += 1
    return analysis, list(by_param.values())


def build_alias_check(fn) -> tuple[AliasCheck | None, str]:
    """The check for ``fn``, or None and why not. The check's registers are new registers of
    ``fn`` (see :class:`AliasCheck`); on refusal ``fn`` may have gained unused declarations, so
    call this on a clone or discard the result."""
    try:
        analysis, fps = footprints(fn)
    except Refused as exc:
        return None, str(exc)
    written = [f for f in fps if f.written]
    if not written:
        return None, "the kernel writes no global buffer"
    if len(fps) < 2:
        return None, "the kernel accesses one global buffer: nothing can alias"
    c = analysis.code
    disjoint = []
    pairs = set()
    for w in written:
        for o in fps:
            if o is w or (o.param, w.param) in pairs:
                continue
            pairs.add((w.param, o.param))
            before, after, both = c.reg(".pred"), c.reg(".pred"), c.reg(".pred")
            c.emit(I("setp", ".le.s64", before, c.operand(w.hi), c.operand(o.lo)),
                   I("setp", ".le.s64", after, c.operand(o.hi), c.operand(w.lo)),
                   I("or", ".pred", both, before, after))
            disjoint.append(both)
    predicate = disjoint[0]
    for p in disjoint[1:] + c.conditions:
        q = c.reg(".pred")
        c.emit(I("and", ".pred", q, predicate, p))
        predicate = q
    if len(c.out) > MAX_CHECK_INSTRUCTIONS:
        return None, f"the check would take {len(c.out)} instructions"
    c.declare()
    names = {p.name: p.name for p in fn.params}
    bounds = {f.param: (_bound(f.lo), _bound(f.hi)) for f in fps}
    known = formulas(c.out)
    ranges = {f.param: f"[{bound_text(bounds[f.param][0], known)}, {bound_text(bounds[f.param][1], known)}) "
                       f"over {f.accesses} accesses" + (" (written)" if f.written else "") for f in fps}
    return AliasCheck(instructions=c.out, predicate=predicate.name,
                      written=[names.get(f.param, f.param) for f in written],
                      compared=[f.param for f in fps], ranges=ranges, bounds=bounds), ""


def _bound(v) -> tuple:
    """A footprint end as the check's code holds it: (register name or None, constant)."""
    v = _v(v)
    return (v.reg.name if v.reg is not None else None, v.k)


def alias_check(fn) -> AliasCheck | None:
    return build_alias_check(fn)[0]
