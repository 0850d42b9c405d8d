"""``superopt dataset export``: every verified, measured-faster rewrite, as JSONL for fine-tuning.

Sources:

* **records** -- the JSON records the search writes (``superopt optimize --report DIR``,
  ``NVCC_PLUS_REPORT_DIR`` for builds): module records (``{"kernels": [...]}``) or single
  kernel records. A candidate counts when its fate is ``winner`` or ``faster`` (measured on
  a GPU, beyond noise), its verdict is ``accepted``, and the record carries the function
  texts (``baseline.ptx`` and the candidate's ``ptx``: the search writes them for the
  winner, the model proposer for every verified candidate).
* **the cache** -- ``$NVCC_PLUS_CACHE_DIR/dataset/*.json`` (or ``$NVCC_PLUS_DATASET_DIR``):
  the search with a model saves every measured win there as it happens, so builds feed
  the dataset without reports.

Each JSONL row: the kernel, target and policy; ``baseline_ptx`` and ``optimized_ptx``
(function texts); the provenance (rules with their plan, or the model with its prompt
hash and sample); the measured ``speedup`` and timing; the verification evidence (policy,
seed, input sets, reason); ptxas resources of both; and ``messages``, a ready chat
example (the rewrite-mode prompt and the winning function as the answer). Rows are
de-duplicated by (baseline, optimized) text. Estimates (no GPU) are never exported.

Verified generations (``superopt generate``) are rows too, with ``"task": "generate"``: the
description, the signature, the reference (kind, label, source), the launch specs, the verified
PTX (function text), the evidence (every verdict's policy, seed, input sets; the confirmation on
fresh inputs), ptxas resources, timing against a CUDA reference where a GPU measured it, and
``messages``: the generation prompt with the verified kernel as the answer. They are saved as
soon as a generation is accepted (:func:`save_generation_row`), and ``dataset export`` also reads
generation records given as paths; ``--no-generations`` leaves them out.

This module is the one home of dataset rows: from search records and from generation records.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Iterator

DATASET_SCHEMA = "nvcc-plus/dataset"
DATASET_VERSION = 1
WIN_FATES = ("winner", "faster")
GENERATION_SCHEMA = "nvcc-plus/generation"      # the record superopt generate writes
GENERATE_TASK = "generate"


def dataset_dir() -> Path:
    """Where searches save their measured wins: ``NVCC_PLUS_DATASET_DIR``, else
    ``dataset/`` in the cache directory."""
    from superopt.config.settings import env_value
    env = env_value("NVCC_PLUS_DATASET_DIR")
    if env:
        return Path(env)
    from superopt.store.cache import default_cache_dir
    return default_cache_dir() / "dataset"


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _verification(verdict: dict | None) -> dict:
    v = verdict or {}
    ev = v.get("evidence") or {}
    return {
        "status": v.get("status"),
        "reason": v.get("reason"),
        "policy": v.get("policy"),
        "seed": ev.get("seed"),
        "sets": ev.get("sets"),
        "backend": ev.get("backend"),
        "max_diff": ev.get("max_diff"),
    }


def _plan_without_text(plan: list) -> list:
    out = []
    for s in plan or []:
        params = dict(s.get("params") or {})
        if "function" in params:
            params["function"] = "<optimized_ptx>"
        out.append({"pass": s.get("pass"), "params": params})
    return out


def chat_example(baseline_fn_text: str, optimized_fn_text: str, target: str, resources: dict | None) -> list[dict] | None:
    """The rewrite-mode prompt for the baseline with the optimized function as the answer."""
    try:
        import ptx_ir
        from superopt.model.prompt import KernelContext, build_messages
        arch = target if target.startswith("sm_") else "sm_" + target.split("_", 1)[-1]
        module = ptx_ir.parse(f".version 9.0\n.target {arch}\n.address_size 64\n\n{baseline_fn_text}")
        fn = module.kernels[0]
        msgs = build_messages("rewrite", fn, KernelContext(target=target, resources=resources))
    except Exception:   # noqa: BLE001 - the chat form is optional
        return None
    return msgs + [{"role": "assistant", "content": optimized_fn_text}]


def rows_from_kernel_record(kr: dict, *, source: str | None = None, min_speedup: float = 1.0,
                            chat: bool = True) -> Iterator[dict]:
    base = (kr.get("baseline") or {})
    base_text = base.get("ptx")
    if not base_text:
        return
    for e in kr.get("candidates", []):
        if e.get("fate") not in WIN_FATES:
            continue
        verdict = e.get("verdict") or {}
        if verdict.get("status") != "accepted":
            continue
        speed = e.get("speedup")
        if not speed or speed <= min_speedup:
            continue
        opt_text = e.get("ptx")
        if not opt_text or opt_text == base_text:
            continue
        target = kr.get("target") or "?"
        row = {
            "schema": DATASET_SCHEMA,
            "version": DATASET_VERSION,
            "id": _h(base_text + "\0" + opt_text),
            "kernel": kr.get("kernel"),
            "signature": kr.get("signature"),
            "target": target,
            "policy": kr.get("policy") or verdict.get("policy"),
            "baseline_ptx": base_text,
            "optimized_ptx": opt_text,
            "provenance": e.get("provenance") or {},
            "plan": _plan_without_text(e.get("plan")),
            "speedup": speed,
            "timing": e.get("timing"),
            "verification": _verification(verdict),
            "resources": {"baseline": base.get("resources"), "optimized": e.get("resources")},
            "source": source,
        }
        if chat:
            msgs = chat_example(base_text, opt_text, target, base.get("resources"))
            if msgs:
                row["messages"] = msgs
        yield row


def kernel_records(doc) -> Iterator[dict]:
    """Kernel records in a JSON document: a module record, a kernel record, or a list of either."""
    if isinstance(doc, list):
        for d in doc:
            yield from kernel_records(d)
    elif isinstance(doc, dict):
        if isinstance(doc.get("kernels"), list):
            yield from (k for k in doc["kernels"] if isinstance(k, dict))
        elif "candidates" in doc and "kernel" in doc:
            yield doc
        elif doc.get("schema") == DATASET_SCHEMA:
            return


def iter_json_files(paths: Iterable) -> Iterator[Path]:
    for p in paths:
        p = Path(p)
        if p.is_dir():
            yield from sorted(x for x in p.rglob("*.json") if x.is_file())
        else:
            yield p           # named by the user: read (or counted unreadable), never skipped unsaid


def save_example(kernel_record: dict, *, target: str | None = None, root: Path | None = None) -> list[Path]:
    """Write each measured win of ``kernel_record`` to the cache's dataset folder."""
    from superopt.store.cache import atomic_write_text
    root = Path(root) if root else dataset_dir()
    written = []
    for row in rows_from_kernel_record(kernel_record, source="search", chat=False):
        row["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        path = root / f"{row['id']}.json"
        atomic_write_text(path, json.dumps(row, indent=1))
        written.append(path)
    return written


def collect(paths: Iterable = (), *, include_cache: bool = True, min_speedup: float = 1.0,
            chat: bool = True, generations: bool = True) -> tuple[list[dict], dict]:
    """Rows from record files under ``paths`` and (optionally) the cache; plus counts.
    ``generations``: also verified generations (``superopt generate``: ``task = "generate"``;
    verified, not necessarily faster, so ``min_speedup`` does not apply to them). A file that
    cannot be used (not a regular file, too large, not UTF-8 JSON, not shaped as a record) is
    counted as unreadable and skipped."""
    rows: dict[str, dict] = {}
    stats = {"files": 0, "unreadable": 0, "kernels": 0, "wins_without_text": 0, "rows": 0, "generations": 0,
             "unreadable_files": []}

    def unreadable(path, why: str) -> None:
        stats["unreadable"] += 1
        stats["unreadable_files"].append(f"{path}: {why}")

    for path in iter_json_files(paths):
        doc, why = _read_json(path, follow=True)
        if not isinstance(doc, (dict, list)):
            unreadable(path, why or "not a JSON object or list")
            continue
        stats["files"] += 1
        try:
            _collect_doc(doc, path, rows, stats, min_speedup=min_speedup, chat=chat, generations=generations)
        except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as exc:
            unreadable(path, f"not shaped as a record ({type(exc).__name__})")
    if include_cache:
        d = dataset_dir()
        for path in sorted(d.glob("*.json")) if d.is_dir() else []:
            row, why = _read_json(path, follow=False)
            if not isinstance(row, dict):
                unreadable(path, why or "not a JSON object")
                continue
            try:
                _collect_saved(row, path, rows, min_speedup=min_speedup, chat=chat, generations=generations)
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                unreadable(path, f"not shaped as a saved win ({type(exc).__name__})")
    out = sorted(rows.values(), key=lambda r: (str(r.get("kernel")), str(r.get("id"))))
    stats["rows"] = len(out)
    stats["generations"] = sum(1 for r in out if r.get("task") == GENERATE_TASK)
    return out, stats


# ---------------------------------------------------------------- generations

def is_generation_record(doc) -> bool:
    return isinstance(doc, dict) and doc.get("schema") == GENERATION_SCHEMA


def _evidence(v: dict) -> dict:
    ev = v.get("evidence") or {}
    return {"status": v.get("status"), "reason": v.get("reason"), "policy": v.get("policy"),
            "seed": ev.get("seed"), "sets": ev.get("sets"), "backend": ev.get("backend")}


def row_from_generation_record(rec: dict) -> dict | None:
    """The dataset row of an accepted generation record (None for any other record)."""
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


def save_generation_row(rec: dict, root: Path | None = None) -> Path | None:
    """Write the dataset row of an accepted generation to the dataset folder (None otherwise)."""
    from superopt.store.cache import atomic_write_text
    row = row_from_generation_record(rec)
    if row is None:
        return None
    root = Path(root) if root else dataset_dir()
    path = root / f"{row['id']}.json"
    atomic_write_text(path, json.dumps(row, indent=1))
    return path


def _read_json(path: Path, *, follow: bool) -> tuple[object, str | None]:
    """(the JSON document in ``path``, None), or (None, why) when it cannot be used: not a
    regular file (a FIFO, a device), over ``INPUT_LIMIT``, not UTF-8, not JSON, nested too deeply."""
    from superopt.store.safe_files import INPUT_LIMIT, loads_json, read_bytes
    try:
        return loads_json(read_bytes(path, INPUT_LIMIT, follow=follow)), None
    except OSError as exc:
        return None, exc.strerror or str(exc)
    except ValueError as exc:
        return None, f"not JSON ({' '.join(str(exc).split())[:120]})"


def _collect_doc(doc, path: Path, rows: dict, stats: dict, *, min_speedup: float, chat: bool,
                 generations: bool) -> None:
    """The rows of one record file into ``rows``."""
    if is_generation_record(doc):
        row = row_from_generation_record(doc) if generations else None
        if row is not None:
            rows.setdefault(row["id"], row)
        return
    if isinstance(doc, dict) and doc.get("schema") == DATASET_SCHEMA:
        if doc.get("task") == GENERATE_TASK and not generations:
            return
        rows.setdefault(doc.get("id") or _h(json.dumps(doc, sort_keys=True)), doc)
        return
    for kr in kernel_records(doc):
        stats["kernels"] += 1
        got = list(rows_from_kernel_record(kr, source=str(path), min_speedup=min_speedup, chat=chat))
        if not got and any(e.get("fate") in WIN_FATES for e in kr.get("candidates", [])) \
                and not (kr.get("baseline") or {}).get("ptx"):
            stats["wins_without_text"] += 1
        for r in got:
            rows.setdefault(r["id"], r)


def _collect_saved(row: dict, path: Path, rows: dict, *, min_speedup: float, chat: bool, generations: bool) -> None:
    """One win the searches saved in the cache's dataset folder into ``rows``."""
    if row.get("task") == GENERATE_TASK:
        if generations:
            rows.setdefault(row.get("id") or path.stem, row)
        return
    if (row.get("speedup") or 0) <= min_speedup:
        return
    if chat and "messages" not in row:
        msgs = chat_example(row["baseline_ptx"], row["optimized_ptx"], row.get("target") or "sm_90",
                            (row.get("resources") or {}).get("baseline"))
        if msgs:
            row["messages"] = msgs
    rows.setdefault(row.get("id") or path.stem, row)


def export(out_path: str | os.PathLike | None, paths: Iterable = (), **kw) -> dict:
    """Write the JSONL (``-`` or None: stdout); return the counts."""
    import sys
    rows, stats = collect(paths, **kw)
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    if out_path in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(out_path).parent.mkdir(parents=True, exist_ok=True)
        Path(out_path).write_text(text)
    return stats
