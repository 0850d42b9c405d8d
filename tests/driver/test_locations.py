"""nvcc-plus.lock is read and written at one place (superopt/store/locations.py): what one
build writes, the next build reads, from the working directory or (under CMake, compiling in
the build directory) from the source's folder."""
from __future__ import annotations

from pathlib import Path

from superopt.store.locations import config_file, lockfile_to_read, lockfile_to_write


def _project(tmp_path: Path) -> tuple[Path, Path, Path]:
    project = tmp_path / "project"
    src = project / "src"
    src.mkdir(parents=True)
    (project / ".git").mkdir()
    build = tmp_path / "build"
    build.mkdir()
    return project, src, build


def test_written_where_it_is_read_under_an_out_of_tree_build(tmp_path):
    project, src, build = _project(tmp_path)
    assert lockfile_to_read(src, cwd=build, env={}) is None
    target = lockfile_to_write(src, None, cwd=build, env={})
    assert target == project / "nvcc-plus.lock"             # the source's project root, not build/
    target.write_text("{}")
    assert lockfile_to_read(src, cwd=build, env={}) == target
    assert lockfile_to_write(src, None, cwd=build, env={}) == target


def test_beside_the_config_file_in_use(tmp_path):
    project, src, build = _project(tmp_path)
    (project / "nvcc-plus.toml").write_text("")
    path, how = config_file(cwd=str(build), source_dirs=[str(src)], env={})
    assert path == str(project / "nvcc-plus.toml") and how == f"found from {src}"
    assert lockfile_to_write(src, path, cwd=build, env={}) == project / "nvcc-plus.lock"


def test_working_directory_first_then_source_and_the_variable_wins(tmp_path):
    project, src, build = _project(tmp_path)
    (project / "nvcc-plus.lock").write_text("{}")
    (build / "nvcc-plus.lock").write_text("{}")
    assert lockfile_to_read(src, cwd=build, env={}) == build / "nvcc-plus.lock"
    named = tmp_path / "elsewhere.lock"
    env = {"NVCC_PLUS_LOCKFILE": str(named)}
    assert lockfile_to_read(src, cwd=build, env=env) == named
    assert lockfile_to_write(src, None, cwd=build, env=env) == named


def test_without_a_project_root_the_working_directory(tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir()
    # no .git anywhere up to / within this owner: the walk may go up, but nothing is found
    assert lockfile_to_write(None, None, cwd=loose, env={}) == loose / "nvcc-plus.lock"
