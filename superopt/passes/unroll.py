"""unroll: unroll counted innermost loops by a factor k, the original loop kept as remainder.

Shape handled (what nvcc leaves rolled: grid-stride loops, ``#pragma unroll 1``-free
loops it chose not to unroll, loops over 64-bit indices ...): a natural loop whose blocks
are one contiguous stretch of the function starting at the header, entered only by
falling through from its preheader, with one latch that ends in ``@[!]p bra HEADER`` and
falls through to the exit, where ``p = setp.CMP iv, B`` reads the induction variable
right after its only update ``iv = iv + step`` in the latch. ``B`` and a register
``step`` are loop-invariant (every reaching definition outside the loop).

Transformation (every memory access and every floating-point operation happens in the
same order as before; the copies are the loop body verbatim, with fresh registers for
values that live within one iteration and fresh labels)::

    G = "the loop would run at least k more iterations from here"
    @!G bra HEADER
    U:   body_1; ...; body_k          (the back edges 1..k-1 dropped: G proved them taken)
         @!cont bra EXIT              (the k-th test, as in the original)
         G = ...; @G bra U
    HEADER: the original loop, unchanged (runs the remaining < k iterations, or all of
            them when G is false at entry)

``G`` is exact, computed without overflow, per the exit test:

* ``lt/le`` with step > 0 (``gt/ge`` with step < 0), constant step: ``iv + c CMP B`` with
  ``c = (k-1)*|step|``, as ``B >= MIN + c && iv CMP B - c`` (resp. ``B <= MAX - c && iv
  CMP B + c``) in the comparison's own signedness and width: then every intermediate
  value is in range, so the wrapping adds of the original reach them exactly.
* a register step (grid-stride loops) moving towards the bound: unsigned ``lt/le`` with
  ``iv += step``, unsigned ``gt/ge`` with ``iv -= step``, signed any of the four with either
  update and a run-time test of the step's sign (``step > 0`` or ``step < 0``):

  - 32-bit: ``iv ± (k-1)*step CMP B`` in 64-bit arithmetic after sign/zero extension
    (every value within +-2^36, so exact).
  - 64-bit (``size_t``/``long long`` indices; nothing to widen to): with ``m`` the step's
    magnitude as an unsigned value (``step``, or ``-step`` when the sign test makes it
    negative) and ``d = B - iv`` (lt/le) or ``iv - B`` (gt/ge) modulo 2^64::

        G = iv CMP B  &&  m <= (2^64-1) / (k-1)  &&  (k-1)*m  <  d     (lt/gt)
                                                               <= d     (le/ge)

    all unsigned except ``iv CMP B``; the first makes ``d`` the exact distance, the
    second makes ``(k-1)*m`` exact (a constant compare, no ``mul.hi`` or division), so
    G is ``iv ± (k-1)*m CMP B`` in exact arithmetic: no add of the next k-1 wraps and
    every test is taken. (k = 2 needs no overflow bound.)
* ``ne`` with a constant power-of-two step: ``d = (B - iv)*sign(step)`` modulo 2^w, and
  ``d >= k*|step|`` (unsigned): the counter cannot hit ``B`` within the next k-1 updates.

Not unrolled: loops with barriers, warp-synchronous or ``.aligned`` instructions (threads
of one warp could run different copies), calls, ``ret``/``exit``, indirect branches; loops
already marked ``.pragma "nounroll"`` (nvcc's remainder loops and ``#pragma unroll 1``);
loops whose unrolled body would exceed ``max_instructions``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ptx_ir import isa
from ptx_ir.dataflow import ENTRY
from ptx_ir.nodes import (
    Directive, Guard, Imm, Instruction, Label, Reg, ScopeClose, ScopeOpen, Sym, VarDecl,
    type_size,
)

from superopt.passes import Change, register
from superopt.passes._loop_tools import I, bra, label_of_block, register_type

NO_DUPLICATE = frozenset({
    "bar", "barrier", "shfl", "vote", "match", "redux", "activemask", "elect", "mbarrier",
    "wgmma", "mma", "wmma", "ldmatrix", "stmatrix", "movmatrix", "call", "ret", "exit", "brx",
    "trap", "setmaxnreg", "griddepcontrol", "tcgen05", "clusterlaunchcontrol", "alloca",
    "stacksave", "stackrestore",
})
INC = {"lt", "le"}
DEC = {"gt", "ge"}
FLIP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq", "ne": "ne"}
INVERT = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}
UNSIGNED_NAMES = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def has_nounroll(fn, header) -> bool:
    """True when the header block carries ``.pragma "nounroll";``."""
    body = fn.body
    first = header.instructions[0] if header.instructions else None
    if first is None:
        return False
    i = next(k for k, s in enumerate(body) if s is first)
    j = i - 1
    while j >= 0 and not isinstance(body[j], Instruction):
        s = body[j]
        if isinstance(s, Directive) and s.name == ".pragma" \
                and any("nounroll" in str(a) for a in s.args):
            return True
        if isinstance(s, Label) and s.name not in header.labels:
            break
        j -= 1
    return False


@dataclass(eq=False)
class LoopPlan:
    loop: object
    header: object
    latch: object
    exit_block: object
    first: object               # first statement of the loop's stretch (header label)
    last: Instruction           # the latch terminator
    statements: list            # the stretch, in order
    term: Instruction
    setp: Instruction
    update: Instruction
    iv: Reg
    width: int
    signed: bool
    op: str                     # continue while: iv OP bound (lt le gt ge ne)
    bound: object               # Imm | Reg
    step: object                # int | Reg
    locals: dict = field(default_factory=dict)   # iteration-local reg -> type
    step_sign: int = 1          # register step: iv = iv + step (1) or iv - step (-1)

    @property
    def body_size(self) -> int:
        return sum(1 for s in self.statements if isinstance(s, Instruction))


def _signed_value(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _invariant(fn, loop, at: Instruction, op) -> bool:
    if isinstance(op, Imm):
        return not op.is_float
    if not isinstance(op, Reg):
        return False
    if op.is_special:
        return True
    defs = fn.def_use.definitions(at, op.name)
    return bool(defs) and all(d != ENTRY and fn.block_of(d) not in loop.blocks for d in defs)


def analyse_loop(fn, loop, *, allow_pragma: bool = False) -> LoopPlan | None:
    """The facts an unrolling needs, or None when the loop is not of the handled shape."""
    if loop.children or len(loop.latches) != 1:
        return None
    header, latch = loop.header, loop.latches[0]
    blocks = fn.blocks
    idx = sorted(blocks.index(b) for b in loop.blocks)
    if idx != list(range(idx[0], idx[-1] + 1)) or blocks[idx[0]] is not header \
            or blocks[idx[-1]] is not latch:
        return None
    if not allow_pragma and has_nounroll(fn, header):
        return None
    term = latch.terminator
    if term is None or term.opcode != "bra" or term.guard is None \
            or not isinstance(term.operands[0], Sym) or term.operands[0].name not in header.labels:
        return None
    if idx[-1] + 1 >= len(blocks):
        return None
    exit_block = blocks[idx[-1] + 1]
    # entered only by falling through from the block before it
    pre = blocks[idx[0] - 1] if idx[0] > 0 else None
    outside_preds = [p for p in fn.cfg.predecessors(header) if p not in loop.blocks]
    if pre is None or outside_preds != [pre]:
        return None
    pt = pre.terminator
    if pt is not None and (pt.guard is None or pt.opcode != "bra"
                           or pt.operands[0].name in header.labels):
        return None
    for inst in fn.instructions:
        if inst.opcode in ("bra", "brx") and fn.block_of(inst) not in loop.blocks \
                and any(isinstance(o, Sym) and o.name in header.labels for o in inst.operands):
            return None
    for b in loop.blocks:
        for inst in b.instructions:
            if inst.opcode in NO_DUPLICATE or ".aligned" in inst.modifiers:
                return None
    # the exit test
    pred = term.guard.reg.name
    defs = fn.def_use.definitions(term, pred)
    if len(defs) != 1 or defs[0] == ENTRY:
        return None
    setp = defs[0]
    if setp.opcode != "setp" or setp.guard is not None or len(setp.operands) != 3 \
            or fn.block_of(setp) is not latch:
        return None
    cmp = next((m[1:] for m in setp.modifiers if m[1:] in
                {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}), None)
    t = setp.type
    if cmp is None or t is None or t[1] not in "usb" or type_size(t) not in (4, 8):
        return None
    width = type_size(t) * 8
    signed = t.startswith(".s")
    if cmp in UNSIGNED_NAMES:
        cmp, signed = UNSIGNED_NAMES[cmp], False
    a, b = setp.operands[1], setp.operands[2]
    plan = None
    for iv, other, op in ((a, b, cmp), (b, a, FLIP[cmp])):
        if not isinstance(iv, Reg):
            continue
        ivdefs = fn.def_use.definitions(setp, iv.name)
        if len(ivdefs) != 1 or ivdefs[0] == ENTRY:
            continue
        update = ivdefs[0]
        if fn.block_of(update) is not latch or update.guard is not None:
            continue
        in_loop = [i for bb in loop.blocks for i in bb.instructions
                   if any(r.name == iv.name for r in isa.defs(i))]
        if in_loop != [update] or update.opcode not in ("add", "sub") \
                or len(update.operands) != 3 or update.type is None \
                or type_size(update.type) * 8 != width:
            continue
        ua, ub = update.operands[1], update.operands[2]
        step = None
        step_sign = 1
        if isinstance(ua, Reg) and ua.name == iv.name:
            step_op = ub
        elif update.opcode == "add" and isinstance(ub, Reg) and ub.name == iv.name:
            step_op = ua
        else:
            continue
        if isinstance(step_op, Imm) and not step_op.is_float:
            sv = _signed_value(int(step_op.value), width)
            step = -sv if update.opcode == "sub" else sv
            step = _signed_value(step, width)
        elif _invariant(fn, loop, update, step_op) and isinstance(step_op, Reg) \
                and not step_op.is_special:
            step = step_op
            step_sign = -1 if update.opcode == "sub" else 1
        else:
            continue
        if not _invariant(fn, loop, setp, other):
            continue
        if isinstance(other, Reg) and other.is_special:
            continue
        if term.guard.negated:
            op = INVERT[op]
        plan = LoopPlan(loop, header, latch, exit_block, None, term, [], term, setp, update,
                        iv, width, signed, op, other, step, step_sign=step_sign)
        break
    if plan is None or not _guard_possible(plan) or not header.labels:
        return None
    # the stretch of statements: from the header's first label to the latch's branch
    body = fn.body
    i = next(k for k, st in enumerate(body) if isinstance(st, Label) and st.name == header.labels[0])
    j = next(k for k, st in enumerate(body) if st is term)
    stretch = body[i:j + 1]
    loop_insts = {id(x) for bb in loop.blocks for x in bb.instructions}
    if {id(s) for s in stretch if isinstance(s, Instruction)} != loop_insts:
        return None
    depth = 0
    for s in stretch:
        depth += isinstance(s, ScopeOpen) - isinstance(s, ScopeClose)
        if depth < 0:
            return None
    if depth:
        return None
    plan.first = stretch[0]
    plan.statements = stretch
    if len(loop.blocks) == 1:
        plan.locals = _iteration_locals(fn, loop, header)
    return plan


def _guard_possible(p: LoopPlan) -> bool:
    if isinstance(p.step, int):
        if p.step == 0:
            return False
        if p.op in INC:
            return p.step > 0
        if p.op in DEC:
            return p.step < 0
        if p.op == "ne":
            s = abs(p.step)
            return s & (s - 1) == 0
        return False
    # register step: the direction must be provable (by a run-time test of
    # the step's sign for signed comparisons)
    return _register_step_check(p) is not False


def _register_step_check(p: LoopPlan):
    """For a register step: None (no run-time test needed), ``("gt"|"lt", 0)`` (the
    step must compare so with 0 at run time), or False (direction not provable)."""
    if p.op in INC:
        if p.step_sign > 0:
            return ("gt", 0) if p.signed else None
        return ("lt", 0) if p.signed else False
    if p.op in DEC:
        if p.step_sign > 0:
            return ("lt", 0) if p.signed else False
        return ("gt", 0) if p.signed else None
    return False


def _iteration_locals(fn, loop, header) -> dict:
    """Registers every iteration writes (unguarded) before reading, not read after the loop."""
    defined: dict = {}            # insertion-ordered: deterministic renaming
    carried: set = set()
    for inst in header.instructions:
        for r in isa.uses(inst):
            if not r.is_special and r.name not in defined:
                carried.add(r.name)
        if inst.guard is None:
            for r in isa.defs(inst):
                defined.setdefault(r.name, None)
    cands = {r: None for r in defined if r not in carried}
    # not live after the loop
    loop_ids = {id(i) for i in header.instructions}
    for inst in fn.instructions:
        if id(inst) in loop_ids:
            continue
        for r in isa.uses(inst):
            if r.name in cands and any(d != ENTRY and id(d) in loop_ids
                                       for d in fn.def_use.definitions(inst, r.name)):
                cands.pop(r.name, None)
    depth = 0
    scoped_names = set()
    for s in fn.body:
        depth += isinstance(s, ScopeOpen) - isinstance(s, ScopeClose)
        if depth > 0 and isinstance(s, VarDecl):
            scoped_names.update(s.register_names())
    out = {}
    for name in cands:
        if name in scoped_names:
            continue
        t = register_type(fn, name)
        if t is not None:
            out[name] = t
    return out


# --------------------------------------------------------------------------- guard code


def _never(p: LoopPlan, k: int) -> bool:
    """True when the guard is false for every value (a constant bound out of reach)."""
    if not (isinstance(p.step, int) and isinstance(p.bound, Imm) and p.op in INC | DEC):
        return False
    w = p.width
    lo = -(1 << (w - 1)) if p.signed else 0
    hi = (1 << (w - 1)) - 1 if p.signed else (1 << w) - 1
    b = int(p.bound.value)
    b = _signed_value(b, w) if p.signed else b & ((1 << w) - 1)
    c = (k - 1) * abs(p.step)
    return b - c < lo if p.op in INC else b + c > hi


class _Never(Exception):
    """The guard is false for every value: unrolling would be dead code."""


def _literal(v: int) -> Imm:
    return Imm(str(v))


def guard_code(fn, p: LoopPlan, k: int) -> tuple[list[Instruction], Reg]:
    """Instructions computing G = 'the loop runs at least k more iterations'."""
    w = p.width
    tchar = "s" if p.signed else "u"
    T = f"{tchar}{w}"
    lo = -(1 << (w - 1)) if p.signed else 0
    hi = (1 << (w - 1)) - 1 if p.signed else (1 << w) - 1
    g = fn.new_register(".pred")
    out: list[Instruction] = []
    B = p.bound
    bval = None
    if isinstance(B, Imm):
        bval = int(B.value)
        bval = _signed_value(bval, w) if p.signed else bval & ((1 << w) - 1)
    if isinstance(p.step, int) and p.op in INC | DEC:
        c = (k - 1) * abs(p.step)
        if p.op in INC:
            if bval is not None:
                limit = bval - c
                if limit < lo:
                    raise _Never()
                out.append(I("setp", f"{p.op}.{T}", g, p.iv, _literal(limit)))
            else:
                t = fn.new_register(f".b{w}")
                out += [I("setp", f"ge.{T}", g, B, _literal(lo + c)),
                        I("sub", f"s{w}", t, B, _literal(c)),
                        I("setp", f"{p.op}.and.{T}", g, p.iv, t, g)]
        else:
            if bval is not None:
                limit = bval + c
                if limit > hi:
                    raise _Never()
                out.append(I("setp", f"{p.op}.{T}", g, p.iv, _literal(limit)))
            else:
                t = fn.new_register(f".b{w}")
                out += [I("setp", f"le.{T}", g, B, _literal(hi - c)),
                        I("add", f"s{w}", t, B, _literal(c)),
                        I("setp", f"{p.op}.and.{T}", g, p.iv, t, g)]
        return out, g
    if isinstance(p.step, int) and p.op == "ne":
        d = fn.new_register(f".b{w}")
        if isinstance(B, Imm):
            bt = fn.new_register(f".b{w}")
            out.append(I("mov", f"b{w}", bt, B))
            B = bt
        if p.step > 0:
            out.append(I("sub", f"s{w}", d, B, p.iv))
        else:
            out.append(I("sub", f"s{w}", d, p.iv, B))
        out.append(I("setp", f"ge.u{w}", g, d, _literal(k * abs(p.step))))
        return out, g
    if w == 64:
        return _guard_code_register64(fn, p, k, g)
    # register step, 32-bit: the exact values (sign- or zero-extended) in 64-bit
    # arithmetic, all within +-2^36, compared as signed 64-bit integers
    ext = "s64.s32" if p.signed else "u64.u32"
    iv64, st64, t64 = (fn.new_register(".b64") for _ in range(3))
    out += [I("cvt", ext, iv64, p.iv), I("cvt", ext, st64, p.step),
            I("mad", "lo.s64", t64, st64, p.step_sign * (k - 1), iv64)]
    if bval is not None:
        b_op = _literal(bval)
    else:
        b64 = fn.new_register(".b64")
        out.append(I("cvt", ext, b64, B))
        b_op = b64
    out.append(I("setp", f"{p.op}.s64", g, t64, b_op))
    check = _register_step_check(p)
    if check:
        out.append(I("setp", f"{check[0]}.and.s32", g, p.step, check[1], g))
    return out, g


def _guard_code_register64(fn, p: LoopPlan, k: int, g: Reg) -> tuple[list[Instruction], Reg]:
    """G for a 64-bit comparison with a register step, where nothing can be widened.

    With ``m`` the distance the counter moves per iteration towards the bound, as an
    unsigned value (``step``, or ``-step`` where the run-time sign test makes ``step``
    negative), and ``d`` the distance from the counter to the bound (``B - iv`` for lt/le,
    ``iv - B`` for gt/ge, modulo 2^64)::

        G = iv OP B                       (then d is exact: 0 <= d < 2^64)
            && m <= (2^64-1) // (k-1)     (then (k-1)*m is exact in 64 bits)
            && (k-1)*m < d   (lt/gt)  or  (k-1)*m <= d   (le/ge)
            [&& step > 0 or step < 0, signed comparisons]

    i.e. ``iv + (k-1)*m OP B`` (``iv - ...`` for gt/ge) in exact arithmetic: every one of
    the next k-1 values lies between ``iv`` and the bound, so the wrapping updates of the
    original reach them exactly (no wrap, no signed overflow) and every test is taken.
    """
    T = f"{'s' if p.signed else 'u'}64"
    out: list[Instruction] = []
    B = p.bound
    if isinstance(B, Imm):
        bt = fn.new_register(".b64")
        out.append(I("mov", "b64", bt, B))
        B = bt
    check = _register_step_check(p)
    if check and check[0] == "lt":
        m = fn.new_register(".b64")
        out.append(I("neg", "s64", m, p.step))
    else:
        m = p.step
    d = fn.new_register(".b64")
    out.append(I("sub", "s64", d, *((B, p.iv) if p.op in INC else (p.iv, B))))
    out.append(I("setp", f"{p.op}.{T}", g, p.iv, B))
    if k > 2:
        t = fn.new_register(".b64")
        out += [I("setp", "le.and.u64", g, m, _literal(((1 << 64) - 1) // (k - 1)), g),
                I("mul", "lo.s64", t, m, k - 1)]
    else:
        t = m
    strict = p.op in ("lt", "gt")
    out.append(I("setp", f"{'lt' if strict else 'le'}.and.u64", g, t, d, g))
    if check:
        out.append(I("setp", f"{check[0]}.and.s64", g, p.step, check[1], g))
    return out, g


# --------------------------------------------------------------------------- apply


class _Labels:
    def __init__(self, fn):
        self.taken = {s.name for s in fn.body if isinstance(s, Label)}

    def fresh(self, hint: str) -> str:
        n = 0
        while f"$Lnp_{hint}_{n}" in self.taken:
            n += 1
        name = f"$Lnp_{hint}_{n}"
        self.taken.add(name)
        return name


def _rename_operand(op, regs: dict, labels: dict):
    from ptx_ir.nodes import Addr, Neg, Pair, Vec
    if isinstance(op, Reg):
        return regs.get(op.name, op)
    if isinstance(op, Sym):
        return Sym(labels[op.name]) if op.name in labels else op
    if isinstance(op, Addr):
        return Addr(_rename_operand(op.base, regs, labels), op.offset,
                    tuple(_rename_operand(x, regs, labels) for x in op.extra))
    if isinstance(op, Vec):
        return Vec(tuple(_rename_operand(x, regs, labels) for x in op.items))
    if isinstance(op, Pair):
        return Pair(_rename_operand(op.first, regs, labels), _rename_operand(op.second, regs, labels))
    if isinstance(op, Neg):
        return Neg(_rename_operand(op.operand, regs, labels))
    return op


def copy_body(fn, plan: LoopPlan, labels: _Labels, hint: str, rename: bool = True) -> list:
    """One copy of the loop stretch with fresh labels (and fresh iteration-local registers);
    the latch terminator left out."""
    lmap = {s.name: labels.fresh(hint) for s in plan.statements if isinstance(s, Label)}
    rmap = {name: fn.new_register(t) for name, t in plan.locals.items()} if rename else {}
    out = []
    for s in plan.statements:
        if s is plan.term:
            continue
        if isinstance(s, Label):
            out.append(Label(lmap[s.name]))
        elif isinstance(s, Instruction):
            new = s.copy()
            new.operands = tuple(_rename_operand(o, rmap, lmap) for o in s.operands)
            if s.guard is not None:
                new.guard = Guard(rmap.get(s.guard.reg.name, s.guard.reg), s.guard.negated)
            out.append(new)
        elif isinstance(s, Directive):
            if s.name == ".pragma":
                continue
            out.append(Directive(s.name, list(s.args), s.terminated))
        elif isinstance(s, (ScopeOpen, ScopeClose)):
            out.append(type(s)())
        elif isinstance(s, VarDecl):
            out.append(copy.copy(s))        # a scope's own register declarations
    return out, rmap


def unroll_loop(fn, plan: LoopPlan, k: int) -> None:
    labels = _Labels(fn)
    exit_label = label_of_block(fn, plan.exit_block)
    labels.taken.add(exit_label)
    header_label = plan.header.labels[0]
    u_head = labels.fresh("unroll")
    entry_code, g0 = guard_code(fn, plan, k)
    new: list = [*entry_code, bra(header_label, Guard(g0, negated=True)), Label(u_head)]
    for m in range(k):
        body, rmap = copy_body(fn, plan, labels, "u")
        new += body
    term = plan.term
    # the k-th test: leave when the original would
    new.append(bra(exit_label, Guard(rmap.get(term.guard.reg.name, term.guard.reg),
                                     not term.guard.negated)))
    again, g1 = guard_code(fn, plan, k)
    new += [*again, bra(u_head, Guard(g1))]
    fn.insert_before(plan.first, new)


def has_backward_branch(fn) -> bool:
    """Cheap syntactic test for loops: a branch to a label defined earlier in the body."""
    seen = set()
    for s in fn.body or ():
        if isinstance(s, Label):
            seen.add(s.name)
        elif isinstance(s, Instruction) and s.opcode == "bra" and s.operands \
                and isinstance(s.operands[0], Sym) and s.operands[0].name in seen:
            return True
    return False


def loop_plans(fn, **kw) -> list[LoopPlan]:
    if not has_backward_branch(fn):
        return []
    plans = []
    for loop in fn.loops:
        plan = analyse_loop(fn, loop, **kw)
        if plan is not None:
            plans.append(plan)
    return plans


@register(
    name="unroll",
    order=40,
    summary="unroll counted innermost loops by k (2/4/8); the original loop runs the remainder",
    assumes="single-latch innermost loop, contiguous, entered by fall-through; exit test "
            "'iv CMP bound' right after the only update iv += step (step constant, or a "
            "loop-invariant register moving towards the bound: unsigned lt/le with +=, unsigned "
            "gt/ge with -=, signed with a run-time test of its sign; 32 or 64 bits); bound "
            "loop-invariant. "
            "The unrolled path is taken only when an overflow-free test proves k more "
            "iterations; no barriers, warp-synchronous/.aligned instructions or calls in the loop",
    params={"factor": [2, 4, 8]},
)
def unroll(fn, *, factor: int = 4, max_instructions: int = 400) -> list[Change]:
    if factor not in (2, 3, 4, 5, 6, 7, 8, 16):
        raise ValueError(f"unsupported unroll factor {factor}")
    if fn.is_declaration:
        return []
    changes = []
    plans = loop_plans(fn)
    for plan in plans:
        if plan.body_size * factor > max_instructions:
            continue
        trip = plan.loop.trip_count
        if trip is not None and trip < factor:
            continue
        if _never(plan, factor):
            continue
        step = plan.step if isinstance(plan.step, int) or plan.step_sign > 0 else f"-{plan.step}"
        desc = (f"loop {plan.header.name}: unrolled x{factor} "
                f"(exit test {plan.op} on {plan.iv}, step {step}; remainder in the original loop)")
        unroll_loop(fn, plan, factor)
        changes.append(Change(desc, plan.term))
    return changes
