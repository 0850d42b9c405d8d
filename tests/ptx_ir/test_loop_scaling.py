"""Loop analysis (CFG, dominators, natural loops, nesting, induction variables) is near-linear
in the number of basic blocks (issue 12: 20k blocks took 76 s). The scaling test compares
10x the blocks with the time of the smaller kernel, not with an absolute time, so a slow or
busy machine does not make it flaky; a quadratic step would take ~100x."""
from __future__ import annotations

import gc
import signal
import time
from pathlib import Path

import pytest

import ptx_ir
from ptx_ir.dominance import Dominance

BLOCKS_PER_UNIT = 7


def many_blocks_kernel(units: int) -> str:
    """``units`` repetitions of an outer loop (3 trips) around an inner loop (4 trips) whose
    body is an if/else diamond: 7 basic blocks and 2 loops per unit, every loop reusing the
    same registers (so per-register definition lists grow with the kernel too)."""
    out = [".version 8.0", ".target sm_90", ".address_size 64", "",
           ".visible .entry many(", "\t.param .u64 many_param_0", ")", "{",
           "\t.reg .pred \t%p<4>;", "\t.reg .b32 \t%r<8>;", "\t.reg .b64 \t%rd<3>;",
           "\tld.param.u64 \t%rd1, [many_param_0];", "\tmov.u32 \t%r5, %tid.x;", "\tmov.u32 \t%r4, 0;"]
    for u in range(units):
        out += ["\tmov.u32 \t%r1, 0;",
                f"$L_o{u}:", "\tmov.u32 \t%r2, 0;",
                f"$L_i{u}:", "\tsetp.lt.u32 \t%p1, %r5, %r2;", f"\t@%p1 bra \t$L_e{u};",
                "\tadd.s32 \t%r4, %r4, %r2;", f"\tbra.uni \t$L_j{u};",
                f"$L_e{u}:", "\txor.b32 \t%r4, %r4, %r2;",
                f"$L_j{u}:", "\tadd.s32 \t%r2, %r2, 1;", "\tsetp.lt.u32 \t%p2, %r2, 4;", f"\t@%p2 bra \t$L_i{u};",
                "\tadd.s32 \t%r1, %r1, 1;", "\tsetp.lt.u32 \t%p3, %r1, 3;", f"\t@%p3 bra \t$L_o{u};"]
    out += ["\tst.global.u32 \t[%rd1], %r4;", "\tret;", "}", ""]
    return "\n".join(out)


class _TooSlow(BaseException):
    """Raised by the alarm (a BaseException: no ``except Exception`` inside can swallow it)."""


def _analyse(units: int, limit_s: float | None = None) -> tuple[float, list]:
    fn = ptx_ir.parse(many_blocks_kernel(units)).function("many")
    assert len(fn.blocks) >= units * BLOCKS_PER_UNIT
    if limit_s is not None:
        def ring(*_):
            raise _TooSlow(f"loop analysis of {len(fn.blocks)} blocks ran past {limit_s:.1f} s")
        old = signal.signal(signal.SIGPROF, ring)
        signal.setitimer(signal.ITIMER_PROF, limit_s)       # CPU seconds, like the measurement
    # CPU time of this process (other processes on a shared machine do not count), without the
    # cyclic GC, whose full collections cost what the whole test session holds, not this kernel.
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        loops = fn.loops            # CFG, dominators, natural loops, nesting, induction variables
        elapsed = time.process_time() - t0
    except _TooSlow as exc:
        pytest.fail(str(exc))
    finally:
        gc.enable()
        if limit_s is not None:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, old)
    return elapsed, loops


@pytest.mark.parametrize("units", [1, 3])
def test_loop_analysis_results_on_the_generated_kernel(units):
    _, loops = _analyse(units)
    assert len(loops) == 2 * units
    outer = [l for l in loops if l.parent is None]
    inner = [l for l in loops if l.parent is not None]
    assert len(outer) == len(inner) == units
    for o in outer:
        (child,) = o.children
        assert child.parent is o and child.blocks < o.blocks and child.depth == 2 and not child.children
        assert o.induction.register == "%r1" and child.induction.register == "%r2"
        assert o.induction.step == child.induction.step == 1
        if units == 1:       # one mov before each loop: the start is known, so is the trip count
            assert (o.induction.init, o.trip_count) == (0, 3)
            assert (child.induction.init, child.trip_count) == (0, 4)
        else:                # the registers are set before every unit's loops: no single start
            assert o.induction.init is None and o.trip_count is None
            assert child.induction.init is None and child.trip_count is None


def _walk_dominates(tree: dict, a, b) -> bool:
    """The reference: walk up from ``b`` (what Dominance did before the interval numbers)."""
    node, seen = b, set()
    while node is not None and id(node) not in seen:
        if node is a:
            return True
        seen.add(id(node))
        parent = tree.get(node)
        if parent is node:
            return False
        node = parent
    return False


KERNELS = sorted((Path(__file__).parent / "data").glob("*.ptx"))


@pytest.mark.parametrize("source", ["generated"] + [p.name for p in KERNELS[:6]])
def test_dominance_queries_match_the_tree_walk(source):
    text = many_blocks_kernel(4) if source == "generated" else (Path(__file__).parent / "data" / source).read_text()
    module = ptx_ir.parse(text)
    checked = 0
    for fn in module.functions:
        if fn.body is None:
            continue
        dom = fn.dominance
        fresh = Dominance(dom.idom, dom.ipdom)
        blocks = list(fn.blocks)
        for a in blocks:
            for b in blocks:
                assert fresh.dominates(a, b) == _walk_dominates(dom.idom, a, b), (fn.name, a, b)
                assert fresh.post_dominates(a, b) == _walk_dominates(dom.ipdom, a, b), (fn.name, a, b)
                checked += 1
    assert checked > 0


SMALL_UNITS = 2000 // BLOCKS_PER_UNIT + 1          # ~2k blocks


def test_loop_analysis_is_near_linear_in_blocks(small_units=SMALL_UNITS):
    small = min(_analyse(small_units)[0] for _ in range(3))
    # 10x the blocks must not take more than 30x the time (quadratic: ~100x); the alarm stops
    # the run just past that, so a regression fails in seconds instead of running for minutes.
    limit = 33 * small + 0.2
    big, loops = _analyse(10 * small_units, limit_s=limit)
    assert len(loops) == 2 * 10 * small_units
    if big > 30 * small:      # one slow run is not a verdict: the better of two
        big = min(big, _analyse(10 * small_units, limit_s=limit)[0])
    assert big <= 30 * small, (f"{10 * small_units * BLOCKS_PER_UNIT} blocks: {big:.2f} s; "
                               f"{small_units * BLOCKS_PER_UNIT} blocks: {small:.3f} s ({big / small:.1f}x)")
