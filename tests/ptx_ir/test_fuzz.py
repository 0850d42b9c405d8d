"""Fuzzing the parser with mutated real PTX: it returns a Module or raises ParseError,
never another exception, and whatever it accepts prints to text it accepts again."""
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

import ptx_ir
from ptx_ir import ParseError

DATA = Path(__file__).parent / "data"
CORPUS = Path(__file__).parent.parent / "corpus" / "ptx"


def _seeds() -> list[str]:
    texts = [(DATA / "analyses.ptx").read_text()]
    if CORPUS.is_dir():
        small = sorted((p for p in CORPUS.glob("*.ptx") if p.stat().st_size < 40_000), key=lambda p: p.name)
        texts += [p.read_text() for p in small[:: max(1, len(small) // 12)]]
    return texts


SEEDS = _seeds()
PIECES = ["{", "}", "(", ")", "[", "]", ";", ",", ":", "@", "!", "|", "+", "-", "<", ">", "=",
          ".reg", ".b32", ".entry", ".func", ".param", ".loc", ".section", ".global", ".v4",
          "%r1", "%tid.x", "$L__BB0_1", "0f3F800000", "0d3FF0000000000000", "-1", "0x10",
          "ld.global.f32", "bra", "call.uni", "\n", " ", "\t", "/*", "*/", "//", '"', "_",
          "brx.idx", ".branchtargets", ".callprototype", "@%p1", "\x00", "é", "99999999999999999999"]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "duplicate", "truncate"]))
        if action == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 40)):]
        elif action == "insert":
            text = text[:pos] + draw(st.sampled_from(PIECES)) + text[pos:]
        elif action == "duplicate":
            n = draw(st.integers(1, 80))
            text = text[:pos] + text[pos:pos + n] + text[pos:]
        else:
            text = text[:pos]
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_ptx_parses_or_raises_parse_error(text):
    try:
        module = ptx_ir.parse(text)
    except ParseError as err:
        assert err.line >= 1 and err.column >= 1
        assert "internal parser error" not in err.message, err.message
        return
    printed = ptx_ir.emit(module)
    assert ptx_ir.emit(ptx_ir.parse(printed)) == printed


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(text):
    try:
        ptx_ir.parse(text)
    except ParseError:
        pass
