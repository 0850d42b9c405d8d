"""Which specs a kernel is judged with (superopt.specs.sources): captured first (with the
inferred small shapes after them), minor kernels skipped, explicit and inferred otherwise."""
from __future__ import annotations

import json

import pytest

import ptx_ir
from superopt.config.resolved import Settings
from superopt.specs import sources
from superopt.specs.capture.format import CaptureError, write_capture
from tests.capture.test_capture_specs import BIGS, DATA, SAXPY, SCALE2, capture, module  # noqa: F401


def test_captured_first_then_inferred_small_shapes(module, capture):
    got = sources.candidates_in_order(module, SAXPY, source=None, settings=None, capture=capture)
    first = got.choices[0]
    assert first.origin == "captured"
    timed = first.specs[0]
    assert timed.origin == "captured" and timed.grid == (16384, 1, 1) and timed.block == (256, 1, 1)
    assert timed.params[0].value == 1 << 22
    # inferred shapes follow the captured ones, for small sizes and tails
    assert any(s.origin == "inferred" for s in first.specs[1:])
    # and inference alone is the next choice, should the captured one not be judgeable
    assert got.choices[-1].origin == "inferred"
    assert got.share > 0.99 and got.skip is None


def test_minor_kernel_is_skipped_unless_asked(module, capture):
    got = sources.candidates_in_order(module, BIGS, source=None, settings=None, capture=capture)
    assert got.skip and "under 1%" in got.skip
    asked = sources.candidates_in_order(module, BIGS, source=None, settings=None, capture=capture,
                                        search_minor=True)
    assert asked.skip is None


def test_without_capture_it_is_inference(module):
    got = sources.candidates_in_order(module, SAXPY, source=None, settings=None, capture=None)
    assert [c.origin for c in got.choices] == ["inferred"] and got.share is None


def test_capture_named_by_env_or_config(tmp_path, monkeypatch, capture):
    path = tmp_path / "cap.json"
    write_capture(capture, path)
    monkeypatch.setenv("NVCC_PLUS_CAPTURE", str(path))
    assert sources.load_configured_capture(Settings())["kernels"][SAXPY]["launches"] == 4
    monkeypatch.delenv("NVCC_PLUS_CAPTURE")
    cfg = {"capture": "cap.json", "config_path": str(tmp_path / "nvcc-plus.toml")}
    assert sources.load_configured_capture(Settings(cfg)) is not None
    assert sources.load_configured_capture(Settings()) is None
    with pytest.raises(CaptureError, match="missing.json"):
        sources.load_configured_capture(Settings({"capture": str(tmp_path / "missing.json")}))


def test_spec_key_changes_with_the_specs(module, capture):
    a = sources.candidates_in_order(module, SAXPY, source=None, settings=None, capture=capture).choices[0]
    b = sources.candidates_in_order(module, SAXPY, source=None, settings=None, capture=None).choices[0]
    assert a.key != b.key and len(a.key) == 16
