"""The capture file: raw JSON lines from the injection library -> aggregated capture.

Raw lines (one JSON object per line, appended by ``inject.c``): ``{"t": "init"|"launch"|
"time"|"snapshot_after"|"error"|"note", "pid": P, ...}``. Launch lines and time lines are
joined on ``(pid, corr)`` (CUPTI's correlation id of the launch call).

The aggregated file (``nvcc-plus.capture.json``)::

    {"format": "nvcc-plus-capture", "version": 1,
     "program": [argv...], "cwd": "...", "date": "ISO-8601", "gpu": "NVIDIA H200" | null,
     "exit_code": 0, "total_ms": T, "errors": [{"message": ..., "count": n}],
     "kernels": {MANGLED: {
         "launches": N, "total_ms": T,          # T includes untracked time (below)
         "untracked": {"launches": n, "ms": t} | absent,   # timed executions with no launch
                                                            # callback (CUDA graph replays)
         "shapes": [{                            # sorted by total_ms, then count, descending
             "grid": [x, y, z], "block": [x, y, z], "shared_bytes": n,
             "count": c, "timed": c2, "total_ms": t,
             "params": [{"offset": o, "size": s, "bytes": "hex" | null,
                         "pointer": null | {"extent": bytes, "offset": bytes,
                                             "alias": j | null},
                         "inner": [{"at": byte offset in the struct, "extent", "offset",
                                    "alias"}]   (only for a struct by value with pointer fields)}],
             "snapshot": null | {"before": [{"param": i, "bytes": n, "path": p}],
                                 "after": [...], "ok": bool} | {"skipped": "reason"}}]}}}

A shape is identified by grid, block, shared bytes, the bytes of every non-pointer parameter,
and for pointer parameters the allocation's extent, the pointer's offset in it and which
earlier parameter (if any) points into the same allocation. Pointer values themselves differ
between runs and launches and do not split shapes (``bytes`` keeps the first launch's value).
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

__all__ = ["FORMAT", "VERSION", "CaptureError", "read_raw", "aggregate", "load_capture",
           "write_capture", "validate_capture", "kernel_share", "minor_kernels", "is_minor",
           "MINOR_SHARE"]

FORMAT = "nvcc-plus-capture"
VERSION = 1
MINOR_SHARE = 0.01


class CaptureError(ValueError):
    """A capture that cannot be made, read or used."""


# --------------------------------------------------------------------------- raw lines

def read_raw(source: str | os.PathLike | Iterable[str]) -> list[dict]:
    """Parse raw JSON lines (a path or an iterable of lines). A torn or garbled line (a
    program killed mid-write) becomes an ``error`` record instead of failing the parse."""
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(source, "r", encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
    else:
        lines = list(source)
    out = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            out.append({"t": "error", "where": "parse", "message": f"raw line {n}: {e.msg}"})
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


# --------------------------------------------------------------------------- aggregation

def _dim3(v) -> list[int]:
    v = [int(x) for x in (v or [])][:3]
    return v + [1] * (3 - len(v))


def _param_key(params: list[dict]) -> tuple:
    """Per launch: the shape-relevant view of the params and the aggregated param dicts."""
    key, shaped = [], []
    bases: list = []
    for i, p in enumerate(params):
        off, size, hexb = int(p.get("offset", 0)), int(p.get("size", 0)), p.get("bytes")
        alloc = p.get("alloc")
        if alloc and hexb:
            base, extent = int(alloc[0]), int(alloc[1])
            value = int.from_bytes(bytes.fromhex(hexb), "little")
            alias = next((j for j, b in enumerate(bases) if b == base), None)
            bases.append(base)
            ptr = {"extent": extent, "offset": value - base, "alias": alias}
            key.append((off, size, "ptr", extent, value - base, alias))
        else:
            bases.append(None)
            ptr = None
        inner = []
        if not alloc and hexb and p.get("inner"):
            raw = bytearray(bytes.fromhex(hexb))
            for at, base, extent in p["inner"]:
                at, base, extent = int(at), int(base), int(extent)
                value = int.from_bytes(raw[at:at + 8], "little")
                inner.append({"at": at, "extent": extent, "offset": value - base,
                              "alias": next((j for j, b in enumerate(bases) if b == base), None)})
                raw[at:at + 8] = bytes(8)          # the shape sees allocations, not addresses
            key.append((off, size, raw.hex(), tuple((d["at"], d["extent"], d["offset"]) for d in inner)))
        elif not alloc:
            key.append((off, size, hexb))
        d = {"offset": off, "size": size, "bytes": hexb, "pointer": ptr}
        if inner:
            d["inner"] = inner
        shaped.append(d)
    return tuple(key), shaped


def aggregate(raw: list[dict], *, program: list[str] | None = None, cwd: str | None = None,
              date: str | None = None, exit_code: int | None = None) -> dict:
    """The aggregated capture (see the module doc) of parsed raw records."""
    times: dict[tuple, tuple[float, str]] = {}
    after: dict[tuple, dict] = {}
    gpu = None
    errors: dict[str, int] = defaultdict(int)
    for r in raw:
        t = r.get("t")
        if t == "time":
            try:
                ms = (int(r["end"]) - int(r["start"])) / 1e6
            except (KeyError, TypeError, ValueError):
                continue
            times[(r.get("pid"), r.get("corr"))] = (max(ms, 0.0), r.get("kernel"))
        elif t == "snapshot_after":
            after[(r.get("pid"), r.get("corr"))] = r
        elif t == "init" and r.get("gpu") and not gpu:
            gpu = r["gpu"]
        elif t == "error":
            where = r.get("where")
            errors[f"{where}: {r.get('message')}" if where else str(r.get("message"))] += 1

    kernels: dict[str, dict] = {}
    shapes: dict[str, dict[tuple, dict]] = {}
    matched: set = set()
    for r in raw:
        if r.get("t") != "launch":
            continue
        name = str(r.get("kernel") or "?")
        grid, block, shared = _dim3(r.get("grid")), _dim3(r.get("block")), int(r.get("shared") or 0)
        pkey, params = _param_key(r.get("params") or [])
        key = (tuple(grid), tuple(block), shared, pkey)
        k = kernels.setdefault(name, {"launches": 0, "total_ms": 0.0, "shapes": []})
        k["launches"] += 1
        s = shapes.setdefault(name, {}).get(key)
        if s is None:
            s = {"grid": grid, "block": block, "shared_bytes": shared, "count": 0, "timed": 0,
                 "total_ms": 0.0, "params": params, "snapshot": None}
            shapes[name][key] = s
            k["shapes"].append(s)
        s["count"] += 1
        ck = (r.get("pid"), r.get("corr"))
        if ck in times:
            ms = times[ck][0]
            matched.add(ck)
            s["timed"] += 1
            s["total_ms"] += ms
            k["total_ms"] += ms
        snap = r.get("snapshot")
        if snap and s["snapshot"] is None:
            if "skipped" in snap:
                s["snapshot"] = {"skipped": str(snap["skipped"])}
            else:
                a = after.get(ck)
                s["snapshot"] = {"before": list(snap.get("before") or []),
                                 "after": list(a.get("after") or []) if a else [],
                                 "ok": bool(snap.get("ok")) and bool(a and a.get("ok"))}
    # timed executions without a launch callback (graph replays, launches before injection)
    for ck, (ms, name) in times.items():
        if ck in matched or not name:
            continue
        k = kernels.setdefault(name, {"launches": 0, "total_ms": 0.0, "shapes": []})
        u = k.setdefault("untracked", {"launches": 0, "ms": 0.0})
        u["launches"] += 1
        u["ms"] += ms
        k["total_ms"] += ms
    for k in kernels.values():
        k["shapes"].sort(key=lambda s: (-s["total_ms"], -s["count"]))
        k["total_ms"] = round(k["total_ms"], 6)
        for s in k["shapes"]:
            s["total_ms"] = round(s["total_ms"], 6)
        if "untracked" in k:
            k["untracked"]["ms"] = round(k["untracked"]["ms"], 6)
    order = sorted(kernels, key=lambda n: (-kernels[n]["total_ms"], -kernels[n]["launches"], n))
    return {
        "format": FORMAT, "version": VERSION,
        "program": list(program or []), "cwd": cwd if cwd is not None else os.getcwd(),
        "date": date or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "gpu": gpu, "exit_code": exit_code,
        "total_ms": round(sum(k["total_ms"] for k in kernels.values()), 6),
        "errors": [{"message": m, "count": c} for m, c in errors.items()],
        "kernels": {n: kernels[n] for n in order},
    }


# --------------------------------------------------------------------------- files

def write_capture(capture: dict, path: str | os.PathLike) -> None:
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(capture, indent=1) + "\n")
    os.replace(tmp, p)


def _need(cond: bool, where: str, what: str):
    if not cond:
        raise CaptureError(f"{where}: {what}")


def validate_capture(doc, where: str = "capture") -> dict:
    """Check the structure of an aggregated capture; CaptureError(where: what) otherwise."""
    _need(isinstance(doc, dict), where, f"not a capture (a JSON object expected, found {type(doc).__name__})")
    _need(doc.get("format") == FORMAT, where,
          f"not an nvcc-plus capture (format is {doc.get('format')!r}, expected {FORMAT!r})")
    v = doc.get("version")
    _need(isinstance(v, int), where, f"version {v!r} is not an integer")
    _need(v <= VERSION, where, f"capture version {v} is newer than this nvcc-plus reads ({VERSION}); upgrade nvcc-plus")
    ks = doc.get("kernels")
    _need(isinstance(ks, dict), where, "'kernels' missing or not an object")
    for name, k in ks.items():
        kw = f"{where}: kernel {name}"
        _need(isinstance(k, dict), kw, "not an object")
        for f in ("launches", "total_ms", "shapes"):
            _need(f in k, kw, f"missing {f!r}")
        _need(isinstance(k["launches"], int) and k["launches"] >= 0, kw, f"launches {k['launches']!r} is not a count")
        _need(isinstance(k["total_ms"], (int, float)) and k["total_ms"] >= 0, kw, f"total_ms {k['total_ms']!r} is not a time")
        _need(isinstance(k["shapes"], list), kw, "'shapes' is not a list")
        for i, s in enumerate(k["shapes"]):
            sw = f"{kw}: shape {i}"
            _need(isinstance(s, dict), sw, "not an object")
            for f in ("grid", "block"):
                d = s.get(f)
                _need(isinstance(d, list) and len(d) == 3 and all(isinstance(x, int) and x >= 1 for x in d),
                      sw, f"{f} {d!r} is not three positive integers")
            _need(isinstance(s.get("shared_bytes", 0), int), sw, "shared_bytes is not an integer")
            _need(isinstance(s.get("count"), int), sw, "count missing or not an integer")
            _need(isinstance(s.get("total_ms", 0), (int, float)), sw, "total_ms is not a number")
            ps = s.get("params")
            _need(isinstance(ps, list), sw, "'params' missing or not a list")
            for j, p in enumerate(ps):
                pw = f"{sw}: param {j}"
                _need(isinstance(p, dict), pw, "not an object")
                _need(isinstance(p.get("offset"), int) and isinstance(p.get("size"), int), pw, "offset/size missing")
                b = p.get("bytes")
                if b is not None:
                    _need(isinstance(b, str) and len(b) == 2 * p["size"], pw,
                          f"bytes {str(b)[:20]!r} is not {p['size']} bytes of hex")
                    try:
                        bytes.fromhex(b)
                    except ValueError:
                        raise CaptureError(f"{pw}: bytes {b[:20]!r} is not hex") from None
                ptr = p.get("pointer")
                if ptr is not None:
                    _need(isinstance(ptr, dict) and isinstance(ptr.get("extent"), int)
                          and isinstance(ptr.get("offset"), int), pw, "pointer needs integer extent and offset")
                inner = p.get("inner", [])
                _need(isinstance(inner, list), pw, "'inner' is not a list")
                for q in inner:
                    _need(isinstance(q, dict) and all(isinstance(q.get(k), int) for k in ("at", "extent", "offset"))
                          and 0 <= q["at"] and q["at"] + 8 <= p["size"], pw,
                          "an inner pointer needs integer at/extent/offset inside the parameter")
    return doc


def load_capture(path: str | os.PathLike) -> dict:
    """Read and validate an aggregated capture file; CaptureError naming the file otherwise.
    Every build with NVCC_PLUS_CAPTURE reads it: a FIFO or device there is refused at once, and
    at most INPUT_LIMIT bytes are read (superopt.store.safe_files)."""
    from superopt.store.safe_files import INPUT_LIMIT, read_text
    p = Path(path)
    try:
        text = read_text(p, INPUT_LIMIT, follow=True)
    except FileNotFoundError:
        raise CaptureError(f"{p}: no such capture file (make one with: superopt capture -o {p} -- ./app args)") from None
    except OSError as e:
        raise CaptureError(f"{p}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise CaptureError(f"{p}: not UTF-8 text (byte {e.start})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CaptureError(f"{p}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise CaptureError(f"{p}: not JSON (nested too deeply)") from None
    return validate_capture(doc, str(p))


# --------------------------------------------------------------------------- shares

def kernel_share(capture: dict) -> dict[str, float]:
    """Each kernel's fraction of the program's total GPU kernel time (0..1). Without any
    timing (timing disabled or unavailable) the fraction of launches stands in."""
    ks = capture.get("kernels") or {}
    total = sum(float(k.get("total_ms") or 0) for k in ks.values())
    if total > 0:
        return {n: float(k.get("total_ms") or 0) / total for n, k in ks.items()}
    launches = sum(int(k.get("launches") or 0) for k in ks.values())
    if launches > 0:
        return {n: int(k.get("launches") or 0) / launches for n, k in ks.items()}
    return {n: 0.0 for n in ks}


def is_minor(capture: dict, kernel: str, threshold: float = MINOR_SHARE) -> bool | None:
    """True when the capture shows ``kernel`` (mangled name) under ``threshold`` of GPU time
    (the optimizer skips those by default); False when above; None when not in the capture
    (never launched in the captured run: the capture says nothing about it)."""
    share = kernel_share(capture)
    if kernel not in share:
        return None
    return share[kernel] < threshold


def minor_kernels(capture: dict, threshold: float = MINOR_SHARE) -> list[str]:
    """The captured kernels under ``threshold`` of the program's GPU time."""
    return [n for n, s in kernel_share(capture).items() if s < threshold]
