"""bench/judge/draw_cost.py: every draw measured in a process of the tree asked for."""
from __future__ import annotations

import json

from bench.judge.draw_cost import DRAWS, ROOT, main, measure


def test_every_draw_is_timed_for_the_tree_asked_for():
    got = measure(ROOT, 4096, 1)
    assert len(got) == len(DRAWS) and all(isinstance(s, float) and s >= 0 for s in got.values())
    assert "poison f32" in got and "generate f32 positive" in got


def test_the_results_file_says_what_was_measured(tmp_path):
    out = tmp_path / "draw.json"
    assert main(["--n", "2048", "--reps", "1", "--old-tree", str(ROOT), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["elements"] == 2048 and doc["commit"] and doc["old_commit"] == doc["commit"]
    assert doc["seconds"]["this"].keys() == doc["seconds"]["old"].keys()
