"""-MD / -MMD: write the dependency file nvcc would write, by a separate ``nvcc -M`` run.

nvcc's plan shows dependency generation as a pseudo-step ``-- Filter Dependencies -- > f.d``
that cannot be replayed. nvcc-plus runs, alongside the replay, the user's command with
``-MD``/``-MMD`` turned into ``-M``/``-MM``, ``-MF <the file from the plan>`` and an explicit
``-MT`` (nvcc 13.0, checked: the output is byte-identical to -MD's):

* target: the last ``-MT`` if given; else the ``-o`` value, prefixed by ``-odir`` when both are
  given (that is what -MD writes); else nothing, and nvcc -M computes ``<odir>/<stem>.o`` as -MD does;
* ``-o``, every ``-MF``/``-MT`` are dropped; ``-odir`` and all other options stay (-c/-dc included,
  they do not change the dependency output but keep macros such as __CUDACC_RDC__ right).
"""
from __future__ import annotations

import os
import subprocess

from nvcc_plus.argv import NvccCommand

_DROP = {"generate-dependencies-with-compile", "generate-nonsystem-dependencies-with-compile",
         "dependency-output", "dependency-target-name", "output-file"}


def dep_target(cmd: NvccCommand) -> str | None:
    mt = cmd.last_value("dependency-target-name")
    if mt is not None:
        return mt
    out = cmd.last_value("output-file")
    if out is None:
        return None
    odir = cmd.last_value("output-directory")
    if odir and not os.path.isabs(out):
        return odir.rstrip("/") + "/" + out
    return out


def dep_args(cmd: NvccCommand, depfile: str) -> list[str]:
    nonsystem = cmd.has("generate-nonsystem-dependencies-with-compile")
    args: list[str] = []
    for it in cmd.items:
        if it.origin != "argv":
            continue       # options files and NVCC_*_FLAGS reach nvcc on their own
        if it.kind == "option" and it.name in _DROP:
            continue
        args.extend(it.tokens)
    args += ["-MM" if nonsystem else "-M", "-MF", depfile]
    target = dep_target(cmd)
    if target is not None:
        args += ["-MT", target]
    return args


def start(real_nvcc: str, cmd: NvccCommand, depfile: str, env: dict[str, str]) -> subprocess.Popen:
    """Start the dependency run; its output is captured (the replay shows the same messages)."""
    return subprocess.Popen([real_nvcc] + dep_args(cmd, depfile), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
