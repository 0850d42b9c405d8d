"""nvcc-plus settings: defaults < nvcc-plus.toml < environment < --plus-* flags.

Every setting, its variable, key and flag is listed once in :mod:`superopt.config.settings` (which
``nvcc-plus --plus-help`` prints). nvcc-plus.toml is named by ``NVCC_PLUS_CONFIG`` /
``--plus-config=PATH``, or discovered (:func:`find_config_file`): from the working directory
upwards, then from each CUDA source's folder upwards, never past the project root (the
folder holding ``.git``). The second walk is what makes a project's file count under CMake,
which compiles in the build directory::

    mode = "optimize"            # off | roundtrip | optimize
    budget = 30                  # search keys sit at the top level
    [driver]                     # (driver keys may also sit at the top level)
    real_nvcc = "/usr/local/cuda/bin/nvcc"   # honoured only from a named file
    timeout = 600
    [kernels."saxpy"]            # launch specs (superopt.specs)

The whole document is also handed to the optimizer (``config=``, with ``config_path``). A key
nothing reads is reported with the closest valid key.
"""
from __future__ import annotations

import math
import os

MODES = ("off", "roundtrip", "optimize")
DEFAULT_MODE = "optimize"
DEFAULT_TIMEOUT = 600.0
CONFIG_NAME = "nvcc-plus.toml"
PROGRESS = ("auto", "on", "off")


class Config:
    """The settings of one run (a plain class: dataclasses cost start-up time)."""

    def __init__(self) -> None:
        self.mode: str = DEFAULT_MODE
        self.real_nvcc: str | None = None
        self.timeout: float | None = DEFAULT_TIMEOUT
        self.build_budget: float | None = None     # seconds for the whole build (nvcc_plus.budget)
        self.verbose: bool = False
        self.report_dir: str | None = None
        self.progress: str = "auto"                # live progress on stderr: auto | on | off
        self.optimizer: str | None = None          # "module:function", developer/test hook
        self.config_path: str | None = None
        self.data: dict = {}                       # the whole nvcc-plus.toml
        self.problems: list[str] = []              # one line each, shown on stderr

    def optimizer_config(self) -> dict:
        out = dict(self.data)
        out["verbose"] = self.verbose      # as resolved (flag > environment > toml): lock/cache entries are announced
        if self.config_path:
            out.setdefault("config_path", self.config_path)
        return out


def find_config_file(start: str | None = None, source_dirs: list[str] | tuple = ()) -> str | None:
    """The nvcc-plus.toml of the project: from ``start`` (the working directory) up to the
    project root, then from each of ``source_dirs`` (the folders of the CUDA sources) up to
    theirs; never past a project root (see superopt.store.discovery)."""
    from superopt.store.locations import config_file
    return config_file(start, source_dirs, env={})[0]


def _truthy(v: object) -> bool:
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def _timeout(v: object, where: str, problems: list[str]) -> float | None | bool:
    try:
        t = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        t = math.nan
    if not math.isfinite(t) or t < 0:
        problems.append(f"{where}: timeout {v!r} is not a number of seconds >= 0 (0 = no limit); "
                        f"using the default {DEFAULT_TIMEOUT:g} s")
        return False
    return t if t > 0 else None


def _progress(v: object, where: str, problems: list[str], current: str) -> str:
    text = str(v).strip().lower()
    if isinstance(v, bool) or text in ("1", "true", "yes", "0", "false", "no"):
        return "on" if _truthy(v) else "off"
    if text in PROGRESS:
        return text
    from superopt.config.settings import did_you_mean
    problems.append(f"{where}: progress {v!r} is not one of {', '.join(PROGRESS)}{did_you_mean(text, PROGRESS)}; "
                    f"using {current}")
    return current


def load(plus: dict[str, str] | None = None, env: dict[str, str] | None = None,
         cwd: str | None = None, source_dirs: list[str] | tuple = ()) -> Config:
    """The driver's settings, each resolved by :func:`superopt.config.settings.resolve` (the one
    resolver: ``--plus-*`` flag > environment > nvcc-plus.toml > default), then checked here:
    a bad value is a problem line and the default, never a crash."""
    from superopt.config.settings import SETTINGS, resolve, toml_value, unknown_key_problems
    plus = plus or {}
    env = os.environ if env is None else env
    cfg = Config()

    named = plus.get("config") or env.get("NVCC_PLUS_CONFIG")
    path = named or find_config_file(cwd, source_dirs)
    doc: dict = {}
    if path:
        try:
            from superopt.store.safe_files import read_toml   # regular file, size cap, nesting
            data = read_toml(path)
        except (OSError, ValueError) as exc:
            cfg.problems.append(f"{path}: {' '.join(str(exc).split())}; ignoring it")
            data = {}
        else:
            cfg.config_path = os.path.abspath(path)
            cfg.problems += unknown_key_problems(data, cfg.config_path)
            doc = {**data, "config_path": cfg.config_path}
        cfg.data = data
        if not named and toml_value(data, "real_nvcc"):
            # A program to run is honoured only from a file the user named: a discovered
            # file may come from a folder someone else controls.
            cfg.problems.append(
                f"{path}: real_nvcc ignored in a discovered config file (name the file with "
                f"NVCC_PLUS_CONFIG or --plus-config=, or set NVCC_PLUS_REAL_NVCC)")
    base = os.path.dirname(os.path.abspath(path)) if path else ""
    flags = {s.toml: plus[s.flag] for s in SETTINGS if s.flag and s.toml and s.flag in plus}

    def get(name: str):
        """(value, where for messages, whether it came from the file)."""
        value, origin = resolve(name, config=doc, env=env, flags=flags)
        in_file = cfg.config_path is not None and origin == cfg.config_path
        where = origin.removeprefix("env ") if origin.startswith("env ") else \
            "--plus-" + origin[2:] if origin.startswith("--") else origin
        return value, where, in_file

    mode, mode_src, _ = get("NVCC_PLUS_MODE")
    if mode is not None:
        cfg.mode = str(mode).strip()
    real, _, in_file = get("NVCC_PLUS_REAL_NVCC")
    if real and not (in_file and not named):
        cfg.real_nvcc = os.path.join(base, os.path.expanduser(str(real))) if in_file else str(real)
    for name, attr, label in (("NVCC_PLUS_TIMEOUT", "timeout", ""), ("NVCC_PLUS_BUILD_BUDGET", "build_budget",
                                                                       ": build_budget")):
        value, where, in_file = get(name)
        if value is not None:
            t = _timeout(value, where + (label if in_file else ""), cfg.problems)
            if t is not False:
                setattr(cfg, attr, t)
    verbose, _, _ = get("NVCC_PLUS_VERBOSE")
    if verbose is not None:
        cfg.verbose = _truthy(verbose)
    progress, where, _ = get("NVCC_PLUS_PROGRESS")
    if progress is not None:
        cfg.progress = _progress(progress, where, cfg.problems, cfg.progress)
    report_dir, _, in_file = get("NVCC_PLUS_REPORT_DIR")          # or its alias NVCC_PLUS_RECORDS_DIR
    if report_dir:
        cfg.report_dir = os.path.join(base, os.path.expanduser(str(report_dir))) if in_file else str(report_dir)
    cfg.optimizer = get("NVCC_PLUS_OPTIMIZER")[0] or None

    cfg.mode = cfg.mode.lower()
    if cfg.mode not in MODES:
        from superopt.config.settings import did_you_mean
        cfg.problems.append(f"unknown mode {cfg.mode!r} from {mode_src} "
                            f"(expected {', '.join(MODES)}){did_you_mean(cfg.mode, MODES)}; running nvcc unchanged")
        cfg.mode = "off"
    return cfg
