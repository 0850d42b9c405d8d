"""Entry point of the `nvcc-plus` command (takes exactly nvcc's arguments).

    nvcc-plus ARGS...              compiler mode (NVCC=nvcc-plus, CMAKE_CUDA_COMPILER=nvcc-plus)
    nvcc-plus /path/to/nvcc ARGS   launcher mode (CMAKE_CUDA_COMPILER_LAUNCHER=nvcc-plus)

Start-up is kept small: only the standard library is imported until a run is replayed, and the
optimizer (superopt, ptx_ir) only when a PTX module is handed to it.
"""
from __future__ import annotations

import os
import sys


def _exec(path: str, args: list[str]) -> int:
    from nvcc_plus.real_nvcc import child_env
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(path, [path] + args, child_env())
    except OSError as exc:
        sys.stderr.write(f"nvcc-plus: cannot run {path}: {exc.strerror}\n")
        return 127
    return 0  # not reached


def _source_dirs(args: list[str]) -> list[str]:
    """Folders of the CUDA sources on the command line, where nvcc-plus.toml is also looked
    for (under CMake the working directory is the build directory). A cheap scan: the full
    argv model is only built when a run is replayed."""
    from nvcc_plus.filetypes import CUDA_SOURCE_EXTS
    out: list[str] = []
    for a in args:
        if not a.startswith("-") and os.path.splitext(a)[1] in CUDA_SOURCE_EXTS and os.path.isfile(a):
            d = os.path.dirname(os.path.abspath(a))
            if d not in out:
                out.append(d)
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    from nvcc_plus import real_nvcc as rn
    from nvcc_plus.plusflags import split_plus_flags
    from nvcc_plus.log import Log

    log = Log()
    if rn.current_depth() >= rn.MAX_DEPTH:
        log.line(None, "nvcc-plus keeps calling itself (the nvcc it finds runs nvcc-plus); "
                       "set NVCC_PLUS_REAL_NVCC to the real nvcc")
        return 1

    # Launcher mode: the compiler to run comes first.
    launch = rn.launcher_compiler(args)
    if launch is not None:
        args = args[1:]
        if rn.is_self(launch):
            launch = None                       # nvcc-plus launching nvcc-plus: one is enough
        elif not rn.looks_like_nvcc(launch):
            rest, _, _ = split_plus_flags(args)
            return _exec(launch, rest)          # not nvcc: be a transparent launcher

    args, plus, problems = split_plus_flags(args)
    if "help" in plus:
        from nvcc_plus.plus_help import help_text
        sys.stdout.write(help_text())
        return 0
    from nvcc_plus import config as cfgmod
    cfg = cfgmod.load(plus, source_dirs=_source_dirs(args))
    if "version" in plus:
        from nvcc_plus.plus_help import version_text
        try:
            found = launch or rn.find(cfg.real_nvcc)
        except rn.NotFound:
            found = None
        sys.stdout.write(version_text(found))
        return 0
    for p in problems + cfg.problems:
        log.line(None, p)

    real = launch
    if real is None:
        try:
            real = rn.find(cfg.real_nvcc)
        except rn.NotFound as exc:
            log.line(None, str(exc))
            return 127

    if cfg.mode == "off":
        return _exec(real, args)

    from nvcc_plus import argv as argvmod
    cmd = argvmod.parse(args, dict(os.environ))
    decision = argvmod.classify(cmd)
    if not decision.replay:
        if cfg.verbose:
            log.info(f"passing through to {real}: {decision.reason}")
        return _exec(real, args)

    from nvcc_plus import nothing_stored
    # the folders the optimizer would look for nvcc-plus.lock from (every CUDA input, -x cu included)
    dirs = list(dict.fromkeys(os.path.dirname(os.path.abspath(p)) for p in cmd.cuda_inputs()))
    if nothing_stored.nvcc_alone(cfg, dirs):
        from nvcc_plus import once
        if once.first_time(nothing_stored.NO_GPU_NO_LOCKFILE, rn.child_env()):
            log.line(None, nothing_stored.NO_GPU_NO_LOCKFILE)
        return _exec(real, args)

    from nvcc_plus import replay
    try:
        return replay.compile(real, args, cmd, cfg, log)
    except replay.Passthrough as exc:
        if cfg.verbose:
            log.info(f"passing through to {real}: {exc}")
        return _exec(real, args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug in nvcc-plus must not break the build
        src = (cmd.cuda_inputs() or [None])[0]
        log.line(src, f"internal error ({type(exc).__name__}: {exc}); running nvcc unchanged")
        return _exec(real, args)


if __name__ == "__main__":
    sys.exit(main())
