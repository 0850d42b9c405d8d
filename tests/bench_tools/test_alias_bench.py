"""bench/alias (issue 26's benchmark) on the CPU: the manifest against the sources, the per-kernel
lines, the per-kernel verdicts and the result file with fake program runs in place of the GPU,
and -- with nvcc on PATH -- that plain nvcc really stores every accumulating kernel's accumulator
in every iteration of its loop (what the benchmark is there to measure)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from bench.alias import run as alias
from bench.programs import run as programs

MVT_STDOUT = """mvt: N=4096 (A 64 MB), block 256
NVCC_PLUS_BENCH kernel=mvt_kernel1 kernel_ms=2.50000 check=PASS
NVCC_PLUS_BENCH kernel=mvt_kernel2 kernel_ms=1.25000 check=FAIL
NVCC_PLUS_BENCH kernel_ms=3.75000 check=FAIL
"""


def test_the_manifest_names_every_kernel_of_the_sources_and_nothing_else():
    names = alias.program_names()
    assert names == list(alias.manifest())            # every folder in the manifest, in its order
    assert {"mvt", "gemm", "covariance"} <= set(names)
    for name in names:
        src = (alias.HERE / name / f"{name}.cu").read_text()
        in_source = programs.kernels_of(name, alias.HERE)
        assert sorted(in_source) == sorted(alias.kernels(name)), name
        for k in in_source:                           # the line the parser reads, per kernel
            assert f'"NVCC_PLUS_BENCH kernel={k} kernel_ms=%.5f check=%s\\n"' in src, (name, k)
        assert '"NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\\n"' in src
        assert "__restrict__" not in src
        make = (alias.HERE / name / "Makefile").read_text()
        assert "NVCC ?= nvcc" in make and "-O3 -arch=sm_90" in make
    acc = {k for n in names for k, a in alias.kernels(n).items() if a}
    assert {"mvt_kernel1", "mvt_kernel2", "gemm_kernel", "mean_kernel", "covar_kernel"} <= acc
    assert alias.kernels("covariance")["reduce_kernel"] is False
    assert set(programs.programs()).isdisjoint(names)  # not part of bench/programs' set


def test_the_per_kernel_lines_are_read():
    got = programs.parse_run({"rc": 1, "seconds": 1.0, "timed_out": False, "stdout": MVT_STDOUT, "stderr": ""})
    assert got["kernel_ms"] == 3.75 and got["check"] == "FAIL"
    assert got["per_kernel"] == {"mvt_kernel1": {"kernel_ms": 2.5, "check": "PASS"},
                                 "mvt_kernel2": {"kernel_ms": 1.25, "check": "FAIL"}}
    plain = programs.parse_run({"rc": 0, "seconds": 1.0, "timed_out": False,
                                "stdout": "NVCC_PLUS_BENCH kernel_ms=1.0 check=PASS\n", "stderr": ""})
    assert "per_kernel" not in plain and plain["kernel_ms"] == 1.0


def _run(per_kernel: dict, check="PASS"):
    return {"kernel_ms": sum(per_kernel.values()), "check": check, "rc": 0 if check == "PASS" else 1,
            "per_kernel": {k: {"kernel_ms": ms, "check": check} for k, ms in per_kernel.items()}}


def _row(name, **modes):
    row = {"program": name, "kernels": list(alias.kernels(name)), "modes": {}, "speedup": {}}
    for mode, runs in modes.items():
        row["modes"][mode] = {"build": {"ok": True}, "runs": [_run(r) for r in runs]}
        programs.summarize(row["modes"][mode])
    return row


def _mvt(plus2=(0.30, 0.31, 0.29)):
    return _row("mvt",
                nvcc=[{"mvt_kernel1": 2.0, "mvt_kernel2": 1.0}, {"mvt_kernel1": 2.02, "mvt_kernel2": 1.01},
                      {"mvt_kernel1": 1.98, "mvt_kernel2": 0.99}],
                plus=[{"mvt_kernel1": 0.5, "mvt_kernel2": p} for p in plus2],
                capture=[{"mvt_kernel1": 0.4, "mvt_kernel2": 0.4}] * 3)


def test_per_kernel_speedups_and_verdicts():
    row = alias.judge(_mvt(plus2=(1.2, 1.21, 1.19)))        # kernel 2 slower under plus, beyond the spread
    k1, k2 = row["per_kernel"]["mvt_kernel1"], row["per_kernel"]["mvt_kernel2"]
    assert k1["accumulating"] and k1["speedup"]["plus"] == pytest.approx(4.0)
    assert k1["modes"]["plus"]["median_ms"] == 0.5 and k1["modes"]["nvcc"]["median_ms"] == 2.0
    assert k1["slower"] == {"plus": False, "capture": False}
    assert k2["slower"]["plus"] is True and k2["speedup"]["capture"] == pytest.approx(2.5)
    res = alias.finish({"programs": [row], "modes": ["nvcc", "plus", "capture"], "not_run": []})
    assert res["slower"] == 1 and res["slower_entries"] == ["mvt:mvt_kernel2:plus"]
    assert res["min_accumulating_speedup"]["plus"] == pytest.approx(1.0 / 1.2)
    assert res["min_accumulating_speedup"]["capture"] == pytest.approx(2.5)
    assert res["all_checks_pass"] and not res["goal_met"]
    assert {k["kernel"] for k in res["kernels"]} == {"mvt_kernel1", "mvt_kernel2"}


def test_a_failed_kernel_check_is_a_failure_and_its_runs_do_not_count():
    row = _mvt()
    row["modes"]["plus"]["runs"][0]["per_kernel"]["mvt_kernel2"]["check"] = "FAIL"
    row["modes"]["plus"]["runs"][0]["check"] = "FAIL"
    programs.summarize(row["modes"]["plus"])
    alias.judge(row)
    assert row["per_kernel"]["mvt_kernel2"]["modes"]["plus"]["runs_ms"] == [0.31, 0.29]
    res = alias.finish({"programs": [row], "modes": ["nvcc", "plus", "capture"], "not_run": []})
    assert not res["all_checks_pass"] and "mvt:plus:FAIL" in res["check_failures"]


def test_the_result_file_and_the_deadline(monkeypatch, tmp_path):
    def fake_bench_program(name, args, work, tools, root=None):
        assert root == alias.HERE and args.budget == 5.0 and args.reps == 3
        return json.loads(json.dumps(_mvt()))

    monkeypatch.setattr(programs, "bench_program", fake_bench_program)
    monkeypatch.setattr(programs, "gpu_name", lambda: "NVIDIA H200")
    out = tmp_path / "alias.json"
    # mvt fits (deadline way above its estimate), then nothing else does
    est = alias.expected_seconds("mvt", 3, 5.0, ["nvcc", "plus", "capture"], 60.0)
    monkeypatch.setattr(alias, "expected_seconds",
                        lambda name, *a, **k: est if name == "mvt" else 1e6)
    rc = alias.main(["--reps", "3", "--out", str(out), "--scratch", str(tmp_path / "s")])
    res = json.loads(out.read_text())
    assert rc == 0 and res["gpu"] == "NVIDIA H200" and res["settings"]["budget_s"] == 5.0
    assert [r["program"] for r in res["programs"]] == ["mvt"]
    assert res["not_run"] == [p for p in alias.program_names() if p != "mvt"] and not res["complete"]
    assert res["min_accumulating_speedup"]["plus"] == pytest.approx(1.0 / 0.30)     # mvt_kernel2
    assert res["slower"] == 0 and res["all_checks_pass"]
    assert res["programs"][0]["per_kernel"]["mvt_kernel1"]["speedup"]["plus"] == pytest.approx(4.0)
    assert not res["goal_met"]                          # incomplete: the other programs did not run


def test_the_default_run_fits_a_device_call():
    names = alias.program_names()
    total = sum(alias.expected_seconds(p, 5, 5.0, ["nvcc", "plus", "capture"], 60.0) for p in names)
    assert total < 540


def _accumulating_loops(ptx: str) -> dict[str, list[tuple[int, int]]]:
    """Per kernel (mangled), per loop (a backward branch): (st.global count, f32 add/fma count)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for m in re.finditer(r"\.entry (\w+)\((.*?)\n\}\n", ptx, re.S):
        lines = m.group(2).splitlines()
        labels = {ln.strip()[:-1]: i for i, ln in enumerate(lines) if re.fullmatch(r"\$\w+:", ln.strip())}
        for i, ln in enumerate(lines):
            b = re.search(r"\bbra(?:\.uni)?\s+(\$\w+);", ln)
            if b and labels.get(b.group(1), i) < i:
                seg = lines[labels[b.group(1)]:i + 1]
                st = sum(bool(re.search(r"\bst\.global\.", s)) for s in seg)
                acc = sum(bool(re.search(r"\b(fma\.rn|add|add\.rn)\.f32\b", s)) for s in seg)
                out.setdefault(m.group(1), []).append((st, acc))
    return out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("name", ["mvt", "gemm", "covariance", "bicg"])
def test_plain_nvcc_stores_the_accumulator_in_every_iteration(name, tmp_path):
    if name not in alias.program_names():
        pytest.skip(f"no {name}")
    ptx = tmp_path / f"{name}.ptx"
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-ptx", "-o", str(ptx), str(alias.HERE / name / f"{name}.cu")],
                   check=True, capture_output=True, timeout=120)
    loops = _accumulating_loops(ptx.read_text())
    for k, acc in alias.kernels(name).items():
        mangled = next(x for x in loops if alias._same_kernel(x, k)) if acc else None
        if not acc:
            assert not any(alias._same_kernel(x, k) for x in loops), k     # no loop at all
            continue
        inner = [(st, n) for st, n in loops[mangled] if n > 0]
        assert inner, (k, loops[mangled])
        for st, n in inner:        # unrolled: one store of the accumulator per accumulation, at least
            assert st >= n, (k, st, n)
