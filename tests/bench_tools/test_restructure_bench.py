"""bench/restructure (issue 27's benchmark) on the CPU: the manifest against the sources, the
programs' conventions and self-checks (a FAIL path that NaN outputs and wrong values reach), the
per-kernel verdicts and goals with fake program runs in place of the GPU, the result file through
bench/alias's machinery, and -- with nvcc on PATH -- that every program compiles to PTX with every
listed kernel in it, in the shape the benchmark is there to measure (row walks: a loop of global
loads without a store of the accumulator; no shared memory, no barrier anywhere), and that a
dry run builds them all."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from bench.alias import run as alias
from bench.programs import run as programs
from bench.restructure import run as restructure

KINDS = ("row-walk", "shared-operand", "other")


def _src(name: str) -> str:
    return (restructure.HERE / name / f"{name}.cu").read_text()


# ---------------------------------------------------------------- the manifest and the sources

def test_the_manifest_parses_and_names_every_kernel_of_the_sources_and_nothing_else():
    toml = tomllib.loads(restructure.SUITE.manifest_path.read_text())
    names = restructure.program_names()
    assert names == list(toml) == ["rowmv", "rownorm", "naivegemm", "stencil3d"]
    for name in names:
        entry = toml[name]
        assert set(entry) <= {"what", "run_s", "goal", *KINDS}, name
        assert 0 < entry["run_s"] <= 3.0, name                # each program's run under ~3 s on an H200
        listed = [k for kind in KINDS for k in entry.get(kind, [])]
        assert len(listed) == len(set(listed)), name          # one kind per kernel
        src = _src(name)
        in_source = programs.kernels_of(name, restructure.HERE)
        assert sorted(in_source) == sorted(listed) == sorted(restructure.kinds(name)), name
        for k in in_source:                                   # the line the parser reads, per kernel
            assert f'"NVCC_PLUS_BENCH kernel={k} kernel_ms=%.5f check=%s\\n"' in src, (name, k)
        assert '"NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\\n"' in src
        assert "__restrict__" not in src and "__shared__" not in src and "__syncthreads" not in src
        make = (restructure.HERE / name / "Makefile").read_text()
        assert "NVCC ?= nvcc" in make and "-O3 -arch=sm_90" in make and "$(NVCC)" in make
    kinds = {k: kd for n in names for k, kd in restructure.kinds(n).items()}
    assert kinds == {"rowmv_f32": "row-walk", "rowmv_f64": "row-walk", "layernorm_rows": "row-walk",
                     "softmax_rows": "row-walk", "naive_gemm": "shared-operand", "stencil27": "shared-operand"}
    assert all(restructure.kernels(n)[k] for n in names for k in restructure.kinds(n))
    assert restructure.goal_of("rowmv", "rowmv_f64") == 3.0 and restructure.goal_of("naivegemm", "naive_gemm") == 2.0
    assert restructure.goal_of("stencil3d", "stencil27") == 1.0        # the issue sets no figure: none slower
    assert set(programs.programs()).isdisjoint(names) and set(alias.program_names()).isdisjoint(names)


def test_the_sizes_the_issue_asks_for():
    defines = {n: dict(re.findall(r"^#define (\w+) (.+)$", _src(n), re.M)) for n in restructure.program_names()}
    d = defines["rowmv"]
    assert (d["ROWS"], d["COLS"]) == ("4096", "4096") and int(d["ODD_ROWS"]) % 32 and int(d["ODD_COLS"]) % 32
    d = defines["rownorm"]
    assert (eval(d["ROWS"]), eval(d["COLS"])) == (8192 + 37, 1024 + 3)
    d = defines["naivegemm"]
    assert (d["M1"], d["N1"], d["K1"], d["TILE"]) == ("1024", "1024", "1024", "16")
    assert all(int(d[x]) % 16 for x in ("M2", "N2", "K2"))
    d = defines["stencil3d"]
    assert (d["NX"], d["NY"], d["NZ"]) == ("256", "256", "256")
    assert all(defines[n]["NUM_REPS"] == "10" for n in defines)


@pytest.mark.parametrize("name", ["rowmv", "rownorm", "naivegemm", "stencil3d"])
def test_the_check_has_a_fail_path_that_nan_and_wrong_values_reach(name):
    src = _src(name)
    # a fixed-seed LCG, never zeros; a warm-up then NUM_REPS timed repetitions
    assert re.search(r"static uint32_t lcg_state = \d+u;", src) and "1664525u" in src
    assert "for (int r = 0; r <= NUM_REPS; ++r)" in src and "if (r > 0)" in src
    # the outputs NaN-filled (untimed) before every repetition: an output a kernel does not write fails
    loop = src[src.index("for (int r = 0; r <= NUM_REPS; ++r)"):]
    first_timer = loop.index("cudaEventRecord(")
    assert "cudaMemset(" in loop[:first_timer] and "0xff" in loop[:first_timer]
    assert "cudaDeviceSynchronize()" in loop[:first_timer]
    # each kernel its own timer: as many event pairs as launches
    launches = len(re.findall(r"<<<", src))
    assert len(re.findall(r"cudaEventRecord\(", src)) == 2 * launches
    # the comparison is written so that NaN fails it (!(err <= tol)), the tolerance has a relative part
    assert re.search(r"if \(!\(fabs\(", src) or re.search(r"if \(!\(err <= ", src)
    assert "1e-5 *" in src
    # every kernel line and the program line report FAIL when something is bad, and the exit code follows
    for line in re.findall(r'printf\("NVCC_PLUS_BENCH [^;]*;', src):
        assert '? "FAIL" : "PASS"' in line or '? "PASS" : "FAIL"' in line, line
    assert re.search(r"return (ok \? EXIT_SUCCESS : EXIT_FAILURE|bad \? EXIT_FAILURE : EXIT_SUCCESS);", src)
    # the mismatch counters feed those lines (no constant PASS)
    assert not re.search(r'check=PASS\\n"', src)


# ---------------------------------------------------------------- verdicts and goals (fake runs)

def _run(per_kernel: dict, check="PASS"):
    return {"kernel_ms": sum(per_kernel.values()), "check": check, "rc": 0 if check == "PASS" else 1,
            "per_kernel": {k: {"kernel_ms": ms, "check": check} for k, ms in per_kernel.items()}}


def _row(name, **modes):
    row = {"program": name, "kernels": list(restructure.kinds(name)), "modes": {}, "speedup": {}}
    for mode, runs in modes.items():
        row["modes"][mode] = {"build": {"ok": True}, "runs": [_run(r) for r in runs]}
        programs.summarize(row["modes"][mode])
    return row


def _scaled(name, base_ms: dict, plus: dict, capture: dict):
    """nvcc at base_ms (+-1%), plus and capture at base_ms / speedup per kernel."""
    def runs(f):
        return [{k: ms * f(k) * j for k, ms in base_ms.items()} for j in (1.0, 1.01, 0.99)]
    return _row(name, nvcc=runs(lambda k: 1.0), plus=runs(lambda k: 1.0 / plus[k]),
                capture=runs(lambda k: 1.0 / capture[k]))


def _all(cap_rowwalk=4.0, cap_gemm=2.5, cap_stencil=1.2, plus=1.0):
    rows = [
        _scaled("rowmv", {"rowmv_f32": 0.5, "rowmv_f64": 0.8}, {"rowmv_f32": plus, "rowmv_f64": plus},
                {"rowmv_f32": cap_rowwalk, "rowmv_f64": cap_rowwalk + 1}),
        _scaled("rownorm", {"layernorm_rows": 0.3, "softmax_rows": 0.4},
                {"layernorm_rows": plus, "softmax_rows": plus},
                {"layernorm_rows": cap_rowwalk, "softmax_rows": cap_rowwalk}),
        _scaled("naivegemm", {"naive_gemm": 2.0}, {"naive_gemm": plus}, {"naive_gemm": cap_gemm}),
        _scaled("stencil3d", {"stencil27": 0.2}, {"stencil27": plus}, {"stencil27": cap_stencil}),
    ]
    for r in rows:
        restructure.judge(r)
    return restructure.finish({"programs": rows, "modes": ["nvcc", "plus", "capture"], "not_run": []})


def test_per_kernel_kinds_goals_and_the_goal():
    res = _all()
    k = {f["kernel"]: f for f in res["kernels"]}
    assert k["rowmv_f32"]["kind"] == "row-walk" and k["rowmv_f32"]["targeted"] is True
    assert k["rowmv_f32"]["goal_speedup"] == 3.0 and k["stencil27"]["goal_speedup"] == 1.0
    assert k["rowmv_f32"]["speedup"]["capture"] == pytest.approx(4.0)
    assert res["min_speedup_by_kind"]["row-walk"]["capture"] == pytest.approx(4.0)
    assert res["min_speedup_by_kind"]["shared-operand"]["capture"] == pytest.approx(1.2)
    assert res["min_targeted_speedup"]["plus"] == pytest.approx(1.0)
    assert res["program_geomean_speedup"]["capture"] > 1.5 and res["below_goal"] == []
    assert res["slower"] == 0 and res["all_checks_pass"] and res["goal_met"]     # plus at 1.0x: none slower is enough
    assert "min row-walk speedup" in restructure.table(res) and "bench/restructure" in restructure.table(res)


@pytest.mark.parametrize("change, why", [
    (dict(cap_rowwalk=2.9), "rowmv:rowmv_f32:capture"),        # a row walk under 3x
    (dict(cap_gemm=1.9), "naivegemm:naive_gemm:capture"),      # the GEMM under 2x
    (dict(plus=0.8), None),                                    # slower without a capture
    (dict(cap_rowwalk=3.0, cap_gemm=2.0, cap_stencil=0.1), None),  # the stencil slower: geomean and verdict
])
def test_the_goal_is_not_met(change, why):
    res = _all(**change)
    assert not res["goal_met"]
    if why:
        assert why in res["below_goal"]
    else:
        assert res["slower"] > 0


def test_a_failed_kernel_check_is_a_failure_and_its_runs_do_not_count():
    rows = _all()["programs"]
    row = next(r for r in rows if r["program"] == "rownorm")
    run = row["modes"]["capture"]["runs"][0]
    run["per_kernel"]["softmax_rows"]["check"] = run["check"] = "FAIL"
    programs.summarize(row["modes"]["capture"])
    restructure.judge(row)
    assert len(row["per_kernel"]["softmax_rows"]["modes"]["capture"]["runs_ms"]) == 2
    res = restructure.finish({"programs": rows, "modes": ["nvcc", "plus", "capture"], "not_run": []})
    assert not res["all_checks_pass"] and "rownorm:capture:FAIL" in res["check_failures"] and not res["goal_met"]


def test_the_result_file_and_the_deadline(monkeypatch, tmp_path):
    def fake_bench_program(name, args, work, tools, root=None):
        assert root == restructure.HERE and args.budget == 5.0 and args.reps == 3
        return json.loads(json.dumps(next(r for r in _all()["programs"] if r["program"] == name)))

    monkeypatch.setattr(programs, "bench_program", fake_bench_program)
    monkeypatch.setattr(programs, "gpu_name", lambda: "NVIDIA H200")
    out = tmp_path / "restructure.json"
    est = restructure.expected_seconds("rowmv", 3, 5.0, ["nvcc", "plus", "capture"], 60.0)
    monkeypatch.setattr(alias, "expected_seconds",           # the machinery's own (bench/alias's)
                        lambda name, *a, **k: est if name in ("rowmv", "naivegemm") else 1e6)
    rc = restructure.main(["--reps", "3", "--out", str(out), "--scratch", str(tmp_path / "s")])
    res = json.loads(out.read_text())
    assert rc == 0 and res["gpu"] == "NVIDIA H200" and res["benchmark"].startswith("bench/restructure")
    assert [r["program"] for r in res["programs"]] == ["rowmv", "naivegemm"]      # the manifest's order
    assert res["not_run"] == ["rownorm", "stencil3d"] and not res["complete"] and not res["goal_met"]
    assert res["programs"][0]["per_kernel"]["rowmv_f64"]["kind"] == "row-walk"
    assert res["min_speedup_by_kind"]["row-walk"]["capture"] == pytest.approx(4.0)
    # the rest into the same file: merged, complete, the goal met
    monkeypatch.setattr(alias, "expected_seconds", lambda name, *a, **k: est)
    rc = restructure.main(["--reps", "3", "--out", str(out), "--scratch", str(tmp_path / "s"),
                           "--program", "rownorm", "--program", "stencil3d"])
    res = json.loads(out.read_text())
    assert rc == 0 and res["complete"] and len(res["programs"]) == 4 and res["goal_met"]


def test_the_default_run_fits_a_device_call():
    total = sum(restructure.expected_seconds(p, 5, 5.0, ["nvcc", "plus", "capture"], 60.0)
                for p in restructure.program_names())
    assert total < 540


# ---------------------------------------------------------------- with nvcc: the PTX

def _loops(ptx: str) -> dict[str, list[list[str]]]:
    """Per kernel (mangled), its loops (a backward branch), as lists of instruction lines."""
    out: dict[str, list[list[str]]] = {}
    for m in re.finditer(r"\.entry (\w+)\((.*?)\n\}\n", ptx, re.S):
        lines = m.group(2).splitlines()
        labels = {ln.strip()[:-1]: i for i, ln in enumerate(lines) if re.fullmatch(r"\$\w+:", ln.strip())}
        out[m.group(1)] = []
        for i, ln in enumerate(lines):
            b = re.search(r"\bbra(?:\.uni)?\s+(\$\w+);", ln)
            if b and labels.get(b.group(1), i) < i:
                out[m.group(1)].append(lines[labels[b.group(1)]:i + 1])
    return out


@pytest.fixture(scope="module")
def ptx(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    folder = tmp_path_factory.mktemp("ptx")
    out = {}
    for name in restructure.program_names():
        path = folder / f"{name}.ptx"
        subprocess.run(["nvcc", "-ptx", "-arch=sm_90", "-O3", "-o", str(path), str(restructure.HERE / name / f"{name}.cu")],
                       check=True, capture_output=True, timeout=120)
        out[name] = path.read_text()
    return out


@pytest.mark.parametrize("name", ["rowmv", "rownorm", "naivegemm", "stencil3d"])
def test_every_program_compiles_to_ptx_with_every_listed_kernel(ptx, name):
    text = ptx[name]
    entries = re.findall(r"\.entry (\w+)\(", text)
    for k in restructure.kinds(name):
        assert any(alias._same_kernel(e, k) for e in entries), (name, k, entries)
    assert len(entries) == len(restructure.kinds(name))
    assert ".shared" not in text and "bar.sync" not in text     # plain nvcc neither stages nor tiles


@pytest.mark.parametrize("name", ["rowmv", "rownorm", "naivegemm"])
def test_the_reduction_loops_load_from_global_and_keep_the_sum_in_a_register(ptx, name):
    loops = _loops(ptx[name])
    for k in restructure.kinds(name):
        mangled = next(x for x in loops if alias._same_kernel(x, k))
        reducing = [seg for seg in loops[mangled]
                    if any(re.search(r"\b(add|fma\.rn|max)\.f(32|64)\b", s) for s in seg)
                    and any("ld.global." in s for s in seg) and not any("st.global." in s for s in seg)]
        assert reducing, (k, "no loop of global loads reducing into a register")
    if name == "rownorm":   # layernorm's and softmax's write loops store: those are the loops with st.global
        for k in ("layernorm_rows", "softmax_rows"):
            mangled = next(x for x in loops if alias._same_kernel(x, k))
            assert any(any("st.global." in s for s in seg) for seg in loops[mangled]), k


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_dry_run_builds_every_program(tmp_path):
    out = tmp_path / "x.json"
    env = {**os.environ, "PYTHONPATH": str(restructure.HERE.parent.parent)}
    r = subprocess.run([sys.executable, "-m", "bench.restructure.run", "--dry-run", "--modes", "nvcc",
                        "--out", str(out), "--scratch", str(tmp_path / "s")],
                       capture_output=True, text=True, timeout=120, env=env, cwd=str(restructure.HERE.parent.parent))
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(out.read_text())
    assert res["dry_run"] and [p["program"] for p in res["programs"]] == restructure.program_names()
    assert all(p["modes"]["nvcc"]["build"]["ok"] for p in res["programs"]) and not res["goal_met"]


# ---------------------------------------------------------------- the programs themselves, on the CPU

# sizes the CPU runs in seconds (the odd ones still odd; the stencil's grid not a cube, so that a
# mixed-up stride shows); every other program at its own sizes
SHRINK = {"naivegemm": {"M1": 256, "N1": 256, "K1": 256, "M2": 200, "N2": 200, "K2": 200},
          "stencil3d": {"NX": 96, "NY": 72, "NZ": 40}}
# one plausible bug per kernel, in the kernel's own source: its check must FAIL, the others PASS
MUTATIONS = {
    "rowmv_f32": ("float acc = 0.0f;\n    for (int j = 0; j < cols; j++) {",
                  "float acc = 0.0f;\n    for (int j = 0; j < cols - 1; j++) {"),        # the last term dropped
    "rowmv_f64": ("double acc = 0.0;", "float acc = 0.0f;"),                                # summed in float
    "layernorm_rows": ("var = var / cols;", "var = var / (cols - 1);"),                    # unbiased variance
    "softmax_rows": ("for (int j = 0; j < cols; j++) {\n      s += expf",
                     "for (int j = 1; j < cols; j++) {\n      s += expf"),                  # the first term dropped
    "naive_gemm": ("if (row < M && col < N) {", "if (row < M - 1 && col < N) {"),          # the last row not written
    "stencil27": ("in[idx + (dz * ny + dy) * nx + dx]", "in[idx + (dz * nx + dy) * nx + dx]"),  # a stride mixed up
}
PROGRAM_OF = {k: n for n in ("rowmv", "rownorm", "naivegemm", "stencil3d") for k in restructure.kinds(n)}


def _on_cpu(name: str, folder, edit: tuple[str, str] | None = None) -> dict:
    """The program compiled with g++ on tests/bench_tools/cuda_on_cpu.h (its kernels run serially on the
    CPU, one repetition after the warm-up) and run; its parsed lines."""
    src = _src(name).replace("#include <cuda_runtime.h>", '#include "cuda_on_cpu.h"')
    src = src.replace("#define NUM_REPS 10", "#define NUM_REPS 1")
    for k, v in SHRINK.get(name, {}).items():
        src, n = re.subn(rf"^#define {k} .*$", f"#define {k} {v}", src, flags=re.M)
        assert n == 1, k
    if edit:
        assert src.count(edit[0]) == 1, edit
        src = src.replace(edit[0], edit[1])
    src, n = re.subn(r"(\w+)<<<(.*?)>>>\(", r"fake_launch(\2, \1, ", src)
    assert n == len(re.findall(r"<<<", _src(name)))
    cpp, exe = folder / f"{name}.cpp", folder / name
    cpp.write_text(src)
    here = restructure.HERE.parent.parent / "tests" / "bench_tools"
    subprocess.run(["g++", "-O2", "-std=c++17", "-I", str(here), "-o", str(exe), str(cpp)],
                   check=True, capture_output=True, timeout=120)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    return programs.parse_run({"rc": r.returncode, "seconds": 0.0, "timed_out": False,
                               "stdout": r.stdout, "stderr": r.stderr})


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@needs_gxx
@pytest.mark.parametrize("name", ["rowmv", "rownorm", "naivegemm", "stencil3d"])
def test_the_program_passes_its_own_check_with_its_kernels_on_the_cpu(name, tmp_path):
    got = _on_cpu(name, tmp_path)
    assert got["rc"] == 0 and got["check"] == "PASS", got.get("output_tail")
    assert set(got["per_kernel"]) == set(restructure.kinds(name))
    assert all(v["check"] == "PASS" and v["kernel_ms"] > 0 for v in got["per_kernel"].values())
    assert got["kernel_ms"] == pytest.approx(sum(v["kernel_ms"] for v in got["per_kernel"].values()), abs=1e-4)


@needs_gxx
@pytest.mark.parametrize("kernel", list(MUTATIONS))
def test_a_wrong_kernel_fails_its_check_and_the_program(kernel, tmp_path):
    name = PROGRAM_OF[kernel]
    got = _on_cpu(name, tmp_path, MUTATIONS[kernel])
    assert got["rc"] != 0 and got["check"] == "FAIL", got
    assert {k: v["check"] for k, v in got["per_kernel"].items()} == \
        {k: "FAIL" if k == kernel else "PASS" for k in restructure.kinds(name)}
