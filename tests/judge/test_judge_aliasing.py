"""The judge runs launches whose buffers overlap (issue 26): aliased layouts on the CPU emulator.

Kernels: tests/judge/aliasing/aliasing.cu, its variants compiled by nvcc 13.0 into
tests/judge/aliasing/ptx/ (tests/judge/aliasing/build_ptx.py): a row matrix-vector product into
a global accumulator (``-restrict`` keeps it in a register; CHECKED tests disjointness at launch;
CHECKED_OFF is that test off by one), an in-place ``y = a*x + y; z = x*y``, and a two-point
stencil whose every aliased layout races."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from superopt.judge.alias_check import ALIAS_INDEX
from superopt.judge.backends.emulator import EmulatorBackend
from superopt.judge.backends.gpu import pack_sets, unpack_result
from superopt.judge.check import ACCEPTED, REJECTED, check
from superopt.judge.inputs import (MAX_ALIAS_LAYOUTS, _overlap_range, alias_geometry, alias_layouts, aliased_set, make_rng,
                                   one_thread_sizes, union_bytes)
from tests.passes.data.unroll_tools import buf, emulator_available, scalar, spec

pytestmark = pytest.mark.skipif(not emulator_available()[0], reason="the CPU emulator needs numpy")

PTX = Path(__file__).parent / "aliasing" / "ptx"


def ptx(name: str) -> str:
    return (PTX / f"{name}.ptx").read_text()


BASE = ptx("baseline")

MATVEC = spec("matvec", [64, 1, 1], ["cdiv(m, 64)", 1, 1],
              [buf("A", "f32", "m*n"), buf("x", "f32", "n"), buf("tmp", "f32", "m", "out"),
               scalar("m", "s32", 100), scalar("n", "s32", 24)])
AXPY = spec("axpy_mul", [64, 1, 1], ["cdiv(n, 64)", 1, 1],
            [buf("x", "f32", "n"), buf("y", "f32", "n", "inout"), buf("z", "f32", "n", "out"),
             scalar("a", "f32", 1.5), scalar("n", "s32", 300)])
STENCIL = spec("stencil2", [64, 1, 1], ["cdiv(n, 64)", 1, 1],
               [buf("in", "f32", "n + 1"), buf("out", "f32", "n", "out"), scalar("n", "s32", 100)],
               vary_sizes=False)


def _edit(text: str, kernel: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced by ``new`` inside ``.entry kernel`` only."""
    start = text.index(f".entry {kernel}(")
    end = text.index("\n}\n", start)
    body = text[start:end]
    assert old in body, old
    return text[:start] + body.replace(old, new, 1) + text[end:]


def swapped_loads() -> str:
    """axpy_mul with its two loads before the store swapped: right whether or not x is y."""
    return _edit(BASE, "axpy_mul",
                 "\tld.global.f32 \t%f2, [%rd6];\n\tcvta.to.global.u64 \t%rd7, %rd2;\n\tadd.s64 \t%rd8, %rd7, %rd5;\n"
                 "\tld.global.f32 \t%f3, [%rd8];\n",
                 "\tcvta.to.global.u64 \t%rd7, %rd2;\n\tadd.s64 \t%rd8, %rd7, %rd5;\n\tld.global.f32 \t%f3, [%rd8];\n"
                 "\tld.global.f32 \t%f2, [%rd6];\n")


def _no_aliasing() -> EmulatorBackend:
    """The emulator as the judge used it before aliased layouts (each buffer its own allocation)."""
    be = EmulatorBackend()
    be.aliasing = False
    return be


def _layouts(v, status=None):
    return [e for e in v.evidence["aliasing"]["layouts"] if status is None or e["status"] == status]


# ---------------------------------------------------------------- the plan and the layout

def test_plan_layouts_capped_and_described():
    lay = alias_layouts(MATVEC)
    assert len(lay) <= MAX_ALIAS_LAYOUTS == 6
    assert [x.kind for x in lay] == ["in place", "shift", "shift", "last", "first", "middle"]
    assert all(x.buffer == "tmp" for x in lay)
    assert [x.at(MATVEC.resolved()).describe() for x in lay][:3] == [
        "tmp aliased onto A at the same start (in place)", "tmp aliased onto A at +1 element",
        "tmp aliased onto A at -1 element"]
    rs = MATVEC.resolved()
    last, first = lay[3].at(rs), lay[4].at(rs)
    a, tmp = rs.param("A"), rs.param("tmp")
    assert last.offset == a.nbytes - 4 and last.describe() == "tmp starting on the last element of A"
    assert first.offset == -(tmp.nbytes - 4) and first.describe() == "tmp ending on the first element of A"
    mid = lay[5].at(rs)
    assert mid.offset % 4 == 0 and 0 < mid.offset and mid.describe().startswith("tmp aliased onto the middle of A")
    # y (inout) on x (an input of its length) in place and shifted; no input larger than y
    assert [(x.buffer, x.onto, x.kind) for x in alias_layouts(AXPY)] == [
        ("y", "x", "in place"), ("y", "x", "shift"), ("y", "x", "shift"), ("y", "x", "last"),
        ("y", "x", "first")]
    # nothing written, or a single buffer: no layout
    ro = spec("k", [32, 1, 1], [1, 1, 1], [buf("a", "f32", 32), buf("b", "f32", 32)])
    one = spec("k", [32, 1, 1], [1, 1, 1], [buf("a", "f32", 32, "inout")])
    assert alias_layouts(ro) == [] and alias_layouts(one) == []


def test_one_thread_sizes_only_the_grid_sizes():
    assert one_thread_sizes(MATVEC, {"m": 64, "n": 15}) == {"m": 1, "n": 15}
    assert one_thread_sizes(STENCIL, {"n": 100}) is None            # vary_sizes = false


@pytest.mark.parametrize("shift", [0, 1, -1])
def test_aliased_set_overlap_holds_the_inputs_data(shift):
    lay = alias_layouts(MATVEC)[{0: 0, 1: 1, -1: 2}[shift]]
    s = aliased_set(MATVEC, 7, ALIAS_INDEX, {"m": 5, "n": 3}, lay, make_rng(7))
    g = alias_geometry(s)
    assert (g.winner, g.loser) == ("A", "tmp")            # the input's data wins over the output's poison
    u = union_bytes(s, g)
    assert g.size == max(15, 5 + shift) * 4 - min(0, shift) * 4
    assert np.array_equal(u[g.at["A"]:g.at["A"] + 60].view(np.float32).view(np.uint32), s.data["A"].view(np.uint32))
    tmp = s.data["tmp"]
    # tmp's view in the union is its data: the overlap holds A's values, poison elsewhere
    assert np.array_equal(u[g.at["tmp"]:g.at["tmp"] + 20].view(np.uint32), tmp.view(np.uint32))
    for j in range(5):
        k = j + shift
        if 0 <= k < 15:
            assert tmp.view(np.uint32)[j] == s.data["A"].view(np.uint32)[k]
        else:
            assert np.isnan(tmp[j])                          # the output's poison
    # a rerun with other poisons keeps the overlap consistent
    s2 = s.with_outputs({"tmp": np.zeros(5, np.float32)}, make_rng(1))
    assert np.array_equal(s2.data["tmp"][g.overlap].view(np.uint32), tmp[g.overlap].view(np.uint32))


def test_overlap_range_is_the_elements_meeting_the_other_view():
    """The overlap as a range [first, stop) of the loser's elements equals the per-element test
    (an element's bytes meet the winner's bytes), at every alignment and element size."""
    rng = np.random.default_rng(5)
    for _ in range(4000):
        es = int(rng.choice([1, 2, 4, 8]))
        length, start, ws = (int(v) for v in rng.integers(0, [40, 300, 300]))
        we = ws + int(rng.integers(0, 200))
        starts = start + np.arange(length) * es
        want = (starts < we) & (starts + es > ws)
        first, stop = _overlap_range(start, es, length, ws, we)
        got = np.zeros(length, bool)
        got[first:stop] = True
        assert np.array_equal(got, want), (es, length, start, ws, we)


def test_alias_geometry_is_made_once_per_set():
    lay = alias_layouts(MATVEC)[1]
    s = aliased_set(MATVEC, 7, ALIAS_INDEX, {"m": 5, "n": 3}, lay, make_rng(7))
    assert alias_geometry(s) is alias_geometry(s)
    other = s.with_outputs({"tmp": np.zeros(5, np.float32)}, make_rng(1))
    assert alias_geometry(other).overlap.tolist() == alias_geometry(s).overlap.tolist()


def test_gpu_wire_form_of_an_aliased_set():
    """pack_sets: the host's item is the union ("u"), the aliased buffer a view ("v") at the right
    offset; unpack_result takes both views from the union the worker sends back."""
    lay = alias_layouts(MATVEC)[2]                               # tmp at -1 element of A
    s = aliased_set(MATVEC, 3, ALIAS_INDEX, {"m": 4, "n": 3}, lay, make_rng(3))
    g = alias_geometry(s)
    wire = pack_sets(MATVEC, [s])
    items = wire["sets"][0]["params"]
    assert [i[0] for i in items] == ["u", "b", "v", "s", "s"]
    assert items[0][4] == g.at["A"] == 4 and items[2] == ("v", 0, -4)
    assert np.array_equal(wire["blobs"][items[0][1]], union_bytes(s))
    # the worker's reply: the union changed (tmp[0] = A[-1] ... written), guards intact
    u = union_bytes(s).copy()
    u[:4] = np.array([2.5], np.float32).view(np.uint8)
    front, back = s.guards["A"]
    raw = {"status": "ok", "buffers": [(u, front, back), (None, *s.guards["x"]), (None, b"", b"")]}
    r = unpack_result(MATVEC, s, raw)
    assert r.outputs["tmp"][0] == np.float32(2.5) and not r.inputs_unchanged["tmp"]
    assert r.inputs_unchanged["A"] and r.guards_intact["tmp"] and not r.guard_damage
    bad = {"status": "ok", "buffers": [(u, front, bytes(len(back))), (None, *s.guards["x"]), (None, b"", b"")]}
    assert "around the union of 'A' and 'tmp'" in unpack_result(MATVEC, s, bad).guard_damage["A"]


def test_emulator_guards_around_the_union():
    """The emulator lays both views in one allocation with guards around the union: the guard
    cheat's write one element past y (x == y) damages the union's back guard."""
    be = EmulatorBackend()
    lay = alias_layouts(AXPY)[0]                                 # y on x in place
    s = aliased_set(AXPY, 5, ALIAS_INDEX, {"n": 10}, lay, make_rng(5))
    ok, cheat = be.run_many(BASE, AXPY, [s])[0], be.run_many(ptx("guard_cheat"), AXPY, [s])[0]
    assert ok.status == "ok" and not ok.guard_damage, ok.error
    x, y = s.data["x"], s.data["y"]
    assert np.array_equal(x.view(np.uint32), y.view(np.uint32))   # one buffer, two views
    want = (np.float64(np.float32(s.scalars["a"])) * x.astype(np.float64) + y).astype(np.float32)   # fma
    assert np.array_equal(ok.outputs["y"].view(np.uint32), want.view(np.uint32))
    assert np.array_equal(ok.outputs["x"].view(np.uint32), want.view(np.uint32))
    assert np.array_equal(ok.outputs["z"].view(np.uint32), (want * want).view(np.uint32))
    assert cheat.status == "ok" and "around the union of 'x' and 'y'" in cheat.guard_damage["x"]


# ---------------------------------------------------------------- the judge

def test_matvec_restrict_passed_without_aliasing_and_is_rejected_with_it():
    cand = ptx("restrict")
    old = check(BASE, cand, MATVEC, backend=_no_aliasing(), sets=3, seed=11)
    assert old.status == ACCEPTED, old.summary()
    assert old.evidence["aliasing"]["layouts"] == []
    v = check(BASE, cand, MATVEC, backend="emulator", sets=3, seed=11)
    assert v.status == REJECTED, v.summary()
    assert "when buffers overlap (tmp aliased onto A" in v.reason and "aliased set" in v.reason
    assert v.mismatch is not None and v.mismatch.set_index >= ALIAS_INDEX
    # at the smallest launch every layout races (threads read what others write); one thread does not
    first = [e for e in _layouts(v) if e["scalars"]["m"] != 1]
    assert first and all(e["status"] == "dropped" and "race" in e["why"] for e in first)
    assert any(e["status"] == "judged" and e["scalars"]["m"] == 1 for e in _layouts(v))


def test_matvec_nvcc_code_accepted_on_every_judged_layout():
    v = check(BASE, BASE, MATVEC, backend="emulator", sets=3, seed=12)
    assert v.status == ACCEPTED, v.summary()
    judged = _layouts(v, "judged")
    assert len(judged) == v.evidence["aliasing"]["judged"] >= 1
    assert "with buffers that overlap on" in v.reason
    assert any(n.startswith("buffers that overlap:") for n in v.evidence["notes"])
    assert v.evidence["aliasing"]["candidate_launches"] == 2 * len(judged)


def test_matvec_runtime_check_accepted_and_off_by_one_rejected():
    v = check(BASE, ptx("checked"), MATVEC, backend="emulator", sets=3, seed=13)
    assert v.status == ACCEPTED, v.summary()
    off = check(BASE, ptx("checked_off"), MATVEC, backend="emulator", sets=3, seed=13)
    assert off.status == REJECTED, off.summary()
    assert "when buffers overlap (tmp aliased onto A" in off.reason
    # the off-by-one check is right whenever the buffers are apart: the ordinary sets pass it
    assert check(BASE, ptx("checked_off"), MATVEC, backend=_no_aliasing(), sets=3, seed=13).status == ACCEPTED


def test_in_place_axpy_correct_rewrite_accepted():
    v = check(BASE, swapped_loads(), AXPY, backend="emulator", sets=3, seed=21)
    assert v.status == ACCEPTED, v.summary()
    judged = [e["layout"] for e in _layouts(v, "judged")]
    assert "y aliased onto x at the same start (in place)" in judged


@pytest.mark.parametrize("variant", ["load_past_store", "restrict"])
def test_in_place_axpy_load_moved_past_store_rejected(variant):
    if variant == "restrict":
        cand = ptx("restrict")
    else:
        # the reload of x[i] moved above the store to y[i]: the same unless y is x
        cand = _edit(BASE, "axpy_mul", "\tst.global.f32 \t[%rd8], %f4;\n\tld.global.f32 \t%f5, [%rd6];\n",
                     "\tld.global.f32 \t%f5, [%rd6];\n\tst.global.f32 \t[%rd8], %f4;\n")
    assert check(BASE, cand, AXPY, backend=_no_aliasing(), sets=3, seed=22).status == ACCEPTED
    v = check(BASE, cand, AXPY, backend="emulator", sets=3, seed=22)
    assert v.status == REJECTED, v.summary()
    assert "when buffers overlap (y aliased onto x at the same start (in place))" in v.reason
    assert v.mismatch.buffer in ("x", "y", "z")


def test_every_layout_racy_dropped_and_judged_on_the_normal_sets():
    v = check(BASE, BASE, STENCIL, backend="emulator", sets=3, seed=31)
    assert v.status == ACCEPTED, v.summary()
    info = v.evidence["aliasing"]
    assert info["judged"] == 0 and info["dropped"] == len(info["layouts"]) == 5
    assert all("race" in e["why"] for e in info["layouts"])
    assert "overlap" not in v.reason
    assert any("buffers that overlap: 0 aliased layouts judged, 5 dropped" in n for n in v.evidence["notes"])
    # a wrong candidate is still rejected on the normal sets
    wrong = _edit(BASE, "stencil2", "add.f32", "sub.f32")
    assert check(BASE, wrong, STENCIL, backend="emulator", sets=3, seed=31).status == REJECTED


def test_guard_zones_around_an_aliased_union():
    cand = ptx("guard_cheat")
    assert check(BASE, cand, AXPY, backend=_no_aliasing(), sets=3, seed=41).status == ACCEPTED
    v = check(BASE, cand, AXPY, backend="emulator", sets=3, seed=41)
    assert v.status == REJECTED, v.summary()
    assert "writes outside buffer 'x' when buffers overlap" in v.reason
    assert "around the union of 'x' and 'y' (y aliased onto x at the same start (in place))" in v.reason


def test_reused_baseline_keeps_its_aliased_runs():
    from superopt.judge.check import run_baseline
    bl = run_baseline(BASE, AXPY, backend="emulator", sets=3, seed=51)
    assert bl.aliased is not None and bl.aliased.sets
    first = check(BASE, BASE, AXPY, backend="emulator", baseline=bl)
    again = check(BASE, ptx("restrict"), AXPY, backend="emulator", baseline=bl)
    assert first.status == ACCEPTED and again.status == REJECTED, (first.summary(), again.summary())
    assert "aliased_baseline" not in again.evidence["phase_seconds"]     # nvcc's runs were not made again


# ---------------------------------------------------------------- the sizes a layout runs at

# 64 bins at the middle of x (n=192: +64 elements, where each bin's own loop reads it back) and
# an n=48 at which x is smaller than the bins: the cheapest set has no middle
BINS = spec("bins64", [1, 1, 1], [1, 1, 1], [buf("x", "f32", "n"), buf("bins", "f32", 64, "out"),
                                             scalar("n", "s32", 192, values=[48])], vary_sizes=False)


def bins_in_registers() -> str:
    """bins64's restrict-compiled body with its loads of x made coherent again: the bins kept in
    registers is what only the middle layout shows (its ``.nc`` loads of x after the bins'
    zeroing are wrong on the in-place layout already: superopt.judge.backends.emulator.alias_launch_plan)."""
    r = ptx("restrict")
    start = r.index(".entry bins64(")
    end = r.index("\n}\n", start)
    return r[:start] + r[start:end].replace("ld.global.nc.f32", "ld.global.f32") + r[end:]


class _GpuOrder(EmulatorBackend):
    """The emulator with a GPU's word that it does not choose the schedule: the aliased layouts
    run at the one-thread sizes first, as on a GPU (superopt.judge.alias_check)."""
    not_chosen = ("the order in which blocks run and the warp schedule (the hardware's)",)


def test_a_layout_apart_at_the_cheapest_set_runs_at_a_larger_one():
    """The middle layout has no overlap at n=48; at n=192 it shows the restrict-compiled body wrong
    (its bins kept in registers while they overlap x). Before: dropped at n=48 and accepted."""
    v = check(BASE, bins_in_registers(), BINS, backend=EmulatorBackend(), policy="exact", sets=2, seed=3)
    assert v.status == REJECTED and "middle of x" in v.reason, v.reason
    info = v.evidence["aliasing"]
    assert info["sizes"] == [{"n": 48}, {"n": 192}]
    middle = [e for e in info["layouts"] if "middle" in e["layout"]]
    assert [(e["status"], e["scalars"]) for e in middle] == [("dropped", {"n": 48}), ("judged", {"n": 192})]
    assert "not overlapping at the first (n=48)" in " ".join(v.evidence["notes"])
    base = check(BASE, BASE, BINS, backend=EmulatorBackend(), policy="exact", sets=2, seed=3)
    assert base.status == ACCEPTED and base.evidence["aliasing"]["judged"] == 6


def test_on_a_gpu_a_layout_one_thread_cannot_form_is_left_to_the_emulator():
    """A GPU's agreeing runs at a size where threads race show no behaviour to keep (a transpose's
    output starting on its input's last element rejected stage-stores' 6.35x on the economy bench
    when such layouts ran there): what the first size cannot form is not run at larger sizes on a
    GPU, and the evidence names it as the emulator's (the search's shadow check of the candidate
    to keep), which judges it and rejects bins64's restrict body."""
    v = check(BASE, bins_in_registers(), BINS, backend=_GpuOrder(), policy="exact", sets=2, seed=3)
    info = v.evidence["aliasing"]
    assert v.status == ACCEPTED and info["sizes"] == [{"n": 48}]
    assert [x for x in info["left_to_emulator"] if "middle of x" in x]
    assert "left to the CPU emulator's check" in " ".join(v.evidence["notes"])
    assert check(BASE, bins_in_registers(), BINS, backend=EmulatorBackend(), policy="exact", sets=2,
                 seed=3).status == REJECTED
    m = check(BASE, BASE, MATVEC, backend=_GpuOrder(), policy="exact", sets=2, seed=3).evidence["aliasing"]
    assert m["sizes"][0]["m"] == 1
    for kind in ("at -1 element", "ending on the first element"):
        tried = [e["scalars"]["m"] for e in m["layouts"] if kind in e["layout"]]
        assert tried == [1], (kind, tried)                  # not at m > 1 on a GPU
        assert [x for x in m["left_to_emulator"] if kind in x]


class _GpuTiming(_GpuOrder):
    """A GPU as the economy bench's H100 behaved: nvcc's runs of an aliased set all take one
    schedule (its agreeing runs hide the race its threads have there) and another kernel's code,
    though the same instructions, takes another (other registers, other timing)."""

    def __init__(self, baseline: str, tables: bool = False):
        super().__init__(stand_ins=tables)      # tables: approximate instructions as a GPU's own
        self.baseline, self._other = baseline, False

    def run_many(self, ptx, spec, input_sets, **kw):
        self._other = ptx != self.baseline
        return super().run_many(ptx, spec, input_sets, **kw)

    def alias_plan(self, run):
        return {"schedule": "warps-down", "block_order": "down", "min_chunks": 4} if self._other \
            else {"schedule": "warps-up"}


FIXED_AXPY = spec("axpy_mul", [64, 1, 1], ["cdiv(n, 64)", 1, 1],
                  [buf("x", "f32", "n"), buf("y", "f32", "n", "inout"), buf("z", "f32", "n", "out"),
                   scalar("a", "f32", 1.5), scalar("n", "s32", 100)], vary_sizes=False)


def test_on_a_gpu_a_rejection_where_nvccs_threads_race_is_confirmed_on_the_emulator():
    """At fixed sizes (no one-thread launch) a GPU runs the aliased layouts where threads race;
    the same code under other launch bounds (an occupancy candidate) then "differs" by timing
    alone (rowops' layernorm lost 1.28x so on an H100, 2026-12-07). The emulator's schedules show
    nvcc's own results differ there: the layouts are dropped and the candidate judged on the
    rest. Before: rejected on "out aliased onto in"."""
    same = _edit(BASE, "stencil2", ")\n{", ")\n.maxnreg 32\n{")
    assert one_thread_sizes(STENCIL, {"n": 100}) is None
    v = check(BASE, same, STENCIL, backend=_GpuTiming(BASE), policy="exact", sets=2, seed=3)
    assert v.status == ACCEPTED, v.reason
    info = v.evidence["aliasing"]
    dropped = info["dropped_on_emulator"]
    assert dropped and all("nvcc's results differ between its runs" in d["why"] for d in dropped)
    assert "CPU emulator" in " ".join(v.evidence["notes"])
    assert "more dropped: nvcc's code races there on the CPU emulator" in v.reason
    # without the GPU's word (the emulator chooses): those layouts were dropped before any candidate
    e = check(BASE, same, STENCIL, backend=EmulatorBackend(), policy="exact", sets=2, seed=3)
    assert e.status == ACCEPTED and "dropped_on_emulator" not in e.evidence["aliasing"]


ROWNORM = spec("rownorm", [64, 1, 1], [5, 1, 1],
               [buf("in", "f32", "rows*cols"), buf("out", "f32", "rows*cols", "out"),
                scalar("rows", "s32", 9), scalar("cols", "s32", 40)], vary_sizes=False)


def test_a_layernorms_races_show_on_the_emulator_through_its_stand_ins():
    """rownorm (a layernorm's shape) has rsqrt.approx, which the emulator refuses when it judges
    (not the GPU's values) and runs by stand-ins where nvcc's code is only compared with itself:
    the occupancy-like candidate the GPU's timing "rejects" on the shifted layouts is accepted,
    those layouts dropped as races, the in-place one (a warp reads and writes its own row)
    still judged; the refused instruction is why the emulator alone cannot judge it."""
    same = _edit(BASE, "rownorm", ")\n{", ")\n.maxnreg 40\n{")
    v = check(BASE, same, ROWNORM, backend=_GpuTiming(BASE, tables=True), policy="exact", sets=2, seed=7)
    assert v.status == ACCEPTED, v.reason
    info = v.evidence["aliasing"]
    racy = {d["layout"] for d in info["dropped_on_emulator"]}
    assert "out aliased onto in at +1 element" in racy and "out aliased onto in at -1 element" in racy
    assert not any("in place" in x for x in racy)
    plain = check(BASE, BASE, ROWNORM, backend=EmulatorBackend(), policy="exact", sets=2, seed=7)
    assert plain.status != ACCEPTED and "rsqrt.approx" in plain.reason, plain.reason


def test_on_a_gpu_a_rejection_where_nvccs_code_is_deterministic_stands():
    """In place (y on x) each thread reads and writes its own elements: no race, and the
    restrict-compiled body (x reused after the store to y) is wrong there. The emulator's runs
    of nvcc's code agree, so the GPU's rejection stands, and says the emulator confirmed it."""
    v = check(BASE, ptx("restrict"), FIXED_AXPY, backend=_GpuTiming(BASE), policy="exact", sets=2, seed=5)
    assert v.status == REJECTED and "when buffers overlap" in v.reason, v.reason
    assert "runs of nvcc's code agree there" in v.reason
    assert v.evidence["aliasing"]["confirmed_on_emulator"]


def test_the_emulator_runs_layouts_apart_at_one_thread_at_the_other_sizes():
    """On the emulator (it chooses the schedules: races show) every layout runs at each size until
    it is judged; MATVEC's layouts W at -1 and W ending on H's first, apart at m=1, run at the
    smallest set's m too."""
    m = check(BASE, BASE, MATVEC, backend=EmulatorBackend(), policy="exact", sets=2, seed=3).evidence["aliasing"]
    assert "left_to_emulator" not in m
    for kind in ("at -1 element", "ending on the first element"):
        tried = sorted(e["scalars"]["m"] for e in m["layouts"] if kind in e["layout"])
        assert tried[0] == 1 and tried[-1] > 1, (kind, tried)


def test_a_non_coherent_read_after_a_store_through_another_pointer_is_rejected():
    """axpy_mul with its second load of x (after the store to y) through the read-only path: with
    y on x in place that path may hold x as it was at launch (PTX leaves such a read undefined),
    and on the emulator's odd launches of an aliased set it does. Before: accepted on every
    layout (the emulator's .nc loads read memory as it is). The first load of x, ahead of every
    store, may take that path (the cache-hints pass makes exactly those .nc): accepted."""
    late = _edit(BASE, "axpy_mul", "\tld.global.f32 \t%f5, [%rd6];", "\tld.global.nc.f32 \t%f5, [%rd6];")
    v = check(BASE, late, AXPY, backend="emulator", sets=3, seed=21)
    assert v.status == REJECTED and "in place" in v.reason, v.reason
    early = _edit(BASE, "axpy_mul", "\tld.global.f32 \t%f2, [%rd6];", "\tld.global.nc.f32 \t%f2, [%rd6];")
    assert check(BASE, early, AXPY, backend="emulator", sets=3, seed=21).status == ACCEPTED


def test_the_emulators_non_coherent_reads_under_nc_stale():
    """One thread stores 7 to x[0] through y (the same memory) and reads x[0] back, plainly and
    through .nc: nc_stale gives the .nc read the value at launch, the plain read the new one."""
    from superopt.judge.emulator.runner import LoadedModule
    text = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 px, .param .u64 py, .param .u64 pout)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [py];
    ld.param.u64 %rd3, [pout];
    st.global.u32 [%rd2], 7;
    ld.global.u32 %r1, [%rd1];
    ld.global.nc.u32 %r2, [%rd1];
    st.global.u32 [%rd3], %r1;
    st.global.u32 [%rd3+4], %r2;
    ret;
}
"""
    for stale, want in ((False, [7, 7]), (True, [7, 3])):
        dev = LoadedModule(text)
        x, out = dev.alloc(4), dev.alloc(8)
        dev.heap.write(x, np.array([3], np.uint32))
        dev.launch("k", grid=(1, 1, 1), block=(1, 1, 1), params=[np.uint64(x), np.uint64(x), np.uint64(out)],
                   nc_stale=stale)
        assert list(np.frombuffer(dev.heap.read(out, 8), np.uint32)) == want, stale


# ---------------------------------------------------------------- where the layouts run (cost)

def test_baseline_aliased_runs_made_only_when_a_check_needs_them():
    from superopt.judge.check import run_baseline
    bl = run_baseline(BASE, AXPY, backend="emulator", sets=3, seed=52)
    assert bl.layouts_pending is not None and "aliasing" not in bl.evidence
    left = check(BASE, BASE, AXPY, backend="emulator", baseline=bl, aliasing="judged elsewhere (test)")
    assert left.status == ACCEPTED, left.summary()
    assert bl.layouts_pending is not None                      # nvcc's aliased runs still not made
    assert left.evidence["aliasing_left_out"] == "judged elsewhere (test)"
    assert "overlap" not in left.reason
    judged = check(BASE, BASE, AXPY, backend="emulator", baseline=bl)
    assert bl.layouts_pending is None and bl.aliased is not None
    assert judged.evidence["aliasing"]["candidate_launches"] > 0


def _larger(s, **sizes):
    from dataclasses import replace
    from superopt.specs.launch_spec import Scalar
    return replace(s, params=[replace(p, value=sizes[p.name]) if isinstance(p, Scalar) and p.name in sizes else p
                              for p in s.params])


def test_judge_leaves_layouts_out_at_a_costly_shape_once_judged_at_another(monkeypatch):
    """A candidate accepted on the aliased layouts at one shape is not judged on them again at a
    shape over the cost bound; one never judged on them is judged on them there in its check on
    fresh inputs (the one a search makes of the candidate it keeps), and a cheat is caught then."""
    from superopt.judge import judge as judge_mod
    big = _larger(AXPY, n=900)
    monkeypatch.setattr(judge_mod, "ALIASED_LAYOUTS_COSTLY_BYTES", judge_mod.spec_bytes(AXPY))
    assert judge_mod.spec_bytes(big) > judge_mod.ALIASED_LAYOUTS_COSTLY_BYTES
    good = swapped_loads()
    j = judge_mod.BackendJudge(backend="emulator", check_sets=2)
    small = j.verify(BASE, good, AXPY)
    assert small.status == ACCEPTED and small.evidence["aliasing"]["candidate_launches"] > 0, small.summary()
    at_big = j.verify(BASE, good, big)
    assert at_big.status == ACCEPTED, at_big.summary()
    assert "judged on them at lengths" in at_big.evidence["aliasing_left_out"]
    assert not (at_big.evidence.get("aliasing") or {}).get("candidate_launches")
    fresh = j.verify(BASE, good, big, fresh=True)
    assert fresh.status == ACCEPTED and "aliasing_left_out" in fresh.evidence, fresh.summary()
    # a candidate first judged at the costly shape: its checks there leave the layouts for the
    # check on fresh inputs (it is only timed until then), which rejects the cheat
    cheat = ptx("restrict")
    v = j.verify(BASE, cheat, big)
    assert v.status == ACCEPTED, v.summary()
    assert v.evidence["aliasing_left_out"].startswith(judge_mod.ALIASING_DEFERRED)
    assert not (v.evidence.get("aliasing") or {}).get("candidate_launches")
    v = j.verify(BASE, cheat, big, fresh=True)
    assert v.status == REJECTED and "when buffers overlap" in v.reason, v.summary()
    # and a right candidate never judged on them at a smaller shape is, on fresh inputs
    j2 = judge_mod.BackendJudge(backend="emulator", check_sets=2)
    assert j2.verify(BASE, good, big).evidence["aliasing_left_out"].startswith(judge_mod.ALIASING_DEFERRED)
    v = j2.verify(BASE, good, big, fresh=True)
    assert v.status == ACCEPTED and v.evidence["aliasing"]["candidate_launches"] > 0, v.summary()


def test_a_search_drops_a_fast_candidate_wrong_on_overlap_when_only_costly_shapes_exist(monkeypatch):
    """End to end through the search's choice: at a costly shape the candidates are timed with the
    aliased layouts left out, and the fresh check before keeping one runs them. The fastest
    candidate, wrong when buffers overlap, is dropped there; the right one is kept."""
    from superopt.judge import judge as judge_mod
    from superopt.search.candidates import Candidate, Step
    from superopt.search.loop import _choose, evaluate
    from superopt.search.options import SearchOptions
    big = _larger(AXPY, n=900)
    monkeypatch.setattr(judge_mod, "ALIASED_LAYOUTS_COSTLY_BYTES", judge_mod.spec_bytes(AXPY))

    class TimedEmulatorJudge(judge_mod.BackendJudge):
        can_time = True
        speedups = {}

        def time(self, base_ptx, cand_ptx, spec, *, fresh=True):
            from superopt.judge.timing import TimingResult
            s = self.speedups[cand_ptx]
            return TimingResult(status="ok", speedup=s, faster=True, reason=f"scripted {s}x")

    j = TimedEmulatorJudge(backend="emulator", check_sets=2)
    cheat, good = ptx("restrict"), swapped_loads()
    j.speedups = {cheat: 1.5, good: 1.2}
    cands = [Candidate(kernel="axpy_mul", plan=[Step(f"test-{name}", {})], ptx=text, changes=[])
             for name, text in (("cheat", cheat), ("good", good))]
    entries = []
    for c in cands:
        e = evaluate(c, BASE, [big], j, "sm_90")
        assert e["fate"] == "faster", e
        assert e["verdict"]["evidence"]["aliasing_left_out"].startswith(judge_mod.ALIASING_DEFERRED)
        e["id"] = c.id
        entries.append(e)
    record = {}
    kept = _choose(entries, {c.id: c for c in cands}, j, SearchOptions(sanitize=()), "axpy_mul", record, BASE, [big])
    assert kept is not None and kept.ptx == good, record
    bad = next(e for e in entries if e["id"] == cands[0].id)
    assert bad["fate"] == "rejected-check" and "when buffers overlap" in bad["reason"], bad


SCALE4 = spec("scale4", [64, 1, 1], ["cdiv(n, 64)", 1, 1],
              [buf("x", "f32", "4*n"), buf("y", "f32", "4*n", "inout"), scalar("n", "s32", 150)])


def test_layouts_keep_the_alignment_of_the_kernels_widest_access():
    """scale4 reads and writes through float4: its layouts shift by 16 bytes, not one float (a
    misaligned launch faults: on a GPU a sticky error and a worker restart per run); a kernel
    of scalar accesses keeps element shifts."""
    from superopt.judge.alias_check import access_alignment
    assert access_alignment(BASE, "scale4") == 16
    assert access_alignment(BASE, "axpy_mul") == 4
    assert access_alignment("not ptx", "scale4") == 1
    rs = SCALE4.resolved()
    got = [lay.at(rs) for lay in alias_layouts(SCALE4, align=16)]
    assert [g.kind for g in got if g is not None] == ["in place", "shift", "shift", "last", "first"]
    assert all(g.offset % 16 == 0 for g in got if g is not None)
    assert [g.offset for g in got if g.kind == "shift"] == [16, -16]
    n = 4 * 150 * 4
    assert next(g for g in got if g.kind == "last").offset == n - 16
    assert next(g for g in got if g.kind == "first").offset == -(n - 16)
    assert "16-byte aligned" in got[1].describe()
    plain = [lay.at(rs) for lay in alias_layouts(SCALE4)]
    assert [g.offset for g in plain if g.kind == "shift"] == [4, -4]


def test_a_float4_kernel_is_judged_on_its_aligned_layouts_none_dropped_for_a_fault(monkeypatch):
    """On the emulator (which faults on a misaligned access as a GPU does): nvcc's scale4 runs on
    every aligned layout without a fault (the shifted ones race, y = 2x + y, and are dropped for
    that); with element-aligned layouts, as before, it faulted on each."""
    from superopt.judge import alias_check
    v = check(BASE, BASE, SCALE4, backend="emulator", sets=2, seed=5)
    assert v.status == ACCEPTED, v.summary()
    info = v.evidence["aliasing"]
    assert info["alignment_bytes"] == 16
    whys = [x.get("why") or "" for x in info["layouts"] if x.get("status") == "dropped"]
    assert whys and not [w for w in whys if "crash" in w or "misaligned" in w], whys
    assert info["judged"] >= 1 and info["candidate_launches"] > 0
    monkeypatch.setattr(alias_check, "access_alignment", lambda ptx, kernel: 1)
    old = check(BASE, BASE, SCALE4, backend="emulator", sets=2, seed=5).evidence["aliasing"]
    assert [x for x in old["layouts"] if "misaligned" in (x.get("why") or "")], old["layouts"]


def test_a_layout_that_faults_is_not_run_again_for_its_other_runs():
    """nvcc's runs on the aliased layouts, in one request: a fault (on a GPU a sticky error that
    ends the worker) leaves the rest unrun. The runs left of a layout that faulted are not tried
    again (each try would cost a worker restart); the other layouts' runs are."""
    from superopt.judge.alias_check import _run_all
    from superopt.judge.backends.base import RunResult

    class FaultyBackend:
        def __init__(self):
            self.requests = []

        def run_many(self, ptx, spec, sets, timeout=None):
            self.requests.append(list(sets))
            out, dead = [], False
            for s in sets:
                if dead:
                    out.append(RunResult(status="not_run"))
                elif s.startswith("bad"):
                    out.append(RunResult(status="crash", error="kernel: CUDA_ERROR_MISALIGNED_ADDRESS"))
                    dead = True
                else:
                    out.append(RunResult(status="ok"))
            return out

    sets = ["good-0", "good-1", "bad-0", "bad-1", "bad-2", "fine-0", "fine-1"]
    groups = [0, 0, 1, 1, 1, 2, 2]
    be = FaultyBackend()
    res = _run_all(be, "", None, sets, 1.0, groups)
    assert [r.status for r in res] == ["ok", "ok", "crash", "crash", "crash", "ok", "ok"]
    assert "an earlier run of this layout ended in crash" in res[3].error
    assert be.requests == [sets, ["fine-0", "fine-1"]]           # one fault, one request after it
    old = FaultyBackend()
    _run_all(old, "", None, sets, 1.0)                            # without groups: each run tried
    assert len(old.requests) == 4


def test_the_emulators_confirmations_of_a_kernel_are_bounded(monkeypatch):
    """Past CONFIRM_BUDGET_S of confirmations for a kernel, a GPU's rejection stands unconfirmed
    and says why (a captured shape's layouts could otherwise cost 15 s each on the emulator)."""
    from superopt.judge import alias_check
    monkeypatch.setattr(alias_check, "CONFIRM_BUDGET_S", 0.0)
    same = _edit(BASE, "stencil2", ")\n{", ")\n.maxnreg 32\n{")
    v = check(BASE, same, STENCIL, backend=_GpuTiming(BASE), policy="exact", sets=2, seed=3)
    assert v.status == REJECTED and "not confirmed on the CPU emulator" in v.reason, v.reason


def test_a_confirmation_past_its_launch_limit_confirms_nothing():
    """emulator_race's per-launch limit fires: a run past it confirms no race, the rejection stands."""
    from superopt.judge import alias_check
    # bins64 at n = 20000: one thread, 20000 dependent adds (past the emulator's check interval)
    s = aliased_set(BINS, 3, ALIAS_INDEX, {"n": 20000}, alias_layouts(BINS)[0], make_rng(3))
    from superopt.judge.policy import EXACT
    why, note = alias_check.emulator_race(BASE, BINS, s, EXACT, make_rng(4), timeout=1e-6)
    assert why is None and "could not run" in note and "timeout" in note, note
