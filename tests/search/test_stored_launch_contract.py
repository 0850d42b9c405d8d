"""Lock and cache entries are checked against the launch contract before use (issue 12): a
stored ``occupancy`` step whose ``.maxntid``/``.reqntid`` does not fit the kernel's launch specs
in force would make every launch fail, so it is refused with one line naming the file, the
kernel and the reason; and with NVCC_PLUS_VERBOSE an applied entry is announced."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

import ptx_ir
from superopt.judge.launch_contract import contract_problem
from superopt.decide.run import globals_text as _globals_text
from superopt.optimize import optimize_module
from superopt.config.resolved import Settings
from superopt.search.options import SearchOptions
from superopt.search.candidates import Step, apply_plan, text_hash
from superopt.store.cache import DecisionCache, decision_key
from superopt.specs.sources import SpecChoice
from superopt.specs.launch_spec import LaunchSpec

CHEATS = Path(__file__).resolve().parents[1] / "judge" / "cheats"
SAXPY = "_Z5saxpyifPKfPf"
BASE = (CHEATS / "saxpy.ptx").read_text()
EXPLICIT = {SAXPY: tomllib.loads((CHEATS / "saxpy.toml").read_text())}   # block [256, 1, 1]
CFG = {"backend": "emulator", "no_gpu": "locked", "passes": ["occupancy"]}


def _entry(plan: list[dict], **extra) -> tuple[str, dict]:
    """(lock key, entry) of ``plan`` on saxpy, with the PTX hash a tamperer can compute too."""
    module = ptx_ir.parse(BASE)
    fn = module.function(SAXPY)
    new, _ = apply_plan(module, SAXPY, [Step.from_dict(s) for s in plan])
    key = decision_key(kernel_text=ptx_ir.printer.emit_function(fn), globals_text=_globals_text(module),
                       target=module.target[0], tool="", policy="exact", passes=CFG["passes"])
    entry = {"kernel": SAXPY, "plan": plan, "status": "optimized", "decision": "measured",
             "ptx_hash": text_hash(ptx_ir.printer.emit_function(new.function(SAXPY))), **extra}
    return key, entry


def _lockfile(tmp_path, plan, **extra) -> Path:
    key, entry = _entry(plan, **extra)
    lock = tmp_path / "nvcc-plus.lock"
    lock.write_text(json.dumps({"version": 1, "decisions": {key: entry}}))
    return lock


TAMPERED = [{"pass": "occupancy", "params": {"block": [32], "minnctapersm": 2}}]     # .maxntid 32
HONEST = [{"pass": "occupancy", "params": {"block": [256], "minnctapersm": 2}}]      # .maxntid 256


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NVCC_PLUS_VERBOSE", raising=False)
    monkeypatch.delenv("NVCC_PLUS_CAPTURE", raising=False)
    return monkeypatch


def test_tampered_maxntid_in_lockfile_is_refused(tmp_path, env):
    lock = _lockfile(tmp_path, TAMPERED)
    env.setenv("NVCC_PLUS_LOCKFILE", str(lock))
    res = optimize_module(BASE, settings=Settings.from_config({**CFG, "kernels": EXPLICIT}))
    assert not res.changed and res.ptx == BASE and ".maxntid" not in res.ptx
    (line,) = [m for m in res.messages if "not applied" in m]
    assert line.startswith(f"{lock}: {SAXPY}: locked decision not applied: sets .maxntid 32")
    assert "the program launches 256 threads (block [256, 1, 1], toml)" in line and "\n" not in line
    (k,) = res.records["kernels"]
    assert k["status"] == "kept-baseline" and k["decision"] is None     # no GPU: nvcc's code


def test_honest_maxntid_matching_the_explicit_block_is_applied(tmp_path, env):
    env.setenv("NVCC_PLUS_LOCKFILE", str(_lockfile(tmp_path, HONEST)))
    res = optimize_module(BASE, settings=Settings.from_config({**CFG, "kernels": EXPLICIT}))
    assert res.changed and ".maxntid 256" in res.ptx and ".minnctapersm 2" in res.ptx
    assert not [m for m in res.messages if "not applied" in m]
    assert res.records["kernels"][0]["status"] == "locked"


def test_added_maxntid_without_an_explicit_or_captured_spec_is_refused(tmp_path, env):
    # Only inferred specs here: their block is a guess, and the program may launch bigger blocks.
    env.setenv("NVCC_PLUS_LOCKFILE", str(_lockfile(tmp_path, HONEST)))
    res = optimize_module(BASE, settings=Settings.from_config(dict(CFG)))
    assert not res.changed and res.ptx == BASE
    (line,) = [m for m in res.messages if "not applied" in m]
    assert SAXPY in line and "no explicit or captured launch spec" in line


def test_tampered_cache_entry_is_refused_and_named(tmp_path, env):
    env.setenv("NVCC_PLUS_LOCKFILE", str(tmp_path / "absent.lock"))
    from superopt.judge.ptxas import ptxas_version
    from superopt.model.base import model_identity
    module = ptx_ir.parse(BASE)
    from superopt.specs.sources import explicit_specs_key
    tool = ptxas_version() + (f" model={model_identity()}" if model_identity() else "")
    explicit = explicit_specs_key(module, SAXPY, source=None, settings=Settings.from_config({**CFG, "kernels": EXPLICIT}))
    tool = f"{tool} explicit={explicit}" if explicit else tool      # the user's specs are in the key
    tool += f" min_gain={SearchOptions().min_gain:g}"                 # and the least gain
    key = decision_key(kernel_text=ptx_ir.printer.emit_function(module.function(SAXPY)),
                       globals_text=_globals_text(module), target=module.target[0], tool=tool,
                       policy="exact", passes=CFG["passes"])
    cache = DecisionCache()
    cache.put(key, _entry(TAMPERED)[1])
    res = optimize_module(BASE, settings=Settings.from_config({**CFG, "kernels": EXPLICIT}))
    assert not res.changed and res.ptx == BASE
    (line,) = [m for m in res.messages if "not applied" in m]
    assert line.startswith(f"{cache.path(key)}: {SAXPY}: cached decision not applied: sets .maxntid 32")


# ------------------------------------------------------------------ the rules, one by one

def _fn(directives: str):
    """saxpy with ``directives`` between its parameters and its body."""
    src = BASE.replace(")\n{", ")\n" + directives + "\n{", 1) if directives else BASE
    fn = ptx_ir.parse(src).function(SAXPY)
    assert [d.name for d in fn.directives] == [ln.split()[0] for ln in directives.splitlines()]
    return fn


def _choices(*blocks, origin="toml"):
    spec = LaunchSpec.from_dict({**EXPLICIT[SAXPY]}, kernel=SAXPY, origin=origin)
    from dataclasses import replace
    return lambda: [SpecChoice([replace(spec, block=b) for b in blocks], origin)]


@pytest.mark.parametrize("base, new, blocks, origin, expect", [
    ("", "", [(256, 1, 1)], "toml", None),
    ("", ".maxntid 256", [(256, 1, 1), (128, 1, 1)], "toml", None),
    ("", ".maxntid 256", [(256, 1, 1)], "captured", None),
    ("", ".maxntid 128", [(256, 1, 1)], "toml", "launches 256 threads (block [256, 1, 1], toml)"),
    ("", ".maxntid 256", [(16, 32, 1)], "toml:/p/q/nvcc-plus.toml", "512 threads (block [16, 32, 1], nvcc-plus.toml)"),
    ("", ".maxntid 256", [(256, 1, 1), (512, 1, 1)], "captured", "(block [512, 1, 1], captured launches)"),
    ("", ".maxntid 256", [(256, 1, 1)], "inferred", "no explicit or captured"),
    ("", ".reqntid 256", [(256, 1, 1)], "toml", None),
    ("", ".reqntid 256", [(128, 1, 1)], "toml", "block [128, 1, 1]"),
    ("", ".reqntid 16, 16", [(256, 1, 1)], "toml", "block [256, 1, 1]"),
    (".maxntid 512", ".maxntid 1024", [(256, 1, 1)], "toml", "own .maxntid 512 -> 1024"),
    (".maxntid 512", "", [(256, 1, 1)], "toml", "own .maxntid 512 -> none"),
    (".reqntid 256", ".maxntid 256", [(256, 1, 1)], "toml", "own .reqntid 256 -> none"),
    (".maxnreg 64", ".maxnreg 32", [(256, 1, 1)], "toml", None),
    (".maxnreg 64", ".maxnreg 128", [(256, 1, 1)], "toml", "raises .maxnreg from 64 to 128"),
    (".maxnreg 64", "", [(256, 1, 1)], "toml", "raises .maxnreg from 64 to no limit"),
    ("", ".maxntid 1024\n.minnctapersm 4", [(256, 1, 1)], "toml", "cannot fit"),
    ("", ".reqnctapercluster 2, 1, 1", [(256, 1, 1)], "toml", "launch directive .reqnctapercluster"),
    (".explicitcluster", "", [(256, 1, 1)], "toml", "launch directive .explicitcluster"),
])
def test_contract_rules(base, new, blocks, origin, expect):
    asked = []

    def specs():
        asked.append(1)
        return _choices(*blocks, origin=origin)()
    got = contract_problem(_fn(base), _fn(new), specs)
    if expect is None:
        assert got is None
    else:
        assert got is not None and expect in got, got
    if base == new:
        assert not asked          # nothing changed: no spec is computed


# ------------------------------------------------------------------ announced under NVCC_PLUS_VERBOSE

def test_applied_entries_are_announced_only_when_verbose(tmp_path, env):
    lock = _lockfile(tmp_path, HONEST, searched_on="NVIDIA H200", spec_origin="captured")
    env.setenv("NVCC_PLUS_LOCKFILE", str(lock))
    quiet = optimize_module(BASE, settings=Settings.from_config({**CFG, "kernels": EXPLICIT}))
    assert quiet.changed and not [m for m in quiet.messages if "applied the" in m]
    env.setenv("NVCC_PLUS_VERBOSE", "1")
    loud = optimize_module(BASE, settings=Settings.from_config({**CFG, "kernels": EXPLICIT}))
    assert loud.ptx == quiet.ptx
    (line,) = [m for m in loud.messages if "applied the" in m]
    assert line == (f"{lock}: {SAXPY}: applied the locked entry: plan occupancy(block=[256], minnctapersm=2); "
                    f"searched on NVIDIA H200, at the program's captured launches")
    # The driver hands over its resolved setting: the flag beats the environment.
    assert not [m for m in optimize_module(BASE, settings=Settings.from_config({**CFG, "kernels": EXPLICIT, "verbose": False})).messages
                if "applied the" in m]
    assert loud.records["kernels"][0]["stored"] == {
        "file": str(lock), "provenance": "searched on NVIDIA H200, at the program's captured launches"}


@pytest.mark.parametrize("extra, words", [
    ({"decision": "estimate", "spec_origin": "inferred"}, "a static estimate (no GPU), with launch specs from inferred"),
    ({"searched_on": "NVIDIA H100 80GB HBM3", "spec_origin": "toml:/p/nvcc-plus.toml"},
     "searched on NVIDIA H100 80GB HBM3, with launch specs from toml:/p/nvcc-plus.toml"),
    ({}, "origin not recorded"),
])
def test_keep_nvcc_entries_are_announced_with_their_origin(tmp_path, env, extra, words):
    key, entry = _entry([], **extra)
    entry.update(plan=[], ptx_hash=None, status="kept-baseline")
    cache = DecisionCache()
    lock = tmp_path / "nvcc-plus.lock"
    lock.write_text(json.dumps({"version": 1, "decisions": {key: entry}}))
    env.setenv("NVCC_PLUS_LOCKFILE", str(lock))
    env.setenv("NVCC_PLUS_VERBOSE", "yes")
    res = optimize_module(BASE, settings=Settings.from_config(dict(CFG)))
    assert not res.changed
    (line,) = res.messages
    assert line == f"{lock}: {SAXPY}: applied the locked entry: plan keep nvcc code; {words}"
    assert not cache.entries()


@pytest.mark.parametrize("params", [{"block": [256], "maxnreg": 5}, {"block": "many", "minnctapersm": 2},
                                    {"block": [256], "minnctapersm": "x"}])
def test_stored_parameters_a_pass_refuses_keep_nvcc_code(tmp_path, env, params):
    key, entry = _entry([])
    entry.update(plan=[{"pass": "occupancy", "params": params}], ptx_hash=None)
    lock = tmp_path / "nvcc-plus.lock"
    lock.write_text(json.dumps({"version": 1, "decisions": {key: entry}}))
    env.setenv("NVCC_PLUS_LOCKFILE", str(lock))
    res = optimize_module(BASE, settings=Settings.from_config({**CFG, "kernels": EXPLICIT}))
    assert not res.changed and res.ptx == BASE
    (line,) = res.messages
    assert line.startswith(f"{lock}: {SAXPY}: locked decision no longer applies")
