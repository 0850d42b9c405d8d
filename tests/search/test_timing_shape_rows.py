"""One block per row: the row count is only the grid (``softmax_rows<<<rows, 256>>>(in, out,
cols)``), inferred as a constant 13 with lengths ``13*cols``. Scaling ``cols`` would leave 13
blocks, so superopt.specs.scaled scales the grid and the lengths' multiples of it instead."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

import ptx_ir
from superopt.judge.cache import spec_key
from superopt.judge.check import Verdict
from superopt.search.loop import COSTLY_CHECK_BYTES, _with_timing_shape
from superopt.specs.launch_spec import Buffer, Bytes, LaunchSpec, Scalar
from superopt.specs.scaled import (GRID_LIMITS, MAX_BUFFER_BYTES, MAX_BYTES, MIN_THREADS, TARGET_BYTES,
                                   TARGET_THREADS, describe, row_dim, scale_factor, timing_shape)
from tests.model.helpers import VADD
from tests.search.test_costly_shapes import SizeJudge

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "ptx"


def inferred(spec: LaunchSpec) -> LaunchSpec:
    return replace(spec, origin="inferred", vary_sizes=False)


def softmax_rows(cols=1543, grid=(13, 1, 1), block=(256, 1, 1), elem="f32", more=()) -> LaunchSpec:
    """As inferred for softmax_rows(const float* in, float* out, int cols) launched <<<rows, 256>>>."""
    g = next((x for x in grid if x != 1), 1)
    return inferred(LaunchSpec("softmax_rows", grid=grid, block=block, params=[
        Buffer("in", elem, f"{g}*cols", "in"), Buffer("out", elem, f"{g}*cols", "out"), *more,
        Scalar("cols", "s32", cols, values=[cols, 1201])]))


def measure(spec):
    rs = spec.resolved()
    sizes = [b.nbytes for b in rs.buffers]
    return math.prod(rs.grid) * math.prod(rs.block), sum(sizes), max(sizes), rs


def test_the_rows_grow_with_the_grid_and_the_row_length_stays():
    small = softmax_rows()
    assert row_dim(small) == (0, 13, ["in", "out"])
    big = timing_shape(small)
    rows = big.grid[0]
    f = rows // 13
    assert rows == 13 * f and f >= 4 and f & (f - 1) == 0 and big.grid[1:] == (1, 1)
    assert [b.length_expr for b in big.buffers] == [f"{rows}*cols"] * 2
    assert big.param("cols").value == 1543 and big.param("cols").values is None and not big.vary_sizes
    threads, nbytes, largest, rs = measure(big)
    assert all(b.length == rows * 1543 for b in rs.buffers)
    assert threads >= TARGET_THREADS or nbytes >= TARGET_BYTES
    assert nbytes <= MAX_BYTES and largest <= MAX_BUFFER_BYTES
    half = measure(timing_shape(small, max_factor=f // 2, min_threads=1))
    assert half[0] < TARGET_THREADS and half[1] < TARGET_BYTES      # the smallest such power of two
    assert big.origin == "inferred, scaled for timing"
    assert scale_factor(small, big) == f
    assert describe(small, big) == f"grid.x={rows} (was 13), cols=1543"
    assert nbytes > COSTLY_CHECK_BYTES                               # a costly shape for the search


def test_only_the_multiples_of_the_grid_grow():
    """A gamma read by every row, a table, a per-block partial sum, a halo: each term whose
    coefficient is a multiple of the 13 blocks grows with them, the rest stays."""
    small = inferred(LaunchSpec("layernorm_rows", grid=(13, 1, 1), block=(128, 1, 1), params=[
        Buffer("x", "f32", "13*cols + 4", "in"), Buffer("gamma", "f32", "cols", "in"),
        Buffer("table", "s32", 1000, "in"), Buffer("partial", "f32", 13, "out"),
        Buffer("tiles", "f32", "26*(cols + 1)", "out"), Buffer("cells", "f32", "cols*rows*13", "out"),
        Scalar("cols", "s32", 409), Scalar("rows", "s32", 7)]))
    big = timing_shape(small)
    g = big.grid[0]
    assert {b.name: b.length_expr for b in big.buffers} == {
        "x": f"{g}*cols + 4", "gamma": "cols", "table": 1000, "partial": g,
        "tiles": f"{2 * g}*(cols + 1)", "cells": f"{g}*cols*rows"}
    rs = big.resolved()
    assert rs.param("x").length == g * 409 + 4 and rs.param("cells").length == g * 409 * 7


def test_lengths_that_are_not_multiples_of_the_grid_get_no_grid_scaling():
    for lengths in (["12*cols", "cols"], ["cols + 13", "14*cols"], ["cols - 13", 1000], [7, "2*cols"]):
        spec = inferred(LaunchSpec("k", grid=(13, 1, 1), block=(256, 1, 1), params=[
            Buffer("a", "f32", lengths[0], "in"), Buffer("b", "f32", lengths[1], "out"),
            Scalar("cols", "s32", 1543)]))
        if lengths[0] == "cols + 13":           # a constant term 13 is a multiple: a per-block halo
            assert row_dim(spec) == (0, 13, ["a"])
            continue
        assert row_dim(spec) is None and timing_shape(spec) is None, lengths
    # a grid of one block: every length is a multiple of 1, so none says anything
    one = softmax_rows(grid=(1, 1, 1))
    assert row_dim(one) is None and timing_shape(one) is None


def test_only_the_first_grid_dimension_is_the_rows():
    """[13, 5]: x bounded by a struct field inference does not scale (a conv with width 3) and
    an output of 5 elements: a length 5 is a coincidence, not five rows of y."""
    conv = inferred(LaunchSpec("conv", grid=(13, 5, 1), block=(32, 8, 1), params=[
        Bytes("p", 48, "00" * 48), Buffer("in", "f32", 9, "in"), Buffer("out", "f32", 5, "out")]))
    assert row_dim(conv) is None and timing_shape(conv) is None
    # a kernel that reads no blockIdx.x: y is the first dimension, and its rows grow
    ys = softmax_rows(grid=(1, 5, 1), block=(32, 1, 1))
    big = timing_shape(ys)
    assert big.grid[0] == 1 and big.grid[1] > 5 and big.buffers[0].length_expr == f"{big.grid[1]}*cols"
    assert big.grid[1] <= GRID_LIMITS[1]
    # a grid that is a formula of a size is scaled through the sizes, as before
    formula = inferred(LaunchSpec("k", grid=("cdiv(n, 256)", 13, 1), block=(256, 1, 1), params=[
        Buffer("x", "f32", "13*n", "inout"), Scalar("n", "s32", 9001)]))
    assert row_dim(formula) is None
    big = timing_shape(formula)
    assert big.grid[1] == 13 and big.param("n").value > 9001


def test_the_limits_hold():
    # a y grid stops at 65535 blocks: 5 * 8192 = 40960 fits, 81920 would not; with blocks of 1
    # thread the threads never reach a wave, so no shape (nothing is scaled past the limit)
    tiny = softmax_rows(cols=3, grid=(1, 5, 1), block=(1, 1, 1))
    assert timing_shape(tiny) is None
    assert timing_shape(tiny, max_factor=1 << 20, min_threads=1).grid[1] == 5 * 8192 <= GRID_LIMITS[1]
    # long f64 rows: 13 rows of 1e6 are 104 MB a buffer, 52 rows 416 MB: over MAX_BYTES
    long_rows = softmax_rows(cols=1_000_000, elem="f64")
    assert timing_shape(long_rows) is None
    # rows of 6000 floats: the bytes, not the threads, stop the growth, never past MAX_BYTES
    big = timing_shape(softmax_rows(cols=6000))
    threads, nbytes, largest, _ = measure(big)
    assert TARGET_BYTES <= nbytes <= MAX_BYTES and MIN_THREADS <= threads < TARGET_THREADS
    # rows of 40000: 64 MB of buffers hold 208 rows, under a wave of blocks: no shape
    assert timing_shape(softmax_rows(cols=40_000)) is None
    # one buffer may not pass 2^31 bytes (32-bit offsets: blockIdx.x * cols in an int)
    for spec in (softmax_rows(cols=1 << 20, elem="u8"), softmax_rows(cols=3000, elem="f64")):
        big = timing_shape(spec)
        assert big is None or measure(big)[2] <= MAX_BUFFER_BYTES
    # a grid near the x limit is not scaled past it
    wide = softmax_rows(cols=1, grid=(13, 1, 1), block=(1, 1, 1))
    big = timing_shape(wide, max_factor=1 << 40, min_threads=1)
    assert big.grid[0] <= GRID_LIMITS[0]


def test_a_struct_holding_pointers_may_bound_the_rows():
    """``if (blockIdx.x >= p.rows) return;`` with p.rows = 37 (inference's fixed prime) and 13
    blocks: the 13 blocks look like 13 rows of a family, but past 37 they would be idle."""
    spec = inferred(LaunchSpec("rows_struct", grid=(13, 1, 1), block=(256, 1, 1), params=[
        Bytes("p", 24, "00" * 16 + (37).to_bytes(4, "little").hex() + (53).to_bytes(4, "little").hex(),
              pointers={0: "p_0", 8: "p_8"}),
        Buffer("p_0", "f32", 13 * 53, "in", embedded=True), Buffer("p_8", "f32", 13 * 53, "out", embedded=True)]))
    assert row_dim(spec) is None and timing_shape(spec) is None
    # a struct without pointers (integer fields 3: a guard on one leaves 3 rows, not 13) does not
    # stop it
    plain = softmax_rows(more=[Bytes("q", 12, "03000000" * 3)])
    assert row_dim(plain) == (0, 13, ["in", "out"])


def test_no_size_parameter_at_all_but_rows_of_a_compile_time_length():
    """``in[blockIdx.x * 1024 + i]`` with COLS a #define: lengths 13*1024, still rows."""
    spec = inferred(LaunchSpec("k", grid=(13, 1, 1), block=(256, 1, 1), params=[
        Buffer("in", "f32", 13 * 1024, "in"), Buffer("out", "f32", 13, "out")]))
    big = timing_shape(spec)
    g = big.grid[0]
    assert [b.length_expr for b in big.buffers] == [g * 1024, g]
    assert describe(spec, big) == f"grid.x={g} (was 13)"


class SlowRows(SizeJudge):
    """nvcc's launch takes 1e-7 s a row."""

    def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
        v = super().verify(base_ptx, cand_ptx, spec, fresh=fresh)
        return Verdict(v.status, v.reason, "exact", {"baseline_seconds": [1e-7 * spec.grid[0], None]})


def test_the_search_times_at_the_grown_grid_and_retries_smaller_when_slow():
    small = softmax_rows()
    judge = SizeJudge(speedup=1.3)
    specs, notes = _with_timing_shape(judge, VADD, [small])
    assert len(specs) == 2 and specs[1] is small and specs[0] == timing_shape(small)
    assert judge.calls == [("verify", spec_key(specs[0]))]
    assert f"scaled up (grid.x={specs[0].grid[0]} (was 13), cols=1543;" in notes[0]
    # 1e-7 s a row: 6656 rows take 0.67 ms, fine; at 1e-5 s a row, a quarter, then a sixteenth
    judge = SlowRows(speedup=1.3)
    judge.verify = lambda b, c, spec, fresh=False: Verdict(
        "accepted", "ok", "exact", {"baseline_seconds": [2e-5 * spec.grid[0]]})
    specs, notes = _with_timing_shape(judge, VADD, [small])
    first = timing_shape(small)
    assert len(specs) == 2 and 2e-5 * specs[0].grid[0] <= 0.01
    assert scale_factor(small, specs[0]) in (scale_factor(small, first) // 4, scale_factor(small, first) // 16)
    assert specs[0].buffers[0].length_expr == f"{specs[0].grid[0]}*cols"
    # out of bounds there: dropped with a note
    judge = SizeJudge(speedup=1.3, wrong_at=spec_key(first))
    specs, notes = _with_timing_shape(judge, VADD, [small])
    assert specs == [small] and "grid.x=" in notes[0] and "cannot be judged there" in notes[0]


# --------------------------------------------------------------------------- a real kernel

def _kernel(ptx_file: str, name: str):
    module = ptx_ir.parse((CORPUS / ptx_file).read_text())
    return module, next(f for f in module.functions if name in f.name)


def test_softmax_block_per_row_from_its_ptx():
    """tests/corpus/src/transpose_softmax.cu: softmax_block_per_row(x, y, cols), one block per
    row, the row count only in the launch. Inference gives grid [13], lengths 13*cols; the
    scaled shape grows the grid, and at 4x (52 rows, small enough to trace) the tracer confirms
    the grown lengths cover every access."""
    from superopt.specs.inference import check_spec, infer_specs
    module, fn = _kernel("transpose_softmax.sm_90.ptx", "softmax_block_per_row")
    spec = infer_specs(module, fn.name).specs[0]
    x, y, cols = (p.name for p in spec.kernel_params)
    assert spec.grid == (13, 1, 1) and [b.length_expr for b in spec.buffers] == [f"13*{cols}"] * 2
    big = timing_shape(spec)
    rows = big.grid[0]
    assert rows >= 13 * 4 and rows * math.prod(big.block) >= MIN_THREADS
    assert [b.length_expr for b in big.buffers] == [f"{rows}*{cols}"] * 2
    assert big.param(cols).value == spec.param(cols).value
    assert measure(big)[1] <= MAX_BYTES
    four = timing_shape(spec, max_factor=4, min_threads=1)
    assert four.grid[0] == 52 and check_spec(module, fn, four) == []


def test_a_row_length_with_a_halo_is_not_grown_and_the_tracer_sees_it():
    """double_buffered_conv<128> (tests/corpus/src/cp_async.cu): each block reads
    128*ntiles + 4 floats, fitted as 1665*ntiles for 13 blocks, not a multiple of 13: that
    buffer keeps its length, and at 52 blocks the kernel reads past it. The search's
    screening (nvcc's own code judged there first) drops such a shape with a note."""
    from superopt.specs.inference import check_spec, infer_specs
    module, fn = _kernel("cp_async.sm_90.ptx", "double_buffered_conv")
    spec = infer_specs(module, fn.name).specs[0]
    four = timing_shape(spec, max_factor=4, min_threads=1)
    lengths = {b.name: b.length_expr for b in spec.buffers}
    x = spec.kernel_params[0].name
    if four is None or not str(lengths[x]).startswith("1665*"):
        pytest.skip(f"inference fitted this kernel differently: {lengths}")
    assert four.grid[0] == 52 and four.param(x).length_expr == lengths[x]
    problems = check_spec(module, fn, four)
    assert any(f"buffer '{x}'" in p and "touches element" in p for p in problems), problems


# --------------------------------------------------------------------------- a warp per row

def test_a_warp_per_row_grows_its_rows_alone():
    """grid cdiv(32*rows, 256), lengths rows*cols: rows and cols by one factor square the
    bytes, which reach their cap while the threads are under a wave; rows alone fill it."""
    small = inferred(LaunchSpec("ln", grid=("cdiv(32*rows, 256)", 1, 1), block=(256, 1, 1), params=[
        Buffer("x", "f32", "rows*cols", "in"), Buffer("gamma", "f32", "cols", "in"),
        Buffer("y", "f32", "rows*cols", "out"),
        Scalar("rows", "s32", 193, values=[193, 127]), Scalar("cols", "s32", 163, values=[163, 97])]))
    big = timing_shape(small)
    f = big.param("rows").value // 193
    assert big.param("rows").value == 193 * f and f >= 4 and big.param("cols").value == 163
    assert big.param("rows").values is None and big.param("cols").values is None
    threads, nbytes, _, rs = measure(big)
    assert threads >= MIN_THREADS and nbytes <= MAX_BYTES and (threads >= TARGET_THREADS or nbytes >= TARGET_BYTES)
    assert rs.grid[0] == -(-32 * 193 * f // 256)
    assert scale_factor(small, big) == f and describe(small, big) == f"rows={193 * f}, cols=163"
    # a retry at a quarter of the factor stays in the family (rows alone)
    quarter = timing_shape(small, max_factor=f // 4, min_threads=1)
    assert quarter.param("rows").value == 193 * f // 4 and quarter.param("cols").value == 163
    # where one factor for all fills a wave, all of them grow, as before
    square = replace(small, grid=("cdiv(rows*cols, 256)", 1, 1))
    big = timing_shape(square)
    assert big.param("cols").value > 163 and big.param("rows").value // 193 == big.param("cols").value // 163


def test_layer_norm_warp_per_row_from_its_ptx():
    """tests/corpus/src/transpose_softmax.cu: layer_norm(x, gamma, beta, y, rows, cols, eps), a
    warp per row; at 4x the rows (small enough to trace) the lengths cover every access."""
    from superopt.specs.inference import check_spec, infer_specs
    module, fn = _kernel("transpose_softmax.sm_90.ptx", "layer_norm")
    spec = infer_specs(module, fn.name).specs[0]
    x, gamma, beta, y, rows, cols, eps = (p.name for p in spec.kernel_params)
    assert rows in str(spec.grid[0]) and cols not in str(spec.grid[0])
    big = timing_shape(spec)
    assert big is not None and big.param(cols).value == spec.param(cols).value
    assert big.param(rows).value >= 4 * spec.param(rows).value
    assert measure(big)[0] >= MIN_THREADS
    four = timing_shape(spec, max_factor=4, min_threads=1)
    assert four.param(rows).value == 4 * spec.param(rows).value and check_spec(module, fn, four) == []
