"""shared-padding: remove shared-memory bank conflicts by padding a kernel-local array.

Power-of-two strides into shared memory (Blelloch / GPU Gems scans, ``[32][32]`` tiles
without the ``+1`` column, FFT butterflies) put many lanes of a warp on one of the 32 banks.
The classic cure inserts a gap every ``CHUNK`` bytes. This pass does it at the PTX level for
one ``.shared`` array ``S`` of fixed size ``N``: every byte offset ``b`` inside the array is
moved to::

    b' = b + PAD * (b / CHUNK)        CHUNK = 128 (or 256), PAD = max(4, widest access)

and the declaration grows to ``N + PAD * ceil(N / CHUNK)`` bytes (a ``.b8`` array keeping its
``.align``). Each access ``ld.shared.u32 %r7, [%r6+12]`` whose address derives from ``S``
gets, in front of it (fresh registers; ``%base`` is ``mov.u32 %base, S`` once at entry)::

    sub.s32 %o, %r6, %base;  add.s32 %o, %o, 12;     // o = byte offset into S
    shr.u32 %q, %o, log2(CHUNK);  shl.b32 %q, %q, log2(PAD);
    add.s32 %n, %r6, %q;                            // and the access reads [%n+12]

(64-bit arithmetic when the address register is 64-bit.) An access ``[S+c]`` with a constant
offset, or whose address is provably ``S + c`` (:mod:`ptx_ir.affine`), is folded into
``[S+c']`` and costs nothing.

Why the program still means the same (the bijection argument)
    ``b -> b + PAD*floor(b/CHUNK)`` is injective (it is strictly increasing), so the new array
    holds every old byte at its own distinct place: a program that reaches the array only
    through the map reads back exactly what it wrote, and nothing else in shared memory
    moves. An access of ``w`` bytes is naturally aligned (PTX requires it), ``w`` is a power
    of two, ``w <= 16`` and ``CHUNK % w == 0``, so its bytes ``b .. b+w-1`` lie in one chunk
    and are moved together, staying contiguous; ``PAD`` is a power of two ``>= w``, so the
    moved address keeps its ``w``-alignment. Hence every access is rewritten to one access of
    the same width to the image of its bytes. This needs **every** access to the array to
    go through the map, which is what the escape rules prove.

What the pass proves from the IR (else it leaves the array alone, and returns [] when no
array qualifies)
    * The array is declared in the function's body (nvcc's demoted ``__shared__``), in
      ``.shared``/``.shared::cta``, with a fixed non-zero size and no initializer, and only
      once. Module-scope and ``extern`` (dynamic, unsized) shared memory is never touched.
    * Escape analysis over def-use chains: the symbol, and every value derived from it by
      address arithmetic (``mov``; ``add`` with one derived operand; ``sub`` of a
      non-derived value; the addend of ``mad.lo``/``mad.wide``; ``cvt`` between 32/64-bit
      integers), flows only into the *address base* of ``ld``/``st``/``atom``/``red`` in
      the ``.shared``/``.shared::cta`` space. Any other use refuses the array: ``cvta`` (a
      generic pointer), storing it as data, comparing it, shifting/masking/multiplying
      it, a call argument or return value, ``cp.async``, ``ldmatrix``/``stmatrix``,
      ``mbarrier``, ``wgmma`` descriptors, bulk copies, ``shfl``, ``selp``, a guard, a
      generic or other-space access, a directive or initializer naming it.
    * Every use of a derived register sees only derived definitions (reaching definitions):
      a register that is ``S + x`` on one path and something else on another (a phi of two
      arrays, a guarded ``mov``, a value from outside) refuses the array; a value derived
      from two arrays refuses both. So each rewritten access targets exactly one array.
    * Every shared-space address operand in the function (any opcode) is a symbol or a
      register derived from some symbol on every path; an address that comes from nowhere
      (a constant, a parameter, ``cvta.to.shared`` of a generic pointer, a special
      register) might reach the array unseen, so the pass does not fire in that function.
    * Access widths are powers of two ``<= 16`` dividing ``CHUNK`` (else the array is
      refused); ``PAD = max(4, widest access)``.
    * The function's kernel-local static shared memory stays within 48 KiB, and the function
      reaches no shared memory but its own fixed arrays (no ``extern``/dynamic or module-scope
      shared memory): the launch's dynamic size is not in the PTX, and static + dynamic must
      fit the device's limit, so a grown static part could make a launch fail.
    As everywhere in ptx_ir, in-bounds accesses are assumed (an access outside ``S`` is
    undefined behaviour in the source, and the offset ``addr - S`` is taken to lie in
    ``[0, N)``).

Heuristic (``heuristic=True``, the default, to spend the search's budget where it can pay)
    An array is padded only when at least one access is not *obviously conflict-free*:
    obviously conflict-free means its affine offset is constant (a broadcast) or its
    ``%tid.x`` part is exactly ``w * %tid.x`` for access width ``w`` (consecutive lanes,
    consecutive words). An access whose address is not affine counts as possibly
    conflicting, so the pass fires. Padding never changes results, only speed; the judge
    measures it (shared memory grows by ``PAD/CHUNK``, about 3 %).

Placement and cost
    Per register-addressed access the pass adds 4 PTX ALU instructions (5 with an immediate
    offset: sub, add, shr, shl, add); ptxas folds the symbol constant and emits about 3
    (IADD3/IMAD, SHF, LEA), fewer where accesses share a base. Accesses with a constant offset
    cost nothing. Where an access sits in a block entered only from a conditional branch
    (nvcc's ``@%p bra`` around ``if (tid < d)``), the computation is placed before that branch
    (from the register the block's ``add base, X, imm`` reads, when it has one; see
    :func:`_placement`), so the guarded block keeps its size and ptxas keeps predicating it
    instead of branching. Measured with ptxas 13.0 for sm_90: scan_blocks 192 -> 272 SASS
    instructions for 74 remapped accesses (29 -> 37 registers), transpose32 88 -> 112 for 8.
"""
from __future__ import annotations

from ptx_ir import isa
from ptx_ir.dataflow import ENTRY
from ptx_ir.nodes import (
    STATE_SPACES, Addr, Directive, Imm, Instruction, Label, Reg, ScopeOpen, Sym, VarDecl,
    type_size, walk_operand,
)
from superopt.passes import Change, register

__all__ = ["shared_padding", "analyse"]

SHARED_CTA = frozenset({".shared", ".shared::cta"})
ACCESS_OPCODES = frozenset({"ld", "st", "atom", "red"})
INT32 = frozenset({".u32", ".s32", ".b32"})
INT64 = frozenset({".u64", ".s64", ".b64"})
MAX_STATIC_SHARED = 48 * 1024
MAX_WIDTH = 16


def _is_pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def _log2(x: int) -> int:
    return x.bit_length() - 1


# --------------------------------------------------------------------------- analysis

class _Taint:
    """The definitions derived from one symbol by address arithmetic, and how it is used."""

    def __init__(self, name: str):
        self.name = name
        self.defs: set[int] = set()          # id(inst) of derived definitions
        self.accesses: list[Instruction] = []
        self.escapes: list[str] = []         # reasons the array cannot be padded


class _Analysis:
    def __init__(self, fn):
        self.fn = fn
        self.du = fn.def_use
        self.reg_types: dict[str, str] = {}
        for decl in fn.reg_decls:
            for n in decl.register_names():
                self.reg_types[n] = decl.type
        for p in fn.params + (fn.returns or []):
            if p.space == ".reg":
                self.reg_types[p.name] = p.type
        # uses: symbol name -> instructions naming it
        self.sym_users: dict[str, list[Instruction]] = {}
        for inst in fn.instructions:
            names = {o.name for op in inst.operands for o in walk_operand(op) if isinstance(o, Sym)}
            for n in names:
                self.sym_users.setdefault(n, []).append(inst)

    # -- is operand ``op`` of ``inst`` derived from the taint?
    def _derived(self, op, inst, t: _Taint) -> bool:
        if isinstance(op, Sym):
            return op.name == t.name
        if isinstance(op, Reg) and not op.is_special:
            return any(d != ENTRY and id(d) in t.defs for d in self.du.definitions(inst, op.name))
        return False

    def _mentions(self, op, inst, t: _Taint) -> bool:
        return any(self._derived(o, inst, t) for o in walk_operand(op))

    def classify(self, inst: Instruction, t: _Taint) -> str:
        """'access', 'derive', 'none' or an escape reason for how ``inst`` uses the taint."""
        ops = inst.operands
        if inst.guard is not None and self._derived(inst.guard.reg, inst, t):
            return "used as a guard"
        first = 1 if isa.has_destination(inst) else 0        # a destination is not a use
        hits = [k for k, op in enumerate(ops) if k >= first and self._mentions(op, inst, t)]
        if not hits:
            return "none"
        op = inst.opcode
        if op in ACCESS_OPCODES:
            addr_pos = [k for k, o in enumerate(ops) if isinstance(o, Addr)]
            if len(addr_pos) == 1 and hits == addr_pos:
                addr = ops[addr_pos[0]]
                if inst.space not in SHARED_CTA:
                    return f"address of {inst.name} (not the .shared::cta window)"
                if not self._derived(addr.base, inst, t) or any(
                        self._mentions(e, inst, t) for e in addr.extra):
                    return f"inside the address of {inst.name}"
                return "access"
            return f"data operand of {inst.name}"
        dest_ok = len(ops) >= 2 and isinstance(ops[0], Reg) and not ops[0].is_special
        if not dest_ok or 0 in hits:
            return f"operand of {inst.name}"
        types = inst.types
        extra = [m for m in inst.modifiers if m not in types]
        int_type = len(types) == 1 and types[0] in INT32 | INT64
        plain = lambda o: isinstance(o, (Reg, Imm)) and not self._derived(o, inst, t)  # noqa: E731
        if op == "mov" and len(ops) == 2 and int_type and not extra and isinstance(ops[1], (Reg, Sym)):
            return "derive"
        if op == "add" and len(ops) == 3 and int_type and not extra:
            a, b = (self._derived(o, inst, t) for o in ops[1:])
            if (a and plain(ops[2])) or (b and plain(ops[1])):
                return "derive"
        if op == "sub" and len(ops) == 3 and int_type and not extra:
            if self._derived(ops[1], inst, t) and plain(ops[2]):
                return "derive"
        if op == "mad" and len(ops) == 4 and int_type and extra in ([".lo"], [".wide"]):
            if hits == [3] and self._derived(ops[3], inst, t) and plain(ops[1]) and plain(ops[2]):
                return "derive"
        if op == "cvt" and len(ops) == 2 and not extra and len(types) == 2 \
                and all(x in INT32 | INT64 for x in types) and isinstance(ops[1], Reg):
            return "derive"
        return f"flows into {inst.name}"

    def taint(self, name: str) -> _Taint:
        """Closure of the values derived from symbol ``name``; then every use classified."""
        t = _Taint(name)
        work = list(self.sym_users.get(name, []))
        while work:
            inst = work.pop()
            if id(inst) not in t.defs and self.classify(inst, t) == "derive":
                t.defs.add(id(inst))
                work.extend(self.du.users(inst))
        # Final classification with the complete set (an add may have become two-sided).
        users: dict[int, Instruction] = {}
        for inst in self.sym_users.get(name, []):
            users[id(inst)] = inst
        for inst in self.fn.instructions:
            if id(inst) in t.defs:
                for user in self.du.users(inst):
                    users[id(user)] = user
        for inst in users.values():
            kind = self.classify(inst, t)
            if kind == "access":
                t.accesses.append(inst)
            elif kind == "derive":
                if id(inst) not in t.defs:          # cannot happen after the closure
                    t.escapes.append(f"{inst!r}: unstable derivation")
            elif kind != "none":
                t.escapes.append(f"{inst!r}: {kind}")
                continue
            # Every derived register this instruction reads must be derived on all paths.
            for reg in {r.name for op in inst.operands for r in _regs(op)}:
                defs = self.du.definitions(inst, reg)
                tainted = [d for d in defs if d != ENTRY and id(d) in t.defs]
                if tainted and len(tainted) != len(defs):
                    t.escapes.append(f"{inst!r}: {reg} is derived from {name} on some paths only")
        return t

    def width_bits(self, reg: Reg) -> int | None:
        ty = self.reg_types.get(reg.name)
        if ty in INT32:
            return 32
        if ty in INT64:
            return 64
        return None


def _regs(op):
    return [o for o in walk_operand(op) if isinstance(o, Reg) and not o.is_special]


def _shared_addresses(inst: Instruction):
    """Address operands of ``inst`` in a shared state space (any opcode).

    State-space modifiers pair with address operands in order (``cp.async.ca.shared.global
    [dst], [src]``); when they do not pair one to one, every address counts as shared."""
    spaces = [m for m in inst.modifiers if m in STATE_SPACES]
    if not any(m.startswith(".shared") for m in spaces):
        return []
    addrs = [op for op in inst.operands if isinstance(op, Addr)]
    if len(addrs) == len(spaces):
        return [a for a, sp in zip(addrs, spaces) if sp.startswith(".shared")]
    return addrs


def _access_width(inst: Instruction) -> int:
    ty = inst.type
    return type_size(ty) * inst.vector_width if ty else 0


def _local_arrays(fn) -> tuple[dict[str, VarDecl], list[str]]:
    """Kernel-local fixed-size shared arrays (name -> decl), and notes on the others."""
    arrays: dict[str, VarDecl] = {}
    counts: dict[str, int] = {}
    notes = []
    for s in fn.body or ():
        if not isinstance(s, VarDecl) or s.space not in SHARED_CTA:
            continue
        counts[s.name] = counts.get(s.name, 0) + 1
        if ".extern" in s.linkage or s.init is not None or s.attributes:
            notes.append(f"{s.name}: extern/initialised/attributed")
            continue
        if not s.size:
            notes.append(f"{s.name}: no fixed size")
            continue
        arrays[s.name] = s
    for name, c in counts.items():
        if c > 1:
            arrays.pop(name, None)
            notes.append(f"{name}: declared {c} times")
    return arrays, notes


def _named_elsewhere(fn, name: str) -> bool:
    """Does a directive or another declaration's initializer name ``name``?"""
    for s in fn.body or ():
        if isinstance(s, VarDecl) and s.init is not None:
            if any(isinstance(o, Sym) and o.name == name for o in walk_operand(s.init)):
                return True
        if isinstance(s, Directive):
            for a in s.args:
                if any(isinstance(o, Sym) and o.name == name for o in walk_operand(a)):
                    return True
    return False


def analyse(fn, *, chunk: int = 128) -> tuple[dict, list[str]]:
    """The arrays that may be padded: name -> (decl, accesses, pad); and why others are not.

    Every access in the plan either has a symbol base with an offset inside the array or a
    32/64-bit integer address register."""
    if fn.body is None:
        return {}, ["no body"]
    arrays, notes = _local_arrays(fn)
    if not arrays:
        return {}, notes
    an = _Analysis(fn)
    # Taint every symbol the function names outside call targets / branch labels, so that
    # every shared-space address can be traced to some symbol.
    labels = {s.name for s in fn.body if isinstance(s, Label)}
    taints: dict[str, _Taint] = {}
    for name in an.sym_users:
        if name in labels:
            continue
        taints[name] = an.taint(name)
    derived_any: set[int] = set()
    for t in taints.values():
        derived_any |= t.defs
    for inst in fn.instructions:
        for addr in _shared_addresses(inst):
            base = addr.base
            if isinstance(base, Sym):
                continue
            if not isinstance(base, Reg) or base.is_special:
                return {}, [f"{inst!r}: shared address not derived from a symbol"]
            defs = an.du.definitions(inst, base.name)
            if not defs or any(d == ENTRY or id(d) not in derived_any for d in defs):
                return {}, [f"{inst!r}: shared address not derived from a symbol on every path"]
    # Shared memory reached through other symbols (extern/dynamic, module scope): the launch
    # asks for static + dynamic bytes together, and a program that requests nearly the
    # device's limit of dynamic shared memory would no longer launch once the static part
    # grows; its dynamic size is not in the PTX, so such kernels are left alone.
    others = sorted(n for n, t in taints.items() if t.accesses and n not in arrays)
    if others:
        return {}, [f"shared memory outside the kernel's own fixed arrays is used ({others[0]}): "
                    f"growing the static part could make launches with large dynamic shared memory fail"]
    out = {}
    for name, decl in arrays.items():
        t = taints.get(name)
        if t is None or not t.accesses:
            notes.append(f"{name}: never accessed")
            continue
        if t.escapes:
            notes.append(f"{name}: escapes ({t.escapes[0]})")
            continue
        if _named_elsewhere(fn, name):
            notes.append(f"{name}: named by a directive or initializer")
            continue
        shared_with = [o for o, u in taints.items() if o != name and u.defs & t.defs]
        if shared_with:
            notes.append(f"{name}: a value derives from both {name} and {shared_with[0]}")
            continue
        widths = {_access_width(i) for i in t.accesses}
        bad = [w for w in widths if not _is_pow2(w) or w > MAX_WIDTH or chunk % w]
        if bad:
            notes.append(f"{name}: access width {bad[0]} bytes does not fit chunks of {chunk}")
            continue
        bases = [next(o for o in i.operands if isinstance(o, Addr)) for i in t.accesses]
        if any(isinstance(a.base, Sym) and not 0 <= (a.offset or 0) < decl.size for a in bases):
            notes.append(f"{name}: a constant address outside the array")
            continue
        if any(isinstance(a.base, Reg) and an.width_bits(a.base) is None for a in bases):
            notes.append(f"{name}: an address register of unknown width")
            continue
        pad = max(4, *widths)
        out[name] = (decl, t.accesses, pad)
    return out, notes


# --------------------------------------------------------------------------- heuristic

def _obviously_conflict_free(acc, name: str, width: int) -> bool:
    if acc is None or acc.affine is None:
        return False
    off = acc.affine.without((f"sym:{name}",))
    if f"sym:{name}" not in acc.affine.atoms() or acc.affine.coefficient(f"sym:{name}") != 1:
        return False
    if off.is_constant:
        return True
    tid = [(m, c) for m, c in off.terms if "%tid.x" in m]
    return tid == [(("%tid.x",), width)]


# --------------------------------------------------------------------------- rewrite

def new_size(old: int, chunk: int, pad: int) -> int:
    return old + pad * -(-old // chunk)


def _remap_const(c: int, chunk: int, pad: int) -> int:
    return c + pad * (c // chunk)


def _constant_offset(acc, name: str) -> int | None:
    if acc is None or acc.affine is None:
        return None
    off = acc.affine.without((f"sym:{name}",))
    if acc.affine.coefficient(f"sym:{name}") == 1 and off.is_constant:
        return off.constant
    return None


def _placement(fn, inst: Instruction, bits: int, an: _Analysis):
    """Where to compute the remapped address of ``inst``: (anchor, root register, constant).

    The new address is ``root + const + shift(root + const - S)`` and the access becomes
    ``[new + const]``. By default the code goes right before the access (anchor None) with
    ``root, const`` its own base register and offset. When the access's block has a single
    predecessor that ends in a conditional branch (nvcc's ``@%p bra`` around a guarded
    block), the code goes before that branch, so that the guarded block keeps its size and
    ptxas can still predicate it: allowed when ``root`` has the same value there as where the
    access uses it, i.e. the base register is not written in the block before the access
    (root = base), or its last write there is an unguarded ``add base, X, imm`` and ``X`` is
    not written in the block before it (root = X, const = imm + offset). Only straight-line
    code of one block lies between the branch and the access, so nothing else can
    intervene."""
    addr = next(o for o in inst.operands if isinstance(o, Addr))
    base, offset = addr.base, addr.offset or 0
    block = fn.block_of(inst)
    preds = list(fn.cfg.predecessors(block))
    if len(preds) != 1 or preds[0] is block:
        return None, base, offset
    term = preds[0].terminator
    if term is None or term.opcode != "bra" or term.guard is None:
        return None, base, offset
    before = block.instructions[:next(k for k, i in enumerate(block.instructions) if i is inst)]
    writes = [k for k, i in enumerate(before) if any(r.name == base.name for r in _defs(i))]
    if not writes:
        return term, base, offset
    d = before[writes[-1]]
    ty = d.types
    if d.opcode != "add" or d.guard is not None or len(d.operands) != 3 or len(ty) != 1 \
            or ty[0] not in (INT32 if bits == 32 else INT64) or len(d.modifiers) != 1:
        return None, base, offset
    x, imm = d.operands[1], d.operands[2]
    if isinstance(x, Imm):
        x, imm = imm, x
    if not (isinstance(x, Reg) and isinstance(imm, Imm)) or imm.is_float or x.is_special \
            or x.name == base.name or an.width_bits(x) != bits:
        return None, base, offset
    if any(any(r.name == x.name for r in _defs(i)) for i in before[:writes[-1]]):
        return None, base, offset
    return term, x, int(imm.value) + offset


def _defs(inst: Instruction):
    return isa.defs(inst)


def _entry_anchor(fn):
    for s in fn.body:
        if isinstance(s, (Instruction, Label, ScopeOpen)):
            return s
    return None


@register(
    name="shared-padding",
    order=21,
    summary="pad a kernel-local __shared__ array by PAD bytes every CHUNK bytes (remap every "
            "access) so that power-of-two strides stop hitting one bank",
    assumes=("The array is declared in the function with a fixed size; its address (and all "
             "address arithmetic on it) flows only into the address of .shared ld/st/atom/red "
             "(no cvta, no store as data, no call, cp.async, ldmatrix, mbarrier, wgmma, "
             "compare, selp/phi with another value); every shared-space address in the "
             "function derives from a symbol on every path; access widths are powers of "
             "two <= 16 dividing CHUNK; accesses stay in bounds (as in the source). The map "
             "b -> b + PAD*(b/CHUNK) is injective and keeps each access in one chunk and "
             "aligned, so the program is unchanged. Heuristic: fires only when some access "
             "is not obviously conflict-free (constant or w*%tid.x)."),
    params={"chunk": [128, 256]},
)
def shared_padding(fn, *, chunk: int = 128, heuristic: bool = True) -> list[Change]:
    if fn.body is None or not _is_pow2(chunk) or chunk < 4:
        return []
    plan, _notes = analyse(fn, chunk=chunk)
    if not plan:
        return []
    by_inst = {id(a.inst): a for a in fn.memory_accesses}
    if heuristic:
        plan = {name: p for name, p in plan.items()
                if not all(_obviously_conflict_free(by_inst.get(id(i)), name, _access_width(i))
                           for i in p[1])}
    if not plan:
        return []
    total = 0
    for s in fn.body:
        if isinstance(s, VarDecl) and s.space in SHARED_CTA and s.size:
            total += new_size(s.size, chunk, plan[s.name][2]) if s.name in plan else s.size
    if total > MAX_STATIC_SHARED:
        return []
    an = _Analysis(fn)
    widths = {}
    for name, (_decl, accesses, _pad) in plan.items():
        for inst in accesses:
            addr = next(o for o in inst.operands if isinstance(o, Addr))
            widths[id(inst)] = an.width_bits(addr.base) if isinstance(addr.base, Reg) else None
    consts = {id(i): _constant_offset(by_inst.get(id(i)), name)
              for name, p in plan.items() for i in p[1]}
    places = {id(i): _placement(fn, i, widths[id(i)], an)
              for p in plan.values() for i in p[1] if widths[id(i)] is not None}

    changes: list[Change] = []
    anchor = _entry_anchor(fn)
    for name, (decl, accesses, pad) in plan.items():
        old = decl.size
        size = new_size(old, chunk, pad)
        bases: dict[int, Reg] = {}
        folded = computed = hoisted = 0
        for inst in accesses:
            k = [j for j, o in enumerate(inst.operands) if isinstance(o, Addr)][0]
            addr = inst.operands[k]
            c = (addr.offset or 0) if isinstance(addr.base, Sym) else consts[id(inst)]
            if c is not None and 0 <= c < old:
                new_addr = Addr(Sym(name), _remap_const(c, chunk, pad))
                fn.replace(inst, inst.with_(operands=_put(inst.operands, k, new_addr)))
                folded += 1
                continue
            bits = widths[id(inst)]
            b = f".b{bits}"
            s, u = f".s{bits}", f".u{bits}"
            if bits not in bases:
                bases[bits] = fn.new_register(b)
                fn.insert_before(anchor, Instruction("mov", (u,), (bases[bits], Sym(name))))
            where, root, const = places[id(inst)]
            off = fn.new_register(b)
            code = [Instruction("sub", (s,), (off, root, bases[bits]))]
            if const:
                off2 = fn.new_register(b)
                code.append(Instruction("add", (s,), (off2, off, Imm(str(const)))))
                off = off2
            q = fn.new_register(b)
            code.append(Instruction("shr", (u,), (q, off, Imm(str(_log2(chunk))))))
            q2 = fn.new_register(b)
            code.append(Instruction("shl", (b,), (q2, q, Imm(str(_log2(pad))))))
            moved = fn.new_register(b)
            code.append(Instruction("add", (s,), (moved, root, q2)))
            new_addr = Addr(moved, const if const or addr.offset is not None else None, addr.extra)
            new_inst = inst.with_(operands=_put(inst.operands, k, new_addr))
            if where is None:
                fn.replace(inst, code + [new_inst])
                computed += 1
            else:
                fn.insert_before(where, code)
                fn.replace(inst, new_inst)
                hoisted += 1
        align = decl.align or type_size(decl.type) * {".v2": 2, ".v4": 4}.get(decl.vector or "", 1)
        decl.type = ".b8"
        decl.vector = None
        decl.align = align
        decl.dims = (size,)
        fn.invalidate()
        changes.append(Change(
            f"padded {name}: {old} -> {size} bytes ({pad} bytes every {chunk}); "
            f"{computed + hoisted} accesses remapped at run time ({hoisted} of them computed "
            f"before the branch that guards them), {folded} folded to constants", decl))
    fn.validate()
    return changes


def _put(ops: tuple, k: int, value) -> tuple:
    return ops[:k] + (value,) + ops[k + 1:]
