"""Lockfile and cache entries are data (issue 12.5): a stored step that carries code (a
model's function body) is applied only after the judge accepts it against nvcc's code."""
from __future__ import annotations

import json
from pathlib import Path

import ptx_ir
from superopt.decide.run import globals_text as _globals_text
from superopt.optimize import optimize_module
from superopt.config.resolved import Settings
import superopt.decide.stored  # noqa: F401 - the stored path registers model-rewrite (the model registers its own pass)
from superopt.passes import registry
from superopt.store.cache import decision_key

CHEATS = Path(__file__).resolve().parents[1] / "judge" / "cheats"
SAXPY = "_Z5saxpyifPKfPf"
CFG = {"backend": "emulator", "no_gpu": "estimate", "budget": 2, "passes": ["cache-hints"]}


def _lock_entry(tmp_path, variant: str, corpus: Path = CHEATS, kernel_file: str = "saxpy.ptx",
                kernel: str = SAXPY) -> Path:
    base = (corpus / kernel_file).read_text()
    module = ptx_ir.parse(base)
    fn = module.function(kernel)
    body = ptx_ir.printer.emit_function(ptx_ir.parse((corpus / "variants" / f"{variant}.ptx").read_text())
                                        .function(kernel))
    key = decision_key(kernel_text=ptx_ir.printer.emit_function(fn), globals_text=_globals_text(module),
                       target=module.target[0], tool="", policy="exact", passes=CFG["passes"])
    lock = tmp_path / "nvcc-plus.lock"
    lock.write_text(json.dumps({"version": 1, "decisions": {key: {
        "kernel": kernel, "plan": [{"pass": "model-rewrite", "params": {"function": body}}],
        "ptx_hash": None, "status": "optimized", "decision": "measured"}}}))
    return lock


def test_tampered_model_rewrite_in_lockfile_is_rejected(tmp_path, monkeypatch):
    assert "model-rewrite" in registry()
    monkeypatch.setenv("NVCC_PLUS_LOCKFILE", str(_lock_entry(tmp_path, "saxpy_const_a")))
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    base = (CHEATS / "saxpy.ptx").read_text()
    res = optimize_module(base, settings=Settings.from_config(dict(CFG)))
    assert res.ptx == base or not res.changed
    (line,) = [m for m in res.messages if "carries code" in m]
    assert "not applied" in line and "rejected" in line


def test_honest_model_rewrite_in_lockfile_is_applied_after_the_check(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_LOCKFILE", str(_lock_entry(tmp_path, "saxpy_eq_commute")))
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    res = optimize_module((CHEATS / "saxpy.ptx").read_text(), settings=Settings.from_config(dict(CFG)))
    (k,) = res.records["kernels"]
    assert k["status"] == "locked" and any("re-checked" in n for n in k["notes"]), k


RACES = Path(__file__).resolve().parents[1] / "judge" / "cheats_races"
SCALE = "_Z5scaleifPKfPf"


def test_tampered_rewrite_guarded_by_never_written_shared_memory_is_rejected(tmp_path, monkeypatch):
    """Issue 25: a model rewrite whose ``@%p`` guard comes from never-written shared memory (its
    outputs equal nvcc's, since the poison never holds 1234567) was re-checked and accepted in a
    no-GPU build and put into the binary; the re-check (decide.stored.recheck_stored, on the
    emulator here) now rejects it by the guard's taint bit, and nvcc's code is kept."""
    monkeypatch.setenv("NVCC_PLUS_LOCKFILE", str(_lock_entry(tmp_path, "scale_guard_store", RACES, "scale.ptx", SCALE)))
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    base = (RACES / "scale.ptx").read_text()
    res = optimize_module(base, settings=Settings.from_config(dict(CFG)))
    assert res.ptx == base or not res.changed
    (line,) = [m for m in res.messages if "carries code" in m]
    assert "not applied" in line and "rejected" in line and "never-written data" in line, line
    (k,) = res.records["kernels"]
    assert k["status"] != "locked", k
