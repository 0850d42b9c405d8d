"""Trust boundaries of the driver's files (issue 12): config discovery stops at the project
root and at a change of owner, a discovered file cannot name a program to run, bad settings
are named, and private temp folders cannot be planted."""
import os

import pytest

from nvcc_plus import config as C
from nvcc_plus import real_nvcc as rn
from superopt.judge import gpu_lock
from superopt.store.private_dir import UnsafePath, open_private, private_dir
from superopt.store.discovery import find_upwards


def test_config_discovery_stops_at_the_project_root(tmp_path):
    (tmp_path / "nvcc-plus.toml").write_text('mode = "off"\n')        # outside the project
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / "src").mkdir()
    assert C.find_config_file(str(proj / "src")) is None
    assert C.load({}, {}, cwd=str(proj / "src")).mode == "optimize"
    (proj / "nvcc-plus.toml").write_text('mode = "roundtrip"\n')
    assert C.find_config_file(str(proj / "src")) == str(proj / "nvcc-plus.toml")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another owner")
def test_config_discovery_stops_at_a_folder_of_another_owner(tmp_path):
    (tmp_path / "nvcc-plus.toml").write_text('policy = "rel:1e30"\n')
    os.chown(tmp_path, 12345, 12345)
    mine = tmp_path / "mine"
    mine.mkdir()
    os.chown(mine, os.geteuid(), os.getegid())
    try:
        assert find_upwards("nvcc-plus.toml", str(mine)) is None
    finally:
        os.chown(tmp_path, os.geteuid(), os.getegid())


def test_configured_nvcc_that_does_not_exist_is_an_error():
    with pytest.raises(rn.NotFound, match="/nonexistent/nvcc"):
        rn.find("/nonexistent/nvcc", env={"PATH": os.environ.get("PATH", "")})


@pytest.mark.parametrize("bad", ["nan", "inf", "-3", "soon"])
def test_bad_timeout_is_named_and_does_not_disable_the_limit(tmp_path, bad):
    cfg = C.load({}, {"NVCC_PLUS_TIMEOUT": bad}, cwd=str(tmp_path))
    assert cfg.timeout == C.DEFAULT_TIMEOUT
    assert any("NVCC_PLUS_TIMEOUT" in p for p in cfg.problems)


def test_lock_dir_refuses_a_planted_symlink(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.mkdir()
    planted = tmp_path / "locks"
    planted.symlink_to(victim)
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(planted))
    with pytest.raises(UnsafePath, match="symlink"):
        with gpu_lock.gpu_lock(0, timeout=0):
            pass
    assert list(victim.iterdir()) == []


def test_private_files_never_follow_symlinks(tmp_path):
    d = private_dir(str(tmp_path / "p"))
    assert (os.stat(d).st_mode & 0o777) == 0o700
    target = tmp_path / "target"
    target.write_text("keep")
    os.symlink(target, os.path.join(d, "x.out"))
    with pytest.raises(OSError):
        open_private(os.path.join(d, "x.out"), os.O_WRONLY, new=True)
    with pytest.raises(OSError):
        open_private(os.path.join(d, "x.out"), os.O_WRONLY)
    assert target.read_text() == "keep"
