"""The one line a compilation prints when the optimizer searched (quiet otherwise, as nvcc is):

    nvcc-plus: k.cu: compute_90: searched 3 kernels in 41.2 s: kept 1 rewrite (saxpy 1.18x), 2 kept nvcc's code

Read from the module's records (reports/schema.json): a kernel was searched when its record
carries the search's ``seconds``; locked and cached decisions cost no search and say nothing.
With ``NVCC_PLUS_SEARCH=deferred`` a kernel whose record carries ``queued`` was queued for a
search after the build::

    nvcc-plus: k.cu: compute_90: queued 2 kernels for a search after the build (superopt cache wait waits for it)
"""
from __future__ import annotations


def _name(k: dict) -> str:
    sig = k.get("signature") or k.get("kernel") or "?"
    return sig.split("(")[0]


def _speedup(k: dict) -> float | None:
    for c in k.get("candidates", []):
        if c.get("id") == k.get("winner") and isinstance(c.get("speedup"), (int, float)):
            return float(c["speedup"])
    return None


def module_summary(records: list[dict], seconds: float) -> str | None:
    """The summary of one optimizer call, or None when nothing was searched."""
    kernels = [k for rec in records for k in rec.get("kernels", [])]
    searched = [k for k in kernels if "seconds" in k]
    queued = [k for k in kernels if k.get("queued")]
    if not searched:
        return _queued(queued)
    kept = [k for k in searched if k.get("status") == "optimized"]
    unverifiable = [k for k in searched if k.get("status") == "not-verifiable"
                    or str(k.get("reason") or "").startswith("not verifiable")]
    failed = [k for k in searched if k.get("status") == "error"]
    rest = len(searched) - len(kept) - len(unverifiable) - len(failed)
    plural = "s" if len(searched) != 1 else ""
    parts = []
    if kept:
        shown = []
        for k in kept[:3]:
            sp = _speedup(k)
            how = "estimate" if k.get("decision") == "estimate" else (f"{sp:.2f}x" if sp else "kept")
            shown.append(f"{_name(k)} {how}")
        more = ", ..." if len(kept) > 3 else ""
        parts.append(f"kept {len(kept)} rewrite{'s' if len(kept) != 1 else ''} ({', '.join(shown)}{more})")
    if rest:
        parts.append(f"{rest} kept nvcc's code")
    if unverifiable:
        parts.append(f"{len(unverifiable)} not verifiable (superopt optimize FILE shows the spec to add)")
    if failed:
        parts.append(f"{len(failed)} failed (nvcc's code kept)")
    line = f"searched {len(searched)} kernel{plural} in {seconds:.1f} s: " + ", ".join(parts)
    return line + (f"; {_queued(queued)}" if queued else "")


def _queued(queued: list[dict]) -> str | None:
    if not queued:
        return None
    n = len(queued)
    return (f"queued {n} kernel{'s' if n != 1 else ''} for a search after the build "
            f"(superopt cache wait waits for it)")
