"""Every PTX of the corpus parses, prints canonically, and ptxas builds the same cubin
from the printed text as from nvcc's original.

One exception, stated precisely: PTX with line information (``-G``, ``-lineinfo``) makes
ptxas embed the PTX *text itself* for debuggers (``.nv_debug_ptx_txt*``) and a SASS→PTX-line
table (``.nv_debug_line_sass``). Those two change with any change of the text (comments,
spacing) and are compared only for presence; every other section — code, symbols,
relocations, the source-level DWARF — must be byte-identical.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

import ptx_ir
from tests.elf_sections import elf_sections

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
MANIFEST = CORPUS / "manifest.json"
ENTRIES = json.loads(MANIFEST.read_text())["entries"]
TEXT_EMBEDDING = (".nv_debug_ptx_txt", ".nv_debug_line_sass", ".rela.nv_debug_line_sass", ".rel.nv_debug_line_sass")


def _normalized(sections: dict[str, bytes], has_line_info: bool) -> dict[str, bytes]:
    if not has_line_info:
        return sections
    out = {}
    for name, data in sections.items():
        if name.startswith(TEXT_EMBEDDING):
            out[name.split(".nv_debug_ptx_txt")[0] + ".nv_debug_ptx_txt" if "ptx_txt" in name else name] = b"present"
        elif name in (".strtab", ".shstrtab"):
            out[name] = b"\0".join(s for s in data.split(b"\0") if not s.startswith(b".nv_debug_ptx_txt"))
        else:
            out[name] = data
    return out


def _assemble(ptxas_argv: list[str], ptx: str, tmp: str, tag: str) -> bytes:
    src, out = os.path.join(tmp, f"{tag}.ptx"), os.path.join(tmp, f"{tag}.cubin")
    Path(src).write_text(ptx)
    argv = [a for a in ptxas_argv if a not in ("-o",)]
    arch = next(a for a in argv if a.startswith("-arch="))
    cmd = ["ptxas", arch] + (["-c"] if "-c" in argv else []) + ["-o", out, src]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise AssertionError(f"ptxas rejected the {tag} text:\n{proc.stderr[-2000:]}")
    return Path(out).read_bytes()


def _round_trip(entry: dict) -> dict:
    original = (CORPUS / entry["file"]).read_text()
    module = ptx_ir.parse(original)
    printed = ptx_ir.emit(module, keep_lines=True)
    canonical = ptx_ir.emit(module)
    result = {
        "idempotent": ptx_ir.emit(ptx_ir.parse(canonical)) == canonical,
        "lines_kept": ptx_ir.emit(ptx_ir.parse(printed), keep_lines=True) == printed,
        "functions": len(module.functions),
    }
    argv = entry["ptxas_command"].split()
    with tempfile.TemporaryDirectory(prefix="corpus-rt-") as tmp:
        a = _assemble(argv, original, tmp, "nvcc")
        b = _assemble(argv, printed, tmp, "printed")
        c = _assemble(argv, canonical, tmp, "canonical")
    line_info = ".loc" in original
    sa = _normalized(elf_sections(a), line_info)
    result["same_cubin"] = a == b
    sb = _normalized(elf_sections(b), line_info)
    result["diff_sections"] = sorted(k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k))
    sc = _normalized(elf_sections(c), line_info)
    result["canonical_diff_sections"] = sorted(k for k in set(sa) | set(sc) if sa.get(k) != sc.get(k))
    result["line_info"] = line_info
    return result


@pytest.fixture(scope="session")
def results() -> dict[str, dict]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {e["file"]: pool.submit(_round_trip, e) for e in ENTRIES}
        return {k: f for k, f in futures.items()}


def test_corpus_is_present_and_covers_the_features():
    features = set().union(*(e["features"] for e in ENTRIES))
    assert len(ENTRIES) >= 60
    for needed in ("brx.idx", ".branchtargets", ".callprototype", ".section .debug_", "inlined_at",
                   '.pragma "nounroll"', "cp.async", "mma.sync", "wmma", "wgmma", ".attribute(.managed)",
                   ".extern .shared", "scoped_block", "param_array", "tex", "vprintf", ".maxnreg", ".reqntid",
                   ".minnctapersm", "local_depot", "f16/bf16"):
        assert needed in features, f"no corpus PTX has {needed!r}"
    assert {e["arch"] for e in ENTRIES} >= {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100"}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"].split("/")[-1] for e in ENTRIES])
def test_round_trip(entry, results):
    r = results[entry["file"]].result()
    assert r["idempotent"], "emit(parse(emit(m))) differs from emit(m)"
    assert r["lines_kept"]
    assert r["diff_sections"] == [], f"cubin sections differ after a round trip: {r['diff_sections']}"
    if not entry["rdc"]:
        # Canonical text (no line padding) gives the same cubin too; relocatable cubins name
        # demoted .shared symbols after PTX line numbers, hence emit(keep_lines=True) above.
        assert r["canonical_diff_sections"] == [], r["canonical_diff_sections"]
    if not r["line_info"]:
        assert r["same_cubin"], "whole cubin differs although no section does"
