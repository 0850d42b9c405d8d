"""The progress of a generation: on a terminal each step is printed once and the status line
is updated in place (a rich live display); in a pipe each line is printed once and nothing
else. The events come from a real run of the loop (planted model, CPU emulator)."""
from __future__ import annotations

import io
import re

from rich.console import Console

from superopt.generate.judge import ReferenceJudge
from superopt.generate.loop import GenerateOptions, generate
from superopt.generate.progress import GenerationProgress, TerminalProgress
from superopt.generate.task import build_task
from tests.generate.helpers import SIGNATURE, VADD_FN, VADD_WRONG, planted, write_reference

ESC = "\x1b["


def _run(tmp_path, console):
    t = build_task("Add two float vectors.", reference=str(write_reference(tmp_path)), signature=SIGNATURE)
    judge = ReferenceJudge(t.reference, t.stub_ptx, backend="emulator", sets=2)
    options = GenerateOptions(rounds=3, samples=1, budget_s=120, save_dataset=False)
    progress = GenerationProgress(options.budget_s, notes=t.notes)
    with TerminalProgress(console, progress) as view:
        result = generate(t, planted([VADD_WRONG], [VADD_FN]), judge, options, on_event=view.on_event)
    return result, progress


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_in_a_pipe_every_line_is_printed_once_and_nothing_else(tmp_path):
    buf = io.StringIO()
    result, progress = _run(tmp_path, Console(file=buf, force_terminal=False, width=100, soft_wrap=True))
    out = buf.getvalue()
    assert result.accepted
    assert ESC not in out                                # no cursor movement, no colours
    assert out.count("round 1/3: asking the model") == 1 and out.count("round 2/3: asking the model") == 1
    assert out.count("round 1, sample 0: rejected-check") == 1
    assert out.count("ACCEPTED: vadd") == 1
    assert "of the 120 s budget" not in out              # the status line is for terminals
    assert [ln for ln in out.splitlines() if ln.strip()] == [ln.text for ln in progress.lines]


def test_on_a_terminal_the_status_line_is_updated_in_place(tmp_path):
    buf = io.StringIO()
    result, progress = _run(tmp_path, Console(file=buf, force_terminal=True, width=100, soft_wrap=True, color_system=None))
    out = buf.getvalue()
    assert result.accepted
    plain = _plain(out)
    for ln in progress.lines:                          # each step once, however often the status changed
        assert plain.count(ln.text) == 1, (ln.text, plain)
    assert "of the 120 s budget)" in plain               # the live status line was drawn ...
    assert f"{ESC}2K" in out or f"{ESC}1A" in out         # ... and erased / redrawn in place


def test_status_line_says_what_happens_and_the_seconds_spent():
    p = GenerationProgress(600)
    p.add("request", {"round": 2, "rounds": 3, "n": 2, "max_tokens": 512, "allowed": 412.0})
    assert re.fullmatch(r"round 2/3: waiting for the model's answer\(s\) \(\d+ s of the 600 s budget\)",
                        p.status_line())
    assert "412 s of the budget for it" in p.lines[-1].text
    p.add("done", {"status": "accepted", "line": "ACCEPTED: vadd ..."})
    assert p.done and "budget" not in p.text().splitlines()[-1]
