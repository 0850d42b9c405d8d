"""NVCC_PLUS_KERNEL_SEARCHES=auto (the default): a compilation searches a second kernel beside
its first only while fewer than AUTO_GPU_SEARCHES searches per GPU run on the host, counted
through superopt.judge.search_census (a flock per searching compilation and per extra search; a
killed compilation's entry is never counted). The GPU is faked (SUPEROPT_FAKE_GPUS) and the
judges hold it as the GPU backend does, as in test_economy."""
from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from contextlib import ExitStack

import pytest

from superopt.decide.searches import AUTO_GPU_SEARCHES
from superopt.judge import search_census
from tests.search.test_economy import _SlowFirstJudge, fake_gpu  # noqa: F401 (a fixture)
from tests.search.test_search import DATA, OPTS

KERNELS = ["_Z10saxpy_loopPfPKffi", "_Z7diamondPiPKii", "_Z6rowsumPfPKfii"]


def _register_and_die(lock_dir: str, ready) -> None:
    os.environ["NVCC_PLUS_LOCK_DIR"] = lock_dir
    held = search_census.register()
    assert held is not None
    ready.set()
    os._exit(0)                         # no clean-up: the entry stays, its lock goes with the process


def test_running_searches_are_counted_while_they_run(fake_gpu):
    assert search_census.running() == 0
    with search_census.register():
        assert search_census.running() == 1
        with search_census.register():
            assert search_census.running() == 2
        assert search_census.running() == 1
    assert search_census.running() == 0
    assert os.listdir(search_census.census_dir()) == []


def test_a_killed_compilations_entry_is_not_counted_and_is_removed(fake_gpu):
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    child = ctx.Process(target=_register_and_die, args=(os.environ["NVCC_PLUS_LOCK_DIR"], ready))
    child.start()
    child.join(30)
    assert ready.is_set() and child.exitcode == 0
    where = search_census.census_dir()
    assert len(os.listdir(where)) == 1              # left behind
    with search_census.register():
        assert search_census.running() == 1
    assert os.listdir(where) == []


def test_an_entry_not_yet_locked_is_not_counted(fake_gpu):
    """Entries are locked under a hidden name, then renamed into place."""
    where = search_census.census_dir()
    open(os.path.join(where, ".123-4-5"), "w").close()
    assert search_census.running() == 0
    assert os.listdir(where) == [".123-4-5"]


def _optimize(tmp_path, monkeypatch, settings: dict, on_first_check=None, meet: bool = False):
    from superopt.config.resolved import Settings
    from superopt.decide.searches import LocalSearch
    from superopt.optimize import optimize_module
    _SlowFirstJudge.made = []
    _SlowFirstJudge.meet = threading.Barrier(2) if meet else None     # see _SlowFirstJudge

    class Judge(_SlowFirstJudge):
        def verify(self, base, cand, spec, **kw):
            first = not self.spans
            got = super().verify(base, cand, spec, **kw)
            if on_first_check is not None and first and self is _SlowFirstJudge.made[0]:
                on_first_check()            # with meet: both searches are under way here
            return got
    monkeypatch.setattr(LocalSearch, "_new_judge", lambda self: Judge())
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / f"cache-{len(os.listdir(tmp_path))}"))
    return optimize_module(DATA.read_text(), settings=Settings({"passes": OPTS.passes, "sanitize": "off", **settings}),
                           kernels=KERNELS, spec_for=lambda m, k: ([{"x": 1}], "test"))


def test_with_room_on_the_gpu_a_second_kernel_is_searched_beside_the_first(fake_gpu, tmp_path, monkeypatch):
    seen = []
    result = _optimize(tmp_path, monkeypatch, {}, on_first_check=lambda: seen.append(search_census.running()),
                       meet=True)
    judges = _SlowFirstJudge.made
    assert len(judges) == 2 and all(j.steps for j in judges)
    assert {t for j in judges for t in j.threads} == {"superopt-search-0", "superopt-search-1"}
    assert not _SlowFirstJudge.meet.broken, "the two searches' checks never met"
    assert seen == [2]                      # the compilation and its second search, while they ran
    assert sorted(k["kernel"] for k in result.records["kernels"]) == sorted(KERNELS)
    assert search_census.running() == 0     # the compilation is no longer counted


def test_a_busy_gpu_gets_one_search_of_the_compilation_at_a_time(fake_gpu, tmp_path, monkeypatch):
    with ExitStack() as others:             # the build's other compilations, searching
        for _ in range(AUTO_GPU_SEARCHES - 1):
            others.enter_context(search_census.register())
        result = _optimize(tmp_path, monkeypatch, {})
    assert len(_SlowFirstJudge.made) == 1 and _SlowFirstJudge.made[0].threads == {"superopt-search-0"}
    assert sorted(k["kernel"] for k in result.records["kernels"]) == sorted(KERNELS)


def test_a_second_search_starts_once_the_gpu_has_room(fake_gpu, tmp_path, monkeypatch):
    """Busy when the compilation starts; the other compilations end during its first search."""
    others = ExitStack()
    for _ in range(AUTO_GPU_SEARCHES - 1):
        others.enter_context(search_census.register())
    ended = threading.Event()

    def end_the_others():
        if not ended.is_set():
            ended.set()
            others.close()
    try:
        _optimize(tmp_path, monkeypatch, {}, on_first_check=end_the_others)
    finally:
        others.close()
    assert ended.is_set() and len(_SlowFirstJudge.made) == 2


@pytest.mark.parametrize("value", ["1", "auto"])
def test_one_at_a_time_when_set_so_or_with_one_kernel(fake_gpu, tmp_path, monkeypatch, value):
    from superopt.config.resolved import Settings
    from superopt.decide.searches import LocalSearch
    from superopt.optimize import optimize_module
    if value == "1":
        _optimize(tmp_path, monkeypatch, {"kernel_searches": "1"})
        assert len(_SlowFirstJudge.made) == 1 and _SlowFirstJudge.made[0].threads == {"MainThread"}
        return
    _SlowFirstJudge.made = []
    monkeypatch.setattr(LocalSearch, "_new_judge", lambda self: _SlowFirstJudge())
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache-one"))
    optimize_module(DATA.read_text(), settings=Settings({"passes": OPTS.passes, "sanitize": "off"}),
                    kernels=KERNELS[:1], spec_for=lambda m, k: ([{"x": 1}], "test"))
    assert len(_SlowFirstJudge.made) == 1 and _SlowFirstJudge.made[0].threads == {"MainThread"}


def test_an_interrupted_compilation_is_no_longer_counted(fake_gpu, tmp_path, monkeypatch):
    from superopt.config.resolved import Settings
    from superopt.decide.searches import LocalSearch
    from superopt.optimize import optimize_module
    from tests.search.test_economy import FakeGpuJudge

    counted = []

    class Broken(FakeGpuJudge):
        def hold(self, deadline=None):
            counted.append(search_census.running())
            raise ZeroDivisionError("the judge broke")
    monkeypatch.setattr(LocalSearch, "_new_judge", lambda self: Broken())
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ZeroDivisionError):
        optimize_module(DATA.read_text(), settings=Settings({"passes": OPTS.passes, "sanitize": "off"}),
                        kernels=KERNELS, spec_for=lambda m, k: ([{"x": 1}], "test"))
    assert counted and counted[0] >= 1            # counted while it searched
    # the compilation's entry (registered by this thread) is closed at once
    mine = f"{os.getpid()}-{threading.get_ident()}-"
    assert not [n for n in os.listdir(search_census.census_dir()) if n.startswith(mine)]
    # a search thread beside it (its judge breaks too) ends on its own, a moment later (CI once
    # saw an entry outlive 10 s: the message names its holder and where that thread is)
    deadline = time.monotonic() + 30
    while search_census.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert search_census.running() == 0, _holders()


def _holders() -> str:
    """The census entries left and, for each held by a thread of this process, its stack."""
    import sys
    import traceback
    frames = sys._current_frames()
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for entry in sorted(os.listdir(search_census.census_dir())):
        pid, _, rest = entry.partition("-")
        ident = int(rest.partition("-")[0]) if pid == str(os.getpid()) and rest[:1].isdigit() else None
        out.append(f"{entry}: thread {names.get(ident, 'ended or another process')}")
        if ident in frames:
            out.append("".join(traceback.format_stack(frames[ident])))
    return "\n".join(out)
