"""``--plus-*`` flags: nvcc-plus's own options, removed before nvcc sees the command line.

--plus-mode=off|roundtrip|optimize, --plus-config=PATH, --plus-real-nvcc=PATH,
--plus-timeout=SECONDS, --plus-build-budget=SECONDS, --plus-report-dir=DIR,
--plus-progress=auto|on|off, --plus-verbose. ``--plus-KEY VALUE`` works too.
--plus-help and --plus-version answer and exit (nvcc is not run).
"""
from __future__ import annotations

PLUS_PREFIX = "--plus-"
PLUS_FLAGS_WITH_VALUE = {"mode", "config", "real-nvcc", "timeout", "report-dir", "build-budget",
                         "progress"}
PLUS_FLAGS_BOOL = {"verbose"}
PLUS_FLAGS_INFO = {"help", "version"}      # answered by nvcc-plus itself, then it exits


def split_plus_flags(argv: list[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """Remove ``--plus-*`` flags. Returns (argv for nvcc, {key: value}, problems)."""
    rest: list[str] = []
    found: dict[str, str] = {}
    problems: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith(PLUS_PREFIX):
            rest.append(tok)
            i += 1
            continue
        key, eq, val = tok[len(PLUS_PREFIX):].partition("=")
        if key in PLUS_FLAGS_WITH_VALUE:
            if not eq:
                if i + 1 < len(argv):
                    val = argv[i + 1]
                    i += 1
                else:
                    problems.append(f"{tok} needs a value; ignored")
                    i += 1
                    continue
            found[key] = val
        elif key in PLUS_FLAGS_BOOL or key in PLUS_FLAGS_INFO:
            found[key] = val if eq else "1"
        else:
            problems.append(f"unknown option {tok} ignored{_did_you_mean(key)}")
        i += 1
    return rest, found, problems


def _did_you_mean(key: str) -> str:
    """`` (did you mean --plus-mode?)`` for a mistyped flag (``--plus-mod=off``)."""
    import difflib
    known = sorted(PLUS_FLAGS_WITH_VALUE | PLUS_FLAGS_BOOL | PLUS_FLAGS_INFO)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not close:
        return " (nvcc-plus --plus-help lists its flags)"
    return f" (did you mean {PLUS_PREFIX}{close[0]}?)"
