"""The restrict-compiled variant of a translation unit: its cicc step again, with
``-kernel-params-are-restrict`` (what ``nvcc -restrict`` passes to cicc), made on demand.

nvcc must compile a kernel without ``__restrict__`` as if its output could overlap its inputs;
the same unit compiled as if every kernel pointer parameter were ``__restrict__`` is the fast
body the optimizer may put behind a launch-time no-alias check (the ``restrict-body`` pass).
An extra cicc costs a build 0.3-1 s, so it runs only when the optimizer asks: the replay hands
superopt a :class:`RestrictVariant` as ``config["restrict_variant"]``, which runs cicc the first
time it is called and remembers the answer (PTX text, or None with the reason in ``error``).

The command is nvcc's own cicc step (same environment, same arguments, read with
``shlex``), with the flag added after ``-arch`` and every file cicc writes (``-o`` and the
``--gen_c_file_name`` / ``--stub_file_name`` / ``--gen_device_file_name`` host-side files)
redirected into a private temporary folder, so nothing the build uses is touched. It never
breaks the build: a failure is one line in the driver's style, and the optimizer goes on
without the variant.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile

FLAG = "-kernel-params-are-restrict"
WRITTEN = ("-o", "--gen_c_file_name", "--stub_file_name", "--gen_device_file_name")
TIMEOUT_S = 300.0
ALREADY = "the build already compiles with -restrict"   # nvcc's PTX is the variant: nothing to say
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _expand(word: str, env: dict) -> str:
    """``$NAME`` / ``${NAME}`` from ``env`` (as sh would expand the plan's ``"$CICC_PATH/cicc"``)."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), word)


def restrict_command(line: str, env: dict, out_dir: str) -> tuple[list[str] | None, str]:
    """(argv, "") of the restrict-compiled cicc step writing into ``out_dir``, or (None, why not)."""
    if "`" in line or "$(" in line:
        return None, "the cicc step uses command substitution"
    try:
        tokens = shlex.split(line)
    except ValueError as exc:
        return None, f"cannot read the cicc step ({exc})"
    if not tokens or os.path.basename(_expand(tokens[0], env)) != "cicc":
        return None, "not a cicc step"
    if FLAG in tokens:
        return None, ALREADY
    argv = [_expand(tokens[0], env)] + [_expand(t, env) if "$" in t else t for t in tokens[1:]]
    seen = set()
    for i, t in enumerate(argv[:-1]):
        if t in WRITTEN and i > 0:
            argv[i + 1] = os.path.join(out_dir, f"restrict{'.ptx' if t == '-o' else '.' + t.strip('-')}")
            seen.add(t)
    if "-o" not in seen:
        return None, "the cicc step has no -o"
    at = next((i + 2 for i, t in enumerate(argv[:-1]) if t == "-arch"), 1)
    argv.insert(at, FLAG)
    return argv, ""


class RestrictVariant:
    """``()`` -> the restrict-compiled PTX of one cicc step (str), or None; memoized.

    ``error`` holds the reason when it could not be made (one line), ``seconds`` what it cost."""

    def __init__(self, line: str, env: dict, cwd: str | None = None):
        self.line, self.env, self.cwd = line, dict(env), cwd
        self.called = False
        self.ptx: str | None = None
        self.error: str | None = None
        self.seconds = 0.0

    def __call__(self) -> str | None:
        if self.called:
            return self.ptx
        self.called = True
        import time
        t0 = time.monotonic()
        tmp = tempfile.mkdtemp(prefix="nvcc-plus-restrict-")
        try:
            argv, why = restrict_command(self.line, self.env, tmp)
            if argv is None:
                self.error = None if why == ALREADY else why
                return None
            try:
                proc = subprocess.run(argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.error = f"cicc {FLAG} did not finish in {TIMEOUT_S:g} s"
                return None
            except OSError as exc:
                self.error = f"cannot run cicc ({exc.strerror or exc})"
                return None
            if proc.returncode != 0:
                first = next((ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines()
                              if ln.strip()), "")
                self.error = f"cicc {FLAG} failed (exit {proc.returncode})" + (f": {first[:160]}" if first else "")
                return None
            try:
                with open(os.path.join(tmp, "restrict.ptx"), encoding="utf-8") as f:
                    self.ptx = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                self.error = f"cicc {FLAG} wrote no readable PTX ({exc})"
            return self.ptx
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            self.seconds = time.monotonic() - t0
