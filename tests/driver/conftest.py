"""Fixtures of the driver tests (helpers live in tests/driver/helpers.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.driver.helpers import KERNEL_CU, MAIN_CU, SCALE_H


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """A folder with k.cu (kernels, a __device__ variable, an anonymous namespace), main.cu, scale.h."""
    (tmp_path / "k.cu").write_text(KERNEL_CU)
    (tmp_path / "main.cu").write_text(MAIN_CU)
    (tmp_path / "scale.h").write_text(SCALE_H)
    return tmp_path


