"""The `superopt` toolbox command: optimize, verify, passes, try, cache."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from superopt.cli_input import (BackendChoice, BadInput, FiniteFloat, SafeGroup, parse_ptx, ptx_input, read_input,
                                 write_output)


# -h as well as --help, for every command (click hands a group's help options to its commands).
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


@click.group(cls=SafeGroup, context_settings=HELP_OPTIONS)
@click.version_option(package_name="nvcc-plus")
def main() -> None:
    """superopt: optimize, verify and measure PTX kernels.

    Shell completion (click's): eval "$(_SUPEROPT_COMPLETE=bash_source superopt)" in ~/.bashrc
    (zsh_source in ~/.zshrc, fish_source for fish)."""


from superopt.judge.verify_cli import verify_command
from superopt.specs.capture.cli import capture_command  # noqa: E402
from superopt.specs.capture.tune import tune_command  # noqa: E402

main.add_command(verify_command, "verify")
main.add_command(capture_command, "capture")
main.add_command(tune_command, "tune")


# Width of the output when it is not a terminal and COLUMNS does not say: rich's default of 80
# clipped the tables of a piped `superopt optimize` (`kept-baseli…`).
PIPED_WIDTH = 120


def _console(stderr: bool = False):
    """The commands' console. Nothing it prints is cut: table cells fold (break inside a word
    rather than end in `…`), long messages wrap, at whatever width (a terminal's, COLUMNS, or
    PIPED_WIDTH when piped)."""
    import os

    from rich.console import Console
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(stderr=stderr, highlight=False, width=PIPED_WIDTH)
    return console


def _ptx_of(path: Path, arch: str, nvcc_args=(), keep_dir=None) -> str:
    """PTX text of a .ptx or .cu file (see :func:`superopt.cli_input.ptx_input`)."""
    return ptx_input(path, arch, nvcc_args, keep_dir=keep_dir)


# Rows of the optimize table: a module of 20,000 kernels took a minute to draw, and no one
# reads that many rows (the record holds them all).
MAX_TABLE_ROWS = 200
# Seconds the spec fixes of one file may take to check on the emulator (each takes about 0.3 s);
# the fixes past it are printed saying they were not checked.
FIX_CHECK_S = 60.0


class _KernelProgress:
    """Shows the kernel being searched in the command's status line (superopt.search.progress)."""

    def __init__(self, status, file_name: str):
        self.status = status
        self.file_name = file_name

    def kernel_started(self, kernel, index, total, budget_s):
        self.status.update(f"{self.file_name}: searching {kernel.split('(')[0]} "
                           f"({index}/{total}, budget {budget_s:g} s) ...")


@main.command("optimize", context_settings={"ignore_unknown_options": True,
                                            "allow_interspersed_args": False})
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("nvcc_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--kernel", "kernels", multiple=True, help="Only this kernel (mangled or demangled name); repeatable.")
@click.option("--budget", type=FiniteFloat(min=0), help="Seconds per kernel (default: NVCC_PLUS_BUDGET or 30).")
@click.option("--arch", default="sm_90", show_default=True, help="Target for .cu inputs (an -arch in NVCC_ARGS wins).")
@click.option("--backend", type=BackendChoice(), default=None,
              help="Default: NVCC_PLUS_BACKEND, nvcc-plus.toml, else auto.")
@click.option("--no-gpu", "no_gpu", type=click.Choice(["locked", "estimate"]), default=None,
              help="Without a GPU: apply only locked decisions (default) or choose by a static estimate.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the JSON record (and rendered reports, if available) here.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the optimized PTX here.")
def optimize_command(file: Path, nvcc_args, kernels, budget, arch, backend, no_gpu, report_dir, output):
    """Optimize every kernel of FILE (.cu or .ptx); print what happened to each.

    Options go before FILE; everything after FILE goes to nvcc as compiler flags
    (superopt optimize --budget 10 k.cu -Iinclude -DN=4096 -std=c++17). nvcc-plus.toml is
    found as a compilation of FILE finds it (superopt config --source FILE shows it).
    Exit 0 done; 2 bad input (FILE unreadable or not PTX, nvcc failed, a bad setting,
    an unusable lockfile, an output that cannot be written), with one line saying which."""
    import tempfile

    from superopt.cli_input import preprocessed_unit
    if file.suffix == ".ptx" and nvcc_args:
        raise BadInput(f"{' '.join(nvcc_args)}: what follows FILE goes to nvcc, which a .ptx input does not "
                       f"run; put superopt's options (-o, --report, ...) before FILE")
    with tempfile.TemporaryDirectory(prefix="superopt-keep-") as keep:
        # nvcc's preprocessed unit: launch blocks as these flags (-D, #if, -I) make them
        ptx = _ptx_of(file, arch, nvcc_args, keep_dir=keep if file.suffix != ".ptx" else None)
        _optimize_file(file, ptx, preprocessed_unit(keep), kernels, budget, backend, no_gpu, report_dir, output)


def _optimize_file(file: Path, ptx: str, unit: str | None, kernels, budget, backend, no_gpu, report_dir, output):
    from superopt.config.cli import project_config
    from superopt.config.resolved import Settings, SettingError
    from superopt.optimize import optimize_module
    from superopt.store.lockfile import LockfileError

    console = _console()
    config, _, _, problems = project_config(file)
    for p in problems:
        console.print(f"[yellow]warning:[/yellow] {p}")
    # "search": an explicit optimize searches now, whatever NVCC_PLUS_SEARCH says for builds
    overrides = {"backend": backend, "budget": budget, "no_gpu": no_gpu, "search": "now"}
    settings = Settings(config, flags={k: v for k, v in overrides.items() if v is not None})
    module = parse_ptx(ptx, file)
    wanted = _resolve_kernels(module, kernels)
    with console.status(f"optimizing {len(wanted) or len(module.kernels)} kernel(s) of {file.name} ...") as status:
        try:
            result = optimize_module(ptx, source=str(file), settings=settings, kernels=wanted or None,
                                     progress=_KernelProgress(status, file.name), unit=unit)
        except (SettingError, LockfileError) as exc:
            raise BadInput(str(exc)) from None
    kernel_records = result.records["kernels"]
    console.print(_optimize_table(file, kernel_records[:MAX_TABLE_ROWS]))
    _print_reasons(console, kernel_records[:MAX_TABLE_ROWS])
    if len(kernel_records) > MAX_TABLE_ROWS:
        from collections import Counter
        rest = Counter(str(k["status"]) for k in kernel_records[MAX_TABLE_ROWS:])
        console.print(f"... and {len(kernel_records) - MAX_TABLE_ROWS} more kernel(s): "
                      + ", ".join(f"{n} {s}" for s, n in rest.most_common())
                      + " (--report DIR writes the record of every kernel)")
    from rich.markup import escape
    for m in result.messages + list(result.build_notes):
        console.print(f"[yellow]note:[/yellow] {escape(m)}")
    _print_spec_fixes(console, module, kernel_records, file, ptx)
    if output:
        write_output(output, result.ptx, "optimized PTX")
        console.print(f"optimized PTX written to {output}")
    if report_dir:
        from superopt.cli_input import make_folder
        make_folder(report_dir, "report")
        path = report_dir / f"{file.name}.record.json"
        write_output(path, json.dumps(result.records, indent=1), "record")
        console.print(f"record written to {path}")


def _optimize_table(file: Path, kernels: list[dict]):
    """One row per kernel; every cell folds rather than being cut (the reasons, whole sentences,
    follow the table: _print_reasons)."""
    from rich.table import Table
    table = Table(title=f"superopt: {file.name}")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("kernel", overflow="fold", ratio=1)
    table.add_column("status", no_wrap=True)            # at most 14 characters: never broken
    table.add_column("winner", overflow="fold")
    table.add_column("speedup", no_wrap=True)
    table.add_column("tried", justify="right", no_wrap=True)     # candidates
    for i, k in enumerate(kernels, 1):
        cands = k.get("candidates", [])
        win = next((c for c in cands if c["fate"] in ("winner", "estimate-winner")), None)
        speed = f"{win['speedup']:.2f}x" if win and win.get("speedup") else "-"
        table.add_row(str(i), k.get("signature") or k["kernel"], k["status"] or "-", k.get("winner") or "-",
                      speed, str(len(cands)))
    return table


def _print_reasons(console, kernels: list[dict]) -> None:
    """Why each kernel got its status, in full (a table cell cut it at 90 characters)."""
    from rich.markup import escape
    for i, k in enumerate(kernels, 1):
        if k.get("reason"):
            console.print(f"{i}. {escape(k.get('signature') or k['kernel'])}: {escape(str(k['reason']))}")


def _not_verifiable(k: dict) -> bool:
    return k.get("status") == "not-verifiable" or str(k.get("reason") or "").startswith("not verifiable")


def _print_spec_fixes(console, module, kernels: list[dict], file: Path, ptx: str | None = None) -> None:
    """For each kernel that could not be verified: why, and the exact spec to add, checked first:
    nvcc's own code (``ptx``) must run under it on the emulator, else what is unknown is printed
    instead (superopt.judge.spec_fix)."""
    from rich.markup import escape

    from superopt.judge.spec_fix import checked_fix
    source_text = read_input(file, "CUDA source", errors="replace") if file.suffix != ".ptx" else None
    if ptx is None:
        import ptx_ir
        ptx = ptx_ir.emit(module)
    import time
    deadline = time.monotonic() + FIX_CHECK_S
    for k in kernels:
        if not _not_verifiable(k):
            continue
        why = str(k.get("reason") or "no launch spec").removeprefix("not verifiable: ")
        console.print(f"\n[bold]{escape(str(file))}: kernel {escape(k.get('signature') or k['kernel'])}[/bold] "
                      f"is not verifiable ({escape(why)}); nvcc's code is kept.")
        try:
            fix = checked_fix(ptx, module, k["kernel"], source_text, deadline=deadline)
        except Exception as exc:  # noqa: BLE001 - the fix is advice; its failure must not hide the table
            console.print(f"  (no template: {type(exc).__name__}: {exc}; see docs/launch-specs.md)", markup=False)
            continue
        # soft_wrap: lines to paste are never broken at the console's width
        console.print(fix.text(), markup=False, soft_wrap=True)


def _resolve_kernels(module, names) -> list[str]:
    out = []
    for name in names:
        hits = [k.name for k in module.kernels if name in (k.name, k.signature or "")
                or (k.signature or "").split("(")[0] == name]
        if not hits:
            raise BadInput(f"no kernel named {name!r} (kernels: "
                                       f"{', '.join(k.signature or k.name for k in module.kernels)})")
        out.extend(hits)
    return out


@main.command("passes")
@click.option("--json", "as_json", is_flag=True, help="Every pass as JSON (name, summary, assumes, parameters).")
@click.option("--names", is_flag=True, help="Only the names, one a line (for NVCC_PLUS_PASSES).")
def passes_command(as_json, names):
    """List the registered passes with what each assumes and its parameters."""
    from superopt.passes import registry
    infos = list(registry().values())
    if names:
        click.echo("\n".join(i.name for i in infos))
        return
    if as_json:
        click.echo(json.dumps([{"name": i.name, "summary": i.summary, "assumes": i.assumes,
                                "params": {k: list(v) for k, v in i.params.items()}} for i in infos],
                              indent=1, default=str))
        return
    _console().print(_passes_table(infos))


def _passes_table(infos):
    """Two columns, so that 80 columns read well: the name (never broken), then what the
    pass does, what it assumes or proves, and its parameters, one under the other."""
    from rich.table import Table
    from rich.text import Text
    table = Table(title="superopt passes", show_lines=True, expand=False)
    table.add_column("pass", no_wrap=True, style="bold")
    table.add_column("what it does / assumes / parameters", overflow="fold")
    for info in infos:
        params = ", ".join(f"{k} in {list(v)}" for k, v in info.params.items()) or "none"
        cell = Text(info.summary)
        cell.append("\nassumes: ", style="dim")
        cell.append(info.assumes)
        cell.append("\nparameters: ", style="dim")
        cell.append(params)
        table.add_row(info.name, cell)
    return table


# What each fate of `superopt try` counts as: only a candidate the differential check accepted
# is "verified"; a rewrite that merely assembled was not checked and never counts as passing.
TRY_VERIFIED = ("verified", "faster", "not-faster", "not-confirmed", "slower-elsewhere", "below-min-gain",
                "not-timed", "winner", "estimate-winner")
TRY_FAILED = ("rejected-check", "rejected-ptxas", "pass-crashed", "error")
TRY_UNCHECKED = ("assembled-not-verifiable",)
TRY_NOT_JUDGED = ("not-judged", "skipped-budget")


def try_counts(rows: list[dict]) -> dict:
    """Counts by what a row proves: verified (and faster), failed, only assembled, not judged,
    same machine code as nvcc's, unreadable files."""
    fates = [r["fate"] for r in rows]
    return {"fired": sum(f != "unreadable" for f in fates),
            "verified": sum(f in TRY_VERIFIED for f in fates),
            "faster": sum(f in ("faster", "winner") for f in fates),
            "failed": sum(f in TRY_FAILED for f in fates),
            "unchecked": sum(f in TRY_UNCHECKED for f in fates),
            "not_judged": sum(f in TRY_NOT_JUDGED for f in fates),
            "same_code": sum(f == "same-code" for f in fates),
            "unreadable": sum(f == "unreadable" for f in fates)}


def try_summary(c: dict) -> str:
    parts = [f"{c['verified']} verified ({c['faster']} faster)",
             f"{c['failed']} failed verification or assembly"]
    if c["unchecked"]:
        parts.append(f"{c['unchecked']} assembled but not verifiable (no launch spec: not checked, "
                     f"not counted as passing)")
    if c["not_judged"]:
        parts.append(f"{c['not_judged']} could not be judged")
    if c["same_code"]:
        parts.append(f"{c['same_code']} made the same machine code as nvcc")
    line = f"fired on {c['fired']} kernel/parameter combinations: " + ", ".join(parts)
    if c["unreadable"]:
        line += f"; {c['unreadable']} file(s) unreadable"
    return line


@main.command("try")
@click.argument("pass_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--on", "targets", multiple=True, required=True,
              type=click.Path(exists=True, path_type=Path), help="PTX/CU files or folders; repeatable.")
@click.option("--backend", type=BackendChoice(), default="auto", show_default=True)
@click.option("--arch", default="sm_90", show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Also write results as JSON.")
@click.option("--strict", is_flag=True, help="Exit 1 also when a rewrite could not be verified (not only when one failed).")
def try_command(pass_file: Path, targets, backend, arch, json_out, strict):
    """Run a user pass over files: where it fired, whether each rewrite verified, speedups.

    Exit 0 when no rewrite failed, 1 when one did (with --strict, also when one was not
    verified), 2 when the pass file cannot be read or loaded (a file of --on that cannot
    be read is a row "unreadable"). A rewrite of a kernel without a launch spec is only assembled: it is
    counted apart, never as passing."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from superopt.judge import BackendJudge
    from superopt.passes import load_pass_file

    console = _console()
    from superopt.cli_input import require_regular
    from superopt.config.checks import JUDGE_SETTINGS, SettingError, check_settings
    try:
        check_settings(names=JUDGE_SETTINGS)
    except SettingError as exc:
        raise BadInput(str(exc)) from None
    require_regular(pass_file, "pass file")
    try:
        infos = load_pass_file(pass_file)
    except Exception as exc:  # noqa: BLE001 - the user's file: say which and why, no traceback
        raise BadInput(f"{pass_file}: cannot load the pass ({type(exc).__name__}: {exc})") from None
    files = []
    for t in targets:
        files.extend(sorted(p for p in t.rglob("*") if p.suffix in (".ptx", ".cu")) if t.is_dir() else [t])
    judge = BackendJudge(backend)
    rows = []
    err = _console(stderr=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal)
    with progress:
        task = progress.add_task("superopt try", total=len(files))
        for path in files:
            progress.update(task, description=f"superopt try: {path.name}")
            rows.extend(_try_file(path, arch, infos, pass_file, judge, progress, task))
            progress.advance(task)
    table = Table(title=f"superopt try {pass_file.name} ({judge.backend})")
    for col in ("file", "kernel", "pass", "fate", "speedup", "reason"):
        table.add_column(col, overflow="fold")          # folded, never cut
    for r in rows:
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        table.add_row(Path(r["file"]).name, r["kernel"], r["pass"], r["fate"], sp, r.get("reason") or "")
    console.print(table)
    counts = try_counts(rows)
    console.print(try_summary(counts))
    if json_out:
        write_output(json_out, json.dumps({"counts": counts, "rows": rows}, indent=1), "results")
    bad = counts["failed"] or (strict and (counts["unchecked"] or counts["not_judged"]))
    sys.exit(1 if bad else 0)


def _try_file(path: Path, arch: str, infos, pass_file: Path, judge, progress, task) -> list[dict]:
    import ptx_ir
    from superopt.judge.ptxas import run_ptxas
    from superopt.specs.sources import find_spec
    from superopt.passes import param_grid
    from superopt.search.candidates import Step, make_candidate
    from superopt.search.loop import evaluate
    rows = []
    try:
        ptx = _ptx_of(path, arch)
        module = parse_ptx(ptx, path)
    except Exception as exc:  # noqa: BLE001 - one bad file is one row
        msg = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        return [{"file": str(path), "kernel": "-", "pass": "-", "fate": "unreadable", "reason": msg[:200]}]
    target = module.target[0] if module.target else arch
    baseline = ptx_ir.emit(module)
    for fn in module.kernels:
        spec = None                              # found once per kernel, when a pass fires
        for info in infos:
            for params in param_grid(info):
                row = {"file": str(path), "kernel": fn.signature or fn.name, "pass": str(Step(info.name, params))}
                try:
                    cand = make_candidate(module, fn.name, [Step(info.name, params)],
                                          {"proposer": "user-pass", "file": str(pass_file)})
                except Exception as exc:  # noqa: BLE001 - the user's pass crashing is a result
                    rows.append({**row, "fate": "pass-crashed", "reason": f"{type(exc).__name__}: {exc}"})
                    continue
                if cand is None:
                    continue
                if spec is None:
                    progress.update(task, description=f"superopt try: {path.name}: {fn.name[:30]} (launch spec)")
                    spec = find_spec(module, fn.name, source=str(path), settings=None)
                specs, why = spec
                progress.update(task, description=f"superopt try: {path.name}: {fn.name[:30]} {info.name}")
                if not specs:
                    static = run_ptxas(cand.ptx, target)
                    rows.append({**row, "fate": "assembled-not-verifiable" if static.ok else "rejected-ptxas",
                                 "reason": f"not verifiable: {why}" if static.ok else static.log[:200],
                                 "changes": len(cand.changes)})
                    continue
                entry = evaluate(cand, baseline, specs, judge, target)
                rows.append({**row, "fate": str(entry["fate"]), "reason": entry.get("reason"),
                             "speedup": entry.get("speedup"), "changes": len(cand.changes)})
    return rows


from superopt.config.cli import config_command  # noqa: E402
from superopt.store.cache_cli import cache_group  # noqa: E402

main.add_command(cache_group, "cache")
main.add_command(config_command, "config")


def _register_report_commands() -> None:
    """Rendering lives in the `reports` package; the toolbox only exposes its commands."""
    from reports.cli import compare_command, gate_command, report_command
    main.add_command(report_command)
    main.add_command(compare_command)
    main.add_command(gate_command)


_register_report_commands()


from superopt.model.cli import dataset_group, model_group  # noqa: E402

main.add_command(model_group, "model")
main.add_command(dataset_group, "dataset")

from superopt.generate.cli import generate_command  # noqa: E402

main.add_command(generate_command, "generate")


def _help_everywhere(group: click.Group) -> None:
    """-h on every command itself, not only through main's context: click caches a command's help
    option the first time it is built, and a command invoked on its own (a test's CliRunner, a
    group run as a script) would otherwise cache --help alone."""
    for cmd in group.commands.values():
        cmd.context_settings = {**HELP_OPTIONS, **(cmd.context_settings or {})}
        if isinstance(cmd, click.Group):
            _help_everywhere(cmd)


_help_everywhere(main)
