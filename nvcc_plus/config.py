"""nvcc-plus settings: defaults < nvcc-plus.toml < environment < --plus-* flags.

Every setting, its variable, key and flag is listed once in :mod:`superopt.settings` (which
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
    problems.append(f"{where}: progress {v!r} is not one of {', '.join(PROGRESS)}; using {current}")
    return current


def load(plus: dict[str, str] | None = None, env: dict[str, str] | None = None,
         cwd: str | None = None, source_dirs: list[str] | tuple = ()) -> Config:
    from superopt.settings import DRIVER_TOML_KEYS, unknown_key_problems
    plus = plus or {}
    env = os.environ if env is None else env
    cfg = Config()
    mode_src = "default"

    named = plus.get("config") or env.get("NVCC_PLUS_CONFIG")
    path = named or find_config_file(cwd, source_dirs)
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
        base = os.path.dirname(os.path.abspath(path))
        cfg.data = data
        # Driver keys may sit at the top level or in a [driver] table (which wins).
        drv = {k: data[k] for k in (*DRIVER_TOML_KEYS, "records_dir") if k in data}
        if isinstance(data.get("driver"), dict):
            drv.update(data["driver"])
        if "mode" in drv:
            cfg.mode, mode_src = str(drv["mode"]), path
        if drv.get("real_nvcc"):
            # A program to run is honoured only from a file the user named: a discovered
            # file may come from a folder someone else controls.
            if named:
                cfg.real_nvcc = os.path.join(base, os.path.expanduser(str(drv["real_nvcc"])))
            else:
                cfg.problems.append(
                    f"{path}: real_nvcc ignored in a discovered config file (name the file with "
                    f"NVCC_PLUS_CONFIG or --plus-config=, or set NVCC_PLUS_REAL_NVCC)")
        if "timeout" in drv:
            t = _timeout(drv["timeout"], path, cfg.problems)
            if t is not False:
                cfg.timeout = t
        if "build_budget" in drv:
            t = _timeout(drv["build_budget"], f"{path}: build_budget", cfg.problems)
            if t is not False:
                cfg.build_budget = t
        if "verbose" in drv:
            cfg.verbose = _truthy(drv["verbose"])
        if "progress" in drv:
            cfg.progress = _progress(drv["progress"], path, cfg.problems, cfg.progress)
        rd = drv.get("report_dir") or drv.get("records_dir")
        if rd:
            cfg.report_dir = os.path.join(base, os.path.expanduser(str(rd)))

    if env.get("NVCC_PLUS_MODE"):
        cfg.mode, mode_src = env["NVCC_PLUS_MODE"].strip(), "NVCC_PLUS_MODE"
    if env.get("NVCC_PLUS_REAL_NVCC"):
        cfg.real_nvcc = env["NVCC_PLUS_REAL_NVCC"]
    if env.get("NVCC_PLUS_TIMEOUT"):
        t = _timeout(env["NVCC_PLUS_TIMEOUT"], "NVCC_PLUS_TIMEOUT", cfg.problems)
        if t is not False:
            cfg.timeout = t
    if env.get("NVCC_PLUS_BUILD_BUDGET"):
        t = _timeout(env["NVCC_PLUS_BUILD_BUDGET"], "NVCC_PLUS_BUILD_BUDGET", cfg.problems)
        if t is not False:
            cfg.build_budget = t
    if env.get("NVCC_PLUS_VERBOSE"):
        cfg.verbose = _truthy(env["NVCC_PLUS_VERBOSE"])
    if env.get("NVCC_PLUS_REPORT_DIR") or env.get("NVCC_PLUS_RECORDS_DIR"):
        cfg.report_dir = env.get("NVCC_PLUS_REPORT_DIR") or env["NVCC_PLUS_RECORDS_DIR"]
    if env.get("NVCC_PLUS_PROGRESS"):
        cfg.progress = _progress(env["NVCC_PLUS_PROGRESS"], "NVCC_PLUS_PROGRESS", cfg.problems, cfg.progress)
    if env.get("NVCC_PLUS_OPTIMIZER"):
        cfg.optimizer = env["NVCC_PLUS_OPTIMIZER"]

    if "mode" in plus:
        cfg.mode, mode_src = plus["mode"].strip(), "--plus-mode"
    if "real-nvcc" in plus:
        cfg.real_nvcc = plus["real-nvcc"]
    if "timeout" in plus:
        t = _timeout(plus["timeout"], "--plus-timeout", cfg.problems)
        if t is not False:
            cfg.timeout = t
    if "build-budget" in plus:
        t = _timeout(plus["build-budget"], "--plus-build-budget", cfg.problems)
        if t is not False:
            cfg.build_budget = t
    if "verbose" in plus:
        cfg.verbose = _truthy(plus["verbose"])
    if "report-dir" in plus:
        cfg.report_dir = plus["report-dir"]
    if "progress" in plus:
        cfg.progress = _progress(plus["progress"], "--plus-progress", cfg.problems, cfg.progress)

    cfg.mode = cfg.mode.lower()
    if cfg.mode not in MODES:
        cfg.problems.append(f"unknown mode {cfg.mode!r} from {mode_src} "
                            f"(expected {', '.join(MODES)}); running nvcc unchanged")
        cfg.mode = "off"
    return cfg
