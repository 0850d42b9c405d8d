"""``superopt cache``: the decision cache as ccache users know it: ``stats`` (hits, misses,
searches, time spent and saved, size and limit, the queue of searches after the build),
``--zero-stats``, ``clear`` (``--zero-stats`` too), ``info``; and the queue's ``wait`` and ``drain``
(``NVCC_PLUS_SEARCH=deferred``: docs/deferred.md)."""
from __future__ import annotations

import json

import click


def _settings():
    from superopt.config.cli import project_config
    from superopt.config.resolved import Settings
    data, _, _, _ = project_config()
    return Settings(data)


def _cache():
    from superopt.store.cache import DecisionCache, configured_max_size
    try:
        limit = configured_max_size(_settings())
    except ValueError as exc:
        from superopt.cli_input import BadInput
        raise BadInput(str(exc)) from None
    return DecisionCache(max_bytes=limit)


def _queue():
    """The queue of searches after the build, and its limits (as a compilation here resolves them)."""
    from superopt.store.queue import Queue, limits_from
    try:
        limits = limits_from(_settings())
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    return Queue(_cache().root), limits


def _runner_line(r: dict) -> str:
    spent = f", {r['spent_s']:.0f} of {r['budget_s']:g} s budget spent" if r.get("budget_s") and \
        isinstance(r.get("spent_s"), (int, float)) else ""
    if r["running"]:
        what = f"busy with {r['entry']}" if r["state"] == "busy" else "idle"
        return f"runner {r['slot']}: running (pid {r['pid']}), {what}, {r['done']} done{spent}"
    return f"runner {r['slot']}: stopped ({r.get('reason') or 'reason not recorded'})"


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
    from superopt.store.queue import Queue
    queue = Queue(cache.root).status()
    out = {**data, "entries": entries, "size_bytes": size, "max_size_bytes": cache.max_bytes or 0,
           "hit_rate": (data["hits"] / lookups) if lookups else None, "cache_dir": str(cache.root),
           "queue": queue}
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
        ("queued searches", f"{queue['entries']} ({_size(queue['bytes'])})"
         + (f", oldest {_duration(queue['oldest_s'])} old" if queue["oldest_s"] is not None else "")),
    ]
    lines += [("queue runner", _runner_line(r)) for r in queue["runners"]] or [("queue runner", "none started")]
    if queue["runners"]:
        lines.append(("queue runner log", queue["log"]))
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
@click.option("--zero-stats", is_flag=True, help="Also set the statistics' counters to zero (ccache -Cz).")
def cache_clear(zero_stats):
    """Remove every cached decision (the statistics stay unless --zero-stats), and forget which
    modules the queue ran (they are queued again by the next deferred build)."""
    from superopt.store.queue import Queue
    cache = _cache()
    forgot = Queue(cache.root).forget_done()
    click.echo(f"removed {cache.clear()} decisions from {cache.root}"
               + (f"; forgot {forgot} modules the queue ran" if forgot else ""))
    if zero_stats:
        from superopt.store.cache_stats import CacheStats
        try:
            CacheStats(cache.root).zero()
        except OSError as exc:
            raise click.ClickException(f"{cache.root}: cannot write the statistics ({exc.strerror or exc})")
        click.echo(f"statistics of {cache.root} set to zero")


WAIT_HELP = """Wait until the queue of searches after the build is empty and no runner is busy.

\b
Starts a runner when searches wait and none runs (--no-start: only wait).
Exit codes: 0 the queue is empty and no runner busy; 1 --timeout passed first;
2 searches wait but no runner works on them (it stopped: its budget
(NVCC_PLUS_QUEUE_BUDGET) was spent, it failed: see its log; or --no-start).
"""


@cache_group.command("wait", help=WAIT_HELP)
@click.option("--timeout", type=click.FloatRange(min=0), default=None,
              help="Give up after this many seconds (exit 1). Default: wait as long as it takes.")
@click.option("--start/--no-start", default=True, show_default=True,
              help="Start a runner when searches wait and none runs.")
@click.option("--quiet", "-q", is_flag=True, help="Print only the outcome.")
def cache_wait(timeout, start, quiet):
    from superopt.store.queue import wait_for_queue
    queue, limits = _queue()
    echo = None if quiet else (lambda m: click.echo(f"superopt cache wait: {m}", err=True))
    code, message = wait_for_queue(queue, limits, timeout=timeout, start=start, echo=echo)
    click.echo(f"superopt cache wait: {message}", err=code != 0)
    raise SystemExit(code)


@cache_group.command("drain")
@click.option("--budget", type=click.FloatRange(min=0), default=None,
              help="Seconds to spend (0: no limit). Default: NVCC_PLUS_QUEUE_BUDGET.")
def cache_drain(budget):
    """Run the queued searches here, in the foreground, until the queue is empty (its log on
    stderr). Exit 0 when it ran or a live runner already works the queue."""
    import dataclasses

    from superopt.decide.queue_runner import drain
    queue, limits = _queue()
    limits = dataclasses.replace(limits, idle_exit_s=0.0, runners=1,
                                 budget_s=limits.budget_s if budget is None else (budget or None))
    code, why = drain(queue, limits, siblings=False)
    click.echo(f"superopt cache drain: {why}", err=True)
    raise SystemExit(code)
