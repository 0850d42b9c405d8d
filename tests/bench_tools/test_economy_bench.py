"""The search-economy benchmark's bookkeeping (bench/economy/run.py) on made-up records: what
counts as searched, the GPU-busy fraction from phases (and the old code's estimate), the
kernels worth searching, and the issue's top-level numbers."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.economy import run as eco


def _k(name, source, *, fates=(), status="kept-baseline", phases=None, seconds=None, reason="r", decision=None,
       **extra):
    k = {"kernel": name, "_source": source, "status": status, "reason": reason, "decision": decision,
         "candidates": [{"fate": f, **extra} for f in fates]}
    if phases is not None:
        k["phases"] = phases
    if seconds is not None:
        k["seconds"] = seconds
    return k


def test_searched_means_a_candidate_was_judged():
    assert eco.searched(_k("a", "x/blas1/blas1.cu", fates=["not-faster"]))
    assert not eco.searched(_k("a", "x/blas1/blas1.cu", fates=["skipped-budget", "skipped-roofline"]))
    assert not eco.searched(_k("a", "x/blas1/blas1.cu", reason="not searched: no GPU became free"))
    assert eco.searched(_k("a", "x/blas1/blas1.cu", status="optimized", decision="measured"))


def test_a_mode_summary_counts_worth_searching_and_gpu_busy():
    recs = [_k("k1", "/w/after/blas1/blas1.cu", fates=["winner"], status="optimized",
               phases={"lease_s": 2.0, "gpu_busy_s": 1.5, "gpu_wait_s": 0.5, "ptxas_s": 3.0}),
            _k("k2", "/w/after/blas1/blas1.cu", reason="not searched: no GPU became free before the optimizer's "
               "time limit", phases={"lease_s": 0.5, "gpu_check_s": 0.4, "gpu_check_n": 3}),
            _k("k3", "/w/after/manykernels/rows.cu", fates=["not-faster"], phases={"lease_s": 1.0, "gpu_busy_s": 0.9})]
    worth = {"blas1": {"k1", "k2"}, "manykernels": {"k3"}}
    s = eco.summarize_mode("after", recs, worth, build_wall=60.0)
    assert (s["kernels"], s["searched"], s["worth_searching"], s["worth_searched"]) == (3, 2, 3, 2)
    assert s["worth_not_searched"] == ["blas1:k2"]
    assert s["gpu_busy_fraction"] == round(2.4 / 3.0, 4) and s["phases_exact"]
    assert s["searched_per_minute"] == 2.0 and s["phase_totals_s"]["ptxas_s"] == 3.0
    assert list(s["not_searched_reasons"]) == ["not searched"]
    # the cut-short search's GPU work is counted apart, not in the searched kernels' totals
    assert s["unsearched_phase_totals_s"] == {"lease_s": 0.5, "gpu_check_s": 0.4}
    assert s["lease_s"] == 3.0
    rows = {r["kernel"]: r for r in s["per_kernel"]}
    assert len(rows) == 2 and all(r["candidates"] == sum(r["fates"].values()) for r in rows.values())
    assert all("lease_s" in r["phases"] for r in rows.values())


def test_the_old_codes_lease_is_its_search_and_its_busy_time_an_upper_bound():
    old = _k("k1", "/w/before/scan/scan.cu", fates=["faster"], seconds=10.0,
             verdict={"evidence": {"wall_seconds": 0.5}}, timing={"wall_seconds": 0.25})
    s = eco.summarize_mode("before", [old], {}, build_wall=120.0)
    assert s["lease_s"] == 10.0 and s["gpu_busy_s"] == 0.75 and not s["phases_exact"]


def test_the_top_level_numbers():
    result = {"modes": {"nvcc": {"build": {"wall_s": 10.0}}, "tune": {"build": {"wall_s": 55.0},
                                                                      "worth_searching": 8, "worth_searched": 6},
                        "before": {"searched_per_minute": 2.0},
                        "after": {"searched_per_minute": 7.0, "gpu_busy_fraction": 0.81}},
              "programs": {"blas1": {"nvcc": {"check": "PASS"}, "after": {"check": "PASS"}}}}
    eco.finish(result)
    assert (result["gpu_busy_fraction"], result["searched_fraction"], result["tune_build_ratio"],
            result["throughput_ratio"], result["all_checks_pass"]) == (0.81, 0.75, 5.5, 3.5, True)
    result["programs"]["blas1"]["after"]["check"] = "FAIL"
    assert eco.finish(result)["all_checks_pass"] is False
    # the programs not run (tune builds alone): not a failure
    result["programs"] = {"blas1": {"speedup": {}, "vs_nvcc": {}}}
    assert eco.finish(result)["all_checks_pass"] is None


def test_the_top_makefile_builds_every_project_and_hands_over_captures(tmp_path):
    tree = eco.prepare(tmp_path, "x")
    assert {p.name for p in tree.iterdir() if p.is_dir()} == set(eco.PROJECTS)
    out = subprocess.run(["make", "-n", "NVCC=mycc", "CAPS=/caps", "manykernels", "blas1"], cwd=tree,
                         capture_output=True, text=True, check=True).stdout
    assert "NVCC_PLUS_CAPTURE=/caps/manykernels.json" in out and "NVCC_PLUS_CAPTURE=/caps/blas1.json" in out
    plain = subprocess.run(["make", "-n", "NVCC=mycc", "blas1"], cwd=tree, capture_output=True, text=True,
                           check=True).stdout
    assert "NVCC_PLUS_CAPTURE" not in plain and "mycc" in plain


def test_programs_slower_than_nvcc_beyond_their_spread_are_counted():
    from bench.never_slower.run import slower_than_nvcc
    result = {"modes": {}, "programs": {
        "a": {"nvcc": {"check": "PASS"}, "after": {"check": "PASS"},
              "vs_nvcc": {"after": slower_than_nvcc([1.0, 1.02], [1.2, 1.21])}},
        "b": {"nvcc": {"check": "PASS"}, "tune": {"check": "PASS"},
              "vs_nvcc": {"tune": slower_than_nvcc([1.0, 1.2], [1.05, 1.1])}}}}
    eco.finish(result)
    assert result["slower"] == 1 and result["slower_entries"][0].startswith("a:after: median")


def test_slower_with_no_rewrite_kept_is_counted_apart():
    """A program whose mode kept no rewrite runs nvcc's machine code: beyond the spread there is
    noise, listed apart; the same difference with a rewrite kept counts as slower."""
    from bench.never_slower.run import slower_than_nvcc
    modes = {"tune": {"winners": ["b:k:unroll(factor=4)"]}}
    result = {"modes": modes, "programs": {}}
    for name in ("a", "b"):
        vs = {"tune": slower_than_nvcc([1.0, 1.001, 1.002], [1.03, 1.031, 1.032])}
        eco.mark_same_code(vs, name, modes)
        result["programs"][name] = {"vs_nvcc": vs}
    eco.finish(result)
    assert result["programs"]["a"]["vs_nvcc"]["tune"]["same_code"] is True
    assert "same_code" not in result["programs"]["b"]["vs_nvcc"]["tune"]
    assert result["slower"] == 1 and result["slower_entries"][0].startswith("b:tune:")
    assert [e.split(":")[0] for e in result["slower_same_code_entries"]] == ["a"]


def test_before_taken_from_an_earlier_file_says_so(tmp_path):
    earlier = tmp_path / "old.json"
    earlier.write_text('{"commit": "abc", "date": "2026-12-01", "modes": {"before": {"searched_per_minute": 2.0}}}')
    got = eco.before_from(earlier)
    assert got["searched_per_minute"] == 2.0 and got["taken_from_commit"] == "abc"
    result = {"modes": {"before": got, "after": {"searched_per_minute": 7.0}}, "programs": {}}
    assert eco.finish(result)["throughput_ratio"] == 3.5
    (tmp_path / "none.json").write_text('{"modes": {}}')
    import pytest
    with pytest.raises(SystemExit):
        eco.before_from(tmp_path / "none.json")


def test_one_run_slowdowns_are_listed_apart_from_verdicts():
    from bench.never_slower.run import slower_than_nvcc
    result = {"modes": {}, "programs": {
        "a": {"vs_nvcc": {"after": slower_than_nvcc([1.0], [1.01])}},
        "b": {"vs_nvcc": {"after": slower_than_nvcc([1.0, 1.001], [1.2, 1.2])}}}}
    eco.finish(result)
    assert result["slower"] == 1 and result["slower_entries"][0].startswith("b:after")
    assert [e.split(":")[0] for e in result["slower_unmeasured_entries"]] == ["a"]


def test_the_deferred_mode_queues_waits_and_applies(tmp_path, monkeypatch):
    """deferred: a first build with NVCC_PLUS_SEARCH=deferred, `superopt cache wait`, the queue
    runner's records moved aside, then `make -B` applying the decisions; the results keep the
    first build's wall (what a user waits for) beside the queue's and the applying build's."""
    import types
    calls = []

    def fake_build(tree, compiler, env, jobs, timeout, caps=None, again=False):
        calls.append(("build", env.get("NVCC_PLUS_SEARCH"), again, caps))
        rec = Path(env["NVCC_PLUS_REPORT_DIR"])
        (rec / ("applied.json" if again else "queued.json")).write_text("{}")
        return {"wall_s": 9.0 if again else 4.0, "rc": 0, "timed_out": False,
                "binaries": {"blas1": f"/bin/{'second' if again else 'first'}"}, "nvcc_plus_lines": []}

    def fake_run(cmd, cwd, env, timeout):
        calls.append(("run", cmd[1:3]))
        (Path(env["NVCC_PLUS_REPORT_DIR"]) / "searched.json").write_text("{}")      # the runner's records
        return {"rc": 0, "stdout": "", "stderr": "", "seconds": 30.0, "timed_out": False}

    monkeypatch.setattr(eco, "build", fake_build)
    monkeypatch.setattr(eco.programs, "run_cmd", fake_run)
    args = types.SimpleNamespace(budget=5.0, timeout=120.0, jobs=8, build_timeout=300.0)
    d = eco.deferred_builds(tmp_path, tmp_path / "caps", {}, args, "/usr/bin/nvcc", "superopt")
    assert calls[0] == ("build", "deferred", False, tmp_path / "caps")
    assert calls[1] == ("run", ["cache", "wait"])
    assert calls[2] == ("build", "deferred", True, tmp_path / "caps")
    assert sorted(p.name for p in d["records_dir"].iterdir()) == ["queued.json", "searched.json"]
    assert [p.name for p in (tmp_path / "records" / "deferred").iterdir()] == ["applied.json"]
    assert d["wall_s"] == 4.0 and d["apply_build_wall_s"] == 9.0 and d["binaries"] == {"blas1": "/bin/second"}
    assert d["total_wall_s"] == pytest.approx(4.0 + d["queue_wall_s"] + 9.0)
    result = {"modes": {"nvcc": {"build": {"wall_s": 2.0}},
                        "deferred": {"build": {k: v for k, v in d.items() if k not in eco.HIDDEN}}},
              "programs": {}}
    eco.finish(result)
    assert result["deferred_build_ratio"] == 2.0
    assert result["deferred_total_ratio"] == pytest.approx((13.0 + d["queue_wall_s"]) / 2.0, abs=1e-3)


def test_a_deferred_kernels_search_replaces_the_record_that_queued_it():
    queued = {**_k("k1", "/w/d/blas1/blas1.cu"), "queued": "entry-1"}
    searched = _k("k1", "/w/d/blas1/blas1.cu", fates=["not-faster"])
    still_queued = {**_k("k2", "/w/d/blas1/blas1.cu"), "queued": "entry-1"}
    kept = eco.searches_of_queue([queued, searched, still_queued])
    assert kept == [searched, still_queued]
