"""The superopt toolbox as users meet it: config (values and their origin), cache stats and
its size limit, optimize with nvcc flags and the spec to add, passes at 80 columns, and try's
honest counts (a rewrite that only assembled is never counted as passing)."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from superopt.cli import main
from superopt.config.resolved import Settings
from tests.search.cli_env import env  # noqa: F401 - the fixture

DATA = Path(__file__).resolve().parent / "data"
QUICKSTART = Path(__file__).resolve().parents[1] / "driver" / "data" / "quickstart" / "saxpy.cu"
STRUCT_CU = """#include "scale.h"
struct Big { const float* const* in; float a[4]; int n; };
__global__ void weird(Big b, float* out) {
  if (threadIdx.x < b.n) out[threadIdx.x] = b.in[0][threadIdx.x] * b.a[threadIdx.x % 4] * SCALE;
}
"""
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# ---- config -------------------------------------------------------------------------------

def test_config_says_where_each_value_came_from(env, monkeypatch):
    (env / "nvcc-plus.toml").write_text('budget = 7\npolicy = "ulp:2"\nbudjet = 1\n')
    monkeypatch.setenv("NVCC_PLUS_POLICY", "exact")
    res = invoke("config", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    by = {r["setting"]: r for r in out["settings"]}
    assert (by["NVCC_PLUS_BUDGET"]["value"], by["NVCC_PLUS_BUDGET"]["from"]) == (7, str(env / "nvcc-plus.toml"))
    assert (by["NVCC_PLUS_POLICY"]["value"], by["NVCC_PLUS_POLICY"]["from"]) == ("exact", "env NVCC_PLUS_POLICY")
    assert by["NVCC_PLUS_BACKEND"]["from"] == "default"
    assert out["files"]["config"] == str(env / "nvcc-plus.toml")
    assert out["files"]["lockfile_write"] == str(env / "nvcc-plus.lock")
    assert any("'budjet'" in p and "'budget'" in p for p in out["problems"])


def test_config_table_hides_secrets(env, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_LLM_API_KEY", "sk-very-secret")
    res = invoke("config")
    assert res.exit_code == 0 and "sk-very-secret" not in res.output and "NVCC_PLUS_BUDGET" in res.output


# ---- cache --------------------------------------------------------------------------------

def test_cache_stats_exits_0_on_an_empty_cache_and_counts(env):
    res = invoke("cache", "stats")
    assert res.exit_code == 0 and "hits" in res.output and "0 B of 1.0 GiB" in res.output
    from superopt.store.cache_stats import CacheStats
    CacheStats(env / "cache").add(hits=3, misses=1, searches=1, search_s=40.0, saved_s=120.0)
    out = json.loads(invoke("cache", "stats", "--json").output)
    assert (out["hits"], out["misses"], out["hit_rate"], out["saved_s"]) == (3, 1, 0.75, 120.0)
    assert invoke("cache", "stats", "--zero-stats").exit_code == 0
    assert json.loads(invoke("cache", "stats", "--json").output)["hits"] == 0


def test_cache_size_limit_evicts_least_recently_used(env):
    from superopt.store.cache import DecisionCache, parse_size
    assert parse_size("1G") == 1 << 30 and parse_size("500M") == 500 << 20 and parse_size(0) == 0
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")
    cache = DecisionCache(env / "cache")
    for i in range(6):
        cache.put(f"{i:02d}" + "a" * 62, {"plan": [], "pad": "x" * 900})
        os.utime(cache._path(f"{i:02d}" + "a" * 62), (time.time() - 100 + i, time.time() - 100 + i))
    assert cache.get("00" + "a" * 62) is not None          # a hit: now the most recently used
    entries, size = cache.size()
    limited = DecisionCache(env / "cache", max_bytes=size // 2)
    limited.put("99" + "b" * 62, {"plan": []})
    left = {p.stem[:2] for p in limited.entries()}
    assert "00" in left and "99" in left and "01" not in left
    assert limited.size()[1] <= 0.9 * (size // 2)
    from superopt.store.cache_stats import CacheStats
    assert CacheStats(env / "cache").read()["evicted"] >= 1


def test_explicit_spec_is_part_of_the_cache_key(tmp_path):
    import ptx_ir
    from superopt.specs.sources import explicit_specs_key
    ptx = (Path(__file__).parent.parent / "ptx_ir" / "data" / "analyses.ptx").read_text()
    module = ptx_ir.parse(ptx)
    name = "_Z7diamondPiPKii"
    table = {"grid": [1, 1, 1], "block": [32, 1, 1], "params": [
        {"name": "out", "kind": "buffer", "type": "s32", "length": 32, "direction": "out"},
        {"name": "in", "kind": "buffer", "type": "s32", "length": 32, "direction": "in"},
        {"name": "n", "kind": "scalar", "type": "s32", "value": 32}]}
    assert explicit_specs_key(module, name, source=None, settings=Settings({})) is None
    a = explicit_specs_key(module, name, source=None, settings=Settings({"kernels": {name: table}}))
    table["block"] = [64, 1, 1]
    b = explicit_specs_key(module, name, source=None, settings=Settings({"kernels": {name: table}}))
    assert a and b and a != b


# ---- passes -------------------------------------------------------------------------------

def test_passes_names_json_and_80_columns(monkeypatch):
    from superopt.passes import registry
    names = invoke("passes", "--names").output.split()
    assert names == list(registry())
    listed = json.loads(invoke("passes", "--json").output)
    assert [p["name"] for p in listed] == names and all("assumes" in p for p in listed)
    monkeypatch.setenv("COLUMNS", "80")
    table = invoke("passes").output
    assert max(len(line) for line in table.splitlines()) <= 80
    for name in names:                               # names are never broken across lines
        assert name in table


# ---- optimize -----------------------------------------------------------------------------

@needs_nvcc
def test_optimize_passes_nvcc_flags_and_prints_the_spec_to_add(env, monkeypatch):
    (env / "inc").mkdir()
    (env / "inc" / "scale.h").write_text("#define SCALE FACTOR\n")
    (env / "k.cu").write_text(STRUCT_CU)
    monkeypatch.setenv("COLUMNS", "200")
    res = invoke("optimize", "--backend", "emulator", "--no-gpu", "estimate", "--budget", "2", "k.cu", "-Iinc", "-DFACTOR=3.0f", "-std=c++17")
    assert res.exit_code == 0, res.output
    assert "weird(Big, float*)" in res.output and "is not verifiable" in res.output
    # inference does not follow the pointer stored behind the struct's pointer field (b.in[0]);
    # the template's guess for the struct's bytes (zeros) makes nvcc's own code write nothing
    # (b.n = 0), so no table is printed: the struct's bytes are named as what is unknown, with
    # how to give them, and the capture (superopt.judge.spec_fix)
    text = " ".join(res.output.split())
    assert "No spec is suggested" in text and "nvcc's code writes none of its outputs under it" in text
    assert "b's bytes (zeros here: write the struct's little-endian bytes; a pointer field goes in pointers" in text
    assert 'kind = "bytes", size = 32' not in text and "superopt capture --data" in text
    bad = invoke("optimize", "k.cu", "-Iinc")          # FACTOR undefined: nvcc's own message
    assert bad.exit_code != 0 and "FACTOR" in bad.output and "k.cu" in bad.output


@needs_nvcc
def test_optimize_shows_a_comment_that_parses_for_an_unverifiable_kernel(env, monkeypatch):
    """A kernel whose spec inference fails but the format can describe: the fix is printed
    filled with the names from the source."""
    import ptx_ir
    from superopt.cli import _print_spec_fixes
    from rich.console import Console
    shutil.copy(QUICKSTART, env / "saxpy.cu")
    import subprocess
    subprocess.run(["nvcc", "-arch=sm_75", "-ptx", "saxpy.cu", "-o", "saxpy.ptx"], check=True, cwd=env)
    module = ptx_ir.parse((env / "saxpy.ptx").read_text())
    console = Console(record=True, width=200)
    _print_spec_fixes(console, module, [{"kernel": module.kernels[0].name, "status": "not-verifiable",
                                         "reason": "not verifiable: inference timed out after 10 s"}],
                      env / "saxpy.cu")
    text = console.export_text()
    assert "(inference timed out after 10 s); nvcc's code is kept." in text
    assert "// nvcc-plus: grid=cdiv(n,256) block=256 n=4096 a=1.5 x:f32[n] in y:f32[n] inout" in text
    assert '[kernels."saxpy"]' in text and "guessed, check against" in text


# ---- try ----------------------------------------------------------------------------------

@needs_nvcc
def test_try_counts_only_checked_rewrites_as_verified(env):
    corpus = env / "corpus"
    corpus.mkdir()
    shutil.copy(QUICKSTART, corpus / "saxpy.cu")           # has a // nvcc-plus: spec
    (corpus / "scale.h").write_text("#define SCALE 3.0f\n")
    (corpus / "k2.cu").write_text(STRUCT_CU)                 # nor the pointer the struct's pointer holds
    res = invoke("try", DATA / "commute_pass.py", "--on", corpus, "--backend", "emulator",
                 "--json", env / "try.json")
    assert res.exit_code == 0, res.output
    assert ("fired on 2 kernel/parameter combinations: 1 verified (0 faster), 0 failed verification or "
            "assembly, 1 assembled but not verifiable") in " ".join(res.output.split())
    counts = json.loads((env / "try.json").read_text())["counts"]
    assert (counts["verified"], counts["unchecked"], counts["failed"]) == (1, 1, 0)
    strict = invoke("try", DATA / "commute_pass.py", "--on", corpus, "--backend", "emulator", "--strict")
    assert strict.exit_code == 1


def test_try_names_a_pass_file_that_does_not_load(env):
    bad = env / "bad_pass.py"
    bad.write_text("def broken(:\n")
    res = CliRunner().invoke(main, ["try", str(bad), "--on", str(env)])
    assert res.exit_code == 2 and f"{bad}: cannot load the pass (SyntaxError" in res.output
