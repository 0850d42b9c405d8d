"""address-arithmetic: hoist loop-invariant index math, strength-reduce induction-variable
products, and divide by loop-invariant integers with multiply-high.

Three parts (``parts``: ``all``, ``hoist`` = the first two, ``divide`` = the third):

**Hoisting.** A pure integer instruction in a loop (``add sub mul mad shl shr and or xor
not neg min max cvt cvta mov selp bfe prmt mul24 mad24``) whose operands are all
loop-invariant (literals, special registers, registers with every reaching definition
outside the loop) and whose destination has no other definition in the whole function
moves to the loop's preheader (repeatedly, so chains move). It computes the same value;
when the loop would not have executed it, the register was never written, so no reader
saw a defined value that changes.

**Strength reduction.** For a basic induction variable (its only definition in the loop is
``iv = iv + step``, step a literal or loop-invariant), a 64-bit ``mul.lo t, iv, C`` /
``mad.lo t, iv, C, X`` (C a literal or loop-invariant) becomes a register ``T`` kept equal
to ``iv*C``: set in the preheader, advanced by ``step*C`` right after the update. All of
it is arithmetic modulo 2^64, a ring, so ``T == iv*C`` holds exactly, wraparound
included. (32-bit products are left: an IMAD costs what the IADD replacing it costs.)
Widening products (``mul.wide``, ``cvt`` of the index) are left alone: there,
``sext(iv + step) != sext(iv) + step`` when the 32-bit index wraps.

**Division by a loop-invariant divisor.** ``div``/``rem`` ``.u32``/``.s32`` inside a loop,
by a register that is loop-invariant (a kernel scalar, ``%ntid.x``), become the
Granlund–Montgomery round-up method (PLDI 1994, fig. 4.1), with the magic number computed
once in the preheader: for 1 <= d < 2^32, ``l = ceil(log2 d)``, ``m = floor(2^32 (2^l -
d) / d) + 1`` (a 64-bit division, once), ``t = mulhi(m, n)``, ``q = (t + ((n - t) >>
min(l,1))) >> max(l-1,0)``: exact for every 0 <= n < 2^32 (their Theorem 4.2; checked by
tests exhaustively at 12 bits, where the same construction applies, and on edge values at
32 bits by executing the emitted instructions). Remainders are ``n - q*d``. Signed
division divides ``|n|`` by ``|d|`` (both fit in u32) and applies the sign (truncation
toward zero, as ``div.s32``). The divisors whose result PTX leaves unspecified (0, and
-1 for signed: ``MIN/-1``) keep the original instruction, selected by a uniform predicate.
"""
from __future__ import annotations

from ptx_ir import isa
from ptx_ir.dataflow import ENTRY
from ptx_ir.nodes import Guard, Imm, Instruction, Reg, Sym, type_size

from superopt.passes import Change, register
from superopt.passes._loop_tools import I, scoped_instructions
from superopt.passes.unroll import has_backward_branch

HOISTABLE = frozenset({"add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not",
                       "neg", "min", "max", "cvt", "cvta", "mov", "selp", "bfe", "prmt",
                       "mul24", "mad24"})


# --------------------------------------------------------------------------- helpers


def _preheader(fn, loop):
    preds = [p for p in fn.cfg.predecessors(loop.header) if p not in loop.blocks]
    return preds[0] if len(preds) == 1 else None


def _insert_in_preheader(fn, pre, insts):
    term = pre.terminator
    if term is not None:
        fn.insert_before(term, insts)
    else:
        fn.insert_after(pre.instructions[-1], insts)


def _invariant(fn, loop, at: Instruction, op) -> bool:
    if isinstance(op, Imm):
        return True
    if isinstance(op, Sym):
        return True
    if not isinstance(op, Reg):
        return False
    if op.is_special:
        # not %warpid or %smid: the PTX ISA calls them volatile (a thread may move to another
        # warp slot or SM while it runs), so a loop that reads them each time is left as it is
        return op.name.split(".")[0] in ("%ntid", "%nctaid", "%ctaid", "%tid", "%nsmid",
                                         "%gridid", "%nwarpid", "%laneid", "%cluster_ctaid", "%cluster_nctaid",
                                         "%clusterid", "%nclusterid", "%cluster_ctarank",
                                         "%cluster_nctarank", "%dynamic_smem_size",
                                         "%total_smem_size")
    defs = fn.def_use.definitions(at, op.name)
    return bool(defs) and all(d != ENTRY and fn.block_of(d) not in loop.blocks for d in defs)


def _all_defs(fn) -> dict:
    out: dict = {}
    for inst in fn.instructions:
        for r in isa.defs(inst):
            out.setdefault(r.name, []).append(inst)
    return out


def _reg_type(fn, name: str) -> str | None:
    from superopt.passes._loop_tools import register_type
    return register_type(fn, name)


# --------------------------------------------------------------------------- hoisting


def _hoistable(fn, loop, inst, defs) -> bool:
    if inst.opcode not in HOISTABLE or inst.guard is not None:
        return False
    if inst.opcode == "cvt" and not all(t[1] in "us" for t in inst.types):
        return False
    if not inst.operands or not isinstance(inst.operands[0], Reg):
        return False
    dst = inst.operands[0]
    if dst.is_special or len(defs.get(dst.name, [])) != 1:
        return False
    return all(_invariant(fn, loop, inst, op) for op in inst.operands[1:])


def hoist(fn) -> list[Change]:
    changes = []
    for _ in range(32):
        defs = _all_defs(fn)
        scoped = scoped_instructions(fn)
        loops = sorted(fn.loops, key=lambda l: (len(l.blocks), l.header.index))
        moves = []
        moved: set = set()
        receiving: set = set()          # preheaders that get instructions this round
        for loop in loops:
            pre = _preheader(fn, loop)
            if pre is None:
                continue
            picked = []
            for block in sorted(loop.blocks, key=lambda b: b.index):
                if block in receiving:
                    continue            # its anchor must stay put during this round
                for inst in block.instructions:
                    if id(inst) not in moved and id(inst) not in scoped \
                            and _hoistable(fn, loop, inst, defs):
                        picked.append(inst)
                        moved.add(id(inst))
            if picked:
                moves.append((loop, pre, picked))
                receiving.add(pre)
        if not moves:
            break
        for loop, pre, picked in moves:
            for inst in picked:
                fn.remove(inst)
            _insert_in_preheader(fn, pre, picked)
            for inst in picked:
                changes.append(Change(f"hoisted {inst.name} {inst.operands[0]} out of loop "
                                      f"{loop.header.name}", inst))
    return changes


# --------------------------------------------------------------------------- strength reduction


def _basic_ivs(fn, loop) -> dict:
    """iv name -> (update instruction, step operand)."""
    inside: dict = {}
    for b in loop.blocks:
        for inst in b.instructions:
            for r in isa.defs(inst):
                inside.setdefault(r.name, []).append(inst)
    out = {}
    for name, insts in inside.items():
        if len(insts) != 1:
            continue
        u = insts[0]
        if u.opcode != "add" or u.guard is not None or len(u.operands) != 3 or u.type is None:
            continue
        a, b = u.operands[1], u.operands[2]
        if isinstance(a, Reg) and a.name == name:
            step = b
        elif isinstance(b, Reg) and b.name == name:
            step = a
        else:
            continue
        if isinstance(step, Imm) and step.is_float:
            continue
        if not _invariant(fn, loop, u, step):
            continue
        out[name] = (u, step)
    return out


def strength_reduce(fn) -> list[Change]:
    changes = []
    for _ in range(32):
        done = False
        for loop in fn.loops:
            pre = _preheader(fn, loop)
            if pre is None:
                continue
            ivs = _basic_ivs(fn, loop)
            if not ivs:
                continue
            scoped = scoped_instructions(fn)
            for block in sorted(loop.blocks, key=lambda b: b.index):
                for inst in block.instructions:
                    if id(inst) in scoped:
                        continue
                    plan = _sr_candidate(fn, loop, inst, ivs)
                    if plan is None:
                        continue
                    _apply_sr(fn, pre, inst, *plan)
                    changes.append(Change(f"strength-reduced {inst.name} of induction variable "
                                          f"{plan[0]} in loop {loop.header.name}", inst))
                    done = True
                    break
                if done:
                    break
            if done:
                break
        if not done:
            break
    return changes


def _sr_candidate(fn, loop, inst, ivs):
    if inst.guard is not None or not inst.operands or not isinstance(inst.operands[0], Reg):
        return None
    op = inst.opcode
    mods = inst.modifiers
    t = inst.type
    if t is None or t[1] not in "usb":
        return None
    width = type_size(t) * 8
    if width != 64:
        return None     # a 32-bit IMAD costs what the IADD replacing it costs
    if op == "mul" and ".lo" in mods and len(inst.operands) == 3:
        srcs = inst.operands[1:]
        extra = None
    elif op == "mad" and ".lo" in mods and len(inst.operands) == 4:
        srcs = inst.operands[1:3]
        extra = inst.operands[3]
    else:
        return None
    for iv_pos in (0, 1):
        iv, factor = srcs[iv_pos], srcs[1 - iv_pos]
        if not isinstance(iv, Reg) or iv.name not in ivs:
            continue
        update, step = ivs[iv.name]
        if type_size(update.type) * 8 != width:
            continue
        # the value read here is the induction variable itself (defined by the update or
        # the preheader), not some other register of the same name
        if not _invariant(fn, loop, inst, factor):
            continue
        if extra is not None and not _invariant(fn, loop, inst, extra):
            continue
        if isinstance(factor, Imm) and factor.is_float:
            continue
        if inst is update:
            continue
        return iv.name, update, step, factor, extra, width
    return None


def _apply_sr(fn, pre, inst, iv, update, step, factor, extra, width):
    w = width
    T = fn.new_register(f".b{w}")
    delta = fn.new_register(f".b{w}")
    if isinstance(step, Imm) and isinstance(factor, Imm):
        value = (int(step.value) * int(factor.value)) % (1 << w)
        init = [I("mul", f"lo.s{w}", T, Reg(iv), factor), I("mov", f"b{w}", delta, value)]
    else:
        init = [I("mul", f"lo.s{w}", T, Reg(iv), factor), I("mul", f"lo.s{w}", delta, step, factor)]
    _insert_in_preheader(fn, pre, init)
    fn.insert_after(update, I("add", f"s{w}", T, T, delta))
    dst = inst.operands[0]
    if extra is None:
        fn.replace(inst, I("mov", f"b{w}", dst, T))
    else:
        fn.replace(inst, I("add", f"s{w}", dst, T, extra))


# --------------------------------------------------------------------------- division


def magic_model(n: int, d: int, bits: int = 32) -> int:
    """floor(n / d) by exactly the steps the pass emits (for tests), 1 <= d < 2^bits."""
    mask = (1 << bits) - 1
    l = ((d - 1) & mask).bit_length()          # ceil(log2 d) = bits - clz(d - 1)
    m = ((((1 << l) - d) << bits) // d + 1) & mask
    t = (m * n) >> bits
    sh1 = min(l, 1)
    sh2 = max(l - 1, 0)
    return ((t + ((n - t) >> sh1)) & mask) >> sh2


def _magic_setup(fn, d, signed: bool) -> tuple[list[Instruction], dict]:
    """Instructions (for the preheader) computing the magic of |d| and the fallback
    predicate; returns them and the registers."""
    r = {k: fn.new_register(t) for k, t in (
        ("pz", ".pred"), ("ad", ".b32"), ("ad1", ".b32"), ("dm1", ".b32"), ("z", ".b32"),
        ("l", ".b32"), ("d64", ".b64"), ("p2l", ".b64"), ("num", ".b64"), ("mq", ".b64"),
        ("m", ".b32"), ("sh1", ".b32"), ("lm1", ".b32"), ("sh2", ".b32"))}
    out = []
    if signed:
        out += [I("setp", "eq.s32", r["pz"], d, 0), I("setp", "eq.or.s32", r["pz"], d, -1, r["pz"]),
                I("abs", "s32", r["ad"], d)]
    else:
        out += [I("setp", "eq.u32", r["pz"], d, 0), I("mov", "b32", r["ad"], d)]
    out += [
        I("selp", "b32", r["ad1"], 1, r["ad"], r["pz"]),      # keep the setup defined for d = 0
        I("add", "s32", r["dm1"], r["ad1"], -1),
        I("clz", "b32", r["z"], r["dm1"]),
        I("sub", "s32", r["l"], 32, r["z"]),                   # l = ceil(log2 |d|)
        I("cvt", "u64.u32", r["d64"], r["ad1"]),
        I("shl", "b64", r["p2l"], 1, r["l"]),
        I("sub", "s64", r["num"], r["p2l"], r["d64"]),
        I("shl", "b64", r["num"], r["num"], 32),
        I("div", "u64", r["mq"], r["num"], r["d64"]),
        I("cvt", "u32.u64", r["m"], r["mq"]),
        I("add", "s32", r["m"], r["m"], 1),
        I("min", "u32", r["sh1"], r["l"], 1),
        I("add", "s32", r["lm1"], r["l"], -1),
        I("max", "s32", r["sh2"], r["lm1"], 0),
    ]
    return out, r


def _udiv_seq(fn, n, r, q, g: Guard) -> list[Instruction]:
    t1, t2, t3, t4 = (fn.new_register(".b32") for _ in range(4))
    return [I("mul", "hi.u32", t1, n, r["m"], guard=g),
            I("sub", "s32", t2, n, t1, guard=g),
            I("shr", "u32", t3, t2, r["sh1"], guard=g),
            I("add", "s32", t4, t1, t3, guard=g),
            I("shr", "u32", q, t4, r["sh2"], guard=g)]


def _division_code(fn, inst, r) -> list[Instruction]:
    op = inst.opcode
    signed = inst.type == ".s32"
    dst, n, d = inst.operands
    fast = Guard(r["pz"], negated=True)
    out = [inst.with_(guard=Guard(r["pz"]))]            # the original, for d = 0 (and -1)
    if signed:
        an = fn.new_register(".b32")
        uq = fn.new_register(".b32")
        sg = fn.new_register(".b32")
        flip = fn.new_register(".b32")
        q = fn.new_register(".b32") if op == "rem" else dst
        out += [I("abs", "s32", an, n, guard=fast), *_udiv_seq(fn, an, r, uq, fast),
                I("xor", "b32", sg, n, d, guard=fast), I("shr", "s32", sg, sg, 31, guard=fast),
                I("xor", "b32", flip, uq, sg, guard=fast),
                I("sub", "s32", q, flip, sg, guard=fast)]
    else:
        q = fn.new_register(".b32") if op == "rem" else dst
        out += _udiv_seq(fn, n, r, q, fast)
    if op == "rem":
        p = fn.new_register(".b32")
        out += [I("mul", "lo.s32", p, q, d, guard=fast), I("sub", "s32", dst, n, p, guard=fast)]
    return out


def divide(fn) -> list[Change]:
    changes = []
    setups: dict = {}
    work = []
    loops = sorted(fn.loops, key=lambda l: -len(l.blocks))      # outermost first
    scoped = scoped_instructions(fn)
    for inst in fn.instructions:
        if id(inst) in scoped:
            continue
        if inst.opcode not in ("div", "rem") or inst.guard is not None \
                or inst.type not in (".u32", ".s32") or len(inst.operands) != 3:
            continue
        dst, n, d = inst.operands
        if not isinstance(dst, Reg) or not isinstance(d, Reg) or not isinstance(n, (Reg, Imm)):
            continue
        block = fn.block_of(inst)
        # the outermost loop holding it in which the divisor does not change
        for loop in loops:
            if block in loop.blocks and _invariant(fn, loop, inst, d):
                pre = _preheader(fn, loop)
                if pre is not None:
                    work.append((loop, pre, inst))
                    break
    # analyses go stale with the first edit: everything above is computed before it
    for loop, pre, inst in work:
        d = inst.operands[2]
        signed = inst.type == ".s32"
        key = (id(loop.header), d.name, signed)
        if key not in setups:
            code, regs = _magic_setup(fn, d, signed)
            _insert_in_preheader(fn, pre, code)
            setups[key] = regs
        fn.replace(inst, _division_code(fn, inst, setups[key]))
        changes.append(Change(f"{inst.name} by loop-invariant {d} in loop {loop.header.name}: "
                              "multiply-high by a magic number computed once (0"
                              f"{' and -1' if signed else ''} keep the original)", inst))
    return changes


# --------------------------------------------------------------------------- the pass


@register(
    name="address-arithmetic",
    order=50,
    summary="hoist loop-invariant index math, strength-reduce 64-bit induction products, "
            "divide by loop-invariant integers with a magic multiply",
    assumes="loops with a unique preheader; hoisted values have one definition in the function; "
            "strength reduction only of 64-bit products of a 64-bit induction variable (exact "
            "modulo 2^64; widening mul.wide left alone); "
            "division: 32-bit div/rem by a loop-invariant register, Granlund-Montgomery exact "
            "for every dividend; divisor 0 (and -1 signed) runs the original instruction",
    params={"parts": ["all", "hoist", "divide"]},
)
def address_arithmetic(fn, *, parts: str = "all") -> list[Change]:
    if parts not in ("all", "hoist", "divide"):
        raise ValueError(f"parts must be all, hoist or divide, not {parts!r}")
    if fn.is_declaration or not has_backward_branch(fn):
        return []
    changes = []
    if parts in ("all", "hoist"):
        # Hoisting only constant moves (a symbol's address, a literal) buys nothing: ptxas
        # rematerialises those. Hoist only where some computation moves too. Hoisting
        # first can make a divisor loop-invariant for the division part.
        trial = fn.clone()
        if any(c.at is not None and c.at.opcode != "mov" for c in hoist(trial)):
            changes += hoist(fn)
    if parts in ("all", "divide"):
        changes += divide(fn)
    if parts in ("all", "hoist"):
        changes += strength_reduce(fn)
    return changes
