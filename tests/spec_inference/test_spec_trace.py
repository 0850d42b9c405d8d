"""The bounds tracer against a reference: random integer programs over the thread index
(exact per thread) and over loaded bytes (intervals must contain every real value)."""
from __future__ import annotations

import random

import pytest

import ptx_ir
from superopt.specs.trace import trace

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"
M32 = (1 << 32) - 1


def s32(x):
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def u32(x):
    return x & M32


def _div(a, b, signed):
    if b == 0:
        return None
    if signed:
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    return a // b


def _rem(a, b, signed):
    if b == 0:
        return None
    if signed:
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    return a % b


# (ptx template, python function of (a, b)) for 32-bit ops; a, b are raw 32-bit patterns
OPS = [
    ("add.s32 {d}, {a}, {b};", lambda a, b: a + b),
    ("sub.s32 {d}, {a}, {b};", lambda a, b: a - b),
    ("mul.lo.s32 {d}, {a}, {b};", lambda a, b: s32(a) * s32(b)),
    ("mul.hi.s32 {d}, {a}, {b};", lambda a, b: (s32(a) * s32(b)) >> 32),
    ("mul.hi.u32 {d}, {a}, {b};", lambda a, b: (u32(a) * u32(b)) >> 32),
    ("and.b32 {d}, {a}, {b};", lambda a, b: a & b),
    ("or.b32 {d}, {a}, {b};", lambda a, b: a | b),
    ("xor.b32 {d}, {a}, {b};", lambda a, b: a ^ b),
    ("min.s32 {d}, {a}, {b};", lambda a, b: min(s32(a), s32(b))),
    ("max.u32 {d}, {a}, {b};", lambda a, b: max(u32(a), u32(b))),
    ("div.s32 {d}, {a}, {b};", lambda a, b: _div(s32(a), s32(b), True)),
    ("div.u32 {d}, {a}, {b};", lambda a, b: _div(u32(a), u32(b), False)),
    ("rem.s32 {d}, {a}, {b};", lambda a, b: _rem(s32(a), s32(b), True)),
    ("rem.u32 {d}, {a}, {b};", lambda a, b: _rem(u32(a), u32(b), False)),
]
UNARY = [
    ("neg.s32 {d}, {a};", lambda a: -s32(a)),
    ("not.b32 {d}, {a};", lambda a: ~a),
    ("abs.s32 {d}, {a};", lambda a: abs(s32(a)) if s32(a) != -(1 << 31) else s32(a)),
    ("shl.b32 {d}, {a}, 3;", lambda a: a << 3),
    ("shr.u32 {d}, {a}, 5;", lambda a: u32(a) >> 5),
    ("shr.s32 {d}, {a}, 4;", lambda a: s32(a) >> 4),
    ("popc.b32 {d}, {a};", lambda a: bin(u32(a)).count("1")),
    ("clz.b32 {d}, {a};", lambda a: 32 - u32(a).bit_length()),
    ("bfe.u32 {d}, {a}, 3, 7;", lambda a: (u32(a) >> 3) & 127),
    ("bfe.s32 {d}, {a}, 2, 6;", lambda a: ((u32(a) >> 2) & 63) - (64 if (u32(a) >> 7) & 1 else 0)),
    ("cvt.u32.u16 {d}, {a16};", lambda a: a & 0xFFFF),
    ("cvt.s32.s8 {d}, {a8};", lambda a: ((a & 0xFF) ^ 0x80) - 0x80),
    ("add.s32 {d}, {a}, -77;", lambda a: a - 77),
    ("mad.lo.s32 {d}, {a}, 13, 5;", lambda a: s32(a) * 13 + 5),
]


def _program(rng: random.Random, n_ops: int, exact: bool):
    """PTX body lines and a python function (t, x) -> final 32-bit pattern (or None)."""
    lines = []
    steps = []
    regs = ["%r1", "%r2"]          # %r1 = tid.x, %r2 = x (tid.x again, or a loaded byte)
    nxt = 3
    for _ in range(n_ops):
        d = f"%r{nxt}"
        nxt += 1
        if rng.random() < 0.5:
            tmpl, f = rng.choice(OPS)
            a = rng.choice(regs)
            if rng.random() < 0.4:
                imm = rng.choice([1, 2, 3, 7, 16, 255, 1000, -5, -1])
                if "div" in tmpl or "rem" in tmpl:
                    imm = abs(imm) or 1
                lines.append(tmpl.format(d=d, a=a, b=imm))
                steps.append((f, d, a, imm))
            else:
                b = rng.choice(regs)
                if "div" in tmpl or "rem" in tmpl:        # a divisor that is never 0
                    nz = f"%r{nxt}"
                    nxt += 1
                    lines.append(f"or.b32 {nz}, {b}, 1;")
                    steps.append((lambda x, y: x | y, nz, b, 1))
                    b = nz
                lines.append(tmpl.format(d=d, a=a, b=b))
                steps.append((f, d, a, b))
        else:
            tmpl, f = rng.choice(UNARY)
            a = rng.choice(regs)
            if "{a16}" in tmpl:
                lines.append(f"cvt.u16.u32 %rs1, {a};")
                lines.append(tmpl.format(d=d, a16="%rs1"))
            elif "{a8}" in tmpl:
                lines.append(f"cvt.u16.u32 %rs1, {a};")
                lines.append(tmpl.format(d=d, a8="%rs1"))
            else:
                lines.append(tmpl.format(d=d, a=a))
            steps.append((f, d, a, None))
        regs.append(d)
    final = regs[-1]

    def run(t, x):
        env = {"%r1": t, "%r2": x}
        for f, d, a, b in steps:
            av = env[a] & M32
            if b is None:
                v = f(av)
            else:
                bv = (env[b] if isinstance(b, str) else b) & M32
                v = f(av, bv)
            if v is None:
                return None
            env[d] = v & M32
        return env[final] & M32
    return lines, final, nxt, run


def _kernel(lines, final, nregs, *, loaded: bool, mask: int | None):
    body = "\n\t".join(lines)
    src = "ld.global.u8 %r2, [%rd2];" if loaded else "mov.u32 %r2, %tid.x;"
    m = f"and.b32 %rf, {final}, {mask};" if mask is not None else f"mov.u32 %rf, {final};"
    return HEADER + f"""
.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)
{{
	.reg .b16 %rs<2>;
	.reg .b32 %r<{nregs + 1}>;
	.reg .b32 %rf;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [k_param_0];
	ld.param.u64 %rd2, [k_param_1];
	mov.u32 %r1, %tid.x;
	{src}
	{body}
	{m}
	cvt.u64.u32 %rd3, %rf;
	add.s64 %rd4, %rd1, %rd3;
	st.global.u8 [%rd4], %rs1;
	ret;
}}
"""


@pytest.mark.parametrize("seed", range(60))
def test_exact_per_thread(seed):
    rng = random.Random(seed)
    lines, final, nregs, run = _program(rng, rng.randint(2, 7), exact=True)
    vals = [run(t, t) for t in range(256)]
    if any(v is None for v in vals):
        pytest.skip("division by zero for some thread")
    mask = 0xFFFFF
    module = ptx_ir.parse(_kernel(lines, final, nregs, loaded=False, mask=mask))
    fn = module.function("k")
    r = trace(module, fn, (1, 1, 1), (256, 1, 1), 0, {0: ("ptr",), 1: ("ptr",)})
    assert not r.problems, (r.problems, lines)
    acc = r.buffers[0]
    got = (acc.lo, acc.end - 1)
    want = (min(v & mask for v in vals), max(v & mask for v in vals))
    assert got == want, "\n".join(lines)


@pytest.mark.parametrize("seed", range(60))
def test_intervals_contain_every_value(seed):
    rng = random.Random(1000 + seed)
    lines, final, nregs, run = _program(rng, rng.randint(1, 5), exact=False)
    vals = [run(t, x) for t in range(0, 64) for x in range(256)]
    if any(v is None for v in vals):
        pytest.skip("division by zero for some input")
    module = ptx_ir.parse(_kernel(lines, final, nregs, loaded=True, mask=None))
    fn = module.function("k")
    r = trace(module, fn, (1, 1, 1), (64, 1, 1), 0, {0: ("ptr",), 1: ("ptr",)})
    if r.problems:
        return                       # the tracer may refuse (too wide a range): never unsound
    acc = r.buffers[0]
    assert acc.lo <= min(vals) and max(vals) < acc.end, ("\n".join(lines), acc.lo, acc.end, min(vals), max(vals))


def test_guard_refinement_bounds_a_loaded_index():
    ptx = HEADER + """
.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1, .param .u32 k_param_2)
{
	.reg .pred %p<4>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [k_param_0];
	ld.param.u64 %rd2, [k_param_1];
	ld.param.u32 %r1, [k_param_2];
	ld.global.u32 %r2, [%rd2];
	setp.lt.s32 %p1, %r2, 0;
	setp.ge.s32 %p2, %r2, %r1;
	or.pred %p3, %p1, %p2;
	@%p3 bra DONE;
	mul.wide.s32 %rd3, %r2, 4;
	add.s64 %rd4, %rd1, %rd3;
	atom.global.add.u32 %r3, [%rd4], 1;
DONE:
	ret;
}
"""
    module = ptx_ir.parse(ptx)
    r = trace(module, module.function("k"), (1, 1, 1), (32, 1, 1), 0, {0: ("ptr",), 1: ("ptr",), 2: ("int", 37)})
    assert not r.problems
    assert (r.buffers[0].lo, r.buffers[0].end) == (0, 148) and r.buffers[0].atomic
    # and without the check the index is unbounded: an index distribution is proposed
    unchecked = ptx.replace("@%p3 bra DONE;", "")
    module = ptx_ir.parse(unchecked)
    r = trace(module, module.function("k"), (1, 1, 1), (32, 1, 1), 0, {0: ("ptr",), 1: ("ptr",), 2: ("int", 37)})
    assert r.problems and 1 in r.index_sources
    r = trace(module, module.function("k"), (1, 1, 1), (32, 1, 1), 0, {0: ("ptr",), 1: ("ptr",), 2: ("int", 37)},
              {1: (0, 99)})
    assert not r.problems and (r.buffers[0].lo, r.buffers[0].end) == (0, 400)
