"""``superopt cache``: the decision cache as ccache users know it: ``stats`` (hits, misses,
searches, time spent and saved, size and limit), ``--zero-stats``, ``clear``, ``info``."""
from __future__ import annotations

import json

import click


def _cache():
    from superopt.config_cli import project_config
    from superopt.store.cache import DecisionCache, configured_max_size
    data, _, _, _ = project_config()
    try:
        limit = configured_max_size(data)
    except ValueError as exc:
        from superopt.cli_input import BadInput
        raise BadInput(str(exc)) from None
    return DecisionCache(max_bytes=limit)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


@click.group("cache")
def cache_group():
    """Inspect, size or clear the decision cache (NVCC_PLUS_CACHE_DIR)."""


@cache_group.command("stats")
@click.option("--zero-stats", is_flag=True, help="Set the counters to zero (the cached decisions stay).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def cache_stats(zero_stats, as_json):
    """Hits, misses, searches, time spent and saved, size."""
    from superopt.store.cache_stats import CacheStats
    cache = _cache()
    stats = CacheStats(cache.root)
    if zero_stats:
        try:
            stats.zero()
        except OSError as exc:
            raise click.ClickException(f"{cache.root}: cannot write the statistics ({exc.strerror or exc})")
        click.echo(f"statistics of {cache.root} set to zero")
        return
    data = stats.read()
    entries, size = cache.size()
    lookups = data["hits"] + data["misses"]
    out = {**data, "entries": entries, "size_bytes": size, "max_size_bytes": cache.max_bytes or 0,
           "hit_rate": (data["hits"] / lookups) if lookups else None, "cache_dir": str(cache.root)}
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    rate = f"{100 * out['hit_rate']:.1f}%" if lookups else "-"
    limit = _size(cache.max_bytes) if cache.max_bytes else "none"
    lines = [
        ("cache directory", str(cache.root)),
        ("since", data.get("since") or "-"),
        ("hits", f"{data['hits']}"),
        ("misses", f"{data['misses']}"),
        ("hit rate", rate),
        ("applied from the lockfile", f"{data['locked']}"),
        ("searches", f"{data['searches']}"),
        ("time spent searching", _duration(data["search_s"])),
        ("time saved by hits", _duration(data["saved_s"])),
        ("decisions", f"{entries}"),
        ("size", f"{_size(size)} of {limit}"),
        ("evicted", f"{data['evicted']}"),
    ]
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        click.echo(f"{k:<{width}}  {v}")


@cache_group.command("info")
def cache_info():
    """Where the cache is and how many decisions it holds."""
    cache = _cache()
    entries, size = cache.size()
    click.echo(f"{cache.root}: {entries} decisions, {_size(size)}")


@cache_group.command("clear")
def cache_clear():
    """Remove every cached decision (the statistics stay; --zero-stats resets them)."""
    cache = _cache()
    click.echo(f"removed {cache.clear()} decisions from {cache.root}")
