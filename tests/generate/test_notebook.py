"""`%load_ext superopt` and `%%ptxgen`, driven through IPython's own test shell
(IPython.testing.globalipapp): the extension loads, a planted model's good kernel comes back
as a callable bound in the namespace (run here on the CPU emulator), a failure comes back as
a report, bad options print the reason and return nothing."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("IPython")

from tests.generate.helpers import SIGNATURE, VADD_FN, VADD_NO_PTXAS, VADD_WRONG, planted  # noqa: E402


@pytest.fixture
def ip():
    from IPython.testing.globalipapp import get_ipython
    shell = get_ipython()
    shell.run_line_magic("load_ext", "superopt")
    shell.run_cell("def vadd_ref(a, b, c, n):\n    c[:n] = a[:n] + b[:n]\n")
    yield shell
    for name in ("vadd", "fast_add", "planted_model"):
        shell.user_ns.pop(name, None)


def line(*extra) -> str:
    return f'--signature "{SIGNATURE}" --reference vadd_ref --model-from planted_model --backend emulator ' \
           f'--sets 2 ' + " ".join(extra)


def test_superopt_is_an_ipython_extension(ip):
    assert "ptxgen" in ip.magics_manager.magics["cell"]


def test_ptxgen_returns_a_verified_callable(ip, capsys):
    ip.user_ns["planted_model"] = planted([VADD_WRONG], [VADD_FN])
    k = ip.run_cell_magic("ptxgen", line("--samples 1", "--name fast_add"), "Add two float vectors.")
    assert ip.user_ns["fast_add"] is k
    assert k.record["status"] == "accepted"
    html = k._repr_html_()
    assert "ACCEPTED: vadd" in html and "rejected-check" in html and ".visible .entry vadd(" in html
    shown = capsys.readouterr().out            # the progress display (text form in a terminal shell)
    assert "round 1/3" in shown and "ACCEPTED: vadd" in shown
    a = np.arange(300, dtype=np.float32)
    b = np.full(300, 2.0, np.float32)
    c = np.zeros(300, np.float32)
    ip.user_ns.update(a=a, b=b, c=c)
    ip.run_cell("fast_add(a, b, c, 300)")
    assert np.array_equal(c, a + b)


def test_ptxgen_failure_is_a_report_not_an_exception(ip):
    ip.user_ns["planted_model"] = planted([VADD_NO_PTXAS])
    r = ip.run_cell_magic("ptxgen", line("--rounds 1 --samples 1"), "Add two float vectors.")
    assert r.status == "not-verified" and "vadd" not in ip.user_ns
    assert "rejected-ptxas" in r._repr_html_() and "NOT-VERIFIED" in repr(r)


def test_ptxgen_bad_options_print_the_reason(ip, capsys):
    ip.user_ns["planted_model"] = planted([VADD_FN])
    assert ip.run_cell_magic("ptxgen", line().replace("vadd_ref", "nothing_here"), "Add.") is None
    assert "neither a function in the notebook nor a file" in capsys.readouterr().err
    assert ip.run_cell_magic("ptxgen", line("--rounds 0"), "Add.") is None
    assert "--rounds must be" in capsys.readouterr().err
    assert ip.run_cell_magic("ptxgen", line(), "   ") is None
    assert "description is empty" in capsys.readouterr().err


def test_outside_jupyter_the_progress_is_not_reprinted_on_every_update(ip, capsys):
    """A terminal IPython prints a display's every update anew (10 copies of the block): there
    the progress goes to the terminal, each line once."""
    ip.user_ns["planted_model"] = planted([VADD_WRONG], [VADD_WRONG.replace("sub.f32", "mul.f32")], [VADD_FN])
    k = ip.run_cell_magic("ptxgen", line("--samples 1"), "Add two float vectors.")
    assert k.record["status"] == "accepted"
    shown = capsys.readouterr().out
    for text in ("round 1/3: asking the model", "round 2/3: asking the model", "round 3/3: asking the model",
                 "round 1, sample 0: rejected-check", "ACCEPTED: vadd"):
        assert shown.count(text) == 1, (text, shown)


def test_under_jupyter_one_output_area_is_updated_in_place(ip, capsys, monkeypatch):
    import superopt.generate.notebook as nb

    class Handle:
        def __init__(self):
            self.updates = []

        def update(self, obj):
            self.updates.append(obj._repr_html_())

    shown = []

    def display(obj, display_id=False):
        shown.append((obj, display_id))
        return handle

    handle = Handle()
    monkeypatch.setattr(nb, "in_jupyter", lambda shell: True)
    monkeypatch.setattr(nb, "display", display)
    ip.user_ns["planted_model"] = planted([VADD_WRONG], [VADD_FN])
    k = ip.run_cell_magic("ptxgen", line("--samples 1"), "Add two float vectors.")
    assert k.record["status"] == "accepted"
    assert len(shown) == 1 and shown[0][1] is True           # one area, made with a display id
    assert len(handle.updates) >= 6                           # updated on every event ...
    assert "round 1/3" not in handle.updates[0] and "round 1/3" in handle.updates[-1]
    assert "ACCEPTED: vadd" in handle.updates[-1] and "budget" not in handle.updates[-1].rsplit("</pre>", 1)[1]
    assert "round 1/3" not in capsys.readouterr().out         # ... and nothing printed besides
