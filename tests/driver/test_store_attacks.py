"""What a repository (or another user) can put where nvcc-plus keeps its files (issue 25):
a symlinked ``.lck`` must not truncate its target, a FIFO must not stall a compile, a cache
entry linked to /dev/zero must not be read until memory runs out, a checkout owned by
another user must not steer a build run by root."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from nvcc_plus import budget
from nvcc_plus import config as C
from superopt.config.resolved import Settings
from superopt.judge import gpu_lock
from superopt.store import discovery, safe_files
from superopt.store.cache import DecisionCache
from superopt.store.cache_stats import CacheStats
from superopt.store.lockfile import Lockfile, LockfileError
from superopt.store.locations import lockfile_to_read
from tests.bounded import bounded_memory, within

KEY = "ab" + "0" * 62
PRECIOUS = "the user's file, which must stay as it is\n"


@pytest.fixture
def precious(tmp_path) -> Path:
    p = tmp_path / "precious.txt"
    p.write_text(PRECIOUS)
    return p


def _entry_path(root: Path) -> Path:
    p = DecisionCache(root).path(KEY)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


# ---- symlinked lock files -----------------------------------------------------------------

def test_symlinked_lockfile_lck_does_not_truncate_its_target(tmp_path, precious):
    lock = tmp_path / "repo" / "nvcc-plus.lock"
    lock.parent.mkdir()
    (lock.parent / "nvcc-plus.lock.lck").symlink_to(precious)    # shipped by the repository
    with pytest.raises(OSError, match="symlink"):
        Lockfile(lock).record(KEY, {"plan": []})
    assert precious.read_text() == PRECIOUS
    assert not lock.exists()


def test_lockfile_lck_that_is_a_plain_file_keeps_working(tmp_path):
    lock = tmp_path / "nvcc-plus.lock"
    Lockfile(lock).record(KEY, {"plan": []})
    Lockfile(lock).record("cd" + KEY[2:], {"plan": []})
    assert set(Lockfile(lock).entries) == {KEY, "cd" + KEY[2:]}


def test_symlinked_stats_lck_does_not_truncate_its_target(tmp_path, precious):
    root = tmp_path / "cache"
    root.mkdir()
    (root / "stats.lck").symlink_to(precious)
    with pytest.raises(OSError, match="symlink"):
        CacheStats(root).add(hits=1)
    with pytest.raises(OSError, match="symlink"):
        CacheStats(root).zero()
    assert precious.read_text() == PRECIOUS


def test_estimate_build_with_a_symlinked_stats_lck_keeps_the_target_and_says_so(tmp_path, monkeypatch, precious):
    from tests.search.test_locked_mode_linear import _files
    from superopt.optimize import optimize_module
    root = tmp_path / "cache"
    root.mkdir()
    (root / "stats.lck").symlink_to(precious)
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(root))
    monkeypatch.chdir(tmp_path)
    ptx, cu = _files(tmp_path, 2)
    res = optimize_module(ptx, source=cu, settings=Settings({"no_gpu": "locked", "backend": "emulator"}))
    assert precious.read_text() == PRECIOUS
    assert any("cache statistics not updated" in m and "stats.lck" in m for m in res.messages), res.messages


def test_symlinked_ledger_is_refused_and_its_target_kept(tmp_path, precious):
    with pytest.raises(OSError, match="symlink"):
        budget.Ledger(str(_link(tmp_path / "ledger.json", precious)), 100.0).start()
    assert precious.read_text() == PRECIOUS


def test_planted_gpu_lock_file_symlink_or_fifo_is_refused(tmp_path, monkeypatch, precious):
    locks = tmp_path / "locks"
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(locks))
    gpu_lock.lock_dir()
    os.symlink(precious, gpu_lock.lock_path(0))
    with pytest.raises(OSError, match="symlink"):
        with gpu_lock.gpu_lock(0, timeout=0):
            pass
    assert precious.read_text() == PRECIOUS
    os.mkfifo(gpu_lock.lock_path(1))
    with within(5), pytest.raises(safe_files.NotRegularFile, match="FIFO"):
        with gpu_lock.gpu_lock(1, timeout=0):
            pass


def _link(path: Path, target) -> Path:
    path.symlink_to(target)
    return path


# ---- special files where a cache entry, the stats or a lockfile should be --------------------

def test_fifo_cache_entry_is_absent_at_once(tmp_path):
    root = tmp_path / "cache"
    os.mkfifo(_entry_path(root))
    with within(5):
        assert DecisionCache(root).get(KEY) is None
    DecisionCache(root).put(KEY, {"plan": []})      # the next decision replaces it
    assert DecisionCache(root).get(KEY) == {"plan": []}


def test_cache_entry_linked_to_dev_zero_is_absent_at_once(tmp_path):
    root = tmp_path / "cache"
    _link(_entry_path(root), "/dev/zero")
    with bounded_memory(1 << 30), within(5):
        assert DecisionCache(root).get(KEY) is None
    assert DecisionCache(root).size() == (1, os.lstat(_entry_path(root)).st_size)   # the link, not /dev/zero


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_cache_entry_that_is_a_device_node_is_absent_at_once(tmp_path):
    root = tmp_path / "cache"
    os.mknod(_entry_path(root), 0o600 | stat.S_IFCHR, os.makedev(1, 5))       # /dev/zero's numbers
    with bounded_memory(1 << 30), within(5):
        assert DecisionCache(root).get(KEY) is None


def test_cache_entry_symlinked_to_a_valid_decision_is_not_followed(tmp_path):
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_text(json.dumps({"plan": [{"pass": "x"}]}))
    root = tmp_path / "cache"
    _link(_entry_path(root), elsewhere)
    assert DecisionCache(root).get(KEY) is None


def test_oversized_or_deeply_nested_cache_entry_is_absent(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    _entry_path(root).write_text("[" * 100_000 + "]" * 100_000)
    assert DecisionCache(root).get(KEY) is None
    _entry_path(root).write_text(json.dumps({"plan": [], "pad": "x" * 5000}))
    assert DecisionCache(root).get(KEY) is not None
    monkeypatch.setattr(safe_files, "CACHE_ENTRY_LIMIT", 1000)
    assert DecisionCache(root).get(KEY) is None


def test_fifo_or_dev_zero_stats_read_as_empty(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    os.mkfifo(root / "stats.json")
    with within(5):
        assert CacheStats(root).read()["hits"] == 0
    (root / "stats.json").unlink()
    _link(root / "stats.json", "/dev/zero")
    with bounded_memory(1 << 30), within(5):
        assert CacheStats(root).read()["hits"] == 0
        CacheStats(root).add(hits=2)          # replaces the link with a real file
    assert CacheStats(root).read()["hits"] == 2 and not (root / "stats.json").is_symlink()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder", "nested"])
def test_lockfile_that_is_no_regular_json_file_is_named(tmp_path, kind):
    lock = tmp_path / "nvcc-plus.lock"
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "dev-zero":
        lock.symlink_to("/dev/zero")
    elif kind == "folder":
        lock.mkdir()
    else:
        lock.write_text('{"version": 1, "decisions": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with bounded_memory(1 << 30), within(5), pytest.raises(LockfileError, match=str(lock)):
        Lockfile(lock)


def test_fifo_ledger_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "ledger")
    with within(5), pytest.raises(safe_files.NotRegularFile, match="FIFO"):
        budget.Ledger(str(tmp_path / "ledger"), 100.0).start()


def test_fifo_config_file_is_a_problem_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "cfg.toml")
    with within(5):
        cfg = C.load({}, {"NVCC_PLUS_CONFIG": str(tmp_path / "cfg.toml")}, cwd=str(tmp_path))
    assert any("cfg.toml" in p and "FIFO" in p for p in cfg.problems), cfg.problems


def test_deeply_nested_config_file_is_a_problem_not_a_crash(tmp_path):
    (tmp_path / "nvcc-plus.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    (tmp_path / ".git").mkdir()
    cfg = C.load({}, {}, cwd=str(tmp_path))
    assert any("nested too deeply" in p for p in cfg.problems), cfg.problems


def test_open_regular_never_truncates(tmp_path):
    p = tmp_path / "f"
    p.write_text(PRECIOUS)
    os.close(safe_files.open_regular(p, os.O_RDWR | os.O_TRUNC))
    assert p.read_text() == PRECIOUS


# ---- ownership ---------------------------------------------------------------------------

def _checkout(tmp_path: Path) -> Path:
    proj = tmp_path / "theirs"
    (proj / ".git").mkdir(parents=True)
    (proj / "src").mkdir()
    (proj / "nvcc-plus.toml").write_text('policy = "rel:1e30"\n')
    (proj / "nvcc-plus.lock").write_text('{"version": 1, "decisions": {}}\n')
    return proj


def test_checkout_of_another_user_is_not_trusted(tmp_path, monkeypatch):
    """Every file of the checkout belongs to someone other than the user running the build
    (simulated: the effective user id is made to differ from the files' owner)."""
    proj = _checkout(tmp_path)
    owner = os.stat(proj).st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)
    monkeypatch.delenv("SUDO_UID", raising=False)
    assert discovery.project_folders(str(proj / "src")) == []
    assert discovery.find_upwards("nvcc-plus.toml", str(proj / "src")) is None
    assert lockfile_to_read(str(proj / "src"), cwd=str(proj / "src"), env={}) is None
    assert C.load({}, {}, cwd=str(proj / "src")).config_path is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a checkout to another user")
def test_root_does_not_trust_a_checkout_another_user_owns(tmp_path, monkeypatch):
    """The case of issue 25: root builds a checkout owned (every folder and file) by uid 12345.
    Comparing with the starting folder's owner trusted it; git would call it dubious."""
    monkeypatch.delenv("SUDO_UID", raising=False)
    proj = _checkout(tmp_path)
    for p in [proj, *proj.rglob("*")]:
        os.chown(p, 12345, 12345)
    assert discovery.find_upwards("nvcc-plus.toml", str(proj / "src")) is None
    assert lockfile_to_read(str(proj / "src"), cwd=str(proj / "src"), env={}) is None
    # under sudo, the user who ran sudo is trusted, as git does
    monkeypatch.setenv("SUDO_UID", "12345")
    assert discovery.find_upwards("nvcc-plus.toml", str(proj / "src")) == str(proj / "nvcc-plus.toml")


def test_sudo_uid_is_honoured_only_for_root(tmp_path, monkeypatch):
    proj = _checkout(tmp_path)
    owner = os.stat(proj).st_uid
    monkeypatch.setenv("SUDO_UID", str(owner))
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1 if owner + 1 != 0 else owner + 2)
    assert discovery.find_upwards("nvcc-plus.toml", str(proj / "src")) is None
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    if owner != 0:
        assert discovery.find_upwards("nvcc-plus.toml", str(proj / "src")) == str(proj / "nvcc-plus.toml")


def test_own_checkout_is_trusted(tmp_path):
    proj = _checkout(tmp_path)
    assert discovery.find_upwards("nvcc-plus.toml", str(proj / "src")) == str(proj / "nvcc-plus.toml")
    assert lockfile_to_read(str(proj / "src"), cwd=str(proj / "src"), env={}) == proj / "nvcc-plus.lock"


def test_fifo_capture_file_is_not_used_and_does_not_stall_the_build(tmp_path, monkeypatch):
    """NVCC_PLUS_CAPTURE is read by every compilation of the build."""
    from tests.search.test_locked_mode_linear import _files
    from superopt.optimize import optimize_module
    from superopt.specs import sources
    os.mkfifo(tmp_path / "app.capture.json")
    monkeypatch.setenv("NVCC_PLUS_CAPTURE", str(tmp_path / "app.capture.json"))
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    sources._CAPTURES.clear()
    ptx, cu = _files(tmp_path, 2)
    with within(10):
        res = optimize_module(ptx, source=cu, settings=Settings({"no_gpu": "locked", "backend": "emulator"}))
    assert any("capture not used" in m and "FIFO" in m for m in res.messages), res.messages
