"""Kernels are keyed by (source, target, kernel): rebuilds replace older records, targets and
sources stay apart."""
from __future__ import annotations

from reports.keyed import current_kernels, kept_speedup
from reports.load import LoadedRecord, load_record_files
from reports.render import markdown
from tests.reports.records import kernel, module, with_speedup, write


def _loaded(*records):
    return [LoadedRecord(f"r{i}.json", r) for i, r in enumerate(records)]


def test_a_rebuild_replaces_the_older_record_whatever_the_file_order():
    old = module([with_speedup(kernel("scale4"), 1.10)], created="2026-12-01T01:00:00+00:00")
    new = module([with_speedup(kernel("scale4"), 1.30)], created="2026-12-01T02:00:00+00:00")
    for order in ((old, new), (new, old)):
        kernels = current_kernels(_loaded(*order))
        assert len(kernels) == 1
        assert kept_speedup(kernels.entries[0].kernel) == 1.30
        assert [kept_speedup(e.kernel) for e in kernels.replaced] == [1.10]


def test_two_gencode_targets_and_two_sources_stay_separate():
    k = kernel("scale4")
    kernels = current_kernels(_loaded(module([k], target="sm_80"), module([k], target="sm_90"),
                                      module([k], source="other/k.cu", target="sm_90")))
    assert sorted((e.key.source, e.key.target) for e in kernels.entries) == [
        ("app/k.cu", "sm_80"), ("app/k.cu", "sm_90"), ("other/k.cu", "sm_90")]
    assert kernels.replaced == []


def test_report_lists_a_rebuilt_kernel_once(tmp_path):
    write(tmp_path / "recs" / "k.cu.sm_90.aaaa.json",
          module([with_speedup(kernel("scale4"), 1.10)], created="2026-12-01T01:00:00+00:00"))
    write(tmp_path / "recs" / "k.cu.sm_90.bbbb.json",
          module([with_speedup(kernel("scale4"), 1.30)], created="2026-12-01T02:00:00+00:00"))
    md = markdown(load_record_files([tmp_path / "recs"]))
    assert md.count("| `scale4` |") == 1
    assert "| 1.30× |" in md and "1.10×" not in md
    assert "1 older record(s)" in md


def test_records_without_a_stamp_let_the_file_given_last_win():
    a, b = module([with_speedup(kernel("scale4"), 1.10)]), module([with_speedup(kernel("scale4"), 1.20)])
    assert kept_speedup(current_kernels(_loaded(a, b)).entries[0].kernel) == 1.20
    assert kept_speedup(current_kernels(_loaded(b, a)).entries[0].kernel) == 1.10
