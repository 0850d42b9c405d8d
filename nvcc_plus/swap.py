"""Hand one cicc-produced PTX file to the optimizer and put the result in its place.

The optimizer is ``superopt.optimize_ptx`` unless NVCC_PLUS_OPTIMIZER=module:function names
another function with the same signature (a developer and test hook). Whatever goes wrong
(import error, exception, timeout, a result that is not text, a result that drops or renames a
kernel) leaves nvcc's PTX in place and returns the reason as one line.
"""
from __future__ import annotations

import importlib
import math
import os
import re
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field


SOFT_SHARE = 0.8             # the optimizer's own deadline, as a share of NVCC_PLUS_TIMEOUT


class OptimizerTimeout(BaseException):
    """The hard limit fired. A BaseException on purpose: the optimizer contains each
    candidate's failures with ``except Exception``, which must not swallow the limit (it
    did once: NVCC_PLUS_TIMEOUT never fired)."""


@dataclass
class SwapResult:
    changed: bool = False
    original: bytes | None = None     # nvcc's PTX, kept to restore it
    error: str | None = None          # why nvcc's PTX was kept (one line)
    kernel: str | None = None         # the kernel the error is about, when known
    messages: list[str] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    record_paths: list[str] = field(default_factory=list)   # record files the optimizer wrote
    build_notes: list[str] = field(default_factory=list)    # lines said once per build (nvcc_plus.once)
    build_wide: bool = False          # the error is the build's, not this file's (a bad setting)


def resolve_optimizer(spec: str | None):
    if spec:
        mod, _, fn = spec.partition(":")
        if not mod or not fn:
            raise ValueError(f"NVCC_PLUS_OPTIMIZER={spec!r} is not module:function")
        return getattr(importlib.import_module(mod), fn)
    from superopt.api import optimize_ptx
    return optimize_ptx


def one_line(text: str, limit: int = 240) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def describe(exc: BaseException) -> str:
    if isinstance(exc, OptimizerTimeout):
        return str(exc)
    msg = one_line(str(exc))
    if is_setting_error(exc):
        # the user's configuration, not a crash: the message names the setting and its values
        return f"configuration error: {msg}"
    return f"optimizer raised {type(exc).__name__}" + (f": {msg}" if msg else "")


def is_setting_error(exc: BaseException) -> bool:
    """A value of a setting nvcc-plus does not accept (superopt.config.settings.SettingError):
    the same for every file of the build."""
    from superopt.config.settings import SettingError
    return isinstance(exc, SettingError)


# Names the host stub relies on: kernels, functions and module-scope variables (the stub
# registers kernels and __device__/__constant__ variables by name).
_DECL_RE = re.compile(r"^((?:\.(?:visible|extern|weak|common)\s+)*)\.(entry|func|global|const)\b(.*)$")
_IDENT_RE = re.compile(r"[A-Za-z_$%][\w$]*")


def interface(ptx: str) -> list[tuple[str, str, str]]:
    """(kind, name, linkage) of every module-scope kernel, function and variable."""
    out = []
    depth = 0
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        if depth == 0 and line:
            m = _DECL_RE.match(line)
            if m:
                linkage, kind, rest = " ".join(m.group(1).split()), m.group(2), m.group(3).strip()
                name = None
                if kind in ("entry", "func"):
                    if rest.startswith("("):          # .func (.param ...) name(
                        close = rest.find(")")
                        rest = rest[close + 1:].strip() if close >= 0 else ""
                    mm = _IDENT_RE.match(rest)
                    name = mm.group(0) if mm else None
                else:
                    head = re.split(r"[\[=;]", rest, maxsplit=1)[0]
                    idents = _IDENT_RE.findall(head)
                    name = idents[-1] if idents else None
                # Functions without linkage are private to the module: an optimizer may
                # inline them away.
                if name and (kind != "func" or linkage):
                    out.append((kind, name, linkage))
        depth += line.count("{") - line.count("}")
        depth = max(depth, 0)
    return sorted(set(out))


def _call_with_timeout(fn, timeout: float | None, *args, **kwargs):
    use_alarm = (timeout and timeout > 0 and hasattr(signal, "setitimer")
                 and threading.current_thread() is threading.main_thread())
    if not use_alarm:
        return fn(*args, **kwargs)

    def _on_alarm(signum, frame):
        raise OptimizerTimeout(f"optimizer timed out after {timeout:g} s")

    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def atomic_write(path: str, data: bytes) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".nvcc-plus-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        except OSError:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def swap_file(path: str, *, optimizer, mode: str, source: str | None, target: str | None,
              config: dict, timeout: float | None, deadline: float | None = None) -> SwapResult:
    res = SwapResult()
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        res.error = f"cannot read {path}: {exc.strerror}"
        return res
    res.original = data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        res.error = "PTX is not UTF-8 text"
        return res
    if timeout and timeout > 0:
        # The optimizer's own soft limit: it stops searching in time and keeps what it has
        # decided; the alarm above is the hard stop behind it.
        # (a fifth of the limit is left for the search in flight to finish and be applied)
        deadline = min(deadline or math.inf, time.time() + SOFT_SHARE * timeout)
    if deadline is not None:
        config = {**config, "deadline": deadline}
    stopped = None
    try:
        outcome = _call_with_timeout(optimizer, timeout, text, mode=mode, source=source,
                                     target=target, config=config)
    except (Exception, OptimizerTimeout) as exc:  # noqa: BLE001 - any failure of the optimizer is contained
        partial = getattr(exc, "outcome", None) if isinstance(exc, OptimizerTimeout) else None
        if partial is None or not isinstance(getattr(partial, "ptx", None), str):
            res.error = describe(exc)
            res.kernel = getattr(exc, "kernel", None)
            res.build_wide = is_setting_error(exc)
            return res
        # The hard limit stopped a search: the kernels decided before it were verified and
        # measured, so they are applied; the rest keep nvcc's code.
        outcome = partial
        stopped = describe(exc)
    new = getattr(outcome, "ptx", None)
    if not isinstance(new, str):
        res.error = f"optimizer returned {type(outcome).__name__} without PTX text"
        return res
    res.messages = [one_line(m) for m in (getattr(outcome, "messages", None) or [])
                    if not (stopped and m.startswith("interrupted in "))]
    if stopped:
        res.messages.insert(0, one_line(f"{stopped}; the kernels decided before it are used, the others keep "
                                        "nvcc's code"))
    res.records = list(getattr(outcome, "records", None) or [])
    res.build_notes = [one_line(m, 1000) for m in (getattr(outcome, "build_notes", None) or [])]
    res.record_paths = [str(p) for p in (getattr(outcome, "record_paths", None) or [])]
    if new == text:
        return res
    if interface(new) != interface(text):
        res.error = "rewritten PTX changes the kernels or visible symbols"
        res.messages = []
        mark_not_applied(res.record_paths, res.error + "; nvcc's own PTX was used")
        return res
    try:
        atomic_write(path, new.encode("utf-8"))
    except (OSError, UnicodeEncodeError) as exc:
        res.error = f"cannot write the rewritten PTX: {exc}"
        return res
    res.changed = True
    return res


def mark_not_applied(record_paths: list[str], reason: str) -> None:
    """Say in the optimizer's record files that the build did not use the rewrite: kernels
    the records call ``optimized`` become ``rolled-back`` with the reason, and the record
    gains ``"driver": {"applied": false, "reason": ...}``. A record that cannot be updated
    is left as it is (the user has already been told on stderr)."""
    import json
    for path in record_paths:
        try:
            with open(path, encoding="utf-8") as f:
                rec = json.load(f)
            rec["driver"] = {"applied": False, "reason": reason}
            for k in rec.get("kernels", []):
                if k.get("status") == "optimized":
                    k["status"] = "rolled-back"
                    k["reason"] = f"{reason} (the search had kept: {k.get('reason')})"
            atomic_write(path, (json.dumps(rec, indent=1)).encode("utf-8"))
        except (OSError, ValueError, AttributeError):
            continue


def restore(path: str, original: bytes) -> None:
    atomic_write(path, original)
