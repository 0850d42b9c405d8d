"""Kernels keyed by (source, target, kernel), the newest record of each winning.

A rebuild writes a new record file next to the old one (the file name carries a hash of the
record), and one source compiled for several ``-gencode`` targets gives one record per target.
Reports and ``compare``/``gate`` therefore never key on the mangled name alone: a kernel is
``(source, target, kernel)``, and when several records hold the same key the one with the
newest ``created`` stamp is the kernel's current state (records without a stamp count as
oldest; between equal stamps the one loaded last wins). The replaced ones are kept aside so
that a report can say what it left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath

from reports.load import LoadedRecord, winner_of


@dataclass(frozen=True, order=True)
class KernelKey:
    source: str
    target: str
    kernel: str

    @property
    def file_name(self) -> str:
        return PurePath(self.source).name if self.source != "-" else "-"

    def short(self) -> str:
        return f"{self.file_name} [{self.target}] {self.kernel}"


@dataclass
class KernelEntry:
    """One kernel's current state: its record entry, the module record it sits in, and where
    that record was read from."""
    key: KernelKey
    kernel: dict
    record: dict
    origin: str

    @property
    def created(self) -> str:
        return self.record.get("created") or ""


@dataclass
class Kernels:
    entries: list[KernelEntry] = field(default_factory=list)
    replaced: list[KernelEntry] = field(default_factory=list)   # older records of the same keys

    def __len__(self) -> int:
        return len(self.entries)

    def by_key(self) -> dict[KernelKey, KernelEntry]:
        return {e.key: e for e in self.entries}


def key_of(kernel: dict, record: dict) -> KernelKey:
    target = kernel.get("target") or record.get("target") or "-"
    return KernelKey(record.get("source") or "-", str(target), kernel["kernel"])


def current_kernels(loaded: list[LoadedRecord]) -> Kernels:
    """The newest entry for every (source, target, kernel) in ``loaded``, in first-seen order."""
    best: dict[KernelKey, KernelEntry] = {}
    order: list[KernelKey] = []
    replaced: list[KernelEntry] = []
    for item in loaded:
        for kernel in item.record.get("kernels", []):
            entry = KernelEntry(key_of(kernel, item.record), kernel, item.record, item.origin)
            old = best.get(entry.key)
            if old is None:
                order.append(entry.key)
                best[entry.key] = entry
            elif entry.created >= old.created:
                replaced.append(old)
                best[entry.key] = entry
            else:
                replaced.append(entry)
    return Kernels([best[k] for k in order], replaced)


def kept_speedup(kernel: dict) -> float | None:
    """The speedup over nvcc's code that the build keeps: the winner's for an optimized kernel,
    1.0 where nvcc's code is kept (or the driver rolled the rewrite back), None when unknown."""
    status = kernel.get("status")
    if status == "rolled-back":
        return 1.0
    win = winner_of(kernel)
    if win is not None and win.get("speedup"):
        return float(win["speedup"])
    if status == "kept-baseline":
        return 1.0
    return None


# Statuses under which the build runs a rewrite (the others run nvcc's code).
REWRITE_STATUSES = ("optimized", "locked", "cached")


def build_speedup(kernel: dict) -> float | None:
    """What the build runs for this kernel, as a speedup over nvcc's code: the kept rewrite's
    speedup, 1.0 wherever nvcc's code is what runs (kept, not verifiable, an optimizer error,
    rolled back, queued for later), None for a kept rewrite whose speedup the record lacks
    (a lock or cache entry without timings)."""
    if kernel.get("status") in REWRITE_STATUSES:
        return kept_speedup(kernel)
    return 1.0
