"""Replay nvcc's plan, swapping each cicc-produced PTX through the optimizer.

Rules that keep a build exactly as nvcc would make it:
* steps run in order, by ``sh -c`` in the caller's working directory, in nvcc's environment;
* until a PTX file actually changes, step output goes straight to the terminal, so a source
  nvcc rejects gives nvcc's messages once and the failing step's exit status (which is nvcc's);
* after a change, step output is held back. If a later step fails, the rewritten PTX may be
  the cause: nvcc's PTX is put back and the steps after the first swap run again. If they
  now succeed, one line says nvcc's own PTX was used; if they fail again, the failure is the
  user's and its output (shown once) and status stand;
* an optimizer failure never stops the replay: nvcc's PTX stays and one line says why.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from nvcc_plus import depfile, plan as planmod, progress_view, real_nvcc as rn, summary, swap
from nvcc_plus.argv import NvccCommand
from nvcc_plus.config import Config
from nvcc_plus.log import Log
from nvcc_plus.restrict_variant import RestrictVariant


class Passthrough(Exception):
    """Run the untouched command with the real nvcc instead (nothing has been run yet)."""


@dataclass
class _Change:
    step: planmod.Command
    original: bytes
    result: swap.SwapResult


@dataclass
class _State:
    changes: list[_Change] = field(default_factory=list)
    first_change: int | None = None          # index of the cicc step of the first change
    env_at_first_change: dict | None = None
    captured: list[tuple[bytes, bytes]] = field(default_factory=list)
    kept: list[tuple[planmod.Command, swap.SwapResult]] = field(default_factory=list)
    fallbacks: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)
    dep_procs: list = field(default_factory=list)
    build_notes: list[str] = field(default_factory=list)   # said once per build (nvcc_plus.once)
    variant_errors: list[tuple[str, str, str | None]] = field(default_factory=list)  # (source, error, arch)


def _write(fd: int, data: bytes) -> None:
    while data:
        n = os.write(fd, data)
        data = data[n:]


class Replayer:
    def __init__(self, p: planmod.Plan, cmd: NvccCommand, real: str, cfg: Config, log: Log,
                 env: dict[str, str]):
        self.plan = p
        self.cmd = cmd
        self.real = real
        self.cfg = cfg
        self.log = log
        self.base_env = env
        self.state = _State()
        self.optimizer = None
        self.optimizer_error: str | None = None
        self.ledger = None                       # the build's budget (nvcc_plus.budget)
        self.budget_left: float | None = None
        self.budget_t0 = 0.0
        if cfg.report_dir:
            # superopt writes its records under NVCC_PLUS_REPORT_DIR itself; a directory given
            # by nvcc-plus.toml or --plus-report-dir reaches it the same way.
            os.environ["NVCC_PLUS_REPORT_DIR"] = cfg.report_dir
        if cfg.mode in ("roundtrip", "optimize"):
            try:
                self.optimizer = swap.resolve_optimizer(cfg.optimizer)
            except Exception as exc:  # noqa: BLE001
                self.optimizer_error = swap.describe(exc).replace("optimizer raised",
                                                                  "cannot load the optimizer:", 1)

    # ---- running steps -------------------------------------------------------------
    def _exec(self, step: planmod.Command, env: dict, capture: bool) -> tuple[int, bytes, bytes]:
        t0 = time.monotonic()
        if capture:
            proc = subprocess.run(["/bin/sh", "-c", step.line], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = proc.stdout, proc.stderr
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            proc = subprocess.run(["/bin/sh", "-c", step.line], env=env)
            out = err = b""
        if self.cfg.verbose:
            self.log.info(f"step {step.index}: {step.tool} ({time.monotonic() - t0:.2f} s, "
                          f"exit {proc.returncode})")
        return proc.returncode, out, err

    def _run_steps(self, start: int, env: dict, swapping: bool) -> tuple[int, planmod.Command | None, bytes]:
        st = self.state
        for step in self.plan.steps[start:]:
            if step.kind == "env":
                env[step.name] = step.value
                continue
            if step.kind == "rm":
                for p in step.paths:
                    try:
                        os.remove(p)
                    except OSError:
                        pass
                continue
            if step.kind == "depfile":
                if not st.dep_procs:
                    st.dep_procs.append(depfile.start(self.real, self.cmd, step.paths[0],
                                                      self.base_env))
                continue
            capture = swapping and st.first_change is not None
            rc, out, err = self._exec(step, env, capture)
            if capture:
                st.captured.append((out, err))
            if rc != 0:
                return rc, step, err
            if step.kind == "cicc" and swapping:
                self._swap(step, env)
        return 0, None, b""

    def _swap(self, step: planmod.Command, env: dict) -> None:
        st = self.state
        source = step.source or step.source_path or "?"
        if self.optimizer is None:
            if self.optimizer_error:
                st.fallbacks.append((source, self.optimizer_error, None, step.arch))
            return
        t0 = time.monotonic()
        timeout, deadline = self._limits(source)
        config = self.cfg.optimizer_config()
        unit = self.plan.host_unit
        if unit and os.path.isfile(unit):
            # the launches of the kernels as this build preprocesses them (-D, #if, includes)
            config["preprocessed"] = os.path.abspath(unit)
        view = None
        if self.cfg.mode == "optimize" and progress_view.wanted(self.cfg.progress):
            view = progress_view.ProgressView(f"{os.path.basename(source)} {step.arch or ''}".strip())
            config["progress"] = view
        variant = None
        if self.cfg.mode == "optimize":
            # the same unit compiled as if every kernel pointer were __restrict__: made only if the
            # optimizer asks (the restrict-body pass), once per cicc step
            variant = RestrictVariant(step.line, env, os.getcwd())
            config["restrict_variant"] = variant
        try:
            res = swap.swap_file(step.ptx, optimizer=self.optimizer, mode=self.cfg.mode,
                                 source=step.source_path or step.source, target=step.arch,
                                 config=config, timeout=timeout, deadline=deadline)
        finally:
            if view is not None:
                view.close()
        seconds = time.monotonic() - t0
        if variant is not None and variant.called:
            if variant.error:
                st.variant_errors.append((source, variant.error, step.arch))
            elif self.cfg.verbose:
                self.log.info(f"{source}: restrict-compiled variant of {step.arch} made in {variant.seconds:.2f} s")
        if self.cfg.verbose:
            self.log.info(f"{source}: optimizer on {step.arch} took {seconds:.2f} s"
                          f" ({'changed' if res.changed else 'unchanged'})")
        for note in res.build_notes:
            if note not in st.build_notes:
                st.build_notes.append(note)
        if res.error and res.build_wide:
            # a bad setting: the same for every file and architecture of the build, said once
            note = f"{res.error}; nvcc's own PTX is used"
            if note not in st.build_notes:
                st.build_notes.append(note)
            return
        if res.error:
            st.fallbacks.append((source, res.error, res.kernel, step.arch))
            return
        line = summary.module_summary(res.records, seconds)
        if line:
            # First among the module's lines: what happened, then the details.
            res.messages.insert(0, f"{step.arch}: {line}" if step.arch else line)
        st.kept.append((step, res))
        if res.changed:
            st.changes.append(_Change(step, res.original or b"", res))
            if st.first_change is None:
                st.first_change = step.index
                st.env_at_first_change = dict(env)

    def _limits(self, source: str) -> tuple[float | None, float | None]:
        """(hard timeout, soft deadline) of the next optimizer call: NVCC_PLUS_TIMEOUT, and
        what is left of the build's budget. With nothing left the optimizer still applies
        cached and locked decisions (the soft deadline has passed: it searches nothing)."""
        timeout = self.cfg.timeout
        if not self.cfg.build_budget or self.cfg.mode != "optimize":
            return timeout, None
        from nvcc_plus import budget
        if self.ledger is None:
            try:
                self.ledger = budget.Ledger(budget.ledger_path(self.base_env), self.cfg.build_budget)
                self.budget_left = self.ledger.start()
            except OSError as exc:
                self.log.line(source, f"build budget ledger unusable ({exc}); using NVCC_PLUS_TIMEOUT alone")
                self.cfg.build_budget = None
                return timeout, None
            self.budget_t0 = time.monotonic()
            if self.budget_left <= 0:
                self.log.line(source, f"the build's optimizer budget ({self.cfg.build_budget:g} s, "
                                      f"NVCC_PLUS_BUILD_BUDGET) is spent: only cached and locked "
                                      f"decisions are applied")
        left = max(0.0, self.budget_left - (time.monotonic() - self.budget_t0))
        hard = left + 30.0             # room to apply stored decisions after the soft deadline
        return (min(timeout, hard) if timeout else hard), time.time() + left

    # ---- the whole run ---------------------------------------------------------------
    def run(self) -> int:
        try:
            return self._run()
        finally:
            if self.ledger is not None:
                self.ledger.finish()

    def _run(self) -> int:
        st = self.state
        _write(1, self.plan.stdout)
        _write(2, self.plan.stderr)
        env = dict(self.base_env)
        rc, failed, failed_err = self._run_steps(0, env, swapping=True)
        if rc != 0 and st.first_change is not None:
            rc = self._retry_without_changes(failed, failed_err)
        elif rc == 0:
            for out, err in st.captured:
                _write(1, out)
                _write(2, err)
            self._report_kept()
        self._report_fallbacks()
        self._report_variant_errors()
        self._report_build_notes()
        dep_rc, dep_err = self._wait_deps()
        if rc == 0 and dep_rc != 0:
            self.log.line(self.cmd.cuda_inputs()[0] if self.cmd.cuda_inputs() else "nvcc-plus",
                          f"the dependency run failed ({swap.one_line(dep_err.decode(errors='replace'), 160)});"
                          " running nvcc unchanged")
            return subprocess.run([self.real] + self.cmd.argv_tokens(), env=self.base_env).returncode
        return rc

    def _retry_without_changes(self, failed: planmod.Command | None, failed_err: bytes) -> int:
        st = self.state
        for ch in st.changes:
            swap.restore(ch.step.ptx, ch.original)
        st.captured.clear()
        why_tool = failed.tool if failed is not None else "a step"
        first_err = ""
        for ln in failed_err.decode("utf-8", "replace").splitlines():
            if ln.strip():
                first_err = swap.one_line(ln, 160)
                break
        start = st.first_change + 1
        env = dict(st.env_at_first_change or self.base_env)
        rc, _, _ = self._run_steps(start, env, swapping=False)
        if rc == 0:
            by_source: dict[str, list[str]] = {}
            for ch in st.changes:
                by_source.setdefault(ch.step.source or ch.step.source_path or "?", []).append(
                    ch.step.arch or "?")
            for source, archs in by_source.items():
                what = f"{why_tool} failed on the rewritten PTX ({', '.join(archs)})"
                if first_err:
                    what += f": {first_err}"
                self.log.line(source, what + "; using nvcc's own PTX")
        what = f"{why_tool} failed on the rewritten PTX" + (f": {first_err}" if first_err else "")
        for ch in st.changes:
            swap.mark_not_applied(ch.result.record_paths, what + "; nvcc's own PTX was used")
        st.kept.clear()
        return rc

    def _report_kept(self) -> None:
        for step, res in self.state.kept:
            source = step.source or step.source_path or "?"
            for m in res.messages:
                self.log.line(source, m)

    def _report_fallbacks(self) -> None:
        grouped: dict[tuple[str, str, str | None], list[str]] = {}
        for source, error, kernel, arch in self.state.fallbacks:
            grouped.setdefault((source, error, kernel), []).append(arch or "?")
        for (source, error, kernel), archs in grouped.items():
            what = (f"kernel {kernel}: " if kernel else "") + error
            self.log.line(source, f"{what} ({', '.join(archs)}); using nvcc's own PTX")

    def _report_variant_errors(self) -> None:
        """The restrict-compiled variant that could not be made: one line per file and error
        (the build goes on; only the restrict-body pass went without it)."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for source, error, arch in self.state.variant_errors:
            grouped.setdefault((source, error), []).append(arch or "?")
        for (source, error), archs in grouped.items():
            self.log.line(source, f"restrict-compiled variant not made: {error} ({', '.join(archs)}); "
                                  f"the kernels were optimized without it")

    def _report_build_notes(self) -> None:
        """Lines true of the whole build: the first compilation of the build to have one says it."""
        if not self.state.build_notes:
            return
        from nvcc_plus import once
        for note in self.state.build_notes:
            if once.first_time(note, self.base_env):
                self.log.line(None, note)

    def _wait_deps(self) -> tuple[int, bytes]:
        rc, err = 0, b""
        for proc in self.state.dep_procs:
            _, e = proc.communicate()
            if proc.returncode != 0 and rc == 0:
                rc, err = proc.returncode, e
        return rc, err


def compile(real: str, args: list[str], cmd: NvccCommand, cfg: Config, log: Log) -> int:
    """Dry-run nvcc, then replay its plan with PTX swapped. Raises Passthrough when the plan
    offers nothing to swap or cannot be replayed (nothing has been run then)."""
    env = rn.child_env()
    user_keeps = cmd.keeps_files()
    tmp = None if user_keeps else tempfile.mkdtemp(prefix="nvcc-plus-")
    try:
        t0 = time.monotonic()
        rc, p = planmod.run_dryrun(real, args, tmp, env)
        if cfg.verbose:
            log.info(f"dry run: {time.monotonic() - t0:.2f} s, {len(p.steps)} steps, "
                     f"{len(p.cicc_steps)} PTX modules")
        if rc != 0:
            raise Passthrough(f"the dry run failed (exit {rc})")
        if p.unreplayable:
            raise Passthrough(p.unreplayable)
        if not p.cicc_steps:
            raise Passthrough("no PTX is generated")
        return Replayer(p, cmd, real, cfg, log, env).run()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
