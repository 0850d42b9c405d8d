"""``superopt verify BASE.ptx CANDIDATE.ptx --kernel NAME [--spec FILE] [--backend auto|gpu|emulator]``

``--backend auto`` (the default, as for every command) is the GPU when one is usable, else the
CPU emulator; the verdict's notes say which and why.

Exit status: 0 accepted, 1 rejected (with which input set, buffer, first differing index
and both values), 2 could not be judged (no GPU, no spec, backend not available, baseline
misbehaves, ...).
"""
from __future__ import annotations

import json
import math
import sys

import click

from superopt.judge.check import COULD_NOT_JUDGE, EXIT_CODES, Policy, Verdict, check
from superopt.specs.launch_spec import SpecError, load_spec
from superopt.cli_input import BackendChoice, FiniteFloat
from superopt.store import safe_files

MAX_SETS = 1000          # input sets per launch shape; each is launched four times

__all__ = ["verify_command", "verify_files"]


def resolve_backend(backend: str) -> tuple[str, str | None]:
    """(the backend to judge on, a note saying what ``auto`` chose and why; None otherwise)."""
    if backend != "auto":
        return backend, None
    from superopt.judge import BackendJudge
    ok, why = BackendJudge.gpu_usable()
    if ok:
        return "gpu", f"backend auto: the GPU ({why.removeprefix('gpu: ')})"
    return "emulator", f"backend auto: the CPU emulator ({why}; --backend gpu insists on a GPU)"


def verify_files(baseline: str, candidate: str, kernel: str, spec_file: str | None, *, backend: str = "auto",
                 policy: str = "exact", sets: int = 4, seed: int | None = None,
                 timeout: float | None = None) -> Verdict:
    """What the command does, as a function (for the driver and tests)."""
    pol = Policy.parse(policy)

    def cnj(reason: str) -> Verdict:
        return Verdict(status=COULD_NOT_JUDGE, reason=reason, policy=str(pol))

    from superopt.judge.devices import GpusSettingError
    try:
        backend, chose = resolve_backend(backend)
    except GpusSettingError as exc:
        return cnj(str(exc))
    verdict = _verify(baseline, candidate, kernel, spec_file, backend, pol, cnj, sets, seed, timeout)
    if chose:
        verdict.evidence.setdefault("notes", []).insert(0, chose)
    return verdict


def _verify(baseline, candidate, kernel, spec_file, backend, pol, cnj, sets, seed, timeout) -> Verdict:

    if not 1 <= sets <= MAX_SETS:
        return cnj(f"--sets must be from 1 to {MAX_SETS}, not {sets}")
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        return cnj(f"--timeout must be a number of seconds > 0, not {timeout}")
    from superopt.config.checks import JUDGE_SETTINGS, setting_problems
    problems = setting_problems(names=JUDGE_SETTINGS)
    if problems:
        return cnj("; ".join(problems))
    texts = []
    for path in (baseline, candidate):
        # a regular file (a FIFO or /dev/zero is refused at once), at most INPUT_LIMIT bytes
        try:
            texts.append(safe_files.read_text(path, safe_files.INPUT_LIMIT, follow=True))
        except UnicodeDecodeError as e:
            return cnj(f"cannot read PTX {path}: not UTF-8 text (byte {e.start})")
        except OSError as e:
            return cnj(f"cannot read PTX {path}: {e.strerror or e}")
    base_ptx, cand_ptx = texts
    import ptx_ir
    modules = []
    for path, text in ((baseline, base_ptx), (candidate, cand_ptx)):
        try:
            modules.append(ptx_ir.parse(text))
        except Exception as e:  # noqa: BLE001 - any parse failure is "cannot judge", never a traceback
            return cnj(f"{path} is not PTX that can be parsed: {type(e).__name__}: {str(e)[:200]}")
    if spec_file is None:
        # As the optimizer does: explicit specs are not at hand, so infer one from the baseline.
        from superopt.specs.inference import infer_specs
        result = infer_specs(modules[0], kernel)
        if not result.specs:
            return cnj(f"no launch spec for {kernel!r}: inference says: {result.reason}; "
                       f"give --spec FILE (TOML or JSON)")
        verdicts = [check(base_ptx, cand_ptx, s, backend=backend, policy=pol, sets=sets, seed=seed,
                          launch_timeout=timeout) for s in result.specs]
        worst = next((v for v in verdicts if v.status != "accepted"), verdicts[0])
        worst.evidence.setdefault("notes", []).append(
            f"spec inferred from the baseline ({len(result.specs)} launch shape(s): "
            + "; ".join(f"grid {s.grid} block {s.block}" for s in result.specs) + ")")
        worst.evidence["spec_origin"] = "inferred"
        return worst
    try:
        spec = load_spec(spec_file, kernel=kernel)
    except SpecError as e:
        # a spec file with one spec under another name: accept it only if it is the only one
        try:
            spec = load_spec(spec_file)
        except SpecError:
            return cnj(f"launch spec: {e}")
        if spec.kernel != kernel and kernel not in spec.kernel and spec.kernel not in kernel:
            return cnj(f"launch spec: {e}")
    if spec.kernel != kernel:
        from dataclasses import replace
        spec = replace(spec, kernel=kernel)
    return check(base_ptx, cand_ptx, spec, backend=backend, policy=pol, sets=sets, seed=seed,
                 launch_timeout=timeout)


@click.command("verify")
@click.argument("baseline", type=click.Path(dir_okay=False))
@click.argument("candidate", type=click.Path(dir_okay=False))
@click.option("--kernel", required=True, help="Kernel (.entry) name; a unique substring of the mangled name works.")
@click.option("--spec", "spec_file", type=click.Path(exists=True, dir_okay=False),
              help="Launch spec (TOML or JSON); without it the spec is inferred from BASELINE, as the optimizer does.")
@click.option("--backend", type=BackendChoice(), default="auto", show_default=True,
              help="auto: the GPU when one is usable, else the CPU emulator.")
@click.option("--policy", default="exact", show_default=True,
              help="exact (bit-identical, NaN==NaN) | ulp:N | rel:X (opt-in tolerance, float buffers only)")
@click.option("--sets", default=4, show_default=True, type=click.IntRange(min=1, max=MAX_SETS),
              help=f"Input sets (each launched twice per kernel); 1 to {MAX_SETS}.")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Master seed (default: fresh from os.urandom).")
@click.option("--timeout", type=FiniteFloat(min=0, min_open=True), default=None,
              help="Seconds per launch, > 0 (default: 10 for the baseline, max(2, 50x baseline) for the candidate).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def verify_command(baseline, candidate, kernel, spec_file, backend, policy, sets, seed, timeout, as_json):
    """Judge CANDIDATE against BASELINE: exit 0 accepted, 1 rejected, 2 could not judge."""
    try:
        Policy.parse(policy)
    except ValueError as e:
        click.echo(f"could not judge: {e}", err=True)
        sys.exit(2)
    v = verify_files(baseline, candidate, kernel, spec_file, backend=backend, policy=policy, sets=sets,
                     seed=seed, timeout=timeout)
    if as_json:
        click.echo(json.dumps(v.to_dict(), indent=2, default=str))
    else:
        click.echo(v.summary())
    sys.exit(EXIT_CODES[v.status])
