"""A GPU-less compilation with nothing stored to apply runs nvcc as it is.

By default (``NVCC_PLUS_NO_GPU=locked``) a compilation without a GPU only applies decisions
from nvcc-plus.lock or the decision cache. On a machine with no NVIDIA device node, no lockfile
on the read path and an empty decision cache, nothing can change nvcc's code; replaying
nvcc's plan step by step and reading its PTX would cost about 0.15 s of CPU per file for the
same object. The compilation then runs the real nvcc directly (as ``mode=off`` does), and the
build says once what would help — the line the optimizer says when it finds nothing stored.

Every setting that could ask for more keeps the full path: another mode, a search on the
emulator (``NVCC_PLUS_NO_GPU=estimate``, ``NVCC_PLUS_BACKEND=emulator``), deferred searches, a
cluster, a capture, records or reports, a lockfile being written, another optimizer or judge,
verbose output, a ``[kernels]`` table (checked on the full path). The questions are all file-system and settings look-ups; no CUDA process and
none of the optimizer's modules.
"""
from __future__ import annotations

import os

# Said once per build; the optimizer's full path says the same (superopt.decide.searches).
NO_GPU_NO_LOCKFILE = ("no GPU and no nvcc-plus.lock: this build uses nvcc's code (and decisions cached "
                      "here before). To optimize GPU-less builds, tune once on a GPU and commit the lockfile "
                      "(superopt tune --build \"make -B NVCC=nvcc-plus\" -- ./app writes nvcc-plus.lock), or set "
                      "NVCC_PLUS_NO_GPU=estimate to search on the CPU emulator (verified, chosen by a static "
                      "estimate)")

# setting -> the values (None: unset) under which a GPU-less compilation only applies stored
# decisions and writes nothing but the object
_ONLY_STORED = {
    "NVCC_PLUS_NO_GPU": (None, "locked"),
    "NVCC_PLUS_BACKEND": (None, "auto"),
    "NVCC_PLUS_SEARCH": (None, "now"),
    "NVCC_PLUS_CLUSTER": (None, ""),
    "NVCC_PLUS_CAPTURE": (None, ""),
    "NVCC_PLUS_LOCK": (None, ""),
    "NVCC_PLUS_JUDGE": (None, ""),
}


def gpu_device_present(env=None) -> bool:
    """The first, free question (as :func:`superopt.judge.devices.driver_present` asks it): the
    NVIDIA driver's device node, WSL's, or the tests' fake GPUs."""
    env = os.environ if env is None else env
    return bool(env.get("SUPEROPT_FAKE_GPUS")) or os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg")


def nvcc_alone(cfg, source_dirs, env=None, cwd=None) -> bool:
    """Whether this compilation can only end with nvcc's own code, so that running nvcc
    directly gives the same object (see the module doc)."""
    env = os.environ if env is None else env
    if cfg.mode != "optimize" or cfg.verbose or cfg.report_dir or cfg.optimizer:
        return False
    if cfg.data.get("kernels"):
        return False            # its tables are checked (and an incomplete one said) on the full path
    if gpu_device_present(env):
        return False
    from superopt.config.settings import resolve
    config = cfg.optimizer_config()
    for name, plain in _ONLY_STORED.items():
        value, _ = resolve(name, config=config, env=env)
        if (value if value is None else str(value).strip().lower()) not in plain:
            return False
    from superopt.store.locations import any_cached_decision, lockfile_to_read
    for folder in list(source_dirs) or [None]:
        if lockfile_to_read(folder, cwd, env) is not None:
            return False
    return not any_cached_decision(env)
