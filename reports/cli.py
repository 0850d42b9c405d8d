"""`superopt report`, `superopt compare`, `superopt gate` (registered on superopt's CLI).

Exit codes are part of the interface (CI scripts branch on them):

* ``report``: 0 written; 2 a records file is unreadable or invalid, or the output cannot be
  written; 3 no HTML could be made (jinja2 missing, or a template error; the message says which).
* ``compare``: 0 compared; 2 a records file is unreadable or invalid.
* ``gate``: 0 no regression; 1 a regression (a kernel slower beyond the allowed loss, a lost
  optimization, a kernel missing from NEW); 2 bad input (unreadable or invalid records, or OLD
  or NEW holding no kernel at all — an empty NEW is never a pass).
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from reports.compare import compare, gate, geomean, mismatches
from reports.keyed import current_kernels
from reports.load import RecordError, load_record_files
from superopt.cli_input import FiniteFloat

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_MISSING_DEPENDENCY = 0, 1, 2, 3


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT


def _load(paths):
    try:
        return load_record_files(paths)
    except RecordError as exc:
        raise BadInput(str(exc)) from None




@click.command("report")
@click.argument("records", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["term", "md", "html"]), default="term", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here instead of stdout (every format; term as plain text).")
@click.option("--no-sass", is_flag=True, help="HTML: skip SASS (by default made with ptxas + cuobjdump/nvdisasm when installed).")
def report_command(records, fmt, output, no_sass):
    """Render records as a table, Markdown or a self-contained HTML page.

    RECORDS are record files, folders of them (searched recursively) or .tar.gz/.tgz archives.
    Kernels are keyed by (source, target, kernel); where a rebuild left several records of a
    key, the newest `created` wins and the report says how many it replaced.

    \b
    Exit codes:
      0  written
      2  a records file is unreadable or invalid (the message names it), or OUTPUT cannot be written
      3  --format html could not render: jinja2 is not installed (the message says how
         to install it) or the template failed (the message names the line)
    """
    from reports import render
    from reports.html import HtmlUnavailable
    loaded = _load(records)
    if fmt == "term" and not output:
        render.terminal(loaded)
        return
    try:
        if fmt == "term":
            text = _terminal_text(loaded)
        elif fmt == "md":
            text = render.markdown(loaded)
        else:
            text = render.html_report(loaded, sass=False if no_sass else None)
    except HtmlUnavailable as exc:
        click.echo(f"superopt report: {exc}", err=True)
        sys.exit(EXIT_MISSING_DEPENDENCY)
    if output:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise BadInput(f"{output}: cannot be written ({exc.strerror or exc})") from None
        click.echo(f"wrote {output}")
    else:
        click.echo(text)


def _terminal_text(loaded) -> str:
    """The terminal table as plain text (no colours, 120 columns), for ``--format term -o``."""
    import io

    from rich.console import Console

    from reports import render
    buf = io.StringIO()
    render.terminal(loaded, console=Console(file=buf, width=120, color_system=None, force_terminal=False,
                                            highlight=False))
    return buf.getvalue()


def _fmt(speedup: float | None) -> str:
    return f"{speedup:.3f}x" if speedup else "-"


FORMAT = click.option("--format", "fmt", type=click.Choice(["term", "md", "json"]), default="term",
                      show_default=True,
                      help="term: a table for people; md: Markdown for a CI comment; json: a document for a CI "
                           "step (docs/reports.md). md and json go to stdout whole; the exit code is the same.")


@click.command("compare")
@click.argument("old", type=click.Path(exists=True, path_type=Path))
@click.argument("new", type=click.Path(exists=True, path_type=Path))
@FORMAT
def compare_command(old, new, fmt):
    """Speedups per kernel in two sets of records, side by side.

    Kernels are matched by (source, target, kernel); records of the same sources made in
    another checkout are matched by file name when the full path differs.

    \b
    Exit codes:
      0  compared
      2  a records file is unreadable or invalid (the message names it)
    """
    rows = compare(current_kernels(_load([old])), current_kernels(_load([new])))
    if fmt != "term":
        from reports.compare_render import compare_json, compare_markdown
        click.echo((compare_markdown if fmt == "md" else compare_json)(rows, str(old), str(new)), nl=fmt == "json")
        return
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"{old} → {new}")
    for col in ("kernel", "file", "target", "old", "new", "change", "status"):
        table.add_column(col, justify="right" if col in ("old", "new", "change") else "left")
    for r in rows:
        change = f"{(r.change - 1) * 100:+.1f}%" if r.change else ""
        status = r.status_before if r.status_before == r.status_after else \
            f"{r.status_before or 'missing'} → {r.status_after or 'missing'}"
        table.add_row(r.label, r.key.file_name, r.key.target, _fmt(r.before), _fmt(r.after), change, status)
    console = Console()
    console.print(table)
    common = [r for r in rows if r.before and r.after]
    ga, gb = geomean(r.before for r in common), geomean(r.after for r in common)
    if ga and gb:
        console.print(f"geomean over {len(common)} kernel(s) in both: {ga:.3f}x -> {gb:.3f}x")


@click.command("gate")
@click.argument("old", type=click.Path(exists=True, path_type=Path))
@click.argument("new", type=click.Path(exists=True, path_type=Path))
@click.option("--max-regression", default=0.02, show_default=True, type=FiniteFloat(0, 1, max_open=True),
              help="Allowed relative loss of speedup (0.02 = 2%); a kernel whose timings in OLD or NEW "
                   "spread more allows that much.")
@FORMAT
def gate_command(old, new, max_regression, fmt):
    """Fail when NEW regresses against OLD.

    A regression is a kernel whose speedup over nvcc fell by more than its noise floor (the
    larger of --max-regression and the relative spread of its timings in OLD or NEW: half the
    sum of IQR/median of nvcc's and the kept code), a kernel that lost its optimization by more
    than that, or a kernel of OLD missing from NEW; a change inside the noise floor is not. A
    kernel timed at other sizes, with specs from another source or on another GPU in OLD than
    in NEW is compared all the same, with a warning. Kernels are matched by (source, target,
    kernel) as in `compare`.

    With --format md or json the verdict, the regressions, the warnings and every kernel's
    row go to stdout as one document (a CI comment, a CI step's input); the exit code is the
    same.

    \b
    Exit codes:
      0  no regression
      1  regression (each one is printed on stderr; with --format md|json, in the document)
      2  bad input: a records file is unreadable or invalid, or OLD or NEW holds no kernel
    """
    old_k, new_k = current_kernels(_load([old])), current_kernels(_load([new]))
    for path, kernels in ((old, old_k), (new, new_k)):
        if not len(kernels):
            raise BadInput(f"{path}: holds no kernel records (is it the records directory of a build that ran "
                           "nvcc-plus with NVCC_PLUS_REPORT_DIR set?)")
    rows = compare(old_k, new_k)
    problems = gate(rows, max_regression)
    if fmt != "term":
        from reports.compare_render import gate_json, gate_markdown
        code = EXIT_REGRESSION if problems else EXIT_OK
        counts = (len(old_k), len(new_k))
        if fmt == "md":
            click.echo(gate_markdown(rows, str(old), str(new), max_regression, problems, counts), nl=False)
        else:
            click.echo(gate_json(rows, str(old), str(new), max_regression, problems, counts, code))
        sys.exit(code)
    for w in mismatches(rows):
        click.echo(f"warning: {w}", err=True)
    for p in problems:
        click.echo(f"regression: {p}", err=True)
    if problems:
        click.echo(f"gate: {len(problems)} regression(s) against {old}", err=True)
        sys.exit(EXIT_REGRESSION)
    click.echo(f"no regressions ({len(new_k)} kernel(s) in {new}, {len(old_k)} in {old})")
