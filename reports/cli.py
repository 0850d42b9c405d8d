"""`superopt report`, `superopt compare`, `superopt gate` (registered on superopt's CLI)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from reports.compare import compare, gate, geomean
from reports.load import RecordError, load_records


def _load(paths):
    try:
        return load_records(paths)
    except RecordError as exc:
        raise click.ClickException(str(exc)) from None


@click.command("report")
@click.argument("records", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["term", "md", "html"]), default="term", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
def report_command(records, fmt, output):
    """Render records (files or folders of JSON) as a table, Markdown or HTML."""
    from reports import render
    data = _load(records)
    if fmt == "term":
        render.terminal(data)
        return
    text = render.markdown(data) if fmt == "md" else render.html_report(data)
    if output:
        output.write_text(text)
        click.echo(f"wrote {output}")
    else:
        click.echo(text)


@click.command("compare")
@click.argument("old", type=click.Path(exists=True, path_type=Path))
@click.argument("new", type=click.Path(exists=True, path_type=Path))
def compare_command(old, new):
    """Speedups per kernel in two sets of records, side by side."""
    rows = compare(_load([old]), _load([new]))
    for r in rows:
        b = f"{r.before:.3f}x" if r.before else "-"
        a = f"{r.after:.3f}x" if r.after else "-"
        ch = f"{(r.change - 1) * 100:+.1f}%" if r.change else ""
        click.echo(f"{r.kernel:60s} {b:>9s} -> {a:>9s} {ch}")
    ga, gb = geomean(r.before for r in rows), geomean(r.after for r in rows)
    if ga and gb:
        click.echo(f"geomean: {ga:.3f}x -> {gb:.3f}x")


@click.command("gate")
@click.argument("old", type=click.Path(exists=True, path_type=Path))
@click.argument("new", type=click.Path(exists=True, path_type=Path))
@click.option("--max-regression", default=0.02, show_default=True, help="Allowed relative loss of speedup.")
def gate_command(old, new, max_regression):
    """Exit 1 when NEW regresses against OLD (slower kernels, lost optimizations)."""
    problems = gate(compare(_load([old]), _load([new])), max_regression)
    for p in problems:
        click.echo(f"regression: {p}", err=True)
    if problems:
        sys.exit(1)
    click.echo("no regressions")
