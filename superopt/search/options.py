"""What one kernel's search may do: :class:`SearchOptions`, made from the run's settings."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from superopt.config.resolved import Settings, SettingError
from superopt.config.settings import did_you_mean

SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


@dataclass
class SearchOptions:
    budget_s: float = 30.0                  # per kernel, wall clock
    # the least gain a kept rewrite shows (0.02: 2% of nvcc's time; NVCC_PLUS_MIN_GAIN)
    min_gain: float = 0.02
    policy: str = "exact"
    backend: str = "auto"                   # auto | gpu | emulator
    no_gpu: str = "locked"                  # locked | estimate
    passes: list[str] | None = None         # None: every registered pass
    extra_params: dict = field(default_factory=dict)   # pass -> params forced (e.g. block size)
    wall_limit_s: float | None = None       # wall clock the compilation's deadline leaves the search
    check_sets: int = 4
    timing_reps: int = 60
    # compute-sanitizer tools run on the candidate to keep (GPU only; empty: none)
    sanitize: tuple = ("memcheck", "racecheck")
    # per kernel: the other launches the program may make, where the candidate to keep is
    # timed too (superopt.specs.program_launches.ProgramLaunches; None: what the specs say)
    launches: object = None
    # per kernel: facts of the module beside the launch's (superopt.passes.LAUNCH_FACTS:
    # restrict_body), filled into the passes that ask for them like the launch facts
    facts: dict = field(default_factory=dict)


def _origin(settings: Settings, name: str) -> str:
    origin = settings.origin(name)
    return f" (from {origin})" if origin != "default" else ""


def parse_min_gain(settings: Settings) -> float:
    """NVCC_PLUS_MIN_GAIN as a fraction: "2%", "2" and 2 are 0.02; 0 keeps any gain beyond noise."""
    raw = settings.raw("NVCC_PLUS_MIN_GAIN")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return SearchOptions.min_gain
    text = str(raw).strip().removesuffix("%").strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value < 100):
        raise SettingError(f"min_gain (NVCC_PLUS_MIN_GAIN) must be a percentage from 0 to below 100 (2 or 2%: "
                           f"a rewrite is kept only when at least 2% faster), not {raw!r}"
                           + _origin(settings, "NVCC_PLUS_MIN_GAIN"))
    return value / 100


def search_options(settings: Settings) -> SearchOptions:
    """The search options of a run (flag > environment > nvcc-plus.toml > default, as the
    settings resolved them); a value nvcc-plus does not accept is a :class:`SettingError`."""
    from superopt.config.checks import check_settings
    from superopt.judge.policy import Policy
    check_settings(settings)          # the settings read deep in the judge, the lockfile mode, the passes
    opts = SearchOptions()
    budget = settings.raw("NVCC_PLUS_BUDGET")
    if budget is not None:
        try:
            opts.budget_s = float(budget)
        except (TypeError, ValueError):
            raise SettingError(f"budget (NVCC_PLUS_BUDGET) must be a number of seconds, not {budget!r}") from None
    if not (math.isfinite(opts.budget_s) and opts.budget_s >= 0):
        raise SettingError(f"budget (NVCC_PLUS_BUDGET) must be a number of seconds >= 0, not {opts.budget_s}")
    opts.min_gain = parse_min_gain(settings)
    opts.policy = settings.text("NVCC_PLUS_POLICY", opts.policy)
    opts.backend = settings.text("NVCC_PLUS_BACKEND", opts.backend)
    opts.no_gpu = settings.text("NVCC_PLUS_NO_GPU", opts.no_gpu)
    if opts.backend not in ("auto", "gpu", "emulator"):
        raise SettingError(f"backend (NVCC_PLUS_BACKEND) must be auto, gpu or emulator, not {opts.backend!r}"
                           + _origin(settings, "NVCC_PLUS_BACKEND")
                           + did_you_mean(opts.backend, ("auto", "gpu", "emulator")))
    if opts.no_gpu not in ("locked", "estimate"):
        raise SettingError(f"no_gpu (NVCC_PLUS_NO_GPU) must be locked or estimate, not {opts.no_gpu!r}"
                           + _origin(settings, "NVCC_PLUS_NO_GPU") + did_you_mean(opts.no_gpu, ("locked", "estimate")))
    try:
        Policy.parse(opts.policy)
    except ValueError as exc:
        raise SettingError(f"policy (NVCC_PLUS_POLICY) {opts.policy!r}: {exc}") from None
    tools = settings.names("NVCC_PLUS_SANITIZE")
    if tools is not None:
        tools = tuple(t for t in tools if t != "off")
        unknown = [t for t in tools if t not in SANITIZER_TOOLS]
        if unknown:
            raise SettingError(f"NVCC_PLUS_SANITIZE: unknown compute-sanitizer tool(s) {unknown} "
                               f"({', '.join(SANITIZER_TOOLS)}, or off)"
                               + did_you_mean(unknown[0], SANITIZER_TOOLS + ("off",)))
        opts.sanitize = tools
    passes = settings.names("NVCC_PLUS_PASSES")
    if passes:
        opts.passes = passes
    return opts
