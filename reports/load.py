"""Reading and validating records (schema ``nvcc-plus/record``).

Every record read is validated against ``reports/schema.json`` (JSON Schema, draft 2020-12,
shipped with the package): a field of the wrong type is refused with the file and the field
named, e.g. ``r.json: kernels[0].candidates[2].speedup: 'fast' is not of type 'number', 'null'``.

Records come as single JSON files, folders of them (searched recursively: a build's records
directory may hold one folder per configuration) or ``.tar.gz``/``.tgz`` archives of such
folders (how ``bench/results/programs-records/`` keeps them). Each loaded record remembers
where it came from so that reports can name the file of every kernel.
"""
from __future__ import annotations

import json
import tarfile
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

SUPPORTED_VERSIONS = (1,)
ARCHIVE_SUFFIXES = (".tgz", ".tar.gz", ".tar")


class RecordError(ValueError):
    """A records file that cannot be used: unreadable, not JSON, or not a valid record. The
    message names the file (and the field)."""


@dataclass(frozen=True)
class LoadedRecord:
    """One module record and where it was read from (``path`` or ``archive:member``)."""
    origin: str
    record: dict


@lru_cache(maxsize=1)
def schema() -> dict:
    """The record format's JSON Schema (``reports/schema.json``)."""
    return json.loads(files("reports").joinpath("schema.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator():
    from jsonschema import Draft202012Validator
    return Draft202012Validator(schema())


def _field(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the record)"


def validate(record: dict, where: str = "record") -> dict:
    """``record`` if it is a record this version reads; else RecordError naming ``where`` and
    the first offending field."""
    if not isinstance(record, dict) or record.get("schema") != "nvcc-plus/record":
        got = record.get("schema") if isinstance(record, dict) else type(record).__name__
        raise RecordError(f"{where}: not an nvcc-plus record (schema {got!r})")
    if record.get("schema_version") not in SUPPORTED_VERSIONS:
        raise RecordError(f"{where}: record version {record.get('schema_version')} is not supported "
                          f"(this nvcc-plus reads {SUPPORTED_VERSIONS})")
    try:
        errors = sorted(_validator().iter_errors(record),
                        key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    except RecursionError:
        raise RecordError(f"{where}: nested too deeply to be a record") from None
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise RecordError(f"{where}: {_field(first.absolute_path)}: {first.message}{more}")
    return record


def _parse(text: bytes | str, where: str) -> dict:
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RecordError(f"{where}: not JSON ({exc})") from None
    except RecursionError:
        raise RecordError(f"{where}: not JSON (nested too deeply)") from None
    return validate(data, where)


def load_record(path: str | Path) -> dict:
    """One record file: a regular file (a FIFO or device is refused at once) of at most
    ``INPUT_LIMIT`` bytes (superopt.store.safe_files)."""
    from superopt.store.safe_files import INPUT_LIMIT, read_bytes
    path = Path(path)
    try:
        text = read_bytes(path, INPUT_LIMIT, follow=True)
    except OSError as exc:
        raise RecordError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return _parse(text, str(path))


def _is_archive(path: Path) -> bool:
    return path.name.endswith(ARCHIVE_SUFFIXES)


def _load_archive(path: Path) -> list[LoadedRecord]:
    from superopt.store.safe_files import INPUT_LIMIT, open_regular
    out = []
    try:
        fd = open_regular(path, follow=True)          # a FIFO named x.tar.gz is refused at once
    except OSError as exc:
        raise RecordError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        with open(fd, "rb") as raw, tarfile.open(fileobj=raw) as tar:
            for member in sorted(tar.getmembers(), key=lambda m: m.name):
                if not (member.isfile() and member.name.endswith(".json")):
                    continue
                where = f"{path}:{member.name}"
                if member.size > INPUT_LIMIT:
                    raise RecordError(f"{where}: {member.size} bytes, over the {INPUT_LIMIT >> 20} MiB "
                                      f"limit of a record")
                handle = tar.extractfile(member)
                out.append(LoadedRecord(where, _parse(handle.read() if handle else b"", where)))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise RecordError(f"{path}: not a readable archive of records ({exc})") from None
    return out


def load_record_files(paths) -> list[LoadedRecord]:
    """Every record under ``paths`` (files, folders searched recursively for ``*.json``,
    archives), in the order given and, within a folder or archive, by name."""
    out: list[LoadedRecord] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            for q in sorted(p.rglob("*")):
                if q.is_file() and q.name.endswith(".json"):
                    out.append(LoadedRecord(str(q), load_record(q)))
                elif q.is_file() and _is_archive(q):
                    out.extend(_load_archive(q))
        elif _is_archive(p):
            out.extend(_load_archive(p))
        else:
            out.append(LoadedRecord(str(p), load_record(p)))
    return out


def load_records(paths) -> list[dict]:
    """The records under ``paths`` (see :func:`load_record_files`), without their origins."""
    return [loaded.record for loaded in load_record_files(paths)]


def winner_of(kernel: dict) -> dict | None:
    return next((c for c in kernel.get("candidates", []) if c.get("fate") in ("winner", "estimate-winner")), None)
