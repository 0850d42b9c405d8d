"""What the HTML report says about each kernel: the evidence of safety, timings, resources,
code side by side, source lines; and how `superopt report` fails (never with a traceback)."""
from __future__ import annotations

import sys

from click.testing import CliRunner

from reports import sass as sass_mod
from reports.cli import report_command
from reports.lineinfo import source_lines
from reports.load import LoadedRecord
from reports.render import html_report
from tests.reports.records import ARCHIVES, kernel, module, write


def _html(*kernels, **kw) -> str:
    return html_report([LoadedRecord("r.json", module(list(kernels), **kw))])


def test_why_it_is_safe_shows_every_input_set_with_sizes_and_distributions():
    k = kernel("gemv_rows")
    win = next(c for c in k["candidates"] if c["fate"] == "winner")
    html = _html(k)
    sets = win["verdict"]["evidence"]["sets"]
    assert f"Input sets ({len(sets)})" in html
    for s in sets:
        assert s["label"] in html
        for name, n in s["lengths"].items():
            assert f"<code>{name}</code>: {n:,}, {s['distributions'][name]}" in html
    assert win["verdict"]["reason"] in html
    assert "Largest difference per output" in html


def test_timing_distributions_and_resources_are_shown():
    k = kernel("gemv_rows")
    win = next(c for c in k["candidates"] if c["fate"] == "winner")
    html = _html(k)
    assert html.count('<svg class="timing"') == 2           # search and confirmation
    assert f"{win['confirmation']['baseline']['median'] * 1e6:.2f} µs" in html
    base_regs, win_regs = k["baseline"]["resources"]["registers"], win["resources"]["registers"]
    assert f"<td class=\"num\">{base_regs}</td><td class=\"num\"><b>{win_regs}</b></td>" in html
    assert "theoretical occupancy (128 threads/block)" in html
    assert "100% (16 blocks, warps)" in html and "62% (10 blocks, registers)" in html


def test_ptx_side_by_side_and_the_source_file_per_kernel():
    html = _html(kernel("scale4"), source="src/app/kernels.cu")
    assert '<table class="code sbs">' in html and 'class="diff_add"' in html
    assert "<code>src/app/kernels.cu</code>, target sm_90" in html


def test_sass_degrades_with_a_note_when_the_tools_are_missing(monkeypatch):
    monkeypatch.setattr(sass_mod, "find_tool", lambda name: None)
    sass_mod.sass_for.cache_clear()
    import reports.report as report_mod
    monkeypatch.setattr(report_mod, "find_tool", lambda name: None)
    html = html_report([LoadedRecord("r.json", module([kernel("scale4")]))], sass=None)
    assert "no SASS: ptxas and cuobjdump or nvdisasm not found on PATH" in html
    sass_mod.sass_for.cache_clear()


def test_source_lines_come_from_loc_and_file_directives(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* y) {\n  y[threadIdx.x] *= 2.0f;\n}\n")
    base = (f'.file 1 "{src}"\n.visible .entry k(\n)\n{{\n.loc 1 2 3\n\tld.global.f32 %f1, [%rd1];\n'
            "\tmul.f32 %f2, %f1, 0f40000000;\n\tst.global.f32 [%rd1], %f2;\n.loc 1 3 1\n\tret;\n}\n")
    opt = base.replace("\tmul.f32 %f2, %f1, 0f40000000;\n", "\tadd.f32 %f2, %f1, %f1;\n")
    lines = source_lines(base, opt)
    assert [(l.line, l.text, l.baseline, l.optimized) for l in lines.lines] == [
        (2, "  y[threadIdx.x] *= 2.0f;", 3, 3), (3, "}", 1, 1)]
    assert lines.note == ""
    no_table = source_lines(base.split("\n", 1)[1], None)
    assert [l.line for l in no_table.lines] == [2, 3] and "file index 1 not resolved" in no_table.note
    assert "build with -lineinfo" in source_lines(".visible .entry k()\n{\n\tret;\n}\n", None).note


def test_report_command_reads_archives_and_writes_html(tmp_path):
    out = tmp_path / "programs.html"
    result = CliRunner().invoke(report_command, [*map(str, ARCHIVES), "--format", "html", "--no-sass", "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert "older record(s) of the same (source, target, kernel)" not in html or "replaced" in html
    assert "Captured programs" in html and "share of GPU time" in html


def test_report_without_jinja2_says_how_to_install_it(tmp_path, monkeypatch):
    rec = write(tmp_path / "r.json", module([kernel("scale4")]))
    monkeypatch.setitem(sys.modules, "jinja2", None)
    result = CliRunner().invoke(report_command, [str(rec), "--format", "html", "--no-sass"])
    assert result.exit_code == 3
    assert "pip install 'jinja2>=3.1'" in result.output
    assert "Traceback" not in result.output
    # Markdown needs no jinja2.
    assert CliRunner().invoke(report_command, [str(rec), "--format", "md"]).exit_code == 0


def test_report_of_an_invalid_file_exits_2_naming_it(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "nvcc-plus/record", "schema_version": 1, "kernels": [{"kernel": 3}]}')
    result = CliRunner().invoke(report_command, [str(bad), "--format", "html"])
    assert result.exit_code == 2
    assert "bad.json: kernels[0]" in result.output


def test_a_minimal_record_renders_in_every_format(tmp_path):
    rec = write(tmp_path / "min.json", {"schema": "nvcc-plus/record", "schema_version": 1,
                                        "kernels": [{"kernel": "k", "status": "not-verifiable"},
                                                    {"kernel": "j", "status": "optimized"}]})
    for fmt in ("term", "md", "html"):
        result = CliRunner().invoke(report_command, [str(rec), "--format", fmt, "--no-sass"])
        assert result.exit_code == 0, (fmt, result.output)
        assert "not verifiable" in result.output or "not-verifiable" in result.output
