"""A versioned candidate and captures of its kernel, for tests/search/test_fast_path.py and the
report tests: ``matvec_rows(A, x, tmp, n)`` of tests/passes/data/restrict_body.cu with nvcc's
restrict-compiled body behind the footprint analysis' own check (the restrict-body pass), and
captured launches whose buffers are disjoint or where ``tmp`` points into ``A``'s allocation."""
from __future__ import annotations

from ptx_ir.printer import emit_function
from superopt.search.candidates import Step, make_candidate
from tests.passes.data.ptx_tools import load

KERNEL = "_Z11matvec_rowsPKfS0_Pfi"
BASE = load("restrict_body.ptx")
RESTRICT = load("restrict_body.restrict.ptx")
N = 256
A, X, T = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000       # allocation addresses at the launch


def candidate():
    """The restrict-body candidate of matvec_rows (its check from the footprint analysis)."""
    cand = make_candidate(BASE, KERNEL, [Step("restrict-body", {"restrict": emit_function(RESTRICT.function(KERNEL))})])
    assert cand is not None and cand.fast_paths, "restrict-body did not version matvec_rows"
    return cand


def _ptr(value: int, extent: int, offset: int = 0, alias: int | None = None, size: int = 8, at: int = 0) -> dict:
    return {"offset": at, "size": size, "bytes": value.to_bytes(8, "little").hex(),
            "pointer": {"extent": extent, "offset": offset, "alias": alias}}


def shape(*, tmp: str = "own", n: int = N, count: int = 3, ms: float = 1.0, grid=(2, 1, 1), block=(128, 1, 1),
          tmp_extent: int | None = None) -> dict:
    """One captured shape. ``tmp``: "own" (an allocation of its own, n floats), "in-A" (1 KiB into
    A's allocation: overlaps A), "after-A" (A's allocation, just past A's n*n floats: disjoint)."""
    a = _ptr(A, 4 * n * n, at=0)
    x = _ptr(X, 4 * n, at=8)
    if tmp == "own":
        t = _ptr(T, tmp_extent if tmp_extent is not None else 4 * n, at=16)
    elif tmp == "in-A":
        t = _ptr(A + 1024, 4 * n * n, offset=1024, alias=0, at=16)
    elif tmp == "after-A":
        a = _ptr(A, 4 * n * n + 4 * n, at=0)
        t = _ptr(A + 4 * n * n, 4 * n * n + 4 * n, offset=4 * n * n, alias=0, at=16)
    else:
        raise ValueError(tmp)
    scalar = {"offset": 24, "size": 4, "bytes": n.to_bytes(4, "little").hex(), "pointer": None}
    return {"grid": list(grid), "block": list(block), "shared_bytes": 0, "count": count, "timed": count,
            "total_ms": ms, "params": [a, x, t, scalar], "snapshot": None}


def kernel_capture(*shapes, untracked: tuple[int, float] | None = None) -> dict:
    """The kernel's entry of an aggregated capture holding ``shapes``."""
    k = {"launches": sum(s["count"] for s in shapes), "total_ms": sum(s["total_ms"] for s in shapes),
         "shapes": list(shapes)}
    if untracked:
        k["untracked"] = {"launches": untracked[0], "ms": untracked[1]}
        k["total_ms"] += untracked[1]
    return k


def capture(*shapes) -> dict:
    """A whole aggregated capture (superopt.specs.capture.format) of matvec_rows."""
    return {"format": "nvcc-plus-capture", "version": 1, "program": ["./app"], "cwd": "/", "date": "2026-01-01",
            "gpu": "NVIDIA H200", "exit_code": 0, "total_ms": sum(s["total_ms"] for s in shapes), "errors": [],
            "kernels": {KERNEL: kernel_capture(*shapes)}}
