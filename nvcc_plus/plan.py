"""nvcc's own plan: ``nvcc ARGS -dryrun --keep --keep-dir DIR``, parsed into steps.

The plan is printed on stderr, one ``#$ `` line per step. ``#$ NAME=VALUE`` lines are the
environment nvcc sets for the steps that follow (set verbatim, never sourced). Everything
else on stdout/stderr (``nvcc warning : ...``) is nvcc's own output, shown before the steps.

Step kinds (each a :class:`Command`):
* ``env``      NAME=VALUE
* ``rm``       nvcc deletes a file itself (failures ignored, nothing printed)
* ``cicc``     writes a PTX module (``-o X.ptx``): the swap point
* ``depfile``  ``-- Filter Dependencies -- > f.d`` (from -MD/-MMD): not replayable as such
* ``cmd``      anything else, run by ``sh -c`` in the caller's working directory (``cudafe++``'s
  input, the preprocessed unit, is noted: launch blocks are read from it)
A line that starts with ``--`` and is not the dependency filter makes the plan unreplayable.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field

_ENV_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_DEP_RE = re.compile(r"^--\s*Filter Dependencies\s*--\s*>\s*(.+?)\s*$")


@dataclass
class Command:
    index: int
    kind: str                      # env | rm | cicc | depfile | cmd
    line: str                      # the text after '#$ '
    name: str | None = None        # env: variable
    value: str | None = None       # env: value
    paths: list[str] = field(default_factory=list)   # rm: files; depfile: [file]
    ptx: str | None = None         # cicc: the PTX it writes
    arch: str | None = None        # cicc: compute_XX
    source: str | None = None      # cicc: --orig_src_file_name (as the user wrote it)
    source_path: str | None = None  # cicc: --orig_src_path_name (absolute)
    unit: str | None = None        # cudafe++: the preprocessed unit it reads (the host gcc -E's output)

    @property
    def tool(self) -> str:
        try:
            first = shlex.split(self.line)[0]
        except (ValueError, IndexError):
            return self.line.split(" ", 1)[0]
        return os.path.basename(first.replace('"', ""))


@dataclass
class Plan:
    steps: list[Command] = field(default_factory=list)
    stdout: bytes = b""       # nvcc's own output during the dry run (not plan lines)
    stderr: bytes = b""
    unreplayable: str | None = None

    @property
    def cicc_steps(self) -> list[Command]:
        return [s for s in self.steps if s.kind == "cicc"]

    @property
    def host_unit(self) -> str | None:
        """The preprocessed translation unit nvcc's host ``gcc -E`` step writes (cudafe++ reads
        it): macros expanded with the build's -D flags, #if branches taken, headers included."""
        return next((s.unit for s in self.steps if s.unit), None)

    @property
    def depfile_steps(self) -> list[Command]:
        return [s for s in self.steps if s.kind == "depfile"]


def _opt_value(tokens: list[str], *names: str) -> str | None:
    val = None
    for i, t in enumerate(tokens[:-1]):
        if t in names:
            val = tokens[i + 1]
    for t in tokens:
        for n in names:
            if t.startswith(n + "="):
                val = t[len(n) + 1:]
    return val


def classify_line(index: int, line: str) -> Command:
    m = _ENV_RE.match(line)
    if m and " " not in m.group(1):
        return Command(index, "env", line, name=m.group(1), value=m.group(2))
    m = _DEP_RE.match(line)
    if m:
        try:
            target = shlex.split(m.group(1))
        except ValueError:
            target = [m.group(1)]
        return Command(index, "depfile", line, paths=target[:1])
    if line.startswith("--"):
        return Command(index, "unknown", line)
    try:
        tokens = shlex.split(line)
    except ValueError:
        return Command(index, "unknown", line)
    if not tokens:
        return Command(index, "unknown", line)
    prog = os.path.basename(tokens[0])
    if prog == "rm":
        return Command(index, "rm", line, paths=[t for t in tokens[1:] if not t.startswith("-")])
    if prog == "cicc":
        out = _opt_value(tokens, "-o")
        if out and out.endswith(".ptx"):
            return Command(index, "cicc", line, ptx=out, arch=_opt_value(tokens, "-arch"),
                        source=_opt_value(tokens, "--orig_src_file_name"),
                        source_path=_opt_value(tokens, "--orig_src_path_name"))
    if prog == "cudafe++" and tokens[-1].endswith(".ii"):
        return Command(index, "cmd", line, unit=tokens[-1])
    return Command(index, "cmd", line)


def parse_plan(stdout: bytes, stderr: bytes) -> Plan:
    plan = Plan(stdout=stdout)
    other: list[bytes] = []
    for raw in stderr.splitlines(keepends=True):
        if raw.startswith(b"#$ "):
            line = raw[3:].rstrip(b"\r\n").decode("utf-8", "surrogateescape")
            step = classify_line(len(plan.steps), line)
            if step.kind == "unknown" and plan.unreplayable is None:
                plan.unreplayable = f"cannot replay plan step {line[:60]!r}"
            plan.steps.append(step)
        else:
            other.append(raw)
    plan.stderr = b"".join(other)
    if len(plan.depfile_steps) > 1 and plan.unreplayable is None:
        plan.unreplayable = "several dependency files"
    return plan


def dryrun_args(args: list[str], keep_dir: str | None) -> list[str]:
    """nvcc's arguments for the dry run. keep_dir None: the user keeps files where nvcc puts them."""
    extra = ["-dryrun"]
    if keep_dir is not None:
        extra += ["--keep", "--keep-dir", keep_dir]
    return list(args) + extra


def run_dryrun(real_nvcc: str, args: list[str], keep_dir: str | None,
               env: dict[str, str]) -> tuple[int, Plan]:
    proc = subprocess.run([real_nvcc] + dryrun_args(args, keep_dir), env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    return proc.returncode, parse_plan(proc.stdout, proc.stderr)
