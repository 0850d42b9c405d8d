"""Stand-ins for superopt.optimize_ptx, selected by NVCC_PLUS_OPTIMIZER=fake_optimizers:<name>.

The driver imports them through the documented hook; the tests put this folder on PYTHONPATH.
NVCC_PLUS_TEST_LOG, when set, names a file that every call appends "<source> <target>" to.
"""
from __future__ import annotations

import os
import time

from superopt.api import OptimizeOutcome


def _log(source, target):
    path = os.environ.get("NVCC_PLUS_TEST_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{source} {target}\n")


def identity(ptx, *, mode="optimize", source=None, target=None, config=None):
    _log(source, target)
    return OptimizeOutcome(ptx=ptx, changed=False)


def marker(ptx, *, mode="optimize", source=None, target=None, config=None):
    """A harmless rewrite: a comment line at the end."""
    _log(source, target)
    return OptimizeOutcome(ptx=ptx + "\n// rewritten by nvcc-plus test marker\n", changed=True)


def round_to_zero(ptx, *, mode="optimize", source=None, target=None, config=None):
    """A rewrite that changes the machine code: round-to-nearest float ops round toward zero."""
    _log(source, target)
    return OptimizeOutcome(ptx=ptx.replace(".rn.f32", ".rz.f32"), changed=True)


def crash(ptx, *, mode="optimize", source=None, target=None, config=None):
    _log(source, target)
    raise RuntimeError("deliberate optimizer crash")


def garbage(ptx, *, mode="optimize", source=None, target=None, config=None):
    """PTX that ptxas rejects (an instruction that does not exist), kernels kept."""
    _log(source, target)
    return OptimizeOutcome(ptx=ptx.replace("ret;", "frobnicate.u32 %r1, %r1;\n\tret;"), changed=True)


def rename_kernel(ptx, *, mode="optimize", source=None, target=None, config=None):
    _log(source, target)
    return OptimizeOutcome(ptx=ptx.replace("_Z1kPf", "_Z1kPf_renamed"), changed=True)


def slow(ptx, *, mode="optimize", source=None, target=None, config=None):
    _log(source, target)
    time.sleep(30)
    return OptimizeOutcome(ptx=ptx, changed=False)


def swallowing(ptx, *, mode="optimize", source=None, target=None, config=None):
    """Contains every failure per candidate, as the search does: the limit must still fire."""
    _log(source, target)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            time.sleep(0.01)
        except Exception:  # noqa: BLE001 - the pattern that once swallowed the timeout
            continue
    return OptimizeOutcome(ptx=ptx, changed=False)


def deadline_reporter(ptx, *, mode="optimize", source=None, target=None, config=None):
    """Says how many seconds the driver's soft deadline leaves (config['deadline']) and
    spends ``NVCC_PLUS_TEST_SPEND`` seconds, as a search would."""
    _log(source, target)
    left = (config or {}).get("deadline")
    msg = "no deadline" if left is None else f"deadline in {max(0.0, left - time.time()):.0f} s"
    time.sleep(float(os.environ.get("NVCC_PLUS_TEST_SPEND", "0")))
    return OptimizeOutcome(ptx=ptx, changed=False, messages=[msg])


def chatty(ptx, *, mode="optimize", source=None, target=None, config=None):
    """Messages for the user, and a record where superopt writes its own (NVCC_PLUS_REPORT_DIR)."""
    _log(source, target)
    folder = os.environ.get("NVCC_PLUS_REPORT_DIR")
    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{os.path.basename(source)}.{target}.json"), "w") as f:
            f.write('{"kernel": "k"}\n')
    return OptimizeOutcome(ptx=ptx, changed=False, messages=["kernel k: nothing to do"],
                           records=[{"kernel": "k", "target": target}])


def not_text(ptx, *, mode="optimize", source=None, target=None, config=None):
    return 42


def _optimized_record(source, target) -> list[str]:
    """Write a record that says the kernel was optimized, as superopt would (when asked to)."""
    import json
    folder = os.environ.get("NVCC_PLUS_REPORT_DIR")
    if not folder:
        return []
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{os.path.basename(source)}.{target}.json")
    rec = {"schema": "nvcc-plus/record", "schema_version": 1, "target": target,
           "kernels": [{"kernel": "k", "status": "optimized", "reason": "test-pass: 1.500x, verified",
                        "candidates": []}]}
    with open(path, "w") as f:
        json.dump(rec, f)
    return [path]


def garbage_with_record(ptx, *, mode="optimize", source=None, target=None, config=None):
    """Like garbage, after writing a record that calls the kernel optimized."""
    out = garbage(ptx, mode=mode, source=source, target=target, config=config)
    out.record_paths = _optimized_record(source, target)
    return out


def rename_kernel_with_record(ptx, *, mode="optimize", source=None, target=None, config=None):
    out = rename_kernel(ptx, mode=mode, source=source, target=target, config=config)
    out.record_paths = _optimized_record(source, target)
    return out


def searcher(ptx, *, mode="optimize", source=None, target=None, config=None):
    """A search of two kernels as superopt reports one: records with the search's seconds
    (one kernel kept a 1.25x rewrite, one kept nvcc's code), progress told to
    ``config["progress"]`` as the search goes."""
    _log(source, target)
    progress = (config or {}).get("progress")
    kernels = []
    for i, (name, status) in enumerate((("saxpy", "optimized"), ("scale", "kept-baseline")), 1):
        if progress is not None:
            progress.kernel_started(f"{name}(float*)", i, 2, 30.0)
        rec = {"kernel": name, "signature": f"{name}(float*)", "status": status, "seconds": 0.01,
               "candidates": [{"id": "c1", "fate": "winner" if status == "optimized" else "not-faster",
                               "speedup": 1.25}],
               "winner": "c1" if status == "optimized" else None,
               "decision": "measured" if status == "optimized" else None}
        kernels.append(rec)
        if progress is not None:
            progress.kernel_finished(f"{name}(float*)", status, 0.01)
    return OptimizeOutcome(ptx=ptx, changed=False, records=[{"target": target, "kernels": kernels}])


def restrict_probe(ptx, *, mode="optimize", source=None, target=None, config=None):
    """Asks for the restrict-compiled variant (config['restrict_variant']) twice and writes what
    it got to ``NVCC_PLUS_TEST_RESTRICT.<target>`` ("None" when there was none)."""
    _log(source, target)
    variant = (config or {}).get("restrict_variant")
    first = variant() if variant is not None else None
    again = variant() if variant is not None else None
    out = os.environ.get("NVCC_PLUS_TEST_RESTRICT")
    if out:
        with open(f"{out}.{target}", "w") as f:
            f.write("None" if first is None else first)
            if again is not first:
                f.write("\n// NOT MEMOIZED\n")
    return OptimizeOutcome(ptx=ptx, changed=False)
