"""The queue of searches after the build (superopt.store.queue) and the deferred decision source
(superopt.decide.deferred), in process: what a deferred compilation records and writes, the
settings, and the queue's disk and age limits firing."""
from __future__ import annotations

import json
import os
import stat
import time

import pytest

from superopt.config.resolved import Settings, SettingError
from superopt.optimize import optimize_module
from superopt.store import queue as q
from tests.deferred.conftest import KERNELS, PTX, SRC


@pytest.fixture
def no_runner(monkeypatch):
    """Compilations here do not start a runner (the tests run it themselves); the starts are counted."""
    started = []
    monkeypatch.setattr(q, "start_runner", lambda queue, limits, **kw: started.append(queue.root) or None)
    return started


def deferred(**settings) -> Settings:
    return Settings({"search": "deferred", **settings})


def queue() -> q.Queue:
    from superopt.store.cache import default_cache_dir
    return q.Queue(default_cache_dir())


def test_search_setting_names_its_valid_values(env):
    with pytest.raises(SettingError) as err:
        q.search_mode(Settings(env={"NVCC_PLUS_SEARCH": "later"}))
    assert "NVCC_PLUS_SEARCH" in str(err.value) and "now, deferred" in str(err.value) and "'later'" in str(err.value)
    assert q.search_mode(Settings(env={})) == "now"
    # the pipeline refuses it too (the driver then keeps nvcc's code and prints this line)
    with pytest.raises(SettingError, match="now, deferred"):
        optimize_module(PTX, source=SRC, settings=Settings({"search": "soon"}))


@pytest.mark.parametrize("name, value, words", [
    ("NVCC_PLUS_QUEUE_MAX_SIZE", "lots", "256M"),
    ("NVCC_PLUS_QUEUE_BUDGET", "-1", ">= 0"),
    ("NVCC_PLUS_QUEUE_RUNNERS", "0", "gpus"),
    ("NVCC_PLUS_QUEUE_IDLE_EXIT", "soon", "number"),
])
def test_bad_queue_limits_are_named(env, name, value, words):
    with pytest.raises(SettingError) as err:
        q.limits_from(Settings(env={name: value}))
    assert name in str(err.value) and words in str(err.value)


def test_deferred_compilation_queues_the_module_and_keeps_nvccs_code(dry_run, no_runner):
    t0 = time.monotonic()
    res = optimize_module(PTX, source=SRC, target="sm_90", settings=deferred())
    assert time.monotonic() - t0 < 30
    assert res.ptx == PTX and not res.changed and res.messages == []
    by = {k["kernel"]: k for k in res.records["kernels"]}
    assert sorted(by) == sorted(KERNELS)
    for k in by.values():
        # structural: nothing judged, no search time, the reason and the queued note
        assert k["status"] == "kept-baseline" and k["candidates"] == [] and "seconds" not in k
        assert k["reason"].startswith("queued for a search after the build")
        assert k["queued"]["status"] == "queued"
    from reports.load import validate
    validate(res.records)
    entries = queue().listing()
    assert len(entries) == 1 and entries[0].name == by[KERNELS[0]]["queued"]["entry"]
    doc = json.loads(entries[0].path.read_text())
    assert doc["ptx"] == PTX and doc["source"] == SRC and doc["target"] == "sm_90" and doc["kernels"] == KERNELS
    assert doc["settings"]["env"]["NVCC_PLUS_JUDGE"] == "bench.scale.dryrun:judge"
    assert "NVCC_PLUS_SEARCH" not in doc["settings"]["env"] and doc["settings"]["document"]["search"] == "deferred"
    # owner-only: the folder and the entry
    assert stat.S_IMODE(os.stat(queue().root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(entries[0].path).st_mode) == 0o600
    assert no_runner == [queue().root]
    from superopt.store.cache_stats import CacheStats
    assert CacheStats(queue().cache_root).read()["searches"] == 0


def test_the_same_module_is_queued_once(dry_run, no_runner):
    first = optimize_module(PTX, source=SRC, target="sm_90", settings=deferred())
    again = optimize_module(PTX, source=SRC, target="sm_90", settings=deferred())
    assert [k["queued"]["status"] for k in again.records["kernels"]] == ["already queued"] * 2
    assert first.records["kernels"][0]["queued"]["entry"] == again.records["kernels"][0]["queued"]["entry"]
    assert len(queue().listing()) == 1
    # another target is another search
    optimize_module(PTX, source=SRC, target="sm_80", settings=deferred())
    assert len(queue().listing()) == 2


def test_queue_disk_limit_refuses_an_entry_with_one_line_never_the_build(dry_run, no_runner):
    size = len(json.dumps(q.make_entry(PTX, target="sm_90", source=SRC, kernels=KERNELS,
                                       settings=deferred())))
    limit = int(1.5 * size)
    settings = deferred(queue_max_size=str(limit))
    ok = optimize_module(PTX, source=SRC, target="sm_90", settings=settings)
    assert ok.records["kernels"][0]["queued"]["status"] == "queued"
    full = optimize_module(PTX, source=SRC, target="sm_80", settings=settings)
    assert full.ptx == PTX and not full.changed
    assert len(full.messages) == 1 and "NVCC_PLUS_QUEUE_MAX_SIZE" in full.messages[0], full.messages
    assert full.messages[0].startswith("search not queued: the queue") and "nvcc's code kept" in full.messages[0]
    for k in full.records["kernels"]:
        assert k["reason"].startswith("not queued: the queue") and "queued" not in k
    assert len(queue().listing()) == 1 and queue().size()[1] <= limit
    assert len(no_runner) == 1                     # nothing queued: no runner started for it


def test_entries_older_than_the_age_limit_are_dropped(env):
    qu = q.Queue(env / "cache")
    entry = q.make_entry(PTX, target="sm_90", source=SRC, kernels=KERNELS, settings=Settings({}))
    added = qu.add(entry, q.QueueLimits())
    assert added.status == "queued"
    old = time.time() - 8 * 86400
    os.utime(added.path, (old, old))
    assert qu.drop_old(30) == []                   # within 30 days: kept
    assert qu.drop_old(7) == [added.name] and qu.listing() == []


def test_a_held_entry_is_not_claimed_twice_nor_dropped(env):
    qu = q.Queue(env / "cache")
    for target in ("sm_80", "sm_90"):
        qu.add(q.make_entry(PTX, target=target, source=SRC, kernels=KERNELS, settings=Settings({})), q.QueueLimits())
    first = qu.claim_next()
    second = qu.claim_next()
    assert first and second and first.name != second.name
    assert qu.claim_next() is None
    os.utime(first.path, (0, 0))
    assert qu.drop_old(1) == []                     # a runner holds it
    first.release()
    assert qu.claim_next().name == first.name       # released (or its runner died): taken again
    second.release()


def test_a_module_run_before_is_not_queued_again(dry_run, no_runner):
    res = optimize_module(PTX, source=SRC, target="sm_90", settings=deferred())
    name = res.records["kernels"][0]["queued"]["entry"]
    qu = queue()
    claim = qu.claim_next()
    qu.finish(claim, done=True)                     # what a runner does after the entry's run
    again = optimize_module(PTX, source=SRC, target="sm_90", settings=deferred())
    for k in again.records["kernels"]:
        assert "not queued: a search after an earlier build" in k["reason"] and "queued" not in k
    assert qu.listing() == [] and qu.done_at(name) is not None
    assert qu.forget_done() == 1                    # superopt cache clear
    third = optimize_module(PTX, source=SRC, target="sm_90", settings=deferred())
    assert third.records["kernels"][0]["queued"]["status"] == "queued"


def test_without_a_way_to_measure_nothing_is_queued(env, no_runner):
    # the emulator's estimates are not stored: a search after the build could not be applied
    res = optimize_module(PTX, source=SRC, target="sm_90",
                          settings=deferred(backend="emulator", no_gpu="estimate"))
    assert all(k["reason"].startswith("not queued: a search after the build stores only measured")
               for k in res.records["kernels"])
    res = optimize_module(PTX, source=SRC, target="sm_90", settings=deferred(backend="emulator"))
    assert all(k["reason"].startswith("no GPU and no locked or cached decision") for k in res.records["kernels"])
    assert queue().listing() == [] and no_runner == []


def test_the_key_of_a_module_does_not_depend_on_what_the_process_did_before():
    """A runner searches many modules in one process: their keys must be those a fresh build
    computes (model-rewrite registering itself on the first search once changed them)."""
    import json
    import subprocess
    import sys

    import ptx_ir
    from superopt.search.rules import all_pass_names
    before = all_pass_names()
    import superopt.model.rewrite  # noqa: F401 - what the first search imports
    assert all_pass_names() == before
    fresh = subprocess.run([sys.executable, "-c", "import json; from superopt.search.rules import all_pass_names; "
                            "print(json.dumps(all_pass_names()))"], capture_output=True, text=True, check=True)
    from superopt.passes import registry
    # this process also holds passes tests registered: the fresh build's names are the others
    ours = [n for n in before if registry().get(n) is None or registry()[n].source.startswith("superopt.")]
    assert json.loads(fresh.stdout) == ours and "model-rewrite" in ours
    assert ptx_ir.parse(PTX).kernels                 # the module the other tests key


def test_summary_line_says_what_was_queued():
    from nvcc_plus.summary import module_summary
    queued = {"kernel": "k", "status": "kept-baseline", "queued": {"entry": "e"}}
    assert module_summary([{"kernels": [queued, dict(queued, kernel="j")]}], 0.4) == (
        "queued 2 kernels for a search after the build (superopt cache wait waits for it)")
    assert module_summary([{"kernels": [{"kernel": "k", "status": "cached"}]}], 0.4) is None


def test_the_report_shows_a_queued_kernel(dry_run, no_runner):
    from rich.console import Console
    from reports.render import markdown, terminal
    res = optimize_module(PTX, source=SRC, target="sm_90", settings=deferred())
    console = Console(record=True, width=250)
    terminal([res.records], console=console)
    assert console.export_text().count("queued (nvcc's code kept)") == 2
    assert markdown([res.records]).count("queued for a search after the build") == 2
