"""What each instruction does to the lanes: the transfer functions of the tracer.

:class:`LaneSemantics` evaluates one instruction for a set of lanes: integer and address
arithmetic exactly where the operands are exact and by interval arithmetic
(:mod:`.intervals`) where they are not, comparisons into predicate formulas, loads and
stores into the :class:`~superopt.specs.trace.accesses.AccessRecorder`, and everything it does
not model (floating point, warp collectives, opaque results) into "unknown". Lanes whose
guard is unknown run the instruction as a ``maybe`` (the result is joined with the old one).
"""
from __future__ import annotations

import numpy as np

from ptx_ir import isa
from ptx_ir.nodes import Addr, Imm, Instruction, Neg, Pair, Reg, Sym, Vec, type_size
from superopt.specs.trace.accesses import TraceError
from superopt.specs.trace.domain import map_formulas
from superopt.specs.trace.intervals import (FLOAT_TYPES, I64, INT_TYPES, LOCAL_END, LOCAL_WIN,
                                            PARAM_STRIDE, SHARED_WIN, _const, _fit, _full,
                                            _mul_iv, _mulhi, _norm_interval, _pred_combine,
                                            _rewidth, _signed_type, _type_range, _unsigned_exact,
                                            _unsigned_view, _uv, _width_of_type, _wrap,
                                            exact_div, exact_rem)

_CMPS = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}


class LaneSemantics:
    """Transfer functions over a :class:`~superopt.specs.trace.domain.LaneDomain` (``dom``)
    that report memory accesses to an ``AccessRecorder`` (``rec``). ``params``: param index
    -> kind (see :func:`superopt.specs.trace.trace`); ``warp_check(inst, sel, mask)``: the
    scheduler's test that every lane of a warp reaches a full-mask collective."""

    def __init__(self, dom, rec, *, params: dict, param_index: dict, warp_check):
        self.dom = dom
        self.rec = rec
        self.params = params
        self.param_index = param_index
        self.warp_check = warp_check
        self.extra = None             # lanes an instruction forked (the scheduler adds them)

    def exec(self, inst: Instruction, sel: np.ndarray) -> None:
        maybe = None
        if inst.guard is not None:
            plo, phi = self.dom.pred(inst.guard.reg.name, sel)
            if inst.guard.negated:
                plo, phi = 1 - phi, 1 - plo
            run = phi == 1
            if not run.all():
                sel = sel[run]
                plo = plo[run]
            if sel.size == 0:
                return
            m = plo == 0
            maybe = m if m.any() else None
        handler = getattr(self, "op_" + inst.opcode.replace(".", "_"), None)
        if handler is None:
            self._unknown(inst, sel, maybe)
        else:
            handler(inst, sel, maybe)

    def _unknown(self, inst, sel, maybe):
        if _touches_global(inst):
            raise TraceError(f"unsupported memory instruction {inst.name}")
        self._defs_top(inst, sel, maybe, inst.opcode)

    def _defs_top(self, inst, sel, maybe, why):
        for r in isa.defs(inst):
            self.dom.put_top(r.name, sel, self.dom.widths.get(r.name, 32), frozenset({why}), maybe)
            if r.name in self.dom.pfid:
                self.dom.pfid[r.name][sel] = -1

    # ---- helpers for ALU ops
    def _dst_w(self, inst, default=None):
        d = inst.operands[0]
        if isinstance(d, Reg):
            return self.dom.widths.get(d.name, default or _width_of_type(inst.type))
        return default or _width_of_type(inst.type)

    def _store(self, inst, sel, maybe, lo, hi, taint, w):
        d = inst.operands[0]
        if isinstance(d, Reg):
            wd = self.dom.widths.get(d.name, w)
            if wd != w and wd != 1:
                lo, hi = _rewidth(lo, hi, w, wd, _signed_type(inst.type))
            self.dom.put(d.name, sel, lo, hi, taint, maybe)
            if d.name in self.dom.pfid:
                self.dom.pfid[d.name][sel] = -1

    def _int_op(self, inst) -> bool:
        t = inst.type
        return t is not None and t in INT_TYPES

    def _binary(self, inst, sel, maybe, exact, interval, w=None, wout=None, unsigned_src=False):
        """Generic two-source integer op: exact(a, b) on int64, interval(alo, ahi, blo, bhi)
        on float64 (or None: full range) for lanes with an unknown source."""
        w = w or _width_of_type(inst.type)
        wout = wout or w
        alo, ahi, ta = self.dom.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.dom.get(inst.operands[2], sel, w)
        with np.errstate(all="ignore"):
            r = exact(alo, blo)
        r = _wrap(np.asarray(r, I64), wout)
        rhi = r.copy()
        inex = (alo != ahi) | (blo != bhi)
        if inex.any():
            if interval is None:
                ilo, ihi = _full(wout, int(inex.sum()))
            else:
                with np.errstate(all="ignore"):
                    fl, fh = interval(alo[inex].astype(np.float64), ahi[inex].astype(np.float64),
                                      blo[inex].astype(np.float64), bhi[inex].astype(np.float64))
                ilo, ihi = _norm_interval(fl, fh, wout)
            r[inex] = ilo
            rhi[inex] = ihi
        self._store(inst, sel, maybe, r, rhi, ta | tb, wout)

    # ---- data movement
    def op_mov(self, inst, sel, maybe):
        d, s = inst.operands[0], inst.operands[1]
        t = inst.type
        if t in FLOAT_TYPES:
            src = self._fsrc(s, sel, t) if t in _EXACT_FLOAT else None
            self._defs_top(inst, sel, maybe, "float")
            if src is not None:
                self._fput(d, sel, *src, maybe)
            return
        if t == ".pred":
            lo, hi, ta = self.dom.get(s, sel, 1)
            self.dom.put(d.name, sel, lo, hi, ta, maybe)
            if isinstance(s, Reg) and s.name in self.dom.pfid:
                self.dom.set_pfid(d.name, sel, self.dom.pfid[s.name][sel] if maybe is None
                               else np.where(maybe, -1, self.dom.pfid[s.name][sel]))
            elif d.name in self.dom.pfid:
                self.dom.pfid[d.name][sel] = -1
            return
        w = _width_of_type(t)
        if isinstance(d, Vec):            # unpack
            lo, hi, ta = self.dom.get(s, sel, w)
            parts = len(d.items)
            pw = w // parts
            exact = lo == hi
            for i, item in enumerate(d.items):
                if not isinstance(item, Reg):
                    continue
                v = _wrap(np.right_shift(lo, pw * i), pw) if pw < 64 else lo
                vhi = v.copy()
                flo, fhi = _full(pw, sel.size)
                v = np.where(exact, v, flo)
                vhi = np.where(exact, vhi, fhi)
                self.dom.put(item.name, sel, v, vhi, ta, maybe)
            return
        if isinstance(s, Vec):            # pack
            parts = len(s.items)
            pw = w // parts
            acc = np.zeros(sel.size, I64)
            exact = np.ones(sel.size, bool)
            taint = frozenset()
            for i, item in enumerate(s.items):
                lo, hi, ti = self.dom.get(item, sel, pw)
                exact &= lo == hi
                acc |= np.left_shift(_unsigned_exact(lo, pw), pw * i)
                taint |= ti
            acc = _wrap(acc, w)
            flo, fhi = _full(w, sel.size)
            self._store(inst, sel, maybe, np.where(exact, acc, flo), np.where(exact, acc, fhi), taint, w)
            return
        lo, hi, ta = self.dom.get(s, sel, w)
        lo, hi = _fit(lo, hi, w)
        self._store(inst, sel, maybe, lo, hi, ta, w)

    def op_cvta(self, inst, sel, maybe):
        s = inst.operands[1]
        w = _width_of_type(inst.type)
        lo, hi, ta = self.dom.get(s, sel, w)
        to = ".to" in inst.modifiers
        space = inst.space or ""
        if space.startswith(".shared"):
            if to:
                lo = np.where(lo >= SHARED_WIN, lo - SHARED_WIN, lo)
                hi = np.where(hi >= SHARED_WIN, hi - SHARED_WIN, hi)
            else:
                lo, hi = lo + SHARED_WIN, hi + SHARED_WIN
        elif space == ".param":
            lo, hi = _full(64, sel.size)
            ta = ta | {"param-space"}
        self._store(inst, sel, maybe, lo, hi, ta, w)

    def op_cvt(self, inst, sel, maybe):
        types = inst.types
        if len(types) != 2 or types[0] not in INT_TYPES or types[1] not in INT_TYPES:
            if len(types) == 2:
                return self._fcvt(inst, sel, maybe, *types)
            return self._defs_top(inst, sel, maybe, "float")
        dt, st = types
        sw, dw = _width_of_type(st), _width_of_type(dt)
        lo, hi, ta = self.dom.get(inst.operands[1], sel, max(sw, 32))
        # the source as its own type
        exact = lo == hi
        if st[1] == "s":
            v = _wrap(lo, sw)
            flo, fhi = _norm_interval(lo, hi, sw)
        else:
            v = _unsigned_exact(lo, sw) if sw < 64 else lo
            if sw < 64:
                flo, fhi = _unsigned_view(lo, hi, sw)
                flo, fhi = flo.astype(I64), fhi.astype(I64)
            else:
                flo, fhi = lo, hi
        vlo = np.where(exact, v, flo)
        vhi = np.where(exact, v, fhi)
        if ".sat" in inst.modifiers:
            rlo, rhi = _type_range(dt)
            vlo, vhi = np.clip(vlo, rlo, rhi), np.clip(vhi, rlo, rhi)
        # to the destination type
        ex2 = vlo == vhi
        r = _wrap(vlo, dw)
        if dt[1] == "u" and dw < 64:
            r = _unsigned_exact(r, dw)
        nlo, nhi = _norm_interval(vlo, vhi, dw)
        if dt[1] == "u" and dw < 64:
            ulo, uhi = _unsigned_view(nlo, nhi, dw)
            nlo, nhi = ulo.astype(I64), uhi.astype(I64)
        self._store_typed(inst, sel, maybe, np.where(ex2, r, nlo), np.where(ex2, r, nhi), ta, dw, dt)

    def _store_typed(self, inst, sel, maybe, lo, hi, taint, w, t):
        """Store a value of type t (w bits, already in t's own numeric range) into the dest."""
        d = inst.operands[0]
        if not isinstance(d, Reg):
            return
        wd = self.dom.widths.get(d.name, w)
        if wd >= 64:
            self.dom.put(d.name, sel, lo, hi, taint, maybe)
            return
        ex = lo == hi
        r = _wrap(lo, wd)
        nlo, nhi = _norm_interval(lo, hi, wd)
        self.dom.put(d.name, sel, np.where(ex, r, nlo), np.where(ex, r, nhi), taint, maybe)

    # ---- integer arithmetic
    def op_add(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._farith(inst, sel, maybe, np.add)
        if any(m in inst.modifiers for m in (".cc",)):
            return self._defs_top(inst, sel, maybe, "carry")
        self._binary(inst, sel, maybe, lambda a, b: a + b, lambda al, ah, bl, bh: (al + bl, ah + bh))

    def op_sub(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._farith(inst, sel, maybe, np.subtract)
        if ".cc" in inst.modifiers:
            return self._defs_top(inst, sel, maybe, "carry")
        self._binary(inst, sel, maybe, lambda a, b: a - b, lambda al, ah, bl, bh: (al - bh, ah - bl))

    def op_addc(self, inst, sel, maybe):
        self._defs_top(inst, sel, maybe, "carry")

    op_subc = op_addc
    op_madc = op_addc

    def op_mul(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._farith(inst, sel, maybe, np.multiply)
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)
        mods = inst.modifiers
        if ".wide" in mods:
            def ex(a, b):
                if uns:
                    return (_unsigned_exact(a, w).astype(np.uint64) * _unsigned_exact(b, w).astype(np.uint64)).view(I64)
                return a * b
            self._binary(inst, sel, maybe, ex, _mul_iv(uns, w), w=w, wout=2 * w)
        elif ".hi" in mods:
            self._binary(inst, sel, maybe, lambda a, b: _mulhi(a, b, w, uns), None, w=w)
        else:
            self._binary(inst, sel, maybe, lambda a, b: a * b, _mul_iv(uns, w), w=w)

    def op_mul24(self, inst, sel, maybe):
        self._defs_top(inst, sel, maybe, "mul24")

    op_mad24 = op_mul24

    def op_mad(self, inst, sel, maybe):
        if not self._int_op(inst) or ".cc" in inst.modifiers:
            return self._defs_top(inst, sel, maybe, "float" if not self._int_op(inst) else "carry")
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)
        mods = inst.modifiers
        wout = 2 * w if ".wide" in mods else w
        alo, ahi, ta = self.dom.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.dom.get(inst.operands[2], sel, w)
        clo, chi, tc = self.dom.get(inst.operands[3], sel, wout)
        with np.errstate(all="ignore"):
            if ".hi" in mods:
                r = _mulhi(alo, blo, w, uns) + clo
            elif ".wide" in mods and uns:
                r = (_unsigned_exact(alo, w).astype(np.uint64) * _unsigned_exact(blo, w).astype(np.uint64)).view(I64) + clo
            else:
                r = alo * blo + clo
        r = _wrap(r, wout)
        rhi = r.copy()
        inex = (alo != ahi) | (blo != bhi) | (clo != chi)
        if inex.any():
            if ".hi" in mods:
                ilo, ihi = _full(wout, int(inex.sum()))
            else:
                fl, fh = _mul_iv(uns, w)(*(x[inex].astype(np.float64) for x in (alo, ahi, blo, bhi)))
                ilo, ihi = _norm_interval(fl + clo[inex], fh + chi[inex], wout)
            r[inex] = ilo
            rhi[inex] = ihi
        self._store(inst, sel, maybe, r, rhi, ta | tb | tc, wout)

    def op_div(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._farith(inst, sel, maybe, np.divide)
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)

        def ex(a, b):                  # ptx_ir's semantics (a zero divisor: see _div_zero)
            return exact_div(a, b, w, not uns)

        def iv(al, ah, bl, bh):
            if uns:
                al, ah = _uv(al, ah, w)
                bl, bh = _uv(bl, bh, w)
            cands = [np.trunc(x / y) for x in (al, ah) for y in (bl, bh)]
            lo = np.minimum.reduce(cands)
            hi = np.maximum.reduce(cands)
            zero = (bl <= 0) & (bh >= 0)
            return np.where(zero, -np.inf, lo), np.where(zero, np.inf, hi)
        self._binary(inst, sel, maybe, ex, iv, w=w)
        self._div_zero(inst, sel)

    def _div_zero(self, inst, sel):
        # Division by zero has no defined result: make it unknown.
        d = inst.operands[0]
        if not isinstance(d, Reg) or d.name not in self.dom.regs.lo:
            return
        blo, bhi, _ = self.dom.get(inst.operands[2], sel, _width_of_type(inst.type))
        z = (blo <= 0) & (bhi >= 0)
        if z.any():
            w = self.dom.widths.get(d.name, 32)
            flo, fhi = _full(w, int(z.sum()))
            self.dom.regs.lo[d.name][sel[z]] = flo
            self.dom.regs.hi[d.name][sel[z]] = fhi
            self.dom.regs.taint[d.name] = self.dom.regs.taint[d.name] | {"division by zero"}

    def op_rem(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)

        def ex(a, b):
            return exact_rem(a, b, w, not uns)

        def iv(al, ah, bl, bh):
            if uns:
                al, ah = _uv(al, ah, w)
                bl, bh = _uv(bl, bh, w)
                return np.zeros_like(al), np.minimum(ah, np.maximum(bh - 1, 0))
            mb = np.maximum(np.abs(bl), np.abs(bh)) - 1
            lo = np.where(al >= 0, 0, np.maximum(al, -mb))
            hi = np.where(ah <= 0, 0, np.minimum(ah, mb))
            return lo, hi
        self._binary(inst, sel, maybe, ex, iv, w=w)
        self._div_zero(inst, sel)

    def op_and(self, inst, sel, maybe):
        if inst.type == ".pred":
            return self._pred_logic(inst, sel, maybe, "and")
        w = _width_of_type(inst.type)

        def iv(al, ah, bl, bh):
            an = al >= 0
            bn = bl >= 0
            hi = np.where(an & bn, np.minimum(ah, bh), np.where(an, ah, np.where(bn, bh, np.inf)))
            lo = np.where(an | bn, 0, -np.inf)
            return lo, hi
        self._binary(inst, sel, maybe, lambda a, b: a & b, iv, w=w)

    def op_or(self, inst, sel, maybe):
        if inst.type == ".pred":
            return self._pred_logic(inst, sel, maybe, "or")
        w = _width_of_type(inst.type)

        def iv(al, ah, bl, bh):
            nn = (al >= 0) & (bl >= 0)
            top = 2.0 ** np.ceil(np.log2(np.maximum(ah, bh) + 1)) - 1
            return np.where(nn, np.maximum(al, bl), -np.inf), np.where(nn, top, np.inf)
        self._binary(inst, sel, maybe, lambda a, b: a | b, iv, w=w)

    def op_xor(self, inst, sel, maybe):
        if inst.type == ".pred":
            return self._pred_logic(inst, sel, maybe, "xor")
        w = _width_of_type(inst.type)

        def iv(al, ah, bl, bh):
            nn = (al >= 0) & (bl >= 0)
            top = 2.0 ** np.ceil(np.log2(np.maximum(ah, bh) + 1)) - 1
            return np.where(nn, 0, -np.inf), np.where(nn, top, np.inf)
        self._binary(inst, sel, maybe, lambda a, b: a ^ b, iv, w=w)

    def op_not(self, inst, sel, maybe):
        if inst.type == ".pred":
            return self._pred_logic(inst, sel, maybe, "not")
        w = _width_of_type(inst.type)
        lo, hi, ta = self.dom.get(inst.operands[1], sel, w)
        self._store(inst, sel, maybe, _wrap(~hi, w), _wrap(~lo, w), ta, w)

    def op_cnot(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        lo, hi, ta = self.dom.get(inst.operands[1], sel, w)
        ex = lo == hi
        r = (lo == 0).astype(I64)
        self._store(inst, sel, maybe, np.where(ex, r, 0), np.where(ex, r, 1), ta, w)

    def op_neg(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        lo, hi, ta = self.dom.get(inst.operands[1], sel, w)
        ex = lo == hi
        r = _wrap(-lo, w)
        nlo, nhi = _norm_interval(-hi.astype(np.float64), -lo.astype(np.float64), w)
        self._store(inst, sel, maybe, np.where(ex, r, nlo), np.where(ex, r, nhi), ta, w)

    def op_abs(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        lo, hi, ta = self.dom.get(inst.operands[1], sel, w)
        ex = lo == hi
        r = _wrap(np.abs(lo), w)
        flo = np.where(lo >= 0, lo, np.where(hi <= 0, -hi, 0)).astype(np.float64)
        fhi = np.where(lo >= 0, hi, np.where(hi <= 0, -lo, np.maximum(-lo, hi))).astype(np.float64)
        nlo, nhi = _norm_interval(flo, fhi, w)
        self._store(inst, sel, maybe, np.where(ex, r, nlo), np.where(ex, r, nhi), ta, w)

    def _minmax(self, inst, sel, maybe, fn):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)
        if uns and w < 64:
            def ex(a, b):
                return fn(_unsigned_exact(a, w), _unsigned_exact(b, w))

            def iv(al, ah, bl, bh):
                al, ah = _uv(al, ah, w)
                bl, bh = _uv(bl, bh, w)
                return fn(al, bl), fn(ah, bh)
        elif uns:
            def ex(a, b):
                return fn(a.view(np.uint64), b.view(np.uint64)).view(I64)
            iv = None
        else:
            ex = fn

            def iv(al, ah, bl, bh):
                return fn(al, bl), fn(ah, bh)
        self._binary(inst, sel, maybe, ex, iv, w=w)

    def op_min(self, inst, sel, maybe):
        self._minmax(inst, sel, maybe, np.minimum)

    def op_max(self, inst, sel, maybe):
        self._minmax(inst, sel, maybe, np.maximum)

    def op_shl(self, inst, sel, maybe):
        w = _width_of_type(inst.type)

        def ex(a, b):
            ub = np.clip(_unsigned_exact(b, 32), 0, w)
            return np.where(ub >= w, 0, np.left_shift(a, np.minimum(ub, 63)))

        def iv(al, ah, bl, bh):
            ok = (bl == bh) & (bl >= 0) & (bl < w)
            f = 2.0 ** np.where(ok, bl, 0)
            return np.where(ok, al * f, -np.inf), np.where(ok, ah * f, np.inf)
        self._binary(inst, sel, maybe, ex, iv, w=w)

    def op_shr(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)

        def ex(a, b):
            ub = np.clip(_unsigned_exact(b, 32), 0, 63)
            if uns:
                if w >= 64:
                    return np.where(ub >= 64, 0, np.right_shift(a.view(np.uint64), ub.astype(np.uint64))).astype(np.uint64).view(I64)
                return np.where(ub >= w, 0, np.right_shift(_unsigned_exact(a, w), ub))
            return np.right_shift(a, np.minimum(ub, 63))

        def iv(al, ah, bl, bh):
            bl = np.clip(bl, 0, 63)
            bh = np.clip(bh, 0, 63)
            if uns:
                al, ah = _uv(al, ah, w)
                return np.floor(al / 2.0 ** bh), np.floor(ah / 2.0 ** bl)
            c = [np.floor(x / 2.0 ** y) for x in (al, ah) for y in (bl, bh)]
            return np.minimum.reduce(c), np.maximum.reduce(c)
        self._binary(inst, sel, maybe, ex, iv, w=w)

    def op_shf(self, inst, sel, maybe):
        w = 32
        alo, ahi, ta = self.dom.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.dom.get(inst.operands[2], sel, w)
        clo, chi, tc = self.dom.get(inst.operands[3], sel, w)
        ex = (alo == ahi) & (blo == bhi) & (clo == chi)
        n = _unsigned_exact(clo, 32)
        n = n & 31 if ".wrap" in inst.modifiers else np.minimum(n, 32)
        v = (_unsigned_exact(blo, 32).astype(np.uint64) << np.uint64(32)) | _unsigned_exact(alo, 32).astype(np.uint64)
        if ".l" in inst.modifiers:
            r = ((v << n.astype(np.uint64)) >> np.uint64(32)) & np.uint64(0xFFFFFFFF)
        else:
            r = (v >> n.astype(np.uint64)) & np.uint64(0xFFFFFFFF)
        r = _wrap(r.astype(I64), 32)
        flo, fhi = _full(32, sel.size)
        self._store(inst, sel, maybe, np.where(ex, r, flo), np.where(ex, r, fhi), ta | tb | tc, 32)

    def op_bfe(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)
        alo, ahi, ta = self.dom.get(inst.operands[1], sel, w)
        plo, phi, tp = self.dom.get(inst.operands[2], sel, 32)
        llo, lhi, tl = self.dom.get(inst.operands[3], sel, 32)
        pos = np.clip(_unsigned_exact(plo, 32) & 0xFF, 0, w)
        ln = np.clip(_unsigned_exact(llo, 32) & 0xFF, 0, w)
        ua = _unsigned_exact(alo, w) if w < 64 else alo
        with np.errstate(all="ignore"):
            field_ = np.right_shift(ua, np.minimum(pos, 63)) & ((np.left_shift(np.ones_like(ln), np.minimum(ln, 63))) - 1)
            if not uns:
                sign = (ln > 0) & ((np.right_shift(field_, np.maximum(ln - 1, 0)) & 1) == 1)
                field_ = np.where(sign, field_ - np.left_shift(np.ones_like(ln), np.minimum(ln, 63)), field_)
        r = _wrap(np.where(ln == 0, 0, field_), w)
        ex = (alo == ahi) & (plo == phi) & (llo == lhi)
        lenx = (llo == lhi)
        top = np.left_shift(np.ones_like(ln), np.minimum(ln, 62)).astype(np.float64)
        flo = np.where(lenx, 0.0 if uns else -top / 2, -np.inf)
        fhi = np.where(lenx, top - 1 if uns else top / 2 - 1, np.inf)
        nlo, nhi = _norm_interval(flo, fhi, w)
        self._store(inst, sel, maybe, np.where(ex, r, nlo), np.where(ex, r, nhi), ta | tp | tl, w)

    def op_popc(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        lo, hi, ta = self.dom.get(inst.operands[1], sel, w)
        u = (_unsigned_exact(lo, w) if w < 64 else lo).view(np.uint64) if w >= 64 else _unsigned_exact(lo, w).astype(np.uint64)
        r = np.zeros(sel.size, I64)
        for i in range(w):
            r += ((u >> np.uint64(i)) & np.uint64(1)).astype(I64)
        ex = lo == hi
        self._store_typed(inst, sel, maybe, np.where(ex, r, 0), np.where(ex, r, w), ta, 32, ".u32")

    def op_clz(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        lo, hi, ta = self.dom.get(inst.operands[1], sel, w)
        u = _unsigned_exact(lo, w).astype(np.uint64) if w < 64 else lo.view(np.uint64)
        r = np.full(sel.size, w, I64)
        for i in range(w):
            bit = ((u >> np.uint64(i)) & np.uint64(1)) == 1
            r = np.where(bit, w - 1 - i, r)
        ex = lo == hi
        self._store_typed(inst, sel, maybe, np.where(ex, r, 0), np.where(ex, r, w), ta, 32, ".u32")

    def op_bfind(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        lo, hi, ta = self.dom.get(inst.operands[1], sel, w)
        self._store_typed(inst, sel, maybe, np.full(sel.size, -1, I64), np.full(sel.size, w - 1, I64), ta | {"bfind"}, 32, ".s32")

    def op_brev(self, inst, sel, maybe):
        self._defs_top(inst, sel, maybe, "brev")

    op_bfi = op_brev
    op_prmt = op_brev
    op_lop3 = op_brev
    op_sad = op_brev
    op_dp4a = op_brev
    op_dp2a = op_brev

    def op_selp(self, inst, sel, maybe):
        t = inst.type
        if t in FLOAT_TYPES:
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(t)
        alo, ahi, ta = self.dom.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.dom.get(inst.operands[2], sel, w)
        c = inst.operands[3]
        neg = isinstance(c, Neg)
        creg = c.operand if neg else c
        plo, phi = self.dom.pred(creg.name, sel)
        if neg:
            plo, phi = 1 - phi, 1 - plo
        unknown = (plo != phi)
        if unknown.any() and maybe is None and w == 64 and any(t.startswith("ptr:") for t in ta | tb) \
                and (np.abs(alo[unknown] - blo[unknown]) > (1 << 32)).any():
            # choosing between two pointers on data: follow both (an interval would span both)
            u = sel[unknown]
            new = self.dom.fork(u)
            self._store(inst, u, None, alo[unknown], ahi[unknown], ta | tb, w)
            self._store(inst, new, None, blo[unknown], bhi[unknown], ta | tb, w)
            self.dom.refine(creg.name, u, not neg)
            self.dom.refine(creg.name, new, neg)
            self.extra = new
            known = ~unknown
            sel, plo, phi = sel[known], plo[known], phi[known]
            alo, ahi, blo, bhi = alo[known], ahi[known], blo[known], bhi[known]
            if sel.size == 0:
                return
        lo = np.where(plo == 1, alo, np.where(phi == 0, blo, np.minimum(alo, blo)))
        hi = np.where(plo == 1, ahi, np.where(phi == 0, bhi, np.maximum(ahi, bhi)))
        self._store(inst, sel, maybe, lo, hi, ta | tb, w)

    def op_slct(self, inst, sel, maybe):
        t = inst.types[0] if inst.types else None
        if t in FLOAT_TYPES:
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(t)
        alo, ahi, ta = self.dom.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.dom.get(inst.operands[2], sel, w)
        if inst.types[-1] in FLOAT_TYPES:
            clo, chi = np.full(sel.size, -1, I64), np.ones(sel.size, I64)
        else:
            clo, chi, _ = self.dom.get(inst.operands[3], sel, 32)
        lo = np.where(clo >= 0, alo, np.where(chi < 0, blo, np.minimum(alo, blo)))
        hi = np.where(clo >= 0, ahi, np.where(chi < 0, bhi, np.maximum(ahi, bhi)))
        self._store(inst, sel, maybe, lo, hi, ta | tb, w)

    # ---- comparisons and predicates
    def _compare(self, inst, sel):
        """(definitely true, possibly true, formula or None) for a setp/set comparison."""
        cmp = next((m[1:] for m in inst.modifiers if m[1:] in _CMPS), None)
        t = inst.types[-1] if inst.types else None
        if t in _EXACT_FLOAT:
            return self._fcompare(inst, sel, t)
        if t is None or t not in INT_TYPES or cmp is None:
            return np.zeros(sel.size, I64), np.ones(sel.size, I64), None
        w = _width_of_type(t)
        unsigned = cmp in ("lo", "ls", "hi", "hs") or t[1] in "ub"
        c = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}.get(cmp, cmp)
        a, b = inst.operands[1], inst.operands[2]
        alo, ahi, _ = self.dom.get(a, sel, w)
        blo, bhi, _ = self.dom.get(b, sel, w)
        if unsigned:
            if w < 64:
                al, ah = _uv(alo.astype(np.float64), ahi.astype(np.float64), w)
                bl, bh = _uv(blo.astype(np.float64), bhi.astype(np.float64), w)
                exa = _unsigned_exact(alo, w)
                exb = _unsigned_exact(blo, w)
            else:
                al, ah, bl, bh = (x.astype(np.float64) for x in (alo, ahi, blo, bhi))
                bad = (al < 0) | (bl < 0)
                al, bl = np.where(bad, 0, al), np.where(bad, 0, bl)
                ah, bh = np.where(bad, 2.0 ** 64, ah), np.where(bad, 2.0 ** 64, bh)
                exa, exb = alo.view(np.uint64), blo.view(np.uint64)
        else:
            al, ah, bl, bh = (x.astype(np.float64) for x in (alo, ahi, blo, bhi))
            exa, exb = alo, blo
        exact = (alo == ahi) & (blo == bhi)
        f = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
             "gt": np.greater, "ge": np.greater_equal}[c]
        r = f(exa, exb).astype(I64)
        if c == "eq":
            dt, pt = (al == ah) & (bl == bh) & (al == bl), (ah >= bl) & (bh >= al)
        elif c == "ne":
            dt, pt = (ah < bl) | (bh < al), ~((al == ah) & (bl == bh) & (al == bl))
        elif c == "lt":
            dt, pt = ah < bl, al < bh
        elif c == "le":
            dt, pt = ah <= bl, al <= bh
        elif c == "gt":
            dt, pt = al > bh, ah > bl
        else:
            dt, pt = al >= bh, ah >= bl
        lo = np.where(exact, r, dt.astype(I64))
        hi = np.where(exact, r, pt.astype(I64))
        formula = None
        ops = []
        for x in (a, b):
            if isinstance(x, Reg) and not x.is_special and x.name in self.dom.tracked:
                ops.append(x.name)
            elif isinstance(x, Imm) and not x.is_float:
                ops.append(int(_wrap(np.array([int(x.value)], I64), w)[0]) if w < 64 else int(x.value))
            else:
                ops.append(None)
        if None not in ops and (isinstance(ops[0], str) or isinstance(ops[1], str)):
            formula = ("cmp", c, unsigned, w, ops[0], ops[1])
        return lo, hi, formula

    def op_setp(self, inst, sel, maybe):
        lo, hi, formula = self._compare(inst, sel)
        d = inst.operands[0]
        p = d.first if isinstance(d, Pair) else d
        q = d.second if isinstance(d, Pair) else None
        fid = self.dom.formula_id(formula) if formula is not None else -1
        bool_op = next((m[1:] for m in inst.modifiers if m in (".and", ".or", ".xor")), None)
        if bool_op is not None and len(inst.operands) > 3:
            c = inst.operands[3]
            neg = isinstance(c, Neg)
            creg = c.operand if neg else c
            clo, chi = self.dom.pred(creg.name, sel)
            if neg:
                clo, chi = 1 - chi, 1 - clo
            nlo, nhi = 1 - hi, 1 - lo
            lo, hi = _pred_combine(bool_op, lo, hi, clo, chi)
            qlo, qhi = _pred_combine(bool_op, nlo, nhi, clo, chi)
            fid = -1
        else:
            qlo, qhi = 1 - hi, 1 - lo
        if isinstance(p, Reg):
            self.dom.put(p.name, sel, lo, hi, frozenset(), maybe)
            self.dom.set_pfid(p.name, sel, np.full(sel.size, fid, I64) if maybe is None else np.where(maybe, -1, fid))
        if isinstance(q, Reg):
            self.dom.put(q.name, sel, qlo, qhi, frozenset(), maybe)
            nf = self.dom.formula_id(("not", fid)) if fid >= 0 else -1
            self.dom.set_pfid(q.name, sel, np.full(sel.size, nf, I64) if maybe is None else np.where(maybe, -1, nf))

    def op_set(self, inst, sel, maybe):
        lo, hi, _ = self._compare(inst, sel)
        dt = inst.types[0] if inst.types else ".u32"
        if dt in FLOAT_TYPES:
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(dt)
        # true -> 0xffffffff (-1), false -> 0
        self._store(inst, sel, maybe, -hi, -lo, frozenset(), w)

    def _pred_logic(self, inst, sel, maybe, kind):
        d = inst.operands[0]
        srcs = []
        for x in inst.operands[1:]:
            neg = isinstance(x, Neg)
            r = x.operand if neg else x
            lo, hi = self.dom.pred(r.name, sel)
            f = self.dom.pfid[r.name][sel] if r.name in self.dom.pfid else np.full(sel.size, -1, I64)
            if neg:
                lo, hi = 1 - hi, 1 - lo
                f = np.array([self.dom.formula_id(("not", int(v))) if v >= 0 else -1 for v in f], I64) \
                    if (f >= 0).any() else f
            srcs.append((lo, hi, f))
        if kind == "not":
            lo, hi, f = srcs[0]
            rlo, rhi = 1 - hi, 1 - lo
            fids = map_formulas(self.dom, "not", f, None)
        else:
            (alo, ahi, fa), (blo, bhi, fb) = srcs[0], srcs[1]
            rlo, rhi = _pred_combine(kind, alo, ahi, blo, bhi)
            fids = map_formulas(self.dom, kind, fa, fb) if kind in ("and", "or") else np.full(sel.size, -1, I64)
        self.dom.put(d.name, sel, rlo, rhi, frozenset(), maybe)
        self.dom.set_pfid(d.name, sel, fids if maybe is None else np.where(maybe, -1, fids))

    # ---- memory
    def op_ld(self, inst, sel, maybe):
        addr = isa.address_operand(inst)
        space = (inst.space or "generic").split("::")[0]
        t = inst.type
        width = inst.vector_width
        nbytes = type_size(t) * width if t else 4
        dests = inst.operands[0].items if isinstance(inst.operands[0], Vec) else (inst.operands[0],)
        if space == ".param":
            return self._ld_param(inst, sel, maybe, addr, dests, t)
        value = None          # (lo, hi, taint) per element
        if space in (".global", "generic"):
            value = self._access(inst, sel, addr, nbytes, "load", space)
        elif space == ".shared":
            self._shared_access(inst, sel, addr, nbytes, "load")
        elif space == ".const":
            value = (None, None, frozenset({"data:const"}))
        lo_t, hi_t = _type_range(t) if t in INT_TYPES else (None, None)
        taint = value[2] if value else frozenset({f"data:{space[1:] if space != 'generic' else 'memory'}"})
        rng = value[0] if value and value[0] is not None else None
        for dreg in dests:
            if not isinstance(dreg, Reg):
                continue
            if t not in INT_TYPES:
                self.dom.put_top(dreg.name, sel, self.dom.widths.get(dreg.name, 32), frozenset({"float"}), maybe)
                continue
            if rng is not None:
                lo, hi = rng
            else:
                lo = np.full(sel.size, lo_t, I64)
                hi = np.full(sel.size, hi_t, I64)
            wd = self.dom.widths.get(dreg.name, _width_of_type(t))
            nlo, nhi = _norm_interval(lo, hi, wd)
            self.dom.put(dreg.name, sel, nlo, nhi, taint, maybe)
            if dreg.name in self.dom.pfid:
                self.dom.pfid[dreg.name][sel] = -1

    op_ldu = op_ld

    def _ld_param(self, inst, sel, maybe, addr, dests, t):
        base = addr.base if addr is not None else None
        off = addr.offset or 0 if addr is not None else 0
        name = base.name if isinstance(base, Sym) else None
        k = self.param_index.get(name)
        base_off = off
        for n_elem, dreg in enumerate(dests):
            off = base_off + n_elem * (type_size(t) if t else 4)
            if not isinstance(dreg, Reg):
                continue
            w = self.dom.widths.get(dreg.name, _width_of_type(t))
            if k is None:
                self.dom.put_top(dreg.name, sel, w, frozenset({"data:param"}), maybe)
                continue
            kind = self.params.get(k, ("int", 0))
            if kind[0] == "ptr" and off == 0:
                v = np.full(sel.size, (k + 1) * PARAM_STRIDE, I64)
                self.dom.put(dreg.name, sel, v, v, frozenset({f"ptr:{k}"}), maybe)
            elif kind[0] == "bytes" and t in INT_TYPES and off in (kind[2] if len(kind) > 2 else {}) \
                    and _width_of_type(t) == 64 and w == 64:
                # a pointer field modelled as a virtual pointer param (index kind[2][off])
                j = kind[2][off]
                v = np.full(sel.size, (j + 1) * PARAM_STRIDE, I64)
                self.dom.put(dreg.name, sel, v, v, frozenset({f"ptr:{j}"}), maybe)
            elif kind[0] == "bytes" and len(kind) > 2 and any(
                    o < off + (type_size(t) if t else 4) and off < o + 8 for o in kind[2]):
                # part of a pointer field, or not as a 64-bit integer: an address's bits,
                # which no traced value stands for
                self.dom.put_top(dreg.name, sel, w, frozenset({f"struct:{k}"}), maybe)
            elif kind[0] == "bytes" and t in INT_TYPES:          # a struct of any size: its raw bytes
                tw = _width_of_type(t)
                raw = (int(kind[1]) >> (8 * off)) & ((1 << tw) - 1)
                if t[1] == "s" and raw >= 1 << (tw - 1):
                    raw -= 1 << tw
                v = np.full(sel.size, _const(raw, w), I64)
                # an aligned 8-byte field may be a pointer: name it, so that an access
                # through it says which field to model as a pointer
                tag = f"struct:{k}@{off}" if tw == 64 and off % 8 == 0 else f"struct:{k}"
                self.dom.put(dreg.name, sel, v, v, frozenset({tag}), maybe)
            elif kind[0] == "int" and off == 0 and t in INT_TYPES:
                tw = _width_of_type(t)
                val = int(kind[1])
                v = np.array([val & ((1 << 64) - 1)], dtype=np.uint64).view(I64)
                v = _wrap(v, tw) if tw < 64 else v
                if t[1] == "u" and tw < 64:
                    v = _unsigned_exact(v, tw)
                v = _wrap(v, w) if w < 64 else v
                v = np.full(sel.size, v[0], I64)
                self.dom.put(dreg.name, sel, v, v, frozenset(), maybe)
            else:
                why = f"struct:{k}" if kind[0] == "struct" else ("float" if kind[0] == "float" else f"data:param{k}")
                self.dom.put_top(dreg.name, sel, w, frozenset({why}), maybe)
                if kind[0] == "float" and len(kind) > 1 and off == 0 and t in _EXACT_FLOAT:
                    v = np.full(sel.size, _round_float(float(kind[1]), t))
                    self._fput(dreg, sel, v, np.ones(sel.size, bool), maybe)
            if dreg.name in self.dom.pfid:
                self.dom.pfid[dreg.name][sel] = -1

    def _store_like(self, inst, sel, kind):
        """Record the bytes a store or an atomic touches in global or shared memory."""
        addr = isa.address_operand(inst)
        space = (inst.space or "generic").split("::")[0]
        t = inst.type
        nbytes = type_size(t) * inst.vector_width if t else 4
        if space in (".global", "generic"):
            self._access(inst, sel, addr, nbytes, kind, space)
        elif space == ".shared":
            self._shared_access(inst, sel, addr, nbytes, kind)
        # .param stores are arguments of a call (the call itself is refused)

    def op_st(self, inst, sel, maybe):
        self._store_like(inst, sel, "store")

    def op_atom(self, inst, sel, maybe):
        self._store_like(inst, sel, "atomic")
        if inst.opcode == "atom":
            self._defs_top(inst, sel, maybe, "data:atomic")

    op_red = op_atom

    def op_cp(self, inst, sel, maybe):
        mods = inst.modifiers
        if any(m in mods for m in (".commit_group", ".wait_group", ".wait_all")) or \
                (".mbarrier" in mods and ".arrive" in mods):
            return
        if ".async" not in mods or ".bulk" in mods or len(inst.operands) < 3:
            if _touches_global(inst) or ".bulk" in mods:
                raise TraceError(f"unsupported memory instruction {inst.name}")
            return
        dst, src = inst.operands[0], inst.operands[1]
        size_op = inst.operands[2]
        nbytes = int(size_op.value) if isinstance(size_op, Imm) else 16
        self._access(inst, sel, src, nbytes, "load", ".global")
        self._shared_access(inst, sel, dst, nbytes, "store")

    def op_prefetch(self, inst, sel, maybe):
        return

    op_prefetchu = op_prefetch
    op_applypriority = op_prefetch
    op_createpolicy = lambda self, inst, sel, maybe: self._defs_top(inst, sel, maybe, "policy")

    def op_discard(self, inst, sel, maybe):
        raise TraceError(f"unsupported memory instruction {inst.name}")

    def _cta(self, sel):
        return self.dom.th["cta"][self.dom.lane_thread[sel]]

    def _access(self, inst, sel, addr, nbytes, kind, space):
        """Record a global/generic access; return (value range or None, None, taint) for loads."""
        lo, hi, ta = self._address(inst, sel, addr)
        return self.rec.global_access(inst, sel, lo, hi, ta, nbytes, kind, self._cta(sel))

    def _address(self, inst, sel, addr: Addr):
        base = addr.base
        off = addr.offset or 0
        if isinstance(base, Sym) and base.name in self.param_index:
            lo, hi = _full(64, sel.size)
            return lo, hi, frozenset({"param-space"})
        lo, hi, ta = self.dom.get(base, sel, 64)
        return lo + off, hi + off, ta

    def _shared_access(self, inst, sel, addr, nbytes, kind):
        base = addr.base
        off = addr.offset or 0
        lo, hi, ta = self.dom.get(base, sel, 64)
        lo, hi = lo + off, hi + off
        # 64-bit shared addresses may be generic-window values converted back
        lo = np.where(lo >= SHARED_WIN, lo - SHARED_WIN, lo)
        hi = np.where(hi >= SHARED_WIN, hi - SHARED_WIN, hi)
        self.rec.shared_access(inst, sel, lo, hi + nbytes, kind, nbytes, self._cta(sel))

    def op_bar(self, inst, sel, maybe):
        if ".warp" in inst.modifiers and inst.operands:
            self.warp_check(inst, sel, inst.operands[0])
        self._defs_top(inst, sel, maybe, "barrier")

    op_barrier = op_bar
    op_membar = op_bar
    op_fence = op_bar
    op_nanosleep = op_bar
    op_griddepcontrol = op_bar
    op_pmevent = op_bar
    op_setmaxnreg = op_bar
    op_elect = lambda self, inst, sel, maybe: self._defs_top(inst, sel, maybe, "elect")

    def op_mbarrier(self, inst, sel, maybe):
        self._defs_top(inst, sel, maybe, "mbarrier")

    def _warp(self, inst, sel, maybe):
        if ".sync" in inst.modifiers and inst.operands:
            mask = inst.operands[0] if inst.opcode == "bar" else inst.operands[-1]
            self.warp_check(inst, sel, mask)
        self._defs_top(inst, sel, maybe, f"data:{inst.opcode}")

    op_shfl = _warp
    op_vote = _warp
    op_match = _warp
    op_redux = _warp
    op_activemask = _warp
    op_ldmatrix = _warp
    op_mma = _warp
    op_wgmma = _warp
    op_movmatrix = _warp

    def op_stmatrix(self, inst, sel, maybe):
        return

    def op_wmma(self, inst, sel, maybe):
        mods = inst.modifiers
        load, store = ".load" in mods, ".store" in mods
        space = (inst.space or "generic").split("::")[0]
        if not (load or store) or space == ".shared":
            self._defs_top(inst, sel, maybe, "wmma")
            return
        # a warp-wide tile: rows x cols elements, `stride` elements between rows (columns)
        import re as _re
        shape = next((m for m in mods if _re.fullmatch(r"\.m\d+n\d+k\d+", m)), None)
        mat = next((m for m in mods if m in (".a", ".b", ".c", ".d")), None)
        t = inst.type
        bits = {".b1": 1, ".s4": 4, ".u4": 4}.get(t, type_size(t) * 8 if t else 0)
        if shape is None or mat is None or not bits:
            raise TraceError(f"unsupported memory instruction {inst.name}")
        mm, nn, kk = (int(x) for x in _re.findall(r"\d+", shape))
        rows, cols = {".a": (mm, kk), ".b": (kk, nn), ".c": (mm, nn), ".d": (mm, nn)}[mat]
        outer, inner = (rows, cols) if ".row" in mods else (cols, rows)
        addr = inst.operands[1] if load else inst.operands[0]
        if not isinstance(addr, Addr):
            raise TraceError(f"unsupported memory instruction {inst.name}")
        stride_op = inst.operands[2] if len(inst.operands) > 2 else None
        if stride_op is None:
            stride = np.full(sel.size, inner, I64)
        else:
            slo, shi, _ = self.dom.get(stride_op, sel, 32)
            if (slo < 0).any():
                raise TraceError(f"{inst.name} with a stride that may be negative")
            stride = shi
        nbytes = -(-((outer - 1) * stride + inner) * bits // 8)
        self._access(inst, sel, addr, nbytes, "load" if load else "store", space)
        if load:
            self._defs_top(inst, sel, maybe, "data:wmma")

    def _texture(self, inst, sel, maybe):
        raise TraceError(f"uses textures or surfaces ({inst.name}); a launch spec cannot describe them")

    op_tex = _texture
    op_tld4 = _texture
    op_suld = _texture
    op_sust = _texture
    op_sured = _texture
    op_txq = _texture
    op_suq = _texture

    def op_isspacep(self, inst, sel, maybe):
        lo, hi, _ = self.dom.get(inst.operands[1], sel, 64)
        space = inst.space or ""
        ex = lo == hi
        if space.startswith(".shared"):
            r = (lo >= SHARED_WIN) & (lo < SHARED_WIN + (1 << 32))
        elif space == ".local":
            r = (lo >= LOCAL_WIN) & (lo < LOCAL_END)
        elif space == ".global":
            r = lo < SHARED_WIN
        else:
            r = np.zeros(sel.size, bool)
        r = r.astype(I64)
        self.dom.put(inst.operands[0].name, sel, np.where(ex, r, 0), np.where(ex, r, 1), frozenset(), maybe)
        if inst.operands[0].name in self.dom.pfid:
            self.dom.pfid[inst.operands[0].name][sel] = -1

    def op_call(self, inst, sel, maybe):
        target = None
        for o in inst.operands:
            if isinstance(o, Sym):
                target = o.name
                break
        if target in ("vprintf", "__assertfail", "free", "__nv_free", "__cudaCDP2Synchronize"):
            self._call_results_top(inst, sel, maybe)
            return
        raise TraceError(f"calls {target or 'a function pointer'} (calls are not analysed)")

    def _call_results_top(self, inst, sel, maybe):
        from ptx_ir.nodes import Paren
        if inst.operands and isinstance(inst.operands[0], Paren) and len(inst.operands) > 1 and isinstance(inst.operands[1], Sym):
            for r in inst.operands[0].items:
                if isinstance(r, Reg):
                    self.dom.put_top(r.name, sel, self.dom.widths.get(r.name, 32), frozenset({"call"}), maybe)

    op_ret = op_bar
    op_exit = op_bar

    # ---- exact floats (values that are facts of the launch: params, immediates, +-*/ of those)
    def _fsrc(self, op, sel, t):
        """(value, known) of a float operand."""
        n = sel.size
        if isinstance(op, Reg) and not op.is_special:
            return self.dom.fget(op.name, sel)
        if isinstance(op, Imm) and op.is_float:
            v = _float_imm(op, t)
            if v is not None:
                return np.full(n, v), np.ones(n, bool)
        return np.zeros(n), np.zeros(n, bool)

    def _fput(self, d, sel, value, known, maybe):
        if isinstance(d, Reg) and d.name not in self.dom.tracked:
            self.dom.fput(d.name, sel, value, known, maybe)

    def _farith(self, inst, sel, maybe, fn):
        """A float add/sub/mul/div: exact where both sources are known (sources are read
        before the destination is made unknown: it may be one of them)."""
        t = inst.type
        mods = set(inst.modifiers)
        if t not in _EXACT_FLOAT or mods & {".rz", ".rm", ".rp", ".sat", ".approx", ".full"} \
                or (fn is np.divide and ".rn" not in mods) or len(inst.operands) != 3:
            return self._defs_top(inst, sel, maybe, "float")
        a, ka = self._fsrc(inst.operands[1], sel, t)
        b, kb = self._fsrc(inst.operands[2], sel, t)
        dt = np.float32 if t == ".f32" else np.float64
        with np.errstate(all="ignore"):
            r = fn(a.astype(dt), b.astype(dt)).astype(np.float64)
        known = ka & kb
        if ".ftz" in mods:                          # denormals flush: leave those unknown
            known &= ~(_denormal(a, t) | _denormal(b, t) | _denormal(r, t))
        self._defs_top(inst, sel, maybe, "float")
        self._fput(inst.operands[0], sel, r, known, maybe)

    def _fcvt(self, inst, sel, maybe, dt, st):
        """cvt with a float side: int -> float, float -> float, float -> int, exact where the
        source is known; the destination is unknown elsewhere."""
        mods = set(inst.modifiers)
        d = inst.operands[0]
        src_f = self._fsrc(inst.operands[1], sel, st) if st in _EXACT_FLOAT else None
        self._defs_top(inst, sel, maybe, "float")
        if dt in _EXACT_FLOAT and st in INT_TYPES and ".rn" in mods:
            lo, hi, _ = self.dom.get(inst.operands[1], sel, max(_width_of_type(st), 32))
            w = _width_of_type(st)
            v = _wrap(lo, w) if st[1] == "s" else (_unsigned_exact(lo, w) if w < 64 else lo)
            known = (lo == hi) & (np.abs(v) < (1 << 24)) & (v >= (0 if st[1] != "s" else -(1 << 24)))
            self._fput(d, sel, v.astype(np.float64), known, maybe)
        elif dt in _EXACT_FLOAT and st in _EXACT_FLOAT and (dt == ".f64" or ".rn" in mods) \
                and not mods & {".rz", ".rm", ".rp", ".sat", ".ftz"}:
            v, known = src_f
            self._fput(d, sel, v.astype(np.float32).astype(np.float64) if dt == ".f32" else v, known, maybe)
        elif st in _EXACT_FLOAT and dt in INT_TYPES and _width_of_type(dt) <= 32 \
                and mods & {".rzi", ".rni", ".rmi", ".rpi"} and not mods & {".ftz"}:
            v, known = src_f
            if not known.any() or not isinstance(d, Reg):
                return
            rnd = {".rzi": np.trunc, ".rni": np.rint, ".rmi": np.floor, ".rpi": np.ceil}[
                next(m for m in (".rzi", ".rni", ".rmi", ".rpi") if m in mods)]
            lo_t, hi_t = _type_range(dt)
            with np.errstate(all="ignore"):
                r = np.where(np.isnan(v), 0, np.clip(rnd(np.nan_to_num(v)), lo_t, hi_t)).astype(I64)
            w = _width_of_type(dt)
            olo, ohi, _ = self.dom.get(d, sel, w)
            lo = np.where(known, r, olo)
            hi = np.where(known, r, ohi)
            self._store_typed(inst, sel, maybe, lo, hi, frozenset({"float"}), w, dt)

    def _fcompare(self, inst, sel, t):
        n = sel.size
        cmp = next((m[1:] for m in inst.modifiers if m[1:] in _FCMPS), None)
        a, ka = self._fsrc(inst.operands[1], sel, t)
        b, kb = self._fsrc(inst.operands[2], sel, t)
        known = ka & kb
        if cmp is None or not known.any() or (".ftz" in inst.modifiers and
                                              (_denormal(a, t) | _denormal(b, t)).any()):
            return np.zeros(n, I64), np.ones(n, I64), None
        unordered = np.isnan(a) | np.isnan(b)
        base = cmp[:-1] if cmp.endswith("u") and cmp not in ("num",) else cmp
        with np.errstate(all="ignore"):
            if cmp == "num":
                r = ~unordered
            elif cmp == "nan":
                r = unordered
            else:
                f = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                     "gt": np.greater, "ge": np.greater_equal}[base]
                r = np.where(unordered, base != cmp, f(a, b))
        r = r.astype(I64)
        return np.where(known, r, 0), np.where(known, r, 1), None


def _touches_global(inst) -> bool:
    if not isa.touches_memory(inst):
        return False
    sp = inst.space
    if sp is None:
        return True
    return sp.split("::")[0] in (".global",)



_EXACT_FLOAT = (".f32", ".f64")
_FCMPS = {"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}


def _round_float(x: float, t: str) -> float:
    return float(np.float32(x)) if t == ".f32" else float(x)


def _float_imm(op, t):
    """The value of a float immediate (``0f3F800000``, ``0d...``, ``1.5``) as type t."""
    text = op.text.lstrip("-")
    neg = op.text.startswith("-")
    try:
        if text[:2] in ("0f", "0F"):
            v = float(np.array([int(text[2:], 16)], np.uint32).view(np.float32)[0])
        elif text[:2] in ("0d", "0D"):
            v = float(np.array([int(text[2:], 16)], np.uint64).view(np.float64)[0])
        else:
            v = float(text)
    except (ValueError, OverflowError):
        return None
    return _round_float(-v if neg else v, t)


def _denormal(x, t):
    tiny = 1.1754943508222875e-38 if t == ".f32" else 2.2250738585072014e-308
    return (x != 0) & (np.abs(x) < tiny)
