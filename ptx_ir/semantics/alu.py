"""Decode a register-to-register PTX instruction into a pure function over lane arrays.

:func:`decode_alu` returns an :class:`AluSpec`: the PTX type of every destination and
source operand (what the emulator reads registers and immediates as) and ``fn`` which maps
the source arrays (natural dtypes, see :mod:`ptx_ir.semantics.types`) to a tuple of
destination arrays. Instructions it does not model exactly raise :class:`Unsupported`;
instructions that are not ALU operations (memory, control flow, warp ops) return None.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ptx_ir.nodes import Imm, Instruction, TYPE_NAMES
from ptx_ir.semantics import convert, floatops, fp, integer
from ptx_ir.semantics import stand_ins as stand_ins_mod
from ptx_ir.semantics.errors import Unsupported
from ptx_ir.semantics.types import has_natural_dtype, is_float, natural_dtype, type_bits

u16, u32, u64 = np.uint16, np.uint32, np.uint64
f16 = np.float16

FP_MODES = {".rn": "rn", ".rz": "rz", ".rm": "rm", ".rp": "rp"}
INT_ROUND = {".rni": "rni", ".rzi": "rzi", ".rmi": "rmi", ".rpi": "rpi"}
NON_ALU = frozenset({
    "ld", "st", "ldu", "atom", "red", "cvta", "bra", "brx", "call", "ret", "exit", "trap",
    "bar", "barrier", "membar", "fence", "shfl", "vote", "match", "redux", "activemask",
    "prefetch", "prefetchu", "nanosleep", "pmevent", "isspacep", "brkpt", "griddepcontrol",
    "elect", "discard", "applypriority", "createpolicy", "alloca", "stacksave",
    "stackrestore",
})


@dataclass
class AluSpec:
    dsts: list[str]
    srcs: list[str]
    fn: Callable
    cc_in: bool = False      # reads the carry flag (passed as an extra last source)
    cc_out: bool = False     # writes the carry flag (returned as an extra last result)
    imm_operands: dict = field(default_factory=dict)   # operand index -> folded immediate
    may_fuse: bool = False   # a plain mul/add/sub that ptxas may contract into an fma


def _text(inst: Instruction) -> str:
    ops = ", ".join(map(str, inst.operands))
    g = f"{inst.guard} " if inst.guard else ""
    return f"{g}{inst.name} {ops}".strip()


def _mode(mods, default="rn"):
    for m in mods:
        if m in FP_MODES:
            return FP_MODES[m]
    return default


def _has_mode(mods):
    return any(m in FP_MODES for m in mods)


def _fmt(t):
    return {".f16": "f16", ".bf16": "bf16", ".f16x2": "f16", ".bf16x2": "bf16"}.get(t)


def _split2(a, fmt):
    a = np.asarray(a, u32)
    lo = (a & u32(0xFFFF)).astype(u16)
    hi = (a >> u32(16)).astype(u16)
    if fmt == "f16":
        return lo.view(f16), hi.view(f16)
    return lo, hi


def _join2(lo, hi):
    lo = np.asarray(lo)
    hi = np.asarray(hi)
    lo = lo.view(u16) if lo.dtype.itemsize == 2 else lo.astype(u16)
    hi = hi.view(u16) if hi.dtype.itemsize == 2 else hi.astype(u16)
    return (hi.astype(u32) << u32(16)) | lo.astype(u32)


def x2(fn16, fmt, nout_pred=False):
    """Lift a function over 16-bit halves to packed x2 registers."""
    def f(*args):
        halves = [_split2(a, fmt) for a in args]
        rl = fn16(*[h[0] for h in halves])
        rh = fn16(*[h[1] for h in halves])
        return _join2(rl, rh)
    return f


def _float_binop(op, t, mods, inst):
    mode = _mode(mods)
    ftz, sat = ".ftz" in mods, ".sat" in mods
    if t == ".f32":
        f = {"add": fp.f32_add, "sub": fp.f32_sub, "mul": fp.f32_mul}[op]
        return lambda a, b: f(a, b, mode, ftz, sat)
    if t == ".f64":
        if ftz or sat:
            raise Unsupported(_text(inst))
        f = {"add": fp.f64_add, "sub": fp.f64_sub, "mul": fp.f64_mul}[op]
        return lambda a, b: f(a, b, mode)
    fmt = _fmt(t)
    if fmt is None:
        raise Unsupported(_text(inst))
    f = {"add": fp.h_add, "sub": fp.h_sub, "mul": fp.h_mul}[op]
    g = lambda a, b: f(a, b, fmt, mode, ftz, sat)   # noqa: E731
    return x2(g, fmt) if t.endswith("x2") else g


def _fma(t, mods, inst):
    mode = _mode(mods, None)
    if mode is None:
        raise Unsupported(_text(inst))
    ftz, sat, relu = ".ftz" in mods, ".sat" in mods, ".relu" in mods
    if t == ".f32":
        if relu:
            raise Unsupported(_text(inst))
        return lambda a, b, c: fp.f32_fma(a, b, c, mode, ftz, sat)
    if t == ".f64":
        return lambda a, b, c: fp.f64_fma(a, b, c, mode)
    fmt = _fmt(t)
    if fmt is None or ".oob" in mods:
        raise Unsupported(_text(inst))
    g = lambda a, b, c: fp.h_fma(a, b, c, fmt, mode, ftz, sat, relu)  # noqa: E731
    return x2(g, fmt) if t.endswith("x2") else g


def decode_alu(inst: Instruction, stand_ins: bool = False) -> AluSpec | None:
    """``inst`` as a function of its source arrays (None for what is not register-to-register).
    ``stand_ins``: the approximate float instructions, refused otherwise, computed by
    :mod:`ptx_ir.semantics.stand_ins` (deterministic, not the GPU's values)."""
    op = inst.opcode
    mods = inst.modifiers
    if op in NON_ALU:
        return None
    types = inst.types
    t = types[-1] if types else None
    text = _text(inst)
    if not all(map(has_natural_dtype, types)):      # .tf32, fp8, .b128: no register value here
        raise Unsupported(text)

    def need(cond=True):
        if not cond:
            raise Unsupported(text)

    # ---------------------------------------------------------------- moves
    if op == "mov":
        need(t is not None)
        return AluSpec([t], [t], lambda a: np.array(a, copy=True))

    # ---------------------------------------------------------------- add / sub
    if op in ("add", "sub"):
        need(t is not None)
        if is_float(t):
            return AluSpec([t], [t, t], _float_binop(op, t, mods, inst),
                           may_fuse=not _has_mode(mods) and t in (".f32", ".f64"))
        if t in (".u16x2", ".s16x2"):
            raise Unsupported(text)
        if ".cc" in mods:
            f = integer.add_cc if op == "add" else integer.sub_cc
            return AluSpec([t], [t, t], lambda a, b: f(a, b), cc_out=True)
        if ".sat" in mods:
            need(t == ".s32")
            f = integer.add_sat_s32 if op == "add" else integer.sub_sat_s32
            return AluSpec([t], [t, t], f)
        f = integer.add if op == "add" else integer.sub
        return AluSpec([t], [t, t], f)
    if op in ("addc", "subc"):
        need(t is not None and not is_float(t))
        f = integer.add_cc if op == "addc" else integer.sub_cc
        cc_out = ".cc" in mods
        if cc_out:
            return AluSpec([t], [t, t], lambda a, b, c: f(a, b, c), cc_in=True, cc_out=True)
        return AluSpec([t], [t, t], lambda a, b, c: f(a, b, c)[0], cc_in=True)

    # ---------------------------------------------------------------- mul / mad
    if op == "mul":
        need(t is not None)
        if is_float(t):
            return AluSpec([t], [t, t], _float_binop("mul", t, mods, inst),
                           may_fuse=not _has_mode(mods) and t in (".f32", ".f64"))
        if ".wide" in mods:
            wt = {".s16": ".s32", ".u16": ".u32", ".s32": ".s64", ".u32": ".u64"}.get(t)
            need(wt is not None)
            return AluSpec([wt], [t, t], integer.mul_wide)
        if ".hi" in mods:
            return AluSpec([t], [t, t], integer.mul_hi)
        return AluSpec([t], [t, t], integer.mul_lo)
    if op == "mad" or op == "madc":
        need(t is not None)
        if is_float(t):
            need(op == "mad")
            return AluSpec([t], [t, t, t], _fma(t, mods, inst))
        cc_in = op == "madc"
        cc_out = ".cc" in mods
        if ".wide" in mods:
            wt = {".s16": ".s32", ".u16": ".u32", ".s32": ".s64", ".u32": ".u64"}.get(t)
            need(wt is not None)
            prod = integer.mul_wide
            srcs = [t, t, wt]
            dst = wt
        elif ".hi" in mods:
            prod = integer.mul_hi
            srcs, dst = [t, t, t], t
        else:
            prod = integer.mul_lo
            srcs, dst = [t, t, t], t
        if ".sat" in mods:
            need(t == ".s32" and ".hi" in mods and not cc_in and not cc_out)
            return AluSpec([dst], srcs, lambda a, b, c: integer.add_sat_s32(prod(a, b), c))
        if cc_in or cc_out:
            def f(a, b, c, cin=None):
                r, cf = integer.add_cc(prod(a, b), c, cin)
                return (r, cf) if cc_out else r
            return AluSpec([dst], srcs, f, cc_in=cc_in, cc_out=cc_out)
        return AluSpec([dst], srcs, lambda a, b, c: integer.add(prod(a, b), c))
    if op in ("mul24", "mad24"):
        need(t in (".s32", ".u32"))
        hi = ".hi" in mods
        if op == "mul24":
            return AluSpec([t], [t, t], lambda a, b: integer.mul24(a, b, hi))
        need(".sat" not in mods)
        return AluSpec([t], [t, t, t], lambda a, b, c: integer.add(integer.mul24(a, b, hi), c))
    if op == "sad":
        return AluSpec([t], [t, t, t], integer.sad)
    if op == "fma":
        need(t is not None)
        return AluSpec([t], [t, t, t], _fma(t, mods, inst))

    # ---------------------------------------------------------------- div / rem
    if op == "div":
        need(t is not None)
        if not is_float(t):
            return AluSpec([t], [t, t], integer.div)
        if ".approx" in mods or ".full" in mods:
            if stand_ins:
                return AluSpec([t], [t, t], stand_ins_mod.div(t, ".ftz" in mods))
            raise Unsupported(text)
        mode = _mode(mods, None)
        need(mode is not None)
        ftz = ".ftz" in mods
        if t == ".f32":
            return AluSpec([t], [t, t], lambda a, b: fp.f32_div(a, b, mode, ftz))
        if t == ".f64":
            return AluSpec([t], [t, t], lambda a, b: fp.f64_div(a, b, mode))
        raise Unsupported(text)
    if op == "rem":
        need(t is not None and not is_float(t))
        return AluSpec([t], [t, t], integer.rem)

    # ---------------------------------------------------------------- abs / neg / min / max
    if op in ("abs", "neg"):
        need(t is not None)
        if is_float(t):
            fmt = _fmt(t)
            ftz = ".ftz" in mods
            if fmt:
                g = (lambda a: fp.h_abs(a, fmt)) if op == "abs" else (lambda a: fp.h_neg(a, fmt))
                if ftz and fmt == "f16":
                    g0 = g
                    g = lambda a: g0(fp.ftz16(a))   # noqa: E731
                return AluSpec([t], [t], x2(g, fmt) if t.endswith("x2") else g)
            g = floatops.fabs if op == "abs" else floatops.fneg
            if ftz:
                need(t == ".f32")
                return AluSpec([t], [t], lambda a: g(fp.ftz(a)))
            return AluSpec([t], [t], g)
        return AluSpec([t], [t], integer.iabs if op == "abs" else integer.ineg)
    if op in ("min", "max"):
        need(t is not None)
        is_max = op == "max"
        if is_float(t):
            nan = ".NaN" in mods
            need(".xorsign" not in mods)
            fmt = _fmt(t)
            if fmt:
                g = lambda a, b: floatops.hminmax(a, b, fmt, is_max, nan)  # noqa: E731
                return AluSpec([t], [t, t], x2(g, fmt) if t.endswith("x2") else g)
            ftz = ".ftz" in mods
            f = floatops.fmax if is_max else floatops.fmin
            return AluSpec([t], [t, t], lambda a, b: f(a, b, ftz, nan))
        if t in (".u16x2", ".s16x2"):
            dt = np.int16 if t == ".s16x2" else np.uint16

            def g(a, b):
                a = np.asarray(a, u32).astype(u32)
                b = np.asarray(b, u32).astype(u32)
                al, ah = (a & u32(0xFFFF)).astype(u16).view(dt), (a >> u32(16)).astype(u16).view(dt)
                bl, bh = (b & u32(0xFFFF)).astype(u16).view(dt), (b >> u32(16)).astype(u16).view(dt)
                f = np.maximum if is_max else np.minimum
                rl, rh = f(al, bl), f(ah, bh)
                if ".relu" in mods:
                    rl, rh = np.maximum(rl, dt(0)), np.maximum(rh, dt(0))
                return _join2(rl, rh)
            return AluSpec([t], [t, t], g)
        f = integer.imax if is_max else integer.imin
        if ".relu" in mods:
            need(t == ".s32")
            return AluSpec([t], [t, t], lambda a, b: np.maximum(f(a, b), np.int32(0)))
        return AluSpec([t], [t, t], f)

    # ---------------------------------------------------------------- bits
    if op == "popc":
        return AluSpec([".u32"], [t], integer.popc)
    if op == "clz":
        return AluSpec([".u32"], [t], integer.clz)
    if op == "bfind":
        sh = ".shiftamt" in mods
        return AluSpec([".u32"], [t], lambda a: integer.bfind(a, sh))
    if op == "brev":
        return AluSpec([t], [t], integer.brev)
    if op == "bfe":
        return AluSpec([t], [t, ".u32", ".u32"], integer.bfe)
    if op == "bfi":
        return AluSpec([t], [t, t, ".u32", ".u32"], integer.bfi)
    if op == "prmt":
        mode = None
        for m in mods:
            if m in (".f4e", ".b4e", ".rc8", ".ecl", ".ecr", ".rc16"):
                mode = m[1:]
        return AluSpec([".b32"], [".b32", ".b32", ".b32"], lambda a, b, c: integer.prmt(a, b, c, mode))
    if op == "lop3":
        need(len(inst.operands) == 5 and isinstance(inst.operands[4], Imm))
        lut = int(inst.operands[4].value) & 0xFF
        need(not any(m in (".or", ".and") for m in mods))
        return AluSpec([t], [t, t, t], lambda a, b, c: integer.lop3(a, b, c, lut),
                       imm_operands={4: lut})
    if op == "shf":
        left = ".l" in mods
        clamp = ".clamp" in mods
        return AluSpec([".b32"], [".b32", ".b32", ".u32"], lambda a, b, c: integer.shf(a, b, c, left, clamp))
    if op == "shl":
        return AluSpec([t], [t, ".u32"], integer.shl)
    if op == "shr":
        return AluSpec([t], [t, ".u32"], integer.shr)
    if op == "bmsk":
        clamp = ".clamp" in mods
        return AluSpec([".b32"], [".u32", ".u32"], lambda a, b: integer.bmsk(a, b, clamp))
    if op == "szext":
        signed = t == ".s32"
        clamp = ".clamp" in mods
        return AluSpec([t], [".u32", ".u32"], lambda a, b: integer.szext(a, b, signed, clamp))
    if op == "dp4a":
        need(len(types) == 2)
        sa, sb = types[0] == ".s32", types[1] == ".s32"
        dt = ".s32" if (sa or sb) else ".u32"
        return AluSpec([dt], [types[0], types[1], dt], lambda a, b, c: integer.dp4a(a, b, c, sa, sb).view(natural_dtype(dt)))
    if op == "dp2a":
        need(len(types) == 2)
        sa, sb = types[0] == ".s32", types[1] == ".s32"
        hi = ".hi" in mods
        dt = ".s32" if (sa or sb) else ".u32"
        return AluSpec([dt], [types[0], types[1], dt], lambda a, b, c: integer.dp2a(a, b, c, sa, sb, hi).view(natural_dtype(dt)))

    # ---------------------------------------------------------------- logic
    if op in ("and", "or", "xor"):
        need(t is not None)
        if t == ".pred":
            f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op]
        else:
            f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        return AluSpec([t], [t, t], f)
    if op == "not":
        if t == ".pred":
            return AluSpec([t], [t], np.logical_not)
        return AluSpec([t], [t], np.invert)
    if op == "cnot":
        return AluSpec([t], [t], lambda a: (np.asarray(a) == 0).astype(np.asarray(a).dtype))
    if op == "copysign":
        need(t in (".f32", ".f64"))
        return AluSpec([t], [t, t], floatops.copysign)
    if op == "testp":
        what = next((m[1:] for m in mods if m[1:] in ("finite", "infinite", "number", "notanumber",
                                                      "normal", "subnormal")), None)
        need(what is not None and t in (".f32", ".f64"))
        return AluSpec([".pred"], [t], lambda a: floatops.testp(what, a))

    # ---------------------------------------------------------------- compare / select
    if op in ("setp", "set"):
        return _decode_setp(inst, text)
    if op == "selp":
        return AluSpec([t], [t, t, ".pred"], lambda a, b, c: np.where(c, a, b).astype(np.result_type(a, b)))
    if op == "slct":
        need(len(types) == 2)
        dt, ct = types
        ftz = ".ftz" in mods

        def g(a, b, c):
            if ftz:
                c = fp.ftz(c)
            return np.where(np.asarray(c) >= 0, a, b).astype(natural_dtype(dt))
        return AluSpec([dt], [dt, dt, ct], g)

    # ---------------------------------------------------------------- conversions
    if op == "cvt":
        return _decode_cvt(inst, text)

    # ---------------------------------------------------------------- float unary
    if op in ("sqrt", "rcp"):
        if ".approx" in mods:
            if stand_ins:
                return AluSpec([t], [t], stand_ins_mod.unary(op, t, ".ftz" in mods))
            raise Unsupported(text)
        mode = _mode(mods, None)
        need(mode is not None)
        ftz = ".ftz" in mods
        if t == ".f32":
            f = fp.f32_sqrt if op == "sqrt" else fp.f32_rcp
            return AluSpec([t], [t], lambda a: f(a, mode, ftz))
        if t == ".f64":
            f = fp.f64_sqrt if op == "sqrt" else fp.f64_rcp
            return AluSpec([t], [t], lambda a: f(a, mode))
        raise Unsupported(text)
    if op in ("rsqrt", "sin", "cos", "lg2", "ex2", "tanh"):
        if stand_ins and ".approx" in mods:
            return AluSpec([t], [t], stand_ins_mod.unary(op, t, ".ftz" in mods))
        raise Unsupported(text)   # approximate on the GPU: not bit-reproducible here
    raise Unsupported(text)


def _decode_setp(inst, text):
    mods = inst.modifiers
    types = inst.types
    is_set = inst.opcode == "set"
    cmpop = None
    boolop = None
    for m in mods:
        w = m[1:]
        if w in ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu",
                 "ltu", "leu", "gtu", "geu", "num", "nan"):
            cmpop = w
        elif w in ("and", "or", "xor"):
            boolop = w
    if cmpop is None:
        raise Unsupported(text)
    if is_set:
        if len(types) != 2:
            raise Unsupported(text)
        dtype_, st = types
    else:
        st = types[-1]
        dtype_ = ".pred"
    ftz = ".ftz" in mods
    fmt = _fmt(st)
    if st.endswith("x2"):
        return _decode_setp_x2(inst, text, cmpop, boolop, is_set, dtype_, st, fmt)
    if is_float(st):
        def cmp(a, b):
            if ftz and st == ".f32":
                a, b = fp.ftz(a), fp.ftz(b)
            if fmt == "bf16":
                a, b = fp.bf16_bits_to_f32(a), fp.bf16_bits_to_f32(b)
            return floatops.float_cmp(cmpop, a, b)
    else:
        if cmpop not in floatops.INT_CMP:
            raise Unsupported(text)
        f = floatops.INT_CMP[cmpop]
        cmp = f
    bf = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop)
    two = False
    if not is_set and inst.operands and type(inst.operands[0]).__name__ == "Pair":
        two = True
    if is_set:
        if dtype_ == ".f32":
            one, zero = np.float32(1.0), np.float32(0.0)
        elif dtype_ == ".f16":
            one, zero = np.float16(1.0), np.float16(0.0)
        elif dtype_ == ".bf16":
            one, zero = np.uint16(0x3F80), np.uint16(0)
        elif dtype_ in (".u32", ".s32", ".b32"):
            one = natural_dtype(dtype_).type(-1) if dtype_ == ".s32" else np.uint32(0xFFFFFFFF)
            zero = natural_dtype(dtype_).type(0)
        else:
            raise Unsupported(text)
        if bf:
            return AluSpec([dtype_], [st, st, ".pred"], lambda a, b, c: np.where(bf(cmp(a, b), c), one, zero))
        return AluSpec([dtype_], [st, st], lambda a, b: np.where(cmp(a, b), one, zero))
    if bf:
        if two:
            return AluSpec([".pred", ".pred"], [st, st, ".pred"],
                           lambda a, b, c: (bf(cmp(a, b), c), bf(~cmp(a, b), c)))
        return AluSpec([".pred"], [st, st, ".pred"], lambda a, b, c: bf(cmp(a, b), c))
    if two:
        return AluSpec([".pred", ".pred"], [st, st], lambda a, b: (cmp(a, b), ~cmp(a, b)))
    return AluSpec([".pred"], [st, st], cmp)


def _decode_cvt(inst, text):
    mods = inst.modifiers
    types = [m for m in mods if m in TYPE_NAMES]
    if len(types) != 2:
        raise Unsupported(text)
    dt_, at = types
    rnd = None
    for m in mods:
        if m in FP_MODES:
            rnd = FP_MODES[m]
        elif m in INT_ROUND:
            rnd = INT_ROUND[m]
    ftz, sat, relu = ".ftz" in mods, ".sat" in mods, ".relu" in mods
    if any(m in (".satfinite", ".pack") for m in mods):
        raise Unsupported(text)
    if dt_ in (".f16x2", ".bf16x2") and at == ".f32":
        fmt = _fmt(dt_)
        if rnd not in ("rn", "rz", "rm", "rp"):
            raise Unsupported(text)
        f = convert.make_cvt(".f16" if fmt == "f16" else ".bf16", ".f32", rnd, ftz, sat, relu)
        return AluSpec([dt_], [".f32", ".f32"], lambda a, b: _join2(f(b), f(a)))
    if dt_ == ".tf32" or at == ".tf32" or type_bits(dt_) > 64:
        raise Unsupported(text)
    f = convert.make_cvt(dt_, at, rnd, ftz, sat, relu)
    return AluSpec([dt_], [at], f)


def _decode_setp_x2(inst, text, cmpop, boolop, is_set, dtype_, st, fmt):
    """setp/set on packed f16x2/bf16x2: one result per half."""
    if cmpop not in ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu",
                     "num", "nan"):
        raise Unsupported(text)

    def halves(a, b):
        al, ah = _split2(a, fmt)
        bl, bh = _split2(b, fmt)
        if fmt == "bf16":
            al, ah, bl, bh = (fp.bf16_bits_to_f32(x) for x in (al, ah, bl, bh))
        return floatops.float_cmp(cmpop, al, bl), floatops.float_cmp(cmpop, ah, bh)

    bf = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop)
    if is_set:
        if dtype_ in (".u32", ".s32", ".b32"):
            one = np.uint32(0xFFFF)
        elif dtype_ == ".f16x2":
            one = np.uint32(0x3C00)
        elif dtype_ == ".bf16x2":
            one = np.uint32(0x3F80)
        else:
            raise Unsupported(text)

        def pack(lo, hi):
            r = np.where(lo, one, np.uint32(0)) | (np.where(hi, one, np.uint32(0)) << np.uint32(16))
            return r.astype(np.uint32).view(natural_dtype(dtype_)) if dtype_ != ".f16x2" else r.astype(np.uint32)
        if bf:
            return AluSpec([dtype_], [st, st, ".pred"],
                           lambda a, b, c: pack(*(bf(x, c) for x in halves(a, b))))
        return AluSpec([dtype_], [st, st], lambda a, b: pack(*halves(a, b)))
    if bf:
        return AluSpec([".pred", ".pred"], [st, st, ".pred"],
                       lambda a, b, c: tuple(bf(x, c) for x in halves(a, b)))
    return AluSpec([".pred", ".pred"], [st, st], halves)
