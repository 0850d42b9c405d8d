"""The fix printed for a "not verifiable" kernel parses as written: the comment and the toml
table it offers each give the kernel a spec, with the parameter names, buffer directions and
element types the IR and the source tell."""
from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

import ptx_ir
from superopt.config.resolved import Settings
from superopt.specs.sources import find_spec
from superopt.specs.template import spec_template

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")

KERNEL = """
__global__ void scale_rows(int rows, int cols, float s, const float* in, float* out) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) for (int c = 0; c < cols; ++c) out[r * cols + c] = s * in[r * cols + c];
}
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("tmpl")
    cu = d / "k.cu"
    cu.write_text(KERNEL)
    subprocess.run(["nvcc", "-arch=sm_75", "-ptx", str(cu), "-o", str(d / "k.ptx")], check=True)
    module = ptx_ir.parse((d / "k.ptx").read_text())
    return d, cu, module, module.kernels[0].name


def test_template_is_filled_from_the_ir_and_the_source(compiled):
    _, cu, module, name = compiled
    t = spec_template(module, name, cu.read_text())
    assert t.comment == ("// nvcc-plus: grid=cdiv(rows,256) block=256 rows=4096 cols=1 s=1.5 "
                         "in:f32[rows] in out:f32[rows] inout")
    assert "block 256" in t.guessed[0]
    assert 'params = [' in t.toml and '[kernels."scale_rows"]' in t.toml


def test_the_comment_as_printed_gives_a_spec(compiled, tmp_path):
    _, cu, module, name = compiled
    t = spec_template(module, name, cu.read_text())
    src = tmp_path / "k.cu"
    src.write_text(t.comment + "\n" + KERNEL.lstrip())
    specs, origin = find_spec(module, name, source=str(src), settings=None)
    assert origin == "comment" and specs[0].block == (256, 1, 1)
    assert [p.name for p in specs[0].params] == ["rows", "cols", "s", "in", "out"]


def test_the_toml_table_as_printed_gives_a_spec(compiled):
    _, _, module, name = compiled
    t = spec_template(module, name, KERNEL)
    config = tomllib.loads(t.toml)
    specs, origin = find_spec(module, name, source=None, settings=Settings(config))
    assert origin.startswith("toml") and specs[0].buffers[1].direction == "inout"
