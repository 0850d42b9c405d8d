"""bench/never_slower/run.py on the CPU: the per-block lines, the "slower than nvcc beyond the
spread" rule and the result file, with fake program runs in place of the builds and the GPU."""
from __future__ import annotations

import json

import pytest

from bench.never_slower import run as ns
from bench.programs import run as programs

BIASGRAD_STDOUT = """biasgrad: dout 8192 x 3072 float (101 MB), 6 block sizes
biasgrad: block   32: 0.9000 ms per launch, max rel err 1e-07
NVCC_PLUS_BENCH block=32 kernel_ms=0.90000 check=PASS
NVCC_PLUS_BENCH block=64 kernel_ms=0.50000 check=FAIL
NVCC_PLUS_BENCH kernel_ms=1.40000 check=FAIL
"""


def test_the_program_lines_per_block_size_are_read():
    got = programs.parse_run({"rc": 1, "seconds": 1.0, "timed_out": False, "stdout": BIASGRAD_STDOUT, "stderr": ""})
    assert got["kernel_ms"] == 1.4 and got["check"] == "FAIL"
    assert got["blocks"] == {"32": {"kernel_ms": 0.9, "check": "PASS"}, "64": {"kernel_ms": 0.5, "check": "FAIL"}}
    src = (programs.HERE / "biasgrad" / "biasgrad.cu").read_text()
    assert 'NVCC_PLUS_BENCH block=%d kernel_ms=%.5f check=%s' in src     # what the regex reads
    assert "biasgrad" in programs.programs()


@pytest.mark.parametrize("nvcc, mode, slower", [
    ([1.00, 1.01, 0.99], [1.01, 1.02, 1.00], False),     # 1% slower, inside the runs' spread
    ([1.00, 1.01, 0.99], [1.10, 1.11, 1.09], True),      # 10% slower, far beyond it
    ([1.00, 1.01, 0.99], [0.80, 0.81, 0.79], False),     # faster
    ([1.00, 1.30, 0.99], [1.10, 1.11, 1.09], False),     # a noisy nvcc run widens the spread
])
def test_slower_beyond_the_spread(nvcc, mode, slower):
    got = ns.slower_than_nvcc(nvcc, mode)
    assert got["slower"] is slower
    assert got["speedup"] == pytest.approx(sorted(nvcc)[1] / sorted(mode)[1])


def test_no_passing_run_is_not_judged():
    assert ns.slower_than_nvcc([], [1.0])["slower"] is None


def _run(total, blocks=None, check="PASS"):
    r = {"kernel_ms": total, "check": check, "rc": 0 if check == "PASS" else 1}
    if blocks:
        r["blocks"] = {str(b): {"kernel_ms": ms, "check": check} for b, ms in blocks.items()}
    return r


def _row(name, nvcc, plus, capture):
    """A bench_program row: per mode a list of runs, each (total ms, {block: ms} or None)."""
    modes = {}
    for mode, runs in (("nvcc", nvcc), ("plus", plus), ("capture", capture)):
        modes[mode] = {"build": {"ok": True}, "runs": [_run(*r) for r in runs]}
        programs.summarize(modes[mode])
    return {"program": name, "kernels": ["k"], "modes": modes, "speedup": {}}


@pytest.fixture
def fake_programs(monkeypatch, tmp_path):
    rows = {
        # plus is slower at block 64 beyond the spread (the case); capture is not
        "biasgrad": _row("biasgrad",
                         nvcc=[(3.0, {32: 1.0, 64: 1.0, 128: 1.0}), (3.01, {32: 1.0, 64: 1.01, 128: 1.0}),
                               (2.99, {32: 1.0, 64: 0.99, 128: 1.0})],
                         plus=[(2.8, {32: 0.8, 64: 1.2, 128: 0.8}), (2.8, {32: 0.8, 64: 1.21, 128: 0.8}),
                               (2.8, {32: 0.8, 64: 1.19, 128: 0.8})],
                         capture=[(3.0, {32: 1.0, 64: 1.0, 128: 1.0})] * 3),
        "scan": _row("scan", nvcc=[(10.0, None), (10.2, None), (9.9, None)],
                     plus=[(9.0, None), (9.1, None), (9.05, None)], capture=[(10.05, None)] * 3),
    }
    calls = []

    def fake_bench_program(name, args, work, tools):
        calls.append((name, args.budget, args.reps, list(args.modes)))
        return json.loads(json.dumps(rows[name]))

    monkeypatch.setattr(programs, "bench_program", fake_bench_program)
    monkeypatch.setattr(programs, "gpu_name", lambda: "NVIDIA H200")
    return {"rows": rows, "calls": calls, "out": tmp_path / "ns.json", "scratch": tmp_path / "work"}


def test_the_result_counts_every_program_mode_and_block_slower_than_nvcc(fake_programs):
    out = fake_programs["out"]
    rc = ns.main(["--program", "biasgrad", "--program", "scan", "--out", str(out), "--scratch",
                  str(fake_programs["scratch"])])
    res = json.loads(out.read_text())
    assert rc == 1                                       # one entry slower: the benchmark fails
    assert res["slower"] == 1 and res["slower_entries"] == ["biasgrad:plus:block=64"]
    labels = [ns._label(e) for e in res["entries"]]
    assert labels == ["biasgrad:plus", "biasgrad:plus:block=32", "biasgrad:plus:block=64",
                      "biasgrad:plus:block=128", "biasgrad:capture", "biasgrad:capture:block=32",
                      "biasgrad:capture:block=64", "biasgrad:capture:block=128", "scan:plus", "scan:capture"]
    e64 = next(e for e in res["entries"] if ns._label(e) == "biasgrad:plus:block=64")
    assert e64["nvcc_ms"] == [1.0, 1.01, 0.99] and e64["mode_ms"] == [1.2, 1.21, 1.19]
    assert e64["speedup"] == pytest.approx(1.0 / 1.2) and "beyond the spread" in e64["reason"]
    assert res["all_checks_pass"] is True and res["complete"] is True
    assert fake_programs["calls"][0] == ("biasgrad", 2.0, 3, ["nvcc", "plus", "capture"])


def test_a_failed_self_check_fails_all_checks_pass(fake_programs):
    bad = fake_programs["rows"]["scan"]
    bad["modes"]["capture"]["runs"][1] = _run(10.0, check="FAIL")
    out = fake_programs["out"]
    ns.main(["--program", "scan", "--out", str(out), "--scratch", str(fake_programs["scratch"])])
    res = json.loads(out.read_text())
    assert res["all_checks_pass"] is False and "scan:capture:FAIL" in res["check_failures"]
    cap = next(e for e in res["entries"] if ns._label(e) == "scan:capture")
    assert cap["mode_ms"] == [10.05, 10.05]             # the failed run does not count
    assert res["slower"] == 0


def test_parts_are_merged_and_the_deadline_stops_new_programs(fake_programs):
    out, scratch = fake_programs["out"], str(fake_programs["scratch"])
    ns.main(["--program", "scan", "--out", str(out), "--scratch", scratch])
    ns.main(["--program", "biasgrad", "--out", str(out), "--scratch", scratch])
    res = json.loads(out.read_text())
    assert {r["program"] for r in res["programs"]} == {"biasgrad", "scan"} and res["slower"] == 1
    # past the deadline nothing new starts; what an earlier part measured stays
    ns.main(["--program", "scan", "--out", str(out), "--scratch", scratch, "--deadline", "1"])
    res = json.loads(out.read_text())
    assert res["not_run"] == [] and {r["program"] for r in res["programs"]} == {"biasgrad", "scan"}
    fresh = out.with_name("fresh.json")
    ns.main(["--program", "scan", "--out", str(fresh), "--scratch", scratch, "--deadline", "1"])
    res = json.loads(fresh.read_text())
    assert res["not_run"] == ["scan"] and res["complete"] is False and res["all_checks_pass"] is False
    assert [c[0] for c in fake_programs["calls"]] == ["scan", "biasgrad"]   # the last two never ran


def test_one_run_on_a_side_says_no_spread_was_measured():
    got = ns.slower_than_nvcc([1.0], [1.003])
    assert got["slower"] is True and got["spread_measured"] is False and "no spread measured" in got["reason"]
    assert ns.slower_than_nvcc([1.0, 1.0], [1.003, 1.003])["spread_measured"] is True
