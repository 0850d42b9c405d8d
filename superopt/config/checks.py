"""Values of settings that are read deep in the code, checked in one place before they are used.

``NVCC_PLUS_EMULATOR_MAX_MB``, ``NVCC_PLUS_EMULATOR_MAX_THREADS`` and
``NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS`` are read by the judge where a launch is sized, where a bad
value silently became the default (``abc``) or a cap of 1 (``0``, ``-5``: every launch refused);
``NVCC_PLUS_GPUS`` is parsed only once a GPU is looked for (never, on a machine without one);
``NVCC_PLUS_LOCK`` was compared with ``"write"`` (anything else meant "read only");
``NVCC_PLUS_PASSES`` names were filtered against the registry (an unknown name: no pass ran).
Each of those was accepted silently. :func:`check_settings` says which setting is wrong and
what it may be, as :class:`SettingError`; the optimizer, ``superopt verify``/``try``/``generate``
call it before they start, and ``superopt config`` lists :func:`setting_problems`.

The values come from the run's :class:`superopt.config.resolved.Settings` (flag > env > toml).
"""
from __future__ import annotations

import math
import re


from superopt.config.settings import SettingError  # noqa: F401 - the one class, re-exported


# The settings the judge reads (verify, try, generate need only these).
JUDGE_SETTINGS = ("NVCC_PLUS_EMULATOR_MAX_MB", "NVCC_PLUS_EMULATOR_MAX_THREADS",
                  "NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS", "NVCC_PLUS_GPUS")
LOCK_MODES = ("write",)
_GPU_ITEM = re.compile(r"\d+|(?:mig-)?(?:gpu-)?[0-9a-f][0-9a-f/-]*", re.I)


def _whole(name: str, minimum: int, what: str):
    def check(value: str) -> str | None:
        try:
            v = float(value)
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and v == int(v) and v >= minimum):
            return f"{name}={value!r}: must be a whole number >= {minimum} ({what})"
        return None
    return check


def _gpus(value: str) -> str | None:
    bad = [x.strip() for x in value.split(",") if x.strip() and not _GPU_ITEM.fullmatch(x.strip())]
    if bad:
        return (f"NVCC_PLUS_GPUS={value!r}: {', '.join(map(repr, bad))} is not a GPU: give comma-separated "
                f"ordinals (0,1), UUIDs or UUID prefixes (GPU-5f3c...), as nvidia-smi -L shows them")
    return None


def _lock(value: str) -> str | None:
    if value.strip() and value.strip() not in LOCK_MODES:
        from superopt.config.settings import did_you_mean
        return (f"NVCC_PLUS_LOCK={value!r}: the one value is write (record decisions into nvcc-plus.lock); "
                f"unset it to only read the lockfile" + did_you_mean(value, LOCK_MODES))
    return None


_CHECKS = {
    "NVCC_PLUS_EMULATOR_MAX_MB": _whole("NVCC_PLUS_EMULATOR_MAX_MB", 1, "megabytes of buffers per input set"),
    "NVCC_PLUS_EMULATOR_MAX_THREADS": _whole("NVCC_PLUS_EMULATOR_MAX_THREADS", 1, "threads per launch"),
    "NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS": _whole("NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS", 1,
                                               "float atomic adds logged per launch"),
    "NVCC_PLUS_GPUS": _gpus,
    "NVCC_PLUS_LOCK": _lock,
}


def setting_problems(settings=None, names=None) -> list[str]:
    """One line per setting of ``names`` (default: all checked here) whose value is wrong, naming
    the setting and the values it may have. ``settings``: the run's (default: the environment's;
    a dict is read as the optimizer's config)."""
    from superopt.config.resolved import Settings
    settings = Settings.from_config(settings)
    wanted = tuple(names) if names is not None else (*_CHECKS, "NVCC_PLUS_PASSES")
    out = []
    for name in wanted:
        if name == "NVCC_PLUS_PASSES":
            from superopt.search.rules import passes_problem     # the pass names live with the search
            problem = passes_problem(settings)
        elif settings.raw(name) is not None:
            problem = _CHECKS[name](str(settings.raw(name)))
        else:
            problem = None
        if problem:
            out.append(problem)
    return out


def check_settings(settings=None, names=None) -> None:
    """:class:`SettingError` naming every wrong setting (see :func:`setting_problems`)."""
    problems = setting_problems(settings, names)
    if problems:
        raise SettingError("; ".join(problems))
