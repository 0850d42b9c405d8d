"""Compile a PTX kernel (and the device functions it calls) into a flat program of closures.

Every function body is resolved once: names are looked up through nested ``{ }`` scopes
(so inline-asm and call-sequence declarations may shadow outer ones), registers get
numbered slots, ``.local`` variables frame offsets, ``.param`` variables per-lane slots,
labels program counters. Each instruction becomes a :class:`CInst` whose ``run(st, idx)``
executes it for the lanes ``idx`` (``None``: every lane of the chunk) of a
:class:`superopt.judge.emulator.executor.Chunk`.

Anything that cannot be executed exactly raises :class:`Unsupported` at compile time
(or, for value-dependent cases, at run time), never a silent approximation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ptx_ir.nodes import (
    Addr, BinExpr, Directive, Function, Imm, Instruction, Label, Module, Neg,
    Pair, Paren, Reg, ScopeClose, ScopeOpen, Sink, Sym, VarDecl, Vec, type_size as node_type_size,
    walk_operand,
)
from ptx_ir.semantics import Unsupported, decode_alu, fp
from ptx_ir.semantics.types import (
    SINT_OF_SIZE, UINT_OF_SIZE, has_natural_dtype, imm_scalar, is_float, is_signed, natural_dtype,
    storage_dtype, type_size,
)
from superopt.judge.emulator import memory as M

# instruction kinds (the scheduler dispatches on these)
ALU, MEM, BRA, EXIT, BAR, WARP, CALL, RET, NOP, BRX, TRAP = range(11)
KIND_NAMES = ["alu", "mem", "bra", "exit", "bar", "warp", "call", "ret", "nop", "brx", "trap"]

SPACE_ALIASES = {".shared::cta": ".shared", ".shared::cluster": None, ".param::entry": ".param",
                 ".param::func": ".param"}
EXTERN_OK = {"vprintf", "__assertfail"}


def inst_text(inst: Instruction) -> str:
    ops = ", ".join(map(str, inst.operands))
    g = f"{inst.guard} " if inst.guard else ""
    return f"{g}{inst.name} {ops}".strip()


class CInst:
    __slots__ = ("kind", "run", "target", "guard", "text", "pc", "fn", "extra", "may_fuse", "taint", "writes_mem")

    def __init__(self, kind, run=None, text="", target=None, guard=None, extra=None):
        self.kind = kind
        self.run = run
        self.text = text
        self.target = target
        self.guard = guard          # (slot, negated) or None
        self.pc = -1
        self.fn = None
        self.extra = extra
        self.may_fuse = False
        # how the instruction moves the taint bit (see Program._taint_plan); None: not at all
        self.taint = None
        # a store, atomic or async copy to shared or global memory (the "interleave" schedule
        # switches warps after each)
        self.writes_mem = False

    def __repr__(self):
        return f"<{KIND_NAMES[self.kind]} {self.pc}: {self.text}>"


@dataclass
class FuncInfo:
    name: str
    is_entry: bool
    entry_pc: int = -1
    reg_slots: list = field(default_factory=list)
    pslots: list = field(default_factory=list)       # every per-lane .param slot it declares
    formals: list = field(default_factory=list)      # (kind, slot) per formal parameter
    rets: list = field(default_factory=list)         # (kind, slot) per return parameter
    frame_size: int = 0
    recursive: bool = False
    address: int = 0


@dataclass
class CallSite:
    id: int
    caller: FuncInfo
    callee: FuncInfo | None          # None: indirect
    args: list                       # readers/pslots of the actual arguments
    rets: list                       # (kind, slot) of the actual return variables
    return_pc: int = -1
    extern: str | None = None
    retval_used: bool = False


class Program:
    """A kernel compiled against one loaded module (module variables have fixed addresses)."""

    def __init__(self, loaded, kernel_name: str):
        self.loaded = loaded
        self.module: Module = loaded.module
        self.kernel_fn = self.module.function(kernel_name)
        if not self.kernel_fn.is_entry or self.kernel_fn.is_declaration:
            raise KeyError(f"{kernel_name} is not a kernel with a body")
        self.insts: list[CInst] = []
        self.reg_dtypes: list[np.dtype] = []
        self.reg_names: list[str] = []
        self.pslot_sizes: list[int] = []
        self.funcs: dict[str, FuncInfo] = {}
        self.sites: list[CallSite] = []
        self.uses_cc = False
        self.uses_shared = False
        self.uses_nc = False          # a global load through the non-coherent path (ld.global.nc, ldu)
        self.cc_slot = self._new_reg("%cc", np.dtype(np.bool_))
        self.kparams: dict[str, tuple[int, int]] = {}     # name -> (offset, size)
        self.kparam_decls: list[VarDecl] = list(self.kernel_fn.params)
        off = 0
        for p in self.kernel_fn.params:
            size = p.size or 0
            align = max(p.align or 1, min(node_type_size(p.type), 8))
            off = -(-off // align) * align
            self.kparams[p.name] = (off, size)
            off += size
        self.kparam_size = off
        self.static_smem = loaded.static_smem
        self.extern_smem_offset = loaded.extern_smem_offset
        self.local_static = loaded.local_static
        self._compile()
        self._taint_plan()

    # ------------------------------------------------------------------ slots
    def _new_reg(self, name, dt):
        self.reg_dtypes.append(np.dtype(dt))
        self.reg_names.append(name)
        return len(self.reg_dtypes) - 1

    def _new_pslot(self, size):
        self.pslot_sizes.append(max(8, -(-size // 8) * 8))
        return len(self.pslot_sizes) - 1

    # ------------------------------------------------------------------ functions
    def _reachable(self):
        mod = self.module
        by_name = {f.name: f for f in mod.functions if not f.is_declaration}
        decls = {f.name: f for f in mod.functions}
        addr_taken = set()
        for f in by_name.values():
            for s in f.body:
                if isinstance(s, Instruction) and s.opcode != "call":
                    for o in s.operands:
                        if isinstance(o, Sym) and o.name in by_name:
                            addr_taken.add(o.name)
        for g in mod.globals:
            if g.init is not None:
                for o in walk_operand(g.init):
                    if isinstance(o, Sym) and o.name in by_name:
                        addr_taken.add(o.name)
        graph: dict[str, set] = {}
        order = []
        todo = [self.kernel_fn.name]
        while todo:
            name = todo.pop()
            if name in graph:
                continue
            graph[name] = set()
            order.append(name)
            f = by_name[name]
            for s in f.body:
                if isinstance(s, Instruction) and s.opcode == "call":
                    tgt = _call_target(s)
                    if isinstance(tgt, Sym):
                        if tgt.name in by_name:
                            graph[name].add(tgt.name)
                            todo.append(tgt.name)
                        elif tgt.name not in decls:
                            raise Unsupported(f"call to unknown function {tgt.name}")
                    else:
                        for t in addr_taken:
                            graph[name].add(t)
                            todo.append(t)
        # recursion: a function that reaches itself
        rec = set()
        for name in graph:
            seen, stack = set(), list(graph[name])
            while stack:
                x = stack.pop()
                if x == name:
                    rec.add(name)
                    break
                if x in seen:
                    continue
                seen.add(x)
                stack.extend(graph.get(x, ()))
        return [by_name[n] for n in order], rec, addr_taken

    def _compile(self):
        funcs, rec, addr_taken = self._reachable()
        for i, f in enumerate(funcs):
            self.funcs[f.name] = FuncInfo(f.name, f.is_entry, recursive=f.name in rec,
                                          address=self.loaded.func_addr[f.name])
        self.func_by_addr = {fi.address: fi for fi in self.funcs.values()}
        self.kernel = self.funcs[self.kernel_fn.name]
        pending = []
        for f in funcs:
            ctx = FnCtx(self, f, self.funcs[f.name])
            pending.append(ctx)
            ctx.declare()
        for ctx in pending:
            ctx.emit()
        for ctx in pending:
            ctx.link()
        for i, ci in enumerate(self.insts):
            ci.pc = i
        for s in self.sites:
            if s.callee is not None and s.callee.entry_pc < 0:
                raise Unsupported(f"call to {s.callee.name}")


    # ------------------------------------------------------------------ the taint bit
    def _taint_plan(self):
        """Which register slots can ever hold a value derived from something never written,
        and which instructions must move the taint bit (the rest run as before, at no cost).

        Taint starts in registers the static def-use check says may be read before any
        write (every register of a called function, which it does not analyse) and in
        ``.shared``/``.local`` memory (loads from them, or from generic addresses, are
        sources); it flows, flow-insensitively here and per lane at run time, through
        every instruction that reads a tracked slot. ``tracked``: those slots;
        ``mem_taint``: memory taint is kept (some load can read shared or local memory)."""
        try:
            from superopt.judge.static_check import analyze
            unwritten = set(analyze(self.module, self.kernel_fn.name).may_be_unwritten)
        except Exception:  # noqa: BLE001 - no analysis: every register may be read unwritten
            unwritten = None
        kernel_slots = set(self.kernel.reg_slots)
        roots = set()
        for slot, name in enumerate(self.reg_names):
            if slot == self.cc_slot:
                continue
            if unwritten is None or slot not in kernel_slots or name in unwritten:
                roots.add(slot)
        self.mem_taint = any(ci.taint is not None and ci.taint[0] in ("ld", "atom") and ci.taint[3]
                             for ci in self.insts)
        tracked = set(roots)
        changed = True
        while changed:
            changed = False
            for ci in self.insts:
                t = ci.taint
                if t is None or t[0] not in ("alu", "warp", "ld", "atom"):
                    continue
                if t[0] == "ld":
                    dsts = [d for elem in t[2] for d in elem]
                    fires = t[3] or any(x in tracked for x in t[1])
                else:
                    dsts = t[2]
                    fires = (t[0] == "atom" and t[3]) or any(x in tracked for x in t[1])
                if fires:
                    for d in dsts:
                        if d not in tracked:
                            tracked.add(d)
                            changed = True
        self.tracked = tracked
        for ci in self.insts:
            t = ci.taint
            if t is None:
                continue
            k = t[0]
            if k in ("alu", "warp", "atom"):
                keep = any(x in tracked for x in t[1]) or any(x in tracked for x in t[2]) or \
                    (k == "atom" and t[3])
            elif k == "ld":
                keep = t[3] or any(x in tracked for x in t[1]) or any(x in tracked for e in t[2] for x in e)
            elif k == "st":
                keep = any(x in tracked for x in t[1]) or any(x in tracked for e in (t[2] or ()) for x in e)
            else:                     # ctl, clear
                keep = any(x in tracked for x in t[1])
            if not keep:
                ci.taint = None


def _call_target(inst):
    for o in inst.operands:
        if isinstance(o, (Sym, Reg)):
            return o
    raise Unsupported(inst_text(inst))


# ====================================================================== per-function context

class FnCtx:
    def __init__(self, prog: Program, fn: Function, info: FuncInfo):
        self.prog = prog
        self.fn = fn
        self.info = info
        self.scope_of = []          # per statement: scope id
        self.scopes: list[dict] = []
        self.parent: list[int] = []
        self.labels: list[dict] = []
        self.branchtargets: dict = {}
        self.fixups = []            # (CInst, scope, label name, attr)

    # -- names
    def _lookup(self, name, scope):
        s = scope
        while s >= 0:
            if name in self.scopes[s]:
                return self.scopes[s][name]
            s = self.parent[s]
        lm = self.prog.loaded
        if name in lm.vars:
            return lm.vars[name]
        if name == "WARP_SZ":
            return ("const", 32)
        if name in self.prog.funcs:
            return ("func", self.prog.funcs[name])
        if name in lm.func_decls:
            return ("extern", name)
        raise Unsupported(f"unknown name {name} in {self.fn.name}")

    def _label_pc(self, name, scope):
        s = scope
        while s >= 0:
            if name in self.labels[s]:
                return self.labels[s][name]
            s = self.parent[s]
        raise Unsupported(f"unknown label {name} in {self.fn.name}")

    # -- pass 1: declarations and labels
    def declare(self):
        prog, info = self.prog, self.info
        self.scopes.append({})
        self.parent.append(-1)
        self.labels.append({})
        frame = 0
        # parameters
        for p in self.fn.params:
            if info.is_entry:
                if p.space != ".param":
                    raise Unsupported(f"kernel parameter in {p.space}")
                self.scopes[0][p.name] = ("kparam", prog.kparams[p.name])
            elif p.space == ".reg":
                slot = prog._new_reg(p.name, storage_dtype(p.type))
                info.reg_slots.append(slot)
                self.scopes[0][p.name] = ("reg", slot)
                info.formals.append(("reg", slot))
            else:
                ps = prog._new_pslot(p.size or 8)
                info.pslots.append(ps)
                self.scopes[0][p.name] = ("lparam", ps)
                info.formals.append(("lparam", ps))
        for p in self.fn.returns or []:
            if p.space == ".reg":
                slot = prog._new_reg(p.name, storage_dtype(p.type))
                info.reg_slots.append(slot)
                self.scopes[0][p.name] = ("reg", slot)
                info.rets.append(("reg", slot))
            else:
                ps = prog._new_pslot(p.size or 8)
                info.pslots.append(ps)
                self.scopes[0][p.name] = ("lparam", ps)
                info.rets.append(("lparam", ps))
        cur = 0
        npc = 0
        pending_labels = []
        for st in self.fn.body:
            if isinstance(st, ScopeOpen):
                self.scopes.append({})
                self.parent.append(cur)
                self.labels.append({})
                cur = len(self.scopes) - 1
            elif isinstance(st, ScopeClose):
                cur = self.parent[cur]
            elif isinstance(st, VarDecl):
                sc = self.scopes[cur]
                if st.space == ".reg":
                    dt = storage_dtype(st.type)
                    for name in st.register_names():
                        slot = prog._new_reg(name, dt)
                        info.reg_slots.append(slot)
                        sc[name] = ("reg", slot)
                elif st.space == ".local":
                    size = st.size or 0
                    align = st.align or node_type_size(st.type)
                    frame = -(-frame // align) * align
                    sc[st.name] = ("local", frame)
                    frame += size
                elif st.space == ".param":
                    ps = prog._new_pslot(st.size or 8)
                    info.pslots.append(ps)
                    sc[st.name] = ("lparam", ps)
                elif st.space in (".shared", ".global", ".const"):
                    sc[st.name] = prog.loaded.place_function_var(self.fn.name, st)
                else:
                    raise Unsupported(f"declaration in {st.space}")
            elif isinstance(st, Label):
                self.labels[cur][st.name] = None
                pending_labels.append((cur, st.name))
            elif isinstance(st, Directive) and st.name == ".branchtargets":
                if pending_labels:
                    sc, nm = pending_labels[-1]
                    self.branchtargets[(sc, nm)] = [a for a in st.args if a != ","]
            elif isinstance(st, Instruction):
                pending_labels = []
        info.frame_size = -(-frame // 16) * 16

    def check_contraction(self):
        """Plain (no rounding modifier) float mul feeding a plain add/sub: ptxas may fuse the
        pair into one fma (it does on sm_90), so the PTX does not determine the result."""
        if self.prog.loaded.fma_contraction == "separate":
            return
        muls = {}
        for st in self.fn.body:
            if isinstance(st, Instruction) and st.opcode == "mul" and _plain_float(st):
                d = st.operands[0] if st.operands else None
                if isinstance(d, Reg):
                    muls[d.name] = st
        if not muls:
            return
        # copies of a product (ptxas propagates them) count as the product
        changed = True
        while changed:
            changed = False
            for st in self.fn.body:
                if (isinstance(st, Instruction) and st.opcode == "mov" and len(st.operands) == 2
                        and isinstance(st.operands[0], Reg) and isinstance(st.operands[1], Reg)
                        and st.operands[1].name in muls and st.operands[0].name not in muls):
                    muls[st.operands[0].name] = muls[st.operands[1].name]
                    changed = True
        for st in self.fn.body:
            if isinstance(st, Instruction) and st.opcode in ("add", "sub") and _plain_float(st):
                for o in st.operands[1:]:
                    if isinstance(o, Reg) and o.name in muls:
                        raise Unsupported(
                            f"{inst_text(muls[o.name])} feeding {inst_text(st)}: without rounding "
                            f"modifiers ptxas may contract them into an fma")

    # -- pass 2: instructions
    def emit(self):
        self.check_contraction()
        prog, info = self.prog, self.info
        info.entry_pc = len(prog.insts)
        cur = 0
        scope_stack = [0]
        next_scope = 1
        self.cur_scope = 0
        body = self.fn.body
        for i, st in enumerate(body):
            if isinstance(st, ScopeOpen):
                scope_stack.append(next_scope)
                next_scope += 1
                cur = scope_stack[-1]
            elif isinstance(st, ScopeClose):
                scope_stack.pop()
                cur = scope_stack[-1]
            elif isinstance(st, Label):
                self.labels[cur][st.name] = len(prog.insts)
            elif isinstance(st, Instruction):
                self.cur_scope = cur
                self.cur_index = i
                ci = self.compile(st)
                ci.taint = self._taint_info(st, ci)
                ci.writes_mem = (ci.kind == MEM and st.opcode in ("st", "atom", "red", "cp")
                                 and self._space(st, ci.text) not in (".local", ".param", ".const"))
                if st.guard is not None and ci.kind not in (NOP,):
                    info_ = self._lookup(st.guard.reg.name, cur)
                    if info_[0] != "reg":
                        raise Unsupported(inst_text(st))
                    ci.guard = (info_[1], st.guard.negated)
                prog.insts.append(ci)
                ci.pc = len(prog.insts) - 1
                if ci.kind == CALL:
                    # the return lands on the next instruction
                    ci.extra.return_pc = len(prog.insts)
        # falling off the end of a function returns
        prog.insts.append(self._ret_inst(Instruction("ret")))

    def link(self):
        for ci, scope, name, kind in self.fixups:
            if kind == "bra":
                ci.target = self._label_pc(name, scope)
            elif kind == "brx":
                s = scope
                tbl = None
                while s >= 0:
                    if (s, name) in self.branchtargets:
                        tbl = self.branchtargets[(s, name)]
                        break
                    if name in self.labels[s]:
                        break
                    s = self.parent[s]
                if tbl is None:
                    raise Unsupported(f"brx.idx table {name}")
                ci.target = np.array([self._label_pc(t, scope) for t in tbl], np.int64)

    # ------------------------------------------------------------------ the taint bit
    def _tslots(self, op) -> list:
        """Register slots an operand reads or names (special registers and symbols: none)."""
        out = []
        for o in walk_operand(op):
            if isinstance(o, Reg) and not o.is_special:
                try:
                    k = self._lookup(o.name, self.cur_scope)
                except Unsupported:
                    continue
                if k[0] == "reg":
                    out.append(k[1])
        return out

    def _taint_info(self, inst: Instruction, ci: CInst):
        """How ``ci`` moves the taint bit (Program._taint_plan prunes what cannot matter):
        ``("alu", srcs, dsts)`` dsts = OR of srcs, lane by lane; ``("warp", srcs, dsts)`` the
        same across the lanes taking part; ``("ld", srcs, elems, mem, addr)`` each element's slots =
        guard and address taint | the loaded bytes' taint (``mem``: may read shared/local memory),
        and a sink (``address``) when the address is tainted;
        ``("st", addr, elems, tracked, sink)`` a sink when the address is tainted, or the value and the
        memory is not tracked (``tracked``: .shared/.local, whose bytes take the value's taint;
        ``sink``: ``call`` for .param, the arguments and results of calls, else ``store``); ``("atom", srcs, dsts, mem)``
        a sink, old value = srcs | memory; ``("ctl", srcs)`` a branch-like sink (guard, brx
        index); ``("clear", dsts)`` results computed by the block (bar.red): never tainted."""
        from ptx_ir import isa
        kind, op, ops = ci.kind, inst.opcode, list(inst.operands)
        guard = self._tslots(inst.guard.reg) if inst.guard is not None else []
        if kind in (BRA, BRX, EXIT, RET, CALL, TRAP):
            srcs = guard + (self._tslots(ops[0]) if kind == BRX and ops else [])
            return ("ctl", tuple(srcs)) if srcs else None
        if kind == NOP:
            return None
        if kind == BAR:
            dsts = self._tslots(ops[0]) if ".red" in inst.modifiers and ops else []
            return ("clear", tuple(dsts)) if dsts else None
        if kind == MEM:
            space = self._space(inst, inst_text(inst))
            if op in ("ld", "ldu") and len(ops) == 2:
                items = list(ops[0].items) if isinstance(ops[0], Vec) else [ops[0]]
                addr = tuple(self._tslots(ops[1]))
                return ("ld", tuple(guard) + addr,
                        tuple(tuple(self._tslots(o)) for o in items), space in (None, ".shared", ".local"), addr)
            if op == "st" and len(ops) == 2:
                items = list(ops[1].items) if isinstance(ops[1], Vec) else [ops[1]]
                return ("st", tuple(guard + self._tslots(ops[0])), tuple(tuple(self._tslots(o)) for o in items),
                        space in (".shared", ".local"), "call" if space == ".param" else "store")
            srcs = [x for r in isa.uses(inst) for x in self._tslots(r)]
            if op in ("atom", "red"):
                dsts = [x for r in isa.defs(inst) for x in self._tslots(r)]
                return ("atom", tuple(srcs), tuple(dsts), space in (None, ".shared"))
            return ("st", tuple(srcs), None, False, "store")   # cp.async: global data, addresses may be tainted
        srcs = [x for r in isa.uses(inst) for x in self._tslots(r)]
        dsts = [x for r in isa.defs(inst) for x in self._tslots(r)]
        if kind == WARP:
            return ("warp", tuple(srcs), tuple(dsts))
        if op in ("addc", "subc", "madc"):
            srcs.append(self.prog.cc_slot)
        if ".cc" in inst.modifiers:
            dsts.append(self.prog.cc_slot)
        return ("alu", tuple(srcs), tuple(dsts))

    # ------------------------------------------------------------------ operands
    def reader(self, op, t):
        """f(st, idx) -> array (lanes idx) or numpy scalar of natural_dtype(t)."""
        if isinstance(op, Imm):
            c = imm_scalar(op.value, op.text, t)
            return lambda st, idx: c
        if isinstance(op, Neg):
            r = self.reader(op.operand, ".pred")
            return lambda st, idx: ~r(st, idx)
        if isinstance(op, Reg):
            if op.is_special:
                return self.special_reader(op.name, t)
            kind = self._lookup(op.name, self.cur_scope)
            if kind[0] != "reg":
                return self.sym_reader(kind, t, op.name)
            return self.reg_reader(kind[1], t)
        if isinstance(op, (Sym, BinExpr)):
            base, off = _sym_off(op)
            kind = self._lookup(base, self.cur_scope)
            if kind[0] == "reg":
                if off:
                    raise Unsupported(str(op))
                return self.reg_reader(kind[1], t)
            return self.sym_reader(kind, t, str(op), off)
        raise Unsupported(f"operand {op}")

    def reg_reader(self, slot, t):
        sd = self.prog.reg_dtypes[slot]
        if t == ".pred":
            if sd != np.bool_:
                return lambda st, idx: (st.R[slot] if idx is None else st.R[slot][idx]) != 0
            return lambda st, idx: st.R[slot] if idx is None else st.R[slot][idx]
        nd = natural_dtype(t)
        if sd == np.bool_:
            raise Unsupported(f"predicate register read as {t}")
        if sd.itemsize == nd.itemsize:
            if sd == nd:
                return lambda st, idx: st.R[slot] if idx is None else st.R[slot][idx]
            return lambda st, idx: (st.R[slot] if idx is None else st.R[slot][idx]).view(nd)
        ut = UINT_OF_SIZE[nd.itemsize]
        if sd.itemsize > nd.itemsize:          # truncate
            return lambda st, idx: (st.R[slot] if idx is None else st.R[slot][idx]).astype(ut).view(nd)
        if is_signed(t):                       # narrower register: extend
            st_ = SINT_OF_SIZE[sd.itemsize]
            return lambda st, idx: (st.R[slot] if idx is None else st.R[slot][idx]).view(st_).astype(nd)
        return lambda st, idx: (st.R[slot] if idx is None else st.R[slot][idx]).astype(ut).view(nd)

    def writer(self, op, t):
        """f(st, idx, value) storing a value of natural_dtype(t)."""
        if isinstance(op, Sink):
            return lambda st, idx, v: None
        if not isinstance(op, Reg) or op.is_special:
            raise Unsupported(f"destination {op}")
        kind = self._lookup(op.name, self.cur_scope)
        if kind[0] != "reg":
            raise Unsupported(f"destination {op}")
        slot = kind[1]
        sd = self.prog.reg_dtypes[slot]
        if t == ".pred" or sd == np.bool_:
            if not (t == ".pred" and sd == np.bool_):
                raise Unsupported(f"{t} value written to register {op}")
            conv = None
        else:
            nd = natural_dtype(t)
            if sd.itemsize == nd.itemsize:
                conv = None if sd == nd else (lambda v: v.view(sd))
            elif sd.itemsize > nd.itemsize:
                if is_signed(t):
                    si = SINT_OF_SIZE[sd.itemsize]
                    conv = lambda v: np.asarray(v).astype(si).view(sd)   # noqa: E731
                else:
                    un = UINT_OF_SIZE[nd.itemsize]
                    conv = lambda v: np.asarray(v).view(un).astype(sd)   # noqa: E731
            else:
                un = UINT_OF_SIZE[nd.itemsize]
                conv = lambda v: np.asarray(v).view(un).astype(sd)       # noqa: E731

        ndarray = np.ndarray
        if conv is None:
            def w(st, idx, v):
                if idx is None:
                    if type(v) is not ndarray or v.ndim == 0 or v.dtype != sd:
                        v = np.full(st.N, v, sd) if np.ndim(v) == 0 else np.asarray(v, sd)
                    st.R[slot] = v
                else:
                    st.R[slot][idx] = v
        else:
            def w(st, idx, v):
                v = conv(v)
                if idx is None:
                    if type(v) is not ndarray or v.ndim == 0:
                        v = np.full(st.N, v, sd)
                    st.R[slot] = v
                else:
                    st.R[slot][idx] = v
        return w

    def special_reader(self, name, t):
        nd = natural_dtype(t) if t != ".pred" else None
        if nd is None:
            raise Unsupported(f"special register {name} as .pred")
        ut = UINT_OF_SIZE[nd.itemsize]

        def r(st, idx):
            v = st.sreg(name)
            if np.ndim(v) == 0:
                return np.asarray(v).astype(ut).view(nd)[()]
            v = v if idx is None else v[idx]
            return v.astype(ut).view(nd)
        return r

    def sym_reader(self, kind, t, text, off=0):
        """The address of a variable (or function) used as a value."""
        nd = natural_dtype(t)
        ut = UINT_OF_SIZE[nd.itemsize]
        k = kind[0]
        if k == "heap":
            c = ut((kind[1] + off) & ((1 << (8 * nd.itemsize)) - 1)).view(nd)
            return lambda st, idx: c
        if k == "shared":
            c = ut(kind[1] + off).view(nd)
            return lambda st, idx: c
        if k == "func":
            c = ut(kind[1].address & ((1 << (8 * nd.itemsize)) - 1)).view(nd)
            return lambda st, idx: c
        if k == "const":
            c = ut(kind[1] + off).view(nd)
            return lambda st, idx: c
        if k == "kparam":
            c = ut((M.KPARAM_BASE + kind[1][0] + off) & ((1 << (8 * nd.itemsize)) - 1)).view(nd)
            return lambda st, idx: c
        if k == "local":
            o = kind[1] + off

            def r(st, idx):
                fb = st.frame_base if idx is None else st.frame_base[idx]
                return (fb + o).astype(ut).view(nd)
            return r
        raise Unsupported(f"address of {text}")

    # ------------------------------------------------------------------ compile one instruction
    def compile(self, inst: Instruction) -> CInst:
        op = inst.opcode
        text = inst_text(inst)
        try:
            if op in ("ld", "ldu"):
                return self.c_ld(inst, text)
            if op == "st":
                return self.c_st(inst, text)
            if op in ("atom", "red"):
                return self.c_atom(inst, text)
            if op == "mov":
                return self.c_mov(inst, text)
            if op == "cvta":
                return self.c_cvta(inst, text)
            if op == "isspacep":
                return self.c_isspacep(inst, text)
            if op == "bra":
                ci = CInst(BRA, text=text)
                tgt = inst.operands[0]
                if not isinstance(tgt, Sym):
                    raise Unsupported(text)
                self.fixups.append((ci, self.cur_scope, tgt.name, "bra"))
                return ci
            if op == "brx":
                if ".idx" not in inst.modifiers:
                    raise Unsupported(text)
                rd = self.reader(inst.operands[0], ".u32")
                ci = CInst(BRX, text=text, extra=rd)
                self.fixups.append((ci, self.cur_scope, inst.operands[1].name, "brx"))
                return ci
            if op == "call":
                return self.c_call(inst, text)
            if op == "ret":
                return self._ret_inst(inst)
            if op == "exit":
                return CInst(EXIT, text=text)
            if op in ("trap", "brkpt"):
                return CInst(TRAP, text=text)
            if op in ("membar", "fence", "prefetch", "prefetchu", "nanosleep", "pmevent",
                      "griddepcontrol", "discard", "applypriority"):
                if op in ("fence",) and any(m.startswith(".proxy") for m in inst.modifiers):
                    pass
                return CInst(NOP, text=text)
            if op in ("bar", "barrier"):
                return self.c_bar(inst, text)
            if op in ("shfl", "vote", "match", "redux", "activemask"):
                return self.c_warp(inst, text)
            if op == "createpolicy":
                raise Unsupported(text)
            if op == "cp":
                return self.c_cp(inst, text)
            return self.c_alu(inst, text)
        except Unsupported as e:
            if e.what == text or str(e.what).startswith(inst.opcode):
                raise
            raise Unsupported(f"{text} ({e.what})") from None

    # ------------------------------------------------------------------ ALU
    def c_alu(self, inst, text):
        spec = decode_alu(inst, stand_ins=getattr(self.prog.loaded, "stand_ins", False))
        if spec is None:
            raise Unsupported(text)
        ops = list(inst.operands)
        dst_ops = []
        nd = len(spec.dsts)
        if nd == 2:
            if not isinstance(ops[0], Pair):
                raise Unsupported(text)
            dst_ops = [ops[0].first, ops[0].second]
            rest = ops[1:]
        else:
            d0 = ops[0]
            if isinstance(d0, Pair):
                raise Unsupported(text)
            dst_ops = [d0]
            rest = ops[1:]
        for k in spec.imm_operands:
            rest = rest[: k - 1]
        if len(rest) != len(spec.srcs):
            raise Unsupported(f"{text} (operand count)")
        srcs = [self.reader(o, t) for o, t in zip(rest, spec.srcs)]
        dsts = [self.writer(o, t) for o, t in zip(dst_ops, spec.dsts)]
        fn = spec.fn
        if spec.cc_in or spec.cc_out:
            self.prog.uses_cc = True
            cc = self.prog.cc_slot
            if spec.cc_in:
                srcs.append(self.reg_reader(cc, ".pred"))
            if spec.cc_out:
                dsts.append(_cc_writer(cc))
        ci = CInst(ALU, text=text)
        ci.may_fuse = spec.may_fuse
        ci.run = _make_alu_run(fn, srcs, dsts)
        return ci

    # ------------------------------------------------------------------ mov / cvta
    def c_mov(self, inst, text):
        t = inst.type
        d, s = inst.operands[0], inst.operands[1]
        if isinstance(s, Vec) or isinstance(d, Vec):
            return self.c_pack(inst, text, d, s, t)
        if isinstance(s, Reg) and s.is_special:
            r = self.special_reader(s.name, t)
            w = self.writer(d, t)
            ci = CInst(ALU, text=text)
            ci.run = lambda st, idx: w(st, idx, _fresh(r(st, idx)))
            return ci
        return self.c_alu(inst, text)

    def c_pack(self, inst, text, d, s, t):
        size = type_size(t)
        if isinstance(s, Vec) and not isinstance(d, Vec):
            k = len(s.items)
            pt = f".b{size * 8 // k}"
            rs = [self.reader(o, pt) for o in s.items]
            w = self.writer(d, t)
            ut = UINT_OF_SIZE[size]
            bits = size * 8 // k

            def run(st, idx):
                acc = None
                for i, r in enumerate(rs):
                    v = np.asarray(r(st, idx)).astype(ut) << ut(bits * i)
                    acc = v if acc is None else (acc | v)
                w(st, idx, acc.view(natural_dtype(t)) if np.ndim(acc) else acc)
            ci = CInst(ALU, text=text)
            ci.run = run
            return ci
        if isinstance(d, Vec) and not isinstance(s, Vec):
            k = len(d.items)
            bits = size * 8 // k
            pt = f".b{bits}"
            r = self.reader(s, f".b{size * 8}")
            ws = [self.writer(o, pt) for o in d.items]
            ut = UINT_OF_SIZE[size]
            pu = UINT_OF_SIZE[bits // 8]
            mask = ut((1 << bits) - 1)

            def run(st, idx):
                v = np.asarray(r(st, idx))
                for i, w in enumerate(ws):
                    w(st, idx, ((v >> ut(bits * i)) & mask).astype(pu))
            ci = CInst(ALU, text=text)
            ci.run = run
            return ci
        raise Unsupported(text)

    def c_cvta(self, inst, text):
        t = inst.type
        mods = inst.modifiers
        to = ".to" in mods
        space = next((SPACE_ALIASES.get(m, m) for m in mods if m in (".global", ".shared", ".local",
                                                                      ".const", ".param", ".shared::cta")), None)
        d, s = inst.operands
        size = type_size(t)
        ut = UINT_OF_SIZE[size]
        if space in (".global", ".const", ".param"):
            delta = 0
        elif space == ".shared":
            delta = M.SHARED_BASE
        elif space == ".local":
            delta = M.LOCAL_BASE
        else:
            raise Unsupported(text)
        r = self.reader(s, t)
        w = self.writer(d, t)
        if to:
            delta = -delta
        dd = ut(delta & ((1 << (8 * size)) - 1))

        def run(st, idx):
            v = np.asarray(r(st, idx)).view(ut) + dd
            w(st, idx, v.view(natural_dtype(t)))
        ci = CInst(ALU, text=text)
        ci.run = run
        return ci

    def c_isspacep(self, inst, text):
        space = next((SPACE_ALIASES.get(m, m) for m in inst.modifiers
                      if m in (".global", ".shared", ".local", ".const", ".param", ".shared::cta")), None)
        d, s = inst.operands
        r = self.reader(s, ".u64")
        w = self.writer(d, ".pred")

        def run(st, idx):
            a = np.asarray(r(st, idx), np.uint64)
            if space in (".global", ".const"):
                res = (a >= np.uint64(M.HEAP_BASE)) & (a < np.uint64(M.HEAP_BASE + st.heap.top))
            elif space == ".shared":
                res = (a >= np.uint64(M.SHARED_BASE)) & (a < np.uint64(M.SHARED_BASE + st.smem_size))
            elif space == ".local":
                res = (a >= np.uint64(M.LOCAL_BASE)) & (a < np.uint64(M.LOCAL_BASE + M.WINDOW))
            elif space == ".param":
                res = (a >= np.uint64(M.KPARAM_BASE)) & (a < np.uint64(M.KPARAM_BASE + st.kblob.size))
            else:
                raise Unsupported(text)
            w(st, idx, res)
        ci = CInst(ALU, text=text)
        ci.run = run
        return ci

    # ------------------------------------------------------------------ memory
    def _space(self, inst, text):
        space = None
        for m in inst.modifiers:
            if m in (".global", ".shared", ".local", ".const", ".param", ".shared::cta",
                     ".param::entry", ".param::func", ".shared::cluster", ".tex"):
                space = SPACE_ALIASES.get(m, m)
                if space is None:
                    raise Unsupported(text)
        if space == ".tex":
            raise Unsupported(text)
        return space   # None = generic

    def _addr(self, a: Addr, space, text):
        """(kind, fn) where fn(st, idx) gives uint64 addresses in the space's addressing."""
        if not isinstance(a, Addr) or a.extra:
            raise Unsupported(text)
        off = a.offset or 0
        base = a.base
        if isinstance(base, Reg):
            kind = self._lookup(base.name, self.cur_scope) if not base.is_special else ("reg", None)
            if kind[0] == "reg":
                slot = kind[1]
                sd = self.prog.reg_dtypes[slot]
                if sd not in (np.dtype(np.uint32), np.dtype(np.uint64)):
                    raise Unsupported(text)
                o = np.uint64(off & 0xFFFFFFFFFFFFFFFF)
                if sd == np.dtype(np.uint64):
                    if off:
                        return "addr", lambda st, idx: (st.R[slot] if idx is None else st.R[slot][idx]) + o
                    return "addr", lambda st, idx: st.R[slot] if idx is None else st.R[slot][idx]
                return "addr", lambda st, idx: (st.R[slot] if idx is None else st.R[slot][idx]).astype(np.uint64) + o
            base_name = base.name
        elif isinstance(base, (Sym, BinExpr)):
            base_name, o2 = _sym_off(base)
            off += o2
        elif isinstance(base, Imm):
            c = np.uint64(int(base.value) + off)
            return "addr", lambda st, idx: c
        else:
            raise Unsupported(text)
        kind = self._lookup(base_name, self.cur_scope)
        k = kind[0]
        if k in ("kparam", "lparam"):
            return k, (kind[1], off)
        if k == "heap":
            c = np.uint64(kind[1] + off)
            if space == ".shared" or space == ".local":
                raise Unsupported(text)
            return "addr", lambda st, idx: c
        if k == "shared":
            c = kind[1] + off
            if space == ".shared":
                cc = np.uint64(c)
                return "addr", lambda st, idx: cc
            if space is None:
                cc = np.uint64(M.SHARED_BASE + c)
                return "addr", lambda st, idx: cc
            raise Unsupported(text)
        if k == "local":
            o = kind[1] + off
            if space == ".local":
                return "addr", lambda st, idx: (st.frame_base if idx is None else st.frame_base[idx]).astype(np.uint64) + np.uint64(o)
            if space is None:
                return "addr", lambda st, idx: (st.frame_base if idx is None else st.frame_base[idx]).astype(np.uint64) + np.uint64(M.LOCAL_BASE + o)
            raise Unsupported(text)
        raise Unsupported(text)

    def _note_space(self, space):
        if space in (None, ".shared"):
            self.prog.uses_shared = True

    def c_ld(self, inst, text):
        space = self._space(inst, text)
        self._note_space(space)
        t = inst.type
        if t is None or t == ".b128":
            raise Unsupported(text)
        w = type_size(t)
        d, a = inst.operands[0], inst.operands[1]
        if len(inst.operands) != 2:
            raise Unsupported(text)
        items = list(d.items) if isinstance(d, Vec) else [d]
        k = len(items)
        if k != inst.vector_width:
            raise Unsupported(text)
        ws = [self.writer(o, t) for o in items]
        nd = natural_dtype(t)
        kind, af = self._addr(a, space, text)
        if kind == "kparam":
            (poff, psize), off = af
            o = poff + off
            if off + w * k > psize:
                raise Unsupported(text)

            def run(st, idx):
                raw = st.kblob[o: o + w * k].view(nd)
                for i, wr in enumerate(ws):
                    wr(st, idx, raw[i])
            return CInst(MEM, run, text)
        if kind == "lparam":
            ps, off = af
            if off % w or off + w * k > self.prog.pslot_sizes[ps]:
                raise Unsupported(text)
            col = off // w
            ut = UINT_OF_SIZE[w]

            def run(st, idx):
                P = st.P[ps].view(ut)
                rows = P if idx is None else P[idx]
                for i, wr in enumerate(ws):
                    wr(st, idx, rows[:, col + i].copy().view(nd))    # never alias the param
            return CInst(MEM, run, text)
        sp = space or "generic"
        # the read-only path: what the launch's nc_stale mode serves from memory as it was at launch
        nc = sp in (".global", "generic") and (inst.opcode == "ldu" or ".nc" in inst.modifiers)
        if nc:
            self.prog.uses_nc = True

        if k == 1:
            w0 = ws[0]

            def run(st, idx):
                v = st.load(sp, af(st, idx), idx, w, 1, nc)
                w0(st, idx, v.view(nd))
        else:
            def run(st, idx):
                v = st.load(sp, af(st, idx), idx, w, k, nc).view(nd)
                for i, wr in enumerate(ws):
                    wr(st, idx, np.ascontiguousarray(v[:, i]))
        return CInst(MEM, run, text)

    def c_st(self, inst, text):
        space = self._space(inst, text)
        self._note_space(space)
        t = inst.type
        if t is None or t == ".b128" or len(inst.operands) != 2:
            raise Unsupported(text)
        w = type_size(t)
        a, s = inst.operands
        items = list(s.items) if isinstance(s, Vec) else [s]
        k = len(items)
        if k != inst.vector_width:
            raise Unsupported(text)
        bt = f".b{w * 8}"
        rs = [self.reader(o, bt) for o in items]
        ut = UINT_OF_SIZE[w]
        kind, af = self._addr(a, space, text)
        if kind == "kparam":
            raise Unsupported(text)
        if kind == "lparam":
            ps, off = af
            if off % w or off + w * k > self.prog.pslot_sizes[ps]:
                raise Unsupported(text)
            col = off // w

            def run(st, idx):
                P = st.P[ps].view(ut)
                for i, r in enumerate(rs):
                    if idx is None:
                        P[:, col + i] = r(st, idx)
                    else:
                        P[idx, col + i] = r(st, idx)
            return CInst(MEM, run, text)
        sp = space or "generic"
        if space == ".const":
            raise Unsupported(text)
        if k == 1:
            r0 = rs[0]

            def run(st, idx):
                addrs = af(st, idx)
                st.store(sp, addrs, idx, w, 1, r0(st, idx))
        else:
            def run(st, idx):
                addrs = af(st, idx)
                n = st.N if idx is None else len(idx)
                vals = np.empty((n, k), ut)
                for i, r in enumerate(rs):
                    vals[:, i] = r(st, idx)
                st.store(sp, addrs, idx, w, k, vals)
        return CInst(MEM, run, text)

    def c_atom(self, inst, text):
        space = self._space(inst, text)
        self._note_space(space)
        if space not in (None, ".global", ".shared"):
            raise Unsupported(text)
        is_red = inst.opcode == "red"
        mods = inst.modifiers
        if inst.vector_width != 1:
            raise Unsupported(text)
        t = inst.type
        opn = next((m[1:] for m in mods if m[1:] in ("add", "min", "max", "and", "or", "xor", "exch",
                                                     "cas", "inc", "dec")), None)
        if opn is None or t is None:
            raise Unsupported(text)
        fn = _atom_fn(opn, t, mods, text)
        ops = list(inst.operands)
        if is_red:
            d, a, srcs = None, ops[0], ops[1:]
        else:
            d, a, srcs = ops[0], ops[1], ops[2:]
        need = 2 if opn == "cas" else 1
        if len(srcs) != need:
            raise Unsupported(text)
        w = type_size(t)
        bt = f".b{w * 8}"
        rs = [self.reader(o, bt) for o in srcs]
        wr = self.writer(d, t) if d is not None else None
        kind, af = self._addr(a, space, text)
        if kind != "addr":
            raise Unsupported(text)
        sp = space or "generic"
        nd = natural_dtype(t)

        kind = _atom_kind(opn, t)
        need_old = wr is not None and not isinstance(d, Sink)

        def run(st, idx):
            addrs = af(st, idx)
            vals = [r(st, idx) for r in rs]
            if opn == "cas":
                old = st.atomic(sp, addrs, idx, w, fn, vals[1], vals[0], kind=kind, need_old=need_old)
            else:
                old = st.atomic(sp, addrs, idx, w, fn, vals[0], kind=kind, need_old=need_old)
            if need_old:
                wr(st, idx, old.view(nd))
        return CInst(MEM, run, text)

    def c_cp(self, inst, text):
        """cp.async (global to shared, completed at once: a program may only read the
        destination after waiting, so finishing early is one of its legal orders);
        commit/wait are no-ops."""
        mods = inst.modifiers
        if ".async" not in mods or any(m.startswith((".bulk", ".mbarrier", ".reduce")) for m in mods):
            raise Unsupported(text)
        if any(m in (".commit_group", ".wait_group", ".wait_all") for m in mods):
            return CInst(NOP, text=text)
        ops = list(inst.operands)
        if len(ops) < 3 or not isinstance(ops[2], Imm):
            raise Unsupported(text)
        size = int(ops[2].value)
        if size not in (4, 8, 16) or ".shared" not in mods and ".shared::cta" not in mods:
            raise Unsupported(text)
        extra = ops[3:]
        if extra and not isinstance(extra[0], (Imm, Reg)) or len(extra) > 1:
            raise Unsupported(text)        # cache policy operands
        src_size = None
        if extra:
            if isinstance(extra[0], Reg):
                k = self._lookup(extra[0].name, self.cur_scope)
                if k[0] == "reg" and self.prog.reg_dtypes[k[1]] == np.bool_:
                    raise Unsupported(text)    # ignore-src predicate
            src_size = self.reader(extra[0], ".u32")
        self.prog.uses_shared = True
        kd, dst = self._addr(ops[0], ".shared", text)
        ks, src = self._addr(ops[1], ".global", text)
        if kd != "addr" or ks != "addr":
            raise Unsupported(text)
        k = size // 4

        def run(st, idx):
            v = st.load(".global", src(st, idx), idx, 4, k).reshape(-1, k)
            if src_size is not None:
                n = np.asarray(src_size(st, idx), np.int64)
                if np.any(n < size):
                    byte = np.arange(4 * k).reshape(1, -1)
                    keep = byte < np.reshape(n, (-1, 1))
                    v = (v.copy().view(np.uint8).reshape(v.shape[0], -1) * keep).astype(np.uint8)
                    v = v.reshape(-1).view(np.uint32).reshape(-1, k)
            st.store(".shared", dst(st, idx), idx, 4, k, v if k > 1 else v[:, 0])
        return CInst(MEM, run, text)

    # ------------------------------------------------------------------ control
    def _ret_inst(self, inst):
        ci = CInst(RET, text=inst_text(inst))
        ci.extra = self.info
        if self.info.is_entry:
            ci.kind = EXIT
        return ci

    def c_call(self, inst, text):
        ops = list(inst.operands)
        rets, args = [], []
        target = None
        i = 0
        if ops and isinstance(ops[0], Paren):
            if len(ops) > 1 and isinstance(ops[1], (Sym, Reg)):
                rets = list(ops[0].items)
                i = 1
        if i >= len(ops) or not isinstance(ops[i], (Sym, Reg)):
            raise Unsupported(text)
        target = ops[i]
        i += 1
        if i < len(ops) and isinstance(ops[i], Paren):
            args = list(ops[i].items)
            i += 1
        ret_kinds = []
        for r in rets:
            k = self._lookup(r.name, self.cur_scope)
            if k[0] not in ("lparam", "reg"):
                raise Unsupported(text)
            ret_kinds.append(k)
        arg_kinds = []
        for a in args:
            if isinstance(a, (Sym, Reg)):
                k = self._lookup(a.name, self.cur_scope)
                if k[0] not in ("lparam", "reg"):
                    raise Unsupported(text)
                arg_kinds.append(k)
            else:
                raise Unsupported(text)
        site = CallSite(len(self.prog.sites), self.info, None, arg_kinds, ret_kinds)
        if isinstance(target, Sym):
            k = self._lookup(target.name, self.cur_scope)
            if k[0] == "func":
                site.callee = k[1]
                if len(args) != len(k[1].formals) or len(rets) != len(k[1].rets):
                    raise Unsupported(f"{text} (argument count)")
            elif k[0] == "extern":
                if k[1] not in EXTERN_OK:
                    raise Unsupported(f"call to external function {k[1]}")
                site.extern = k[1]
                site.retval_used = self._retval_used(ret_kinds)
                if site.extern == "vprintf" and site.retval_used:
                    raise Unsupported(f"{text} (printf's return value is used)")
            else:
                raise Unsupported(text)
        else:
            site.indirect = self.reader(target, ".u64")
        self.prog.sites.append(site)
        ci = CInst(CALL, text=text, extra=site)
        return ci

    def _retval_used(self, ret_kinds):
        """Whether the value an external call returns is used: nvcc loads the return
        variable into a register after every call; it counts only if that register is
        read somewhere in the function."""
        slots = {(k[0], k[1]) for k in ret_kinds}
        if not slots:
            return False
        body = self.fn.body
        depth = 0
        loaded = set()
        for st in body[self.cur_index + 1:]:
            if isinstance(st, ScopeOpen):
                depth += 1
            elif isinstance(st, ScopeClose):
                if depth == 0:
                    break
                depth -= 1
            elif isinstance(st, Instruction):
                for j, o in enumerate(st.operands):
                    for x in walk_operand(o):
                        if isinstance(x, (Sym, Reg)):
                            try:
                                k = self._lookup(x.name, self.cur_scope)
                            except Unsupported:
                                continue
                            if (k[0], k[1]) in slots:
                                if st.opcode == "ld" and j == 1 and isinstance(st.operands[0], Reg):
                                    loaded.add(st.operands[0].name)
                                else:
                                    return True
        if not loaded:
            return False
        for st in body:
            if isinstance(st, Instruction):
                srcs = st.operands if st.opcode == "st" else st.operands[1:]
                for o in srcs:
                    for x in walk_operand(o):
                        if isinstance(x, Reg) and x.name in loaded:
                            return True
                if st.guard is not None and st.guard.reg.name in loaded:
                    return True
        return False

    def c_bar(self, inst, text):
        mods = inst.modifiers
        ops = list(inst.operands)
        if ".warp" in mods:
            mr = self.reader(ops[0], ".b32") if ops else (lambda st, idx: np.uint32(0xFFFFFFFF))
            ci = CInst(WARP, text=text)
            ci.extra = ("warpsync", mr)
            ci.run = lambda st, idx, E: None
            return ci
        if any(m in (".arrive",) for m in mods) or any(m.startswith(".cluster") for m in mods):
            raise Unsupported(text)
        if ".red" in mods:
            opn = next((m[1:] for m in mods if m[1:] in ("popc", "and", "or")), None)
            if opn is None:
                raise Unsupported(text)
            if opn == "popc":
                d, rest = ops[0], ops[1:]
                wr = self.writer(d, ".u32")
            else:
                d, rest = ops[0], ops[1:]
                wr = self.writer(d, ".pred")
            bid = rest[0]
            cnt = rest[1] if len(rest) == 3 else None
            pr = self.reader(rest[-1], ".pred")
            ci = CInst(BAR, text=text)
            ci.extra = (self.reader(bid, ".u32"), self.reader(cnt, ".u32") if cnt is not None else None,
                        opn, pr, wr)
            return ci
        if not ops:
            ops = [Imm("0")]
        bid = self.reader(ops[0], ".u32")
        cnt = self.reader(ops[1], ".u32") if len(ops) > 1 else None
        ci = CInst(BAR, text=text)
        ci.extra = (bid, cnt, None, None, None)
        return ci

    def c_warp(self, inst, text):
        op = inst.opcode
        mods = inst.modifiers
        ops = list(inst.operands)
        ci = CInst(WARP, text=text)
        if op == "activemask":
            wr = self.writer(ops[0], ".b32")
            ci.extra = ("activemask", None)
            ci.run = lambda st, idx, E: wr(st, idx, st.active_mask_of(idx))
            return ci
        if op == "shfl":
            if ".sync" not in mods:
                raise Unsupported(text)
            mode = next(m[1:] for m in mods if m[1:] in ("up", "down", "bfly", "idx"))
            d = ops[0]
            if isinstance(d, Pair):
                wd, wp = self.writer(d.first, ".b32"), self.writer(d.second, ".pred")
            else:
                wd, wp = self.writer(d, ".b32"), None
            ra, rb, rc, rm = (self.reader(ops[1], ".b32"), self.reader(ops[2], ".b32"),
                              self.reader(ops[3], ".b32"), self.reader(ops[4], ".b32"))
            ci.extra = ("shfl", rm)

            def run(st, idx, E):
                st.do_shfl(idx, mode, ra, rb, rc, wd, wp, text)
            ci.run = run
            return ci
        if op == "vote":
            mode = next((m[1:] for m in mods if m[1:] in ("all", "any", "uni", "ballot")), None)
            if mode is None:
                raise Unsupported(text)
            sync = ".sync" in mods
            d, p = ops[0], ops[1]
            rp = self.reader(p, ".pred")
            rm = self.reader(ops[2], ".b32") if sync else None
            wr = self.writer(d, ".b32" if mode == "ballot" else ".pred")
            ci.extra = ("vote", rm)

            def run(st, idx, E):
                st.do_vote(idx, mode, rp, rm, wr)
            ci.run = run
            return ci
        if op == "match":
            mode = next((m[1:] for m in mods if m[1:] in ("any", "all")), None)
            t = inst.type
            d = ops[0]
            if isinstance(d, Pair):
                wd, wp = self.writer(d.first, ".b32"), self.writer(d.second, ".pred")
            else:
                wd, wp = self.writer(d, ".b32"), None
            ra = self.reader(ops[1], t)
            rm = self.reader(ops[2], ".b32")
            ci.extra = ("match", rm)

            def run(st, idx, E):
                st.do_match(idx, mode, ra, rm, wd, wp)
            ci.run = run
            return ci
        if op == "redux":
            opn = next((m[1:] for m in mods if m[1:] in ("add", "min", "max", "and", "or", "xor")), None)
            t = inst.type
            if opn is None or t not in (".u32", ".s32", ".b32") or any(m in (".abs", ".NaN") for m in mods):
                raise Unsupported(text)
            wd = self.writer(ops[0], t)
            ra = self.reader(ops[1], t)
            rm = self.reader(ops[2], ".b32")
            ci.extra = ("redux", rm)

            def run(st, idx, E):
                st.do_redux(idx, opn, ra, rm, wd, natural_dtype(t))
            ci.run = run
            return ci
        raise Unsupported(text)


def _plain_float(inst):
    t = inst.type
    return (t is not None and is_float(t) and has_natural_dtype(t)
            and not any(m in (".rn", ".rz", ".rm", ".rp") for m in inst.modifiers))


def _sym_off(op):
    if isinstance(op, Sym):
        return op.name, 0
    if isinstance(op, BinExpr) and isinstance(op.left, Sym) and isinstance(op.right, Imm):
        v = int(op.right.value)
        return op.left.name, (v if op.op == "+" else -v)
    raise Unsupported(f"operand {op}")


def _fresh(v):
    return np.array(v, copy=True)


def _cc_writer(slot):
    def w(st, idx, v):
        if idx is None:
            st.R[slot] = np.asarray(v, bool)
        else:
            st.R[slot][idx] = v
    return w


def _make_alu_run(fn, srcs, dsts):
    n = len(srcs)
    if len(dsts) == 1:
        w0 = dsts[0]
        if n == 1:
            r0, = srcs
            return lambda st, idx: w0(st, idx, fn(r0(st, idx)))
        if n == 2:
            r0, r1 = srcs
            return lambda st, idx: w0(st, idx, fn(r0(st, idx), r1(st, idx)))
        if n == 3:
            r0, r1, r2 = srcs
            return lambda st, idx: w0(st, idx, fn(r0(st, idx), r1(st, idx), r2(st, idx)))
        return lambda st, idx: w0(st, idx, fn(*[r(st, idx) for r in srcs]))

    def run(st, idx):
        res = fn(*[r(st, idx) for r in srcs])
        for w, v in zip(dsts, res):
            w(st, idx, v)
    return run


# ------------------------------------------------------------------ atomics

def _atom_kind(opn, t):
    """How the memory model may batch an atomic (see memory.atomic_apply)."""
    if opn == "exch":
        return ("exch",)
    if opn == "cas":
        return ("cas",)
    if opn == "add" and t in (".f32", ".f64"):
        return ("fadd", natural_dtype(t), t == ".f32")
    if is_float(t):
        return None
    nd = natural_dtype(t)
    uf = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
          "or": np.bitwise_or, "xor": np.bitwise_xor}.get(opn)
    if uf is None:
        return None
    return ("assoc", uf, nd if opn in ("min", "max") else np.dtype(UINT_OF_SIZE[type_size(t)]))


def _atom_fn(opn, t, mods, text):
    w = type_size(t)
    ut = UINT_OF_SIZE[w]
    nd = natural_dtype(t)
    if opn == "add":
        if t == ".f32":
            return lambda o, v: fp.f32_add(o.view(np.float32), np.asarray(v, ut).view(np.float32), "rn",
                                           True).view(ut)
        if t == ".f64":
            return lambda o, v: fp.f64_add(o.view(np.float64), np.asarray(v, ut).view(np.float64)).view(ut)
        if t in (".f16", ".bf16"):
            fmt = t[1:]
            return lambda o, v: np.asarray(fp.h_add(o.view(nd), np.asarray(v, ut).view(nd), fmt)).view(ut)
        if t in (".f16x2", ".bf16x2"):
            from ptx_ir.semantics.alu import x2
            fmt = t[1:-2]
            add2 = x2(lambda p, q: fp.h_add(p, q, fmt), fmt)
            return lambda o, v: np.asarray(add2(o, np.asarray(v, ut))).astype(ut)
        if is_float(t):
            raise Unsupported(text)
        return lambda o, v: o + np.asarray(v, ut)
    if is_float(t) and opn not in ("exch", "cas"):
        raise Unsupported(text)
    if opn in ("min", "max"):
        f = np.minimum if opn == "min" else np.maximum
        if is_signed(t):
            return lambda o, v: f(o.view(nd), np.asarray(v, ut).view(nd)).view(ut)
        return lambda o, v: f(o, np.asarray(v, ut))
    if opn == "and":
        return lambda o, v: o & np.asarray(v, ut)
    if opn == "or":
        return lambda o, v: o | np.asarray(v, ut)
    if opn == "xor":
        return lambda o, v: o ^ np.asarray(v, ut)
    if opn == "exch":
        return lambda o, v: np.broadcast_to(np.asarray(v, ut), o.shape).copy()
    if opn == "cas":
        return lambda o, v, c: np.where(o == np.asarray(c, ut), np.asarray(v, ut), o).astype(ut)
    if opn == "inc":
        if t != ".u32":
            raise Unsupported(text)
        return lambda o, v: np.where(o >= np.asarray(v, ut), ut(0), o + ut(1)).astype(ut)
    if opn == "dec":
        if t != ".u32":
            raise Unsupported(text)
        return lambda o, v: np.where((o == 0) | (o > np.asarray(v, ut)), np.asarray(v, ut), o - ut(1)).astype(ut)
    raise Unsupported(text)
