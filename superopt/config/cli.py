"""``superopt config``: the effective settings and where each came from (a flag is not
possible here: the environment, which nvcc-plus.toml, or the default), found the way a
compilation finds them. ``--source FILE`` finds nvcc-plus.toml and the lockfile as the
compilation of FILE would (from the working directory, then FILE's folder)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import click


def load_toml(path: str | None) -> tuple[dict, list[str]]:
    """(the parsed file with ``config_path``, problems naming the file)."""
    if not path:
        return {}, []
    from superopt.store.safe_files import read_toml     # regular file, size cap, nesting
    try:
        data = read_toml(path)
    except (OSError, ValueError) as exc:
        return {}, [f"{path}: {' '.join(str(exc).split())}; ignoring it"]
    from superopt.config.settings import unknown_key_problems
    full = os.path.abspath(path)
    return {**data, "config_path": full}, unknown_key_problems(data, full)


def project_config(source: Path | None = None) -> tuple[dict, str | None, str, list[str]]:
    """(config, its path, how it was found, problems) as a compilation of ``source`` finds it."""
    from superopt.store.locations import config_file
    dirs = [str(Path(source).resolve().parent)] if source else []
    path, how = config_file(source_dirs=dirs)
    data, problems = load_toml(path)
    return data, path, how, problems


SECRET = ("NVCC_PLUS_LLM_API_KEY",)


def _show(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict, bool)):
        return json.dumps(value)
    return str(value)


@click.command("config")
@click.option("--source", type=click.Path(dir_okay=False, path_type=Path),
              help="Find nvcc-plus.toml and the lockfile as compiling this file would.")
@click.option("--all", "show_all", is_flag=True, help="Also the internal and developer variables.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def config_command(source, show_all, as_json):
    """Print the effective settings and where each came from."""
    from superopt.config.settings import GROUPS, SETTINGS, resolve
    from superopt.store.cache import default_cache_dir
    from superopt.store.locations import lockfile_to_read, lockfile_to_write

    data, path, how, problems = project_config(source)
    from superopt.config.checks import setting_problems
    problems = problems + setting_problems(data)
    src_dir = str(Path(source).resolve().parent) if source else None
    from superopt.model.dataset import dataset_dir
    # Defaults that are places: show the place itself.
    computed = {"NVCC_PLUS_CACHE_DIR": str(default_cache_dir()), "NVCC_PLUS_DATASET_DIR": str(dataset_dir()),
                "NVCC_PLUS_CONFIG": path or "none found",
                "NVCC_PLUS_LOCKFILE": str(lockfile_to_read(src_dir) or "none found")}
    rows = []
    for s in SETTINGS:
        if s.group in ("internal", "developer") and not show_all:
            continue
        if s.alias_of:
            continue
        value, origin = resolve(s.env, config=data)   # (the raw values: superopt.config.resolved.Settings reads them the same way)
        if value is None:
            value = computed.get(s.env, s.default)
        if s.env in SECRET and value:
            value = "(set, not shown)"
        rows.append({"setting": s.env, "toml": s.toml, "value": value, "from": origin, "group": s.group})
    files = {"config": path, "config_found": how,
             "lockfile_read": str(lockfile_to_read(src_dir) or ""),
             "lockfile_write": str(lockfile_to_write(src_dir, data.get("config_path"))),
             "cache_dir": str(default_cache_dir())}
    if as_json:
        click.echo(json.dumps({"files": files, "settings": rows, "problems": problems}, indent=1, default=str))
        return
    from rich.console import Console
    from rich.table import Table
    console = Console(highlight=False)
    console.print(f"nvcc-plus.toml: {path or '-'} ({how})")
    console.print(f"lockfile: reads {files['lockfile_read'] or '- (none yet)'}; "
                  f"NVCC_PLUS_LOCK=write writes {files['lockfile_write']}")
    console.print(f"cache: {files['cache_dir']}")
    for p in problems:
        console.print(f"[yellow]warning:[/yellow] {p}")
    for group, title in GROUPS.items():
        mine = [r for r in rows if r["group"] == group]
        if not mine:
            continue
        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        table.add_column("setting", no_wrap=True)
        table.add_column("value", overflow="fold")
        table.add_column("from", overflow="fold")
        for r in mine:
            origin = r["from"]
            style = "dim" if origin == "default" else ""
            table.add_row(r["setting"], _show(r["value"]), origin, style=style)
        console.print(table)
