"""Shared pieces of the generate tests: references, kernels, planted models."""
from __future__ import annotations

from pathlib import Path

from tests.model.helpers import VADD_FN, VADD_WRONG, PlantedModel

SIGNATURE = "vadd(const float* a, const float* b, float* c, int n)"
REFERENCE = """import numpy as np

def reference(a, b, c, n):
    c[:n] = a[:n] + b[:n]
"""
# assembles nowhere: a 64-bit register in a 32-bit float add
VADD_NO_PTXAS = VADD_FN.replace("add.f32 \t%f3, %f2, %f1;", "add.f32 \t%f3, %f2, %rd1;")
assert VADD_NO_PTXAS != VADD_FN and VADD_WRONG != VADD_FN


def write_reference(tmp_path: Path, text: str = REFERENCE, name: str = "ref.py") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def planted(*rounds) -> PlantedModel:
    """A model answering ``rounds[i]`` (a list of function texts) to its i-th request."""
    return PlantedModel({"rewrite": [list(r) for r in rounds]})


__all__ = ["SIGNATURE", "REFERENCE", "VADD_FN", "VADD_WRONG", "VADD_NO_PTXAS", "write_reference", "planted",
           "PlantedModel"]
