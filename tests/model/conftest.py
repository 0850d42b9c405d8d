"""Fixtures of the model-proposer tests (the pass fixture is defined in helpers.py)."""
import pytest

from tests.model.helpers import test_passes  # noqa: F401


@pytest.fixture(autouse=True)
def _private_dataset_dir(monkeypatch, tmp_path):
    """Measured wins that searches save go to the test's folder, not the user's cache."""
    monkeypatch.setenv("NVCC_PLUS_DATASET_DIR", str(tmp_path / "dataset"))
