"""A verified generation as a dataset row (``superopt dataset export``), and the record on disk.

A row: ``{"schema": "nvcc-plus/dataset", "task": "generate", ...}`` with the description,
the signature, the reference (kind, label, source), the launch specs, the verified PTX
(function text), the evidence (every verdict's policy, seed, input sets; the confirmation
on fresh inputs), ptxas resources, timing against a CUDA reference where a GPU measured it,
and ``messages``: the generation prompt with the verified kernel as the answer (a ready
chat example). Rows are saved to the dataset folder as soon as a generation is accepted
(``$NVCC_PLUS_DATASET_DIR`` or the cache's ``dataset/``), and ``dataset export`` also reads
generation records given as paths. Only accepted generations become rows.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

__all__ = ["row_from_record", "save_dataset_row", "write_record", "is_generation_record", "GENERATE_TASK"]

GENERATE_TASK = "generate"


def is_generation_record(doc) -> bool:
    from superopt.generate.loop import RECORD_SCHEMA
    return isinstance(doc, dict) and doc.get("schema") == RECORD_SCHEMA


def _evidence(v: dict) -> dict:
    ev = v.get("evidence") or {}
    return {"status": v.get("status"), "reason": v.get("reason"), "policy": v.get("policy"),
            "seed": ev.get("seed"), "sets": ev.get("sets"), "backend": ev.get("backend")}


def row_from_record(rec: dict) -> dict | None:
    """The dataset row of an accepted generation record (None for any other record)."""
    from superopt.model.dataset import DATASET_SCHEMA, DATASET_VERSION
    if not is_generation_record(rec) or rec.get("status") != "accepted":
        return None
    res = rec.get("result") or {}
    ptx = res.get("ptx")
    if not ptx:
        return None
    ref = rec.get("reference") or {}
    rid = hashlib.sha256((rec.get("description", "") + "\0" + (ref.get("source") or "") + "\0" + ptx)
                         .encode()).hexdigest()[:16]
    messages = None
    winner_round = next((rd for rd in rec.get("rounds", [])
                         if any(r.get("fate") == "accepted" for r in rd.get("responses", []))), None)
    if winner_round and winner_round.get("messages"):
        messages = list(winner_round["messages"]) + [{"role": "assistant", "content": ptx}]
    timing = res.get("timing") or {}
    return {
        "schema": DATASET_SCHEMA, "version": DATASET_VERSION, "task": GENERATE_TASK, "id": "gen-" + rid,
        "kernel": rec.get("kernel"), "description": rec.get("description"), "signature": rec.get("signature"),
        "target": rec.get("target"), "policy": (rec.get("judge") or {}).get("policy"),
        "reference": {"kind": ref.get("kind"), "label": ref.get("label"), "source": ref.get("source")},
        "specs": rec.get("specs"), "ptx": ptx, "header": rec.get("header"),
        "verification": {"checks": [_evidence(v) for v in res.get("verdicts") or []],
                         "confirmations": [_evidence(v) for v in res.get("confirmations") or []],
                         "backend": (rec.get("judge") or {}).get("backend")},
        "resources": res.get("resources"),
        "speedup": timing.get("speedup") if timing.get("status") == "ok" else None,
        "timing": timing if timing.get("status") == "ok" else None,
        "provenance": {"model": rec.get("model"), "round": res.get("what"), "created": rec.get("created")},
        **({"messages": messages} if messages else {}),
    }


def save_dataset_row(rec: dict, root: Path | None = None) -> Path | None:
    from superopt.model.dataset import dataset_dir
    from superopt.store.cache import atomic_write_text
    row = row_from_record(rec)
    if row is None:
        return None
    root = Path(root) if root else dataset_dir()
    path = root / f"{row['id']}.json"
    atomic_write_text(path, json.dumps(row, indent=1))
    return path


def write_record(rec: dict, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1, default=str))
    return path
