"""Never slower in the program (issue 24): the candidate to keep is timed at the other launch
shapes the program may use, with a scripted timer whose speed depends on the block, and kept
only when it is slower at none of them."""
from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

import ptx_ir
from superopt.judge import Judge
from superopt.judge.check import Verdict
from superopt.search import launch_shapes
from superopt.search.choices import kernel_search_options, launch_facts
from superopt.search.loop import search_kernel
from superopt.search.options import SearchOptions
from superopt.specs.program_launches import ProgramLaunches
from superopt.specs.sources import explicit_or_inferred
from tests.model.helpers import VADD, test_passes, vadd_spec  # noqa: F401 (a fixture)

SOURCE = """
__global__ void vadd(const float *x, const float *y, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
int main() {
    int sizes[] = {128, 512};
    for (int j = 0; j < 2; j++) {
        int bs = sizes[j];
        vadd<<<(n + bs - 1) / bs, bs>>>(dx, dy, dout, n);
    }
}
"""
RUNTIME_SOURCE = """
__global__ void vadd(const float *x, const float *y, float *out, int n) {}
void run(int n, int threads) { vadd<<<(n + threads - 1) / threads, threads>>>(dx, dy, dout, n); }
"""


@dataclass
class Timing:
    status: str
    faster: bool
    speedup: float
    reason: str = "scripted"
    slower: bool = False

    def to_dict(self):
        return {"status": self.status, "faster": self.faster, "speedup": self.speedup, "slower": self.slower}


class BlockJudge(Judge):
    """Accepts (unless told otherwise per block); the candidate's speed is ``speed_at[block.x]``
    (1.0 elsewhere); slower beyond noise below 0.98."""

    backend = "scripted-gpu"
    policy = "exact"
    can_time = True

    def __init__(self, speed_at: dict, *, wrong_at=(), own_fails_at=(), fails_timing_at=(), own_fails_scaled_at=()):
        self.speed_at, self.wrong_at, self.own_fails_at = speed_at, wrong_at, own_fails_at
        self.fails_timing_at, self.own_fails_scaled_at = fails_timing_at, own_fails_scaled_at
        self.timed: list[tuple] = []
        self.checked: list[tuple] = []

    def verify(self, base, cand, spec, *, fresh=False):
        b = spec.block[0]
        self.checked.append((tuple(spec.block), cand == base))
        if b in self.own_fails_at:
            return Verdict("could_not_judge", "nvcc's code is not deterministic at this block", "exact", {})
        if b in self.own_fails_scaled_at and str(spec.origin).endswith("scaled for timing"):
            return Verdict("could_not_judge", "nvcc's code reads past a buffer there", "exact", {})
        if cand != base and b in self.wrong_at:
            return Verdict("rejected", "buffer 'out' element 7 differs", "exact", {})
        return Verdict("accepted", "identical", "exact", {})

    def time(self, base, cand, spec, *, fresh=True):
        b = spec.block[0]
        self.timed.append(tuple(spec.block))
        if b in self.fails_timing_at:
            return Timing("error", False, None, "timing failed: launch failed")
        s = self.speed_at.get(b, 1.0)
        return Timing("ok", s > 1.02, s, slower=s < 0.98)


OPTS = SearchOptions(budget_s=60, passes=["test-nc-loads"], sanitize=())


def search(tmp_path, source, judge, ptx=VADD, opts=OPTS):
    cu = tmp_path / "vadd.cu"
    cu.write_text(source)
    module = ptx_ir.parse(ptx)
    choice, why = explicit_or_inferred(module, "vadd", source=str(cu), settings=None)
    assert choice is not None, why
    options = kernel_search_options(opts, choice, None)
    return choice, search_kernel(module, "vadd", choice.specs, target="sm_90", options=options, judge=judge)


def winner_or_best(result):
    return next(e for e in result.record["candidates"] if e.get("launch_shapes_timed"))


def test_faster_at_the_timed_block_and_slower_at_another_source_block_is_not_kept(tmp_path, test_passes):  # noqa: F811
    judge = BlockJudge({256: 1.3, 128: 1.0, 512: 0.8})
    choice, result = search(tmp_path, SOURCE, judge)
    assert choice.launches.source_blocks == ((128, 1, 1), (512, 1, 1)) and not choice.launches.runtime
    assert result.winner is None and result.record["status"] == "kept-baseline"
    e = winner_or_best(result)
    assert e["fate"] == "slower-elsewhere"
    assert "0.800x (slower beyond noise) at block 512 (source)" in e["reason"]
    assert "slower elsewhere" in result.record["reason"]
    rows = e["launch_shapes_timed"]
    assert [(r["block"][0], r["origin"]) for r in rows] == [(256, "timed"), (128, "source"), (512, "source")]
    assert [r["speedup"] for r in rows] == [1.3, 1.0, 0.8] and [r["slower"] for r in rows] == [False, False, True]
    # the other blocks are timed at the timed shape's sizes (the scaled-up n), not the small inferred ones
    assert rows[1]["note"] == "at the timed shape's sizes" and rows[1]["grid"][0] * 128 >= rows[0]["grid"][0] * 256 - 256


def test_not_slower_anywhere_is_kept_and_the_record_lists_every_shape(tmp_path, test_passes):  # noqa: F811
    judge = BlockJudge({256: 1.3, 128: 1.01, 512: 0.99})
    _, result = search(tmp_path, SOURCE, judge)
    assert result.winner is not None
    win = next(e for e in result.record["candidates"] if e["fate"] == "winner")
    rows = win["launch_shapes_timed"]
    assert [(r["block"][0], r["speedup"]) for r in rows] == [(256, 1.3), (128, 1.01), (512, 0.99)]
    assert "not slower at 2 other launch shape(s) (0.990x-1.010x)" in result.record["reason"]
    # the candidate was checked at the new blocks (their small inferred shapes) before being timed there
    assert ((128, 1, 1), False) in judge.checked and ((512, 1, 1), False) in judge.checked


def test_only_the_candidate_to_keep_is_timed_at_the_other_shapes(tmp_path, test_passes):  # noqa: F811
    judge = BlockJudge({256: 1.3})
    _, result = search(tmp_path, SOURCE, judge)
    judged = [e for e in result.record["candidates"] if e.get("timing")]
    assert len(judged) >= 2                       # several candidates were timed ...
    timed_elsewhere = [e for e in result.record["candidates"] if e.get("launch_shapes_timed")]
    assert [e["fate"] for e in timed_elsewhere] == ["winner"]     # ... one at the other shapes
    assert judge.timed.count((128, 1, 1)) == 1 and judge.timed.count((512, 1, 1)) == 1


def test_a_block_computed_at_run_time_times_the_usual_and_inferred_blocks(tmp_path, test_passes):  # noqa: F811
    judge = BlockJudge({256: 1.3})
    choice, result = search(tmp_path, RUNTIME_SOURCE, judge)
    assert choice.launches.runtime and choice.launches.source_blocks == ()
    assert result.winner is not None
    rows = next(e for e in result.record["candidates"] if e["fate"] == "winner")["launch_shapes_timed"]
    got = {r["block"][0]: r["origin"] for r in rows}
    assert got == {256: "timed", 96: "inferred", 1024: "inferred", 128: "usual", 512: "usual"}
    assert all(r.get("speedup") == 1.0 for r in rows[1:])


def test_a_usual_block_slower_is_not_kept(tmp_path, test_passes):  # noqa: F811
    judge = BlockJudge({256: 1.3, 1024: 0.7})
    _, result = search(tmp_path, RUNTIME_SOURCE, judge)
    assert result.winner is None
    e = winner_or_best(result)
    assert e["fate"] == "slower-elsewhere" and "at block 1024 (inferred)" in e["reason"]


MAXNTID_VADD = VADD.replace(".visible .entry vadd(", ".visible .entry vadd(").replace(
    "\n{\n\t.reg .pred", "\n.maxntid 256, 1, 1\n{\n\t.reg .pred")


def test_a_block_the_launch_bounds_forbid_is_skipped_with_a_note(tmp_path, test_passes):  # noqa: F811
    assert ".maxntid 256" in MAXNTID_VADD
    judge = BlockJudge({256: 1.3})
    _, result = search(tmp_path, RUNTIME_SOURCE, judge, ptx=MAXNTID_VADD)
    assert result.winner is not None
    rows = next(e for e in result.record["candidates"] if e["fate"] == "winner")["launch_shapes_timed"]
    skipped = {r["block"][0]: r["skipped"] for r in rows if r.get("skipped")}
    assert set(skipped) == {512, 1024}
    assert all("__launch_bounds__" in why for why in skipped.values())
    assert (512, 1, 1) not in judge.timed and (1024, 1, 1) not in judge.timed
    assert "2 skipped" in result.record["reason"]


def test_a_block_nvcc_code_cannot_be_judged_at_is_skipped_not_a_failure(tmp_path, test_passes):  # noqa: F811
    judge = BlockJudge({256: 1.3}, own_fails_at=(512,))
    _, result = search(tmp_path, SOURCE, judge)
    assert result.winner is not None
    rows = next(e for e in result.record["candidates"] if e["fate"] == "winner")["launch_shapes_timed"]
    row = next(r for r in rows if r["block"][0] == 512)
    assert "nvcc's own code cannot be judged there" in row["skipped"] and "speedup" not in row


def test_a_block_whose_scaled_sizes_break_is_timed_at_its_inferred_sizes(tmp_path, test_passes):  # noqa: F811
    judge = BlockJudge({256: 1.3, 512: 0.8}, own_fails_scaled_at=(512,))
    _, result = search(tmp_path, SOURCE, judge)
    e = winner_or_best(result)
    row = next(r for r in e["launch_shapes_timed"] if r["block"][0] == 512)
    assert row["note"].startswith("at the inferred sizes: nvcc's own code cannot be judged at the timed shape's")
    assert row["speedup"] == 0.8 and e["fate"] == "slower-elsewhere"     # still judged, at the small size


def test_wrong_at_another_source_block_is_not_kept(tmp_path, test_passes):  # noqa: F811
    judge = BlockJudge({256: 1.3}, wrong_at=(512,))
    _, result = search(tmp_path, SOURCE, judge)
    assert result.winner is None
    e = winner_or_best(result)
    assert e["fate"] == "rejected-check" and "at block 512 (source), a block the program may launch" in e["reason"]
    assert (512, 1, 1) not in judge.timed          # never timed where it is wrong


def test_failing_where_nvcc_code_runs_is_not_kept(tmp_path, test_passes):  # noqa: F811
    judge = BlockJudge({256: 1.3}, fails_timing_at=(512,))
    _, result = search(tmp_path, SOURCE, judge)
    assert result.winner is None
    e = winner_or_best(result)
    assert e["fate"] == "not-timed" and "could not be timed at block 512" in e["reason"]


def test_the_inference_time_limit_fires_and_nothing_is_kept(tmp_path, test_passes, monkeypatch):  # noqa: F811
    """The other blocks cannot be made in time: the search cannot say the candidate is not
    slower there, so it is not kept (the limit is real: inference stops at its deadline)."""
    monkeypatch.setattr(launch_shapes, "OTHER_BLOCKS_INFERENCE_S", 0.0)
    judge = BlockJudge({256: 1.3})
    _, result = search(tmp_path, SOURCE, judge)
    assert result.winner is None
    e = winner_or_best(result)
    assert e["fate"] == "not-timed" and "inference timed out after 0 s" in e["reason"]


# --------------------------------------------------------------------------- with a capture

def captured(n: int, block: int = 128):
    s = vadd_spec()
    s.params[-1] = replace(s.params[-1], value=n)
    return replace(s, grid=(-(-n // block), 1, 1), block=(block, 1, 1), origin="captured", vary_sizes=False)


def capture_search(judge, weighted):
    specs = [weighted[0][0]]
    opts = replace(OPTS, launches=ProgramLaunches("captured", weighted=tuple(weighted), runtime=False,
                                                  captured_blocks=tuple(tuple(s.block) for s, _ in weighted)))
    return search_kernel(ptx_ir.parse(VADD), "vadd", specs, target="sm_90", options=opts, judge=judge)


def test_every_captured_shape_is_timed_and_weighed_by_its_gpu_time(test_passes):  # noqa: F811
    main, other = captured(1 << 20), captured(1 << 16, block=512)
    judge = BlockJudge({128: 1.3, 512: 0.99})
    result = capture_search(judge, [(main, 0.7), (other, 0.3)])
    assert result.winner is not None
    win = next(e for e in result.record["candidates"] if e["fate"] == "winner")
    rows = win["launch_shapes_timed"]
    assert [(r["origin"], r["share"], r["speedup"]) for r in rows] == [("captured", 0.7, 1.3), ("captured", 0.3, 0.99)]
    assert win["weighted_speedup"] == pytest.approx(1 / (0.7 / 1.3 + 0.3 / 0.99))
    assert ((512, 1, 1), False) in judge.checked    # a captured block no spec checked: checked before timing


def test_a_captured_shape_slower_beyond_noise_is_not_kept(test_passes):  # noqa: F811
    main, other = captured(1 << 20), captured(1 << 16, block=512)
    result = capture_search(BlockJudge({128: 1.3, 512: 0.9}), [(main, 0.9), (other, 0.1)])
    assert result.winner is None
    assert winner_or_best(result)["fate"] == "slower-elsewhere"


def test_the_weighed_speedup_decides(test_passes):  # noqa: F811
    """Faster at the main shape, within noise at the other (not "slower"), but weighed by their
    GPU time the program would not be faster: not kept."""
    main, other = captured(1 << 20), captured(1 << 16, block=512)
    judge = BlockJudge({128: 1.03, 512: 0.985})
    result = capture_search(judge, [(main, 0.3), (other, 0.7)])
    assert result.winner is None
    e = winner_or_best(result)
    assert e["fate"] == "slower-elsewhere" and "weighed by the 2 captured shapes' GPU time" in e["reason"]
    assert e["weighted_speedup"] < 1.0


def test_every_captured_block_bounds_the_occupancy_block():
    """.maxntid from the launch facts must let every captured block launch, not only the
    timed shape's."""
    from superopt.specs.sources import SpecChoice
    main = captured(1 << 20)
    choice = SpecChoice([main], "captured", launches=ProgramLaunches(
        "captured", weighted=((main, 0.97),), runtime=False, captured_blocks=((128, 1, 1), (1024, 1, 1))))
    assert launch_facts(choice)["contract_block"] == (1024, 1, 1)


def test_a_stored_maxntid_that_a_captured_block_would_break_is_refused():
    from superopt.judge.launch_contract import contract_problem
    from superopt.specs.sources import SpecChoice
    base = ptx_ir.parse(VADD).function("vadd")
    new = ptx_ir.parse(MAXNTID_VADD).function("vadd")
    main = captured(1 << 20)
    choice = SpecChoice([main], "captured", launches=ProgramLaunches(
        "captured", weighted=((main, 0.97),), runtime=False, captured_blocks=((128, 1, 1), (1024, 1, 1))))
    assert "launches 1024 threads" in contract_problem(base, new, lambda: [choice])


# --------------------------------------------------------------------------- the timing rule

def test_slower_beyond_noise_is_the_mirror_of_faster():
    from superopt.judge.timing import Stats, slower_than
    a = Stats(60, 10e-6, 9.9e-6, 10.1e-6, 0.2e-6, 9.8e-6, 10.4e-6)
    b = Stats(60, 11e-6, 10.9e-6, 11.1e-6, 0.2e-6, 10.8e-6, 11.4e-6)
    assert slower_than(a, b, (1.08, 1.12))[0]
    assert not slower_than(a, b, (0.99, 1.12))[0]               # the interval reaches 1
    noisy = Stats(60, 10.1e-6, 9e-6, 11e-6, 2e-6, 8e-6, 12e-6)
    assert not slower_than(a, noisy, (1.001, 1.02))[0]          # within the spread
    assert not slower_than(b, a, (0.88, 0.92))[0]               # faster is not slower


def test_the_record_with_every_shape_validates(tmp_path, test_passes):  # noqa: F811
    from reports.load import validate
    from superopt.store import record as rec
    _, result = search(tmp_path, SOURCE, BlockJudge({256: 1.3, 512: 0.8}))
    doc = rec.module_record(source=str(tmp_path / "vadd.cu"), target="sm_90", mode="optimize")
    doc["kernels"].append(result.record)
    validate(doc)


def test_the_report_shows_every_shape_timed(tmp_path, test_passes):  # noqa: F811
    from reports import render
    from superopt.store import record as rec
    _, refused = search(tmp_path, SOURCE, BlockJudge({256: 1.3, 512: 0.8}))
    doc = rec.module_record(source=str(tmp_path / "vadd.cu"), target="sm_90", mode="optimize")
    doc["kernels"].append(refused.record)
    md = render.markdown([doc])
    assert "Launch shapes the program may use, timed for `test-nc-loads(which=all)` (slower-elsewhere)" in md
    assert "| 512 | " in md and "| source | – | 0.800× | slower |" in md
    assert "| 256 | " in md and "| timed | – | 1.300× | not slower |" in md
    html = render.html_report([doc], sass=False)
    assert "Launch shapes the program may use" in html and "<b>slower</b>" in html
