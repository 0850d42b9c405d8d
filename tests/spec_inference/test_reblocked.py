"""Inferred shapes beside a capture are also tried at the program's real block, when their grid
formula describes the captured launch (a GPU Gems scan: 1024 elements per block of 512)."""
from __future__ import annotations

from superopt.specs.launch_spec import Buffer, LaunchSpec, Scalar
from superopt.specs.sources import reblocked

N_REAL = 64 * 1024 * 1024


def inferred(block: int, grid: str = "cdiv(n, 1024)") -> LaunchSpec:
    return LaunchSpec("_Z11scan_blocksPKiPiS1_i", grid=(grid, 1, 1), block=(block, 1, 1), params=[
        Buffer("in", "s32", "n", "in"), Buffer("out", "s32", "n", "out"),
        Buffer("sums", "s32", "cdiv(n, 1024)", "out"), Scalar("n", "s32", 49157)], origin="inferred")


def captured(block: int = 512, grid: int = N_REAL // 1024, shared: int = 0) -> LaunchSpec:
    return LaunchSpec("_Z11scan_blocksPKiPiS1_i", grid=(grid, 1, 1), block=(block, 1, 1), params=[
        Buffer("p0", "s32", N_REAL, "in"), Buffer("p1", "s32", N_REAL, "out"),
        Buffer("p2", "s32", grid, "out"), Scalar("p3", "s32", N_REAL)], shared_bytes=shared,
        origin="captured")


def test_guessed_blocks_of_the_captured_family_move_to_the_captured_block():
    moved = reblocked([inferred(256), inferred(96), inferred(128)], [captured()])
    assert len(moved) == 1                       # the three guesses are one shape at block 512
    (m,) = moved
    assert m.block == (512, 1, 1) and m.grid == ("cdiv(n, 1024)", 1, 1)
    assert m.scalar_values() == {"n": 49157}      # still a small size: a cheap check
    assert m.resolved().grid == (49, 1, 1)
    assert m.origin == "inferred"


def test_a_formula_that_does_not_give_the_captured_grid_is_not_moved():
    # cdiv(n, 256) at the captured n is 4x the captured grid: another launch family
    assert reblocked([inferred(256, "cdiv(n, 256)")], [captured()]) == []


def test_nothing_is_added_when_a_guess_already_has_the_captured_block():
    assert reblocked([inferred(512), inferred(256)], [captured()]) == []


def test_the_captured_dynamic_shared_memory_comes_along():
    (m,) = reblocked([inferred(256)], [captured(shared=4096)])
    assert m.shared_bytes == 4096


def test_a_different_parameter_list_is_not_matched():
    other = LaunchSpec("k", grid=("cdiv(n, 1024)", 1, 1), block=(256, 1, 1),
                       params=[Scalar("n", "s32", 1000)], origin="inferred")
    assert reblocked([other], [captured()]) == []
