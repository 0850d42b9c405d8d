"""nvcc-plus settings: defaults < nvcc-plus.toml < environment < --plus-* flags.

nvcc-plus.toml is looked for in the working directory and its parents (the first one wins),
or named by ``NVCC_PLUS_CONFIG`` / ``--plus-config=PATH``::

    mode = "optimize"            # off | roundtrip | optimize
    [driver]                     # (these keys may also sit at the top level)
    real_nvcc = "/usr/local/cuda/bin/nvcc"
    timeout = 600                # seconds the optimizer may spend on one PTX module
    build_budget = 3600          # seconds for all compilations of one build (nvcc_plus.budget)
    verbose = false
    report_dir = "build/nvcc-plus-records"   # one JSON file per PTX module with records

The whole document is also handed to the optimizer (``config=``), so other tables
(``[superopt]``, kernel launch specs, ...) belong to it.

Environment: NVCC_PLUS_MODE, NVCC_PLUS_CONFIG, NVCC_PLUS_REAL_NVCC, NVCC_PLUS_TIMEOUT,
NVCC_PLUS_BUILD_BUDGET (and NVCC_PLUS_BUILD_LEDGER),
NVCC_PLUS_VERBOSE, NVCC_PLUS_REPORT_DIR, and the developer hook NVCC_PLUS_OPTIMIZER=module:function
(called instead of ``superopt.optimize_ptx``, with the same signature).
Flags: --plus-mode=, --plus-config=, --plus-real-nvcc=, --plus-timeout=, --plus-build-budget=, --plus-verbose,
--plus-report-dir= (removed before nvcc sees the command line).
"""
from __future__ import annotations

import math
import os

MODES = ("off", "roundtrip", "optimize")
DEFAULT_MODE = "optimize"
DEFAULT_TIMEOUT = 600.0
CONFIG_NAME = "nvcc-plus.toml"
_DRIVER_KEYS = ("mode", "real_nvcc", "timeout", "verbose", "report_dir", "build_budget")


class Config:
    """The settings of one run (a plain class: dataclasses cost start-up time)."""

    def __init__(self) -> None:
        self.mode: str = DEFAULT_MODE
        self.real_nvcc: str | None = None
        self.timeout: float | None = DEFAULT_TIMEOUT
        self.build_budget: float | None = None     # seconds for the whole build (nvcc_plus.budget)
        self.verbose: bool = False
        self.report_dir: str | None = None
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


def find_config_file(start: str | None = None) -> str | None:
    """The nvcc-plus.toml of the project: from ``start`` (the working directory) up to the
    project root, never past it (see superopt.store.discovery)."""
    from superopt.store.discovery import find_upwards
    return find_upwards(CONFIG_NAME, start)


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


def load(plus: dict[str, str] | None = None, env: dict[str, str] | None = None,
         cwd: str | None = None) -> Config:
    plus = plus or {}
    env = os.environ if env is None else env
    cfg = Config()
    mode_src = "default"

    named = plus.get("config") or env.get("NVCC_PLUS_CONFIG")
    path = named or find_config_file(cwd)
    if path:
        try:
            import tomllib
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except (OSError, ValueError) as exc:
            cfg.problems.append(f"{path}: {' '.join(str(exc).split())}; ignoring it")
            data = {}
        else:
            cfg.config_path = os.path.abspath(path)
        base = os.path.dirname(os.path.abspath(path))
        cfg.data = data
        # Driver keys may sit at the top level or in a [driver] table (which wins).
        drv = {k: data[k] for k in _DRIVER_KEYS if k in data}
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

    cfg.mode = cfg.mode.lower()
    if cfg.mode not in MODES:
        cfg.problems.append(f"unknown mode {cfg.mode!r} from {mode_src} "
                            f"(expected {', '.join(MODES)}); running nvcc unchanged")
        cfg.mode = "off"
    return cfg
