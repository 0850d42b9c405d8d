"""What stage-stores and stage-loads share: the kernel checks, the dense-run analysis that
picks a block's permutation, the plan, and the code both emit (the block test and the
thread's slots, the permuted slot of a thread, label renaming, store-to-load forwarding).
See :mod:`superopt.passes.stage_stores` for the design and the soundness argument."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import networkx as nx

from ptx_ir import isa
from ptx_ir.affine import Affine
from ptx_ir.nodes import (Addr, Guard, Instruction, Label, Reg, ScopeClose, ScopeOpen, Sym,
                          VarDecl)
from superopt.passes._loop_tools import I, bra, register_type

MAX_STAGE_BYTES = 40 * 1024     # static shared memory the staging may add (48 KiB is the limit)
TID = ("%tid.x", "%tid.y", "%tid.z")
NTID = ("%ntid.x", "%ntid.y", "%ntid.z")
REFUSED_OPCODES = frozenset({
    "bar", "barrier", "membar", "fence", "atom", "red", "call", "trap", "brkpt", "shfl",
    "vote", "match", "redux", "activemask", "elect", "mbarrier", "cp", "griddepcontrol",
    "tex", "tld4", "txq", "suld", "sust", "sured", "suq", "st.async", "red.async", "wgmma",
    "wmma", "mma", "ldmatrix", "stmatrix", "tcgen05", "multimem", "tensormap", "setmaxnreg",
    "nanosleep", "pmevent", "isspacep", "cvta.to.shared", "stackrestore", "stacksave",
    "alloca", "applypriority", "discard", "clusterlaunchcontrol", "getctarank", "mapa", "brx",
})
ORDERING = frozenset({".volatile", ".relaxed", ".acquire", ".release", ".mmio", ".sc",
                      ".acq_rel", ".weak"})

@dataclass(eq=False)
class StagingPlan:
    """What the analysis found: the stores, the coordinates and the permutation."""

    block: tuple                # (bx, by, bz)
    stores: list                # [Instruction]; their index is the "unit" coordinate
    width: int                  # bytes per stored element
    run: list                   # [(coordinate, extent)] of the dense run, fastest first
    others: list                # [(coordinate, extent)] the rest
    pad_every: int = 0          # one padding slot every this many slots (0: none)
    forwards: dict = field(default_factory=dict)   # load Instruction -> [store index] before it

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    @property
    def slots(self) -> int:
        return self.threads * len(self.stores)

    @property
    def run_length(self) -> int:
        return math.prod(n for _, n in self.run)

    def padded(self, o: int) -> int:
        return o + (o // self.pad_every if self.pad_every else 0)

    @property
    def padded_slots(self) -> int:
        return self.padded(self.slots - 1) + 1

    def owner_slot(self, w: int) -> int:
        """The owner slot writer slot ``w`` performs (the permutation, evaluated in Python)."""
        digits = self.digits(w)
        return self.slot_of(digits)

    def digits(self, w: int) -> dict:
        rho, q = w % self.run_length, w // self.run_length
        out = {}
        for name, n in self.run:
            out[name], rho = rho % n, rho // n
        for name, n in self.others:
            out[name], q = q % n, q // n
        return out

    def slot_of(self, digits: dict) -> int:
        bx, by, bz = self.block
        t = (digits.get("%tid.z", 0) * by + digits.get("%tid.y", 0)) * bx + digits.get("%tid.x", 0)
        return digits.get("unit", 0) * self.threads + t


def normalise_block(block):
    if block is None:
        return None
    dims = [block] if isinstance(block, int) else list(block)
    try:
        dims = [int(d) for d in dims] + [1] * (3 - len(dims))
    except (TypeError, ValueError):
        return None
    if len(dims) != 3 or any(d < 1 for d in dims) or math.prod(dims) > 1024:
        return None
    return tuple(dims)


def split_tid(aff: Affine, block) -> tuple[dict, Affine] | None:
    """{tid atom: coefficient Affine}, rest. None when a %tid atom appears non-linearly.
    ``%ntid`` atoms are the block's constants here (the staged path runs only at ``block``)."""
    coeff: dict = {t: Affine() for t in TID}
    rest = Affine()
    for mono, c in aff.terms:
        term = Affine.const(c)
        tids = [a for a in mono if a in TID]
        if len(tids) > 1:
            return None
        for a in mono:
            if a in NTID:
                term = term.scale(block[NTID.index(a)])
            elif a not in TID:
                term = term * Affine.atom(a)
        if tids:
            coeff[tids[0]] = coeff[tids[0]] + term
        else:
            rest = rest + term
    return coeff, rest


def allowed_atoms(aff: Affine) -> bool:
    return all(a in TID or a in NTID or a.startswith(("%ctaid", "%nctaid", "param:"))
               for a in aff.atoms())


def topological(fn) -> list[Instruction] | None:
    g = fn.cfg
    try:
        order = list(nx.topological_sort(g))
    except nx.NetworkXUnfeasible:
        return None
    return [inst for b in order for inst in b.instructions]


def reaching_stores(fn, order, stores) -> dict:
    """load -> indices of the staged stores that can execute before it (same thread)."""
    pos = {id(i): k for k, i in enumerate(order)}
    block_of = fn.block_of
    reach: dict = {}
    for si, st in enumerate(stores):
        sb = block_of(st)
        seen = nx.descendants(fn.cfg, sb)
        for inst in order:
            if not isa.is_load(inst):
                continue
            lb = block_of(inst)
            if lb in seen or (lb is sb and pos[id(inst)] > pos[id(st)]):
                reach.setdefault(inst, []).append(si)
    return reach


def bank_conflicts(plan: StagingPlan, pad_every: int) -> int:
    """Worst-case shared-memory wavefronts over the owners' writes and the writers' reads
    (4-byte banks; the value array), summed over warps."""
    saved = plan.pad_every
    plan.pad_every = pad_every
    total = 0
    t = plan.threads
    for u in range(len(plan.stores)):
        for w0 in range(0, t, 32):
            for phase in ("own", "write"):
                banks: dict = {}
                for lane in range(w0, min(w0 + 32, t)):
                    o = u * t + lane if phase == "own" else plan.owner_slot(u * t + lane)
                    word = plan.padded(o) * plan.width // 4        # 4-byte banks; one word is shared
                    banks.setdefault(word % 32, set()).add(word // 32)
                total += max(len(v) for v in banks.values())
    plan.pad_every = saved
    return total


def kernel_eligibility(fn, block, *, loops_ok: bool = False) -> tuple[tuple | None, list | None, str]:
    """(block normalised, instructions in topological order, "") when ``fn`` is a kernel the
    staging passes handle, else (None, None, why not): an acyclic ``.entry`` without nested
    scopes, shared memory, barriers, fences, atomics, calls, traps, warp collectives or generic
    or ordered accesses, whose ``.reqntid``/``.maxntid`` agree with ``block``. With
    ``loops_ok`` (stage-row-loads) the kernel may have loops; the instructions then come in
    layout order."""
    block = normalise_block(block)
    if block is None:
        return None, None, "no usable launch block"
    if not fn.is_entry or fn.body is None:
        return None, None, "not a kernel"
    if any(isinstance(s, (ScopeOpen, ScopeClose)) for s in fn.body):
        return None, None, "nested scopes"
    for name in (".reqntid", ".maxntid"):
        d = fn.directive(name)
        if d is not None:
            dims = [int(str(a)) for a in d.args if str(a).strip() not in (",", "")]
            dims += [1] * (3 - len(dims))
            if name == ".reqntid" and tuple(dims) != block:
                return None, None, f"{name} differs from the block"
            if name == ".maxntid" and math.prod(dims) < math.prod(block):
                return None, None, f"{name} is smaller than the block"
    if any(isinstance(s, VarDecl) and s.space.startswith(".shared") for s in fn.body):
        return None, None, "the kernel uses shared memory"
    if fn.loops and not loops_ok:
        return None, None, "the kernel has loops"
    order = topological(fn) if not fn.loops else list(fn.instructions)
    if order is None:
        return None, None, "cyclic control flow"
    for inst in order:
        op = inst.opcode
        if op in REFUSED_OPCODES or inst.name.startswith(("cvta.to.shared", "cvta.shared")):
            return None, None, f"{inst.name} is not handled"
        if not isa.touches_memory(inst) and op != "prefetch":
            continue
        space = inst.space
        if space is None or space.startswith(".shared"):
            return None, None, f"{inst.name}: generic or shared access"
        if set(inst.modifiers) & ORDERING:
            return None, None, f"{inst.name}: ordered access"
    return block, order, ""


def dense_run(forms: list, width: int, block) -> tuple[list | None, list, list, str]:
    """The permutation's coordinates for K accesses of ``width`` bytes with address forms
    ``forms``: (unit order, run, others, "") or (None, [], [], why not). ``unit order`` lists
    the access indices sorted by their constant offset (the "unit" coordinate's order);
    ``run`` the coordinates that tile consecutive elements, fastest first, as (name, extent);
    ``others`` the remaining coordinates."""
    deltas = []
    for f in forms:
        d = f - forms[0]
        if not d.is_constant:
            return None, [], [], "the addresses differ by more than a constant"
        deltas.append(d.constant)
    if len(set(deltas)) != len(deltas):
        return None, [], [], "two accesses of a thread share an address"
    split = split_tid(forms[0], block)
    if split is None:
        return None, [], [], "a thread index appears non-linearly"
    coeff, _rest = split
    cx = coeff["%tid.x"]
    if cx.is_constant and cx.constant == width:
        return None, [], [], "the accesses are already coalesced"
    coords = []                    # (name, coefficient or None, extent)
    for t, n in zip(TID, block):
        if n > 1:
            c = coeff[t]
            coords.append((t, c.constant if c.is_constant else None, n))
    k = len(forms)
    unit_coef = None
    if k > 1:
        ds = sorted(deltas)
        step = ds[1] - ds[0]
        if all(ds[i] - ds[0] == i * step for i in range(k)):
            unit_coef = step
    # The dense run: coordinates tiling w, w*n1, w*n1*n2, ...
    pool = [(n_, c, e) for n_, c, e in coords if c is not None and c > 0]
    if unit_coef is not None and unit_coef > 0:
        pool.append(("unit", unit_coef, k))
    run: list = []
    need = width
    while True:
        hit = [p for p in pool if p[1] == need and p not in run]
        if not hit:
            break
        run.append(hit[0])
        need *= hit[0][2]
    length = math.prod(e for _, _, e in run)
    if length * width < 32:
        return None, [], [], "no run of a full 32-byte sector"
    # The unit coordinate is in sorted-delta order.
    unit_order = list(range(k))
    if any(n_ == "unit" for n_, _, _ in run) or unit_coef is not None:
        unit_order = sorted(range(k), key=lambda i: deltas[i])
    names_in_run = {n_ for n_, _, _ in run}
    others = [(n_, e) for n_, _, e in coords if n_ not in names_in_run]
    if k > 1 and "unit" not in names_in_run:
        others.append(("unit", k))
    return unit_order, [(n_, e) for n_, _, e in run], others, ""


class Emitter:
    def __init__(self, fn):
        self.fn = fn
        self.out: list = []

    def reg(self, t):
        return self.fn.new_register(t)

    def __call__(self, *insts):
        self.out.extend(insts)


def const_div_mod(em: Emitter, x: Reg, n: int) -> tuple[Reg, Reg]:
    """(x / n, x % n) for a constant n >= 1, unsigned 32-bit."""
    q, r = em.reg(".u32"), em.reg(".u32")
    if n & (n - 1) == 0:
        em(I("shr", ".b32", q, x, n.bit_length() - 1), I("and", ".b32", r, x, n - 1))
    else:
        em(I("div", ".u32", q, x, n), I("rem", ".u32", r, x, n))
    return q, r


def padded_index(em: Emitter, o: Reg, pad_every: int) -> Reg:
    if not pad_every:
        return o
    t, p = em.reg(".u32"), em.reg(".u32")
    em(I("shr", ".b32", t, o, pad_every.bit_length() - 1), I("add", ".s32", p, o, t))
    return p


def slot_addr(em: Emitter, array: str, p: Reg, size: int) -> Reg:
    base, a = em.reg(".u32"), em.reg(".u32")
    em(I("mov", ".u32", base, Sym(array)), I("mad", ".lo.s32", a, p, size, base))
    return a


def value_reg_type(width: int) -> str:
    return {1: ".b16", 2: ".b16", 4: ".b32", 8: ".b64"}[width]




def u64_address(fn, inst: Instruction) -> bool:
    """Whether ``inst``'s address is a 64-bit register (plus an offset)."""
    a = isa.address_operand(inst)
    return isinstance(a.base, Reg) and register_type(fn, a.base.name) in (".u64", ".b64", ".s64")


def choose_padding(plan: StagingPlan) -> str:
    """Sets ``plan.pad_every`` to the padding with the fewest bank conflicts; '' or, when the
    arrays would not fit ``MAX_STAGE_BYTES``, why not (checked before the search too, which
    walks every slot)."""
    need = plan.width + 8
    if plan.slots * need > MAX_STAGE_BYTES:
        return "the staging arrays would exceed the shared-memory budget"
    plan.pad_every = min((0, 32, 16, 8), key=lambda p: (bank_conflicts(plan, p), p))
    if plan.padded_slots * need > MAX_STAGE_BYTES:
        return "the staging arrays would exceed the shared-memory budget"
    return ""


# --------------------------------------------------------------------------- code both passes emit

@dataclass
class ThreadSlots:
    """The registers the prologue leaves: the thread's linear index and, per unit, the
    shared addresses of its own address slot and value slot."""

    lin: Reg
    addr: list
    val: list


def array_names(fn, prefix: str) -> tuple[str, str]:
    """Fresh names for the value and the address array (``__np_<prefix>_vals_0`` ...)."""
    vals, adrs = fn.new_label(f"{prefix}_vals").lstrip("$"), fn.new_label(f"{prefix}_addrs").lstrip("$")
    return "__np_" + vals.replace("Lnp_", ""), "__np_" + adrs.replace("Lnp_", "")


def staging_arrays(plan: StagingPlan, vals: str, adrs: str) -> list[VarDecl]:
    return [VarDecl(space=".shared", type=".b8", name=vals, align=8, dims=(plan.padded_slots * plan.width,)),
            VarDecl(space=".shared", type=".b8", name=adrs, align=8, dims=(plan.padded_slots * 8,))]


def prologue(em: Emitter, plan: StagingPlan, orig_label: str, vals: str, adrs: str) -> ThreadSlots:
    """The block-uniform test ``%ntid == block`` (else a jump to ``orig_label``, nvcc's code),
    the thread's linear index, and its K address slots set to 0 ("nothing recorded")."""
    block_test(em, plan.block, orig_label)
    lin = linear_index(em, plan.block)
    zero = em.reg(".u64")
    em(I("mov", ".u64", zero, 0))
    slots = ThreadSlots(lin, [], [])
    for u in range(len(plan.stores)):
        o = em.reg(".u32")
        em(I("add", ".s32", o, lin, u * plan.threads))
        p = padded_index(em, o, plan.pad_every)
        slots.addr.append(slot_addr(em, adrs, p, 8))
        slots.val.append(slot_addr(em, vals, p, plan.width))
        em(I("st", ".shared.u64", Addr(slots.addr[-1]), zero))
    return slots


def block_test(em: Emitter, block, orig_label: str) -> None:
    """``%ntid == block`` (block-uniform), else a jump to ``orig_label`` (nvcc's code)."""
    ok = em.reg(".pred")
    for d, (dim, n) in enumerate(zip(NTID, block)):
        r = em.reg(".u32")
        em(I("mov", ".u32", r, dim))
        em(I("setp", ".eq.u32", ok, r, n) if d == 0 else I("setp", ".eq.and.u32", ok, r, n, ok))
    em(bra(orig_label, Guard(ok, negated=True), uni=False))


def linear_index(em: Emitter, block) -> Reg:
    """The thread's linear index in ``block`` (``(tid.z*by + tid.y)*bx + tid.x``)."""
    tx, ty, tz = (em.reg(".u32") for _ in range(3))
    em(I("mov", ".u32", tx, "%tid.x"), I("mov", ".u32", ty, "%tid.y"), I("mov", ".u32", tz, "%tid.z"))
    lin = em.reg(".u32")
    bx, by, _ = block
    em(I("mad", ".lo.s32", lin, tz, by, ty), I("mad", ".lo.s32", lin, lin, bx, tx))
    return lin


def permuted_slot(em: Emitter, plan: StagingPlan, lin: Reg, u: int, vals: str, adrs: str) -> tuple[Reg, Reg]:
    """(address slot, value slot) of the owner whose access this thread performs as its
    ``u``-th: writer slot ``W = u*T + lin`` takes run position ``W % L`` and the other
    coordinates from ``W / L`` (:meth:`StagingPlan.digits`), so a warp covers a run."""
    bx, by, _ = plan.block
    w = em.reg(".u32")
    em(I("add", ".s32", w, lin, u * plan.threads))
    q, rho = const_div_mod(em, w, plan.run_length)
    parts = []
    for name, n in plan.run:
        rho, d = const_div_mod(em, rho, n)
        parts.append((name, d))
    for name, n in plan.others:
        q, d = const_div_mod(em, q, n)
        parts.append((name, d))
    stride = {"%tid.x": 1, "%tid.y": bx, "%tid.z": bx * by, "unit": plan.threads}
    o = em.reg(".u32")
    em(I("mov", ".u32", o, 0))
    for name, d in parts:
        em(I("mad", ".lo.s32", o, d, stride[name], o))
    p = padded_index(em, o, plan.pad_every)
    return slot_addr(em, adrs, p, 8), slot_addr(em, vals, p, plan.width)


def renamer(code, taken: set, prefix: str) -> dict:
    """A fresh ``$Lnp_<prefix>_N`` for every label of ``code`` (``taken`` grows with them)."""
    rename = {}
    counter = 0
    for name in sorted(s.name for s in code if isinstance(s, Label)):
        while f"$Lnp_{prefix}_{counter}" in taken:
            counter += 1
        rename[name] = f"$Lnp_{prefix}_{counter}"
        taken.add(rename[name])
    return rename


def retarget(inst: Instruction, rename: dict) -> Instruction:
    target = inst.operands[0]
    if isinstance(target, Sym) and target.name in rename:
        return inst.with_(operands=(Sym(rename[target.name]),) + tuple(inst.operands[1:]))
    return inst


@dataclass
class Forwarded:
    """Registers that remember one of the thread's own stores: whether it ran, its address,
    its value (all set at entry, so no register is read unwritten)."""

    flag: Reg
    addr: Reg
    val: Reg


def forwarding_registers(em: Emitter, n: int, vtype: str, lin: Reg) -> list[Forwarded]:
    out = [Forwarded(em.reg(".pred"), em.reg(".b64"), em.reg(vtype)) for _ in range(n)]
    for f in out:
        em(I("setp", ".ne.u32", f.flag, lin, lin), I("mov", ".b64", f.addr, 0), I("mov", vtype, f.val, 0))
    return out


def remember_store(em: Emitter, f: Forwarded, ea: Reg, value, vtype: str, lin: Reg, guard) -> None:
    """At one of the thread's own stores (``ea`` its effective address): record it in ``f``."""
    em(I("mov", ".b64", f.addr, ea, guard=guard), I("mov", vtype, f.val, value, guard=guard),
       I("setp", ".eq.u32", f.flag, lin, lin, guard=guard))


def forward_to_load(em: Emitter, load: Instruction, sources: list, vtype: str) -> None:
    """After ``load`` (same width as the stores): take the value of the latest of ``sources``
    (:class:`Forwarded`, in program order) that ran at the load's address. A guarded load that
    did not execute keeps its destination."""
    a = isa.address_operand(load)
    la = em.reg(".b64")
    em(I("add", ".s64", la, a.base, a.offset or 0))
    g = None
    if load.guard is not None:
        g = load.guard.reg
        if load.guard.negated:
            ng = em.reg(".pred")
            em(I("not", ".pred", ng, g))
            g = ng
    for f in sources:
        q = em.reg(".pred")
        em(I("setp", ".eq.and.b64", q, la, f.addr, f.flag))
        if g is not None:
            gq = em.reg(".pred")
            em(I("and", ".pred", gq, q, g))
            q = gq
        em(I("mov", vtype, load.operands[0], f.val, guard=Guard(q)))
