"""SASS from a record's PTX when ptxas and cuobjdump/nvdisasm are installed."""
from __future__ import annotations

import pytest

from reports.sass import find_tool, sass_for
from tests.reports.records import kernel

TOOLS = find_tool("ptxas") and (find_tool("cuobjdump") or find_tool("nvdisasm"))


@pytest.mark.skipif(not TOOLS, reason="ptxas and cuobjdump/nvdisasm are not installed (pip install 'nvcc-plus[toolchain]')")
def test_sass_of_a_recorded_kernel():
    k = kernel("scale4")
    base = sass_for(k["baseline"]["ptx"], "sm_90")
    assert base.text, base.note
    lines = base.text.splitlines()
    assert lines[0].startswith("/*0000*/") and any("EXIT" in ln for ln in lines)
    win = next(c for c in k["candidates"] if c["fate"] == "winner")
    assert any(".128" in ln or ".64" in ln for ln in sass_for(win["ptx"], "sm_90").text.splitlines())


def test_no_sass_for_a_target_that_is_not_an_architecture():
    assert "not an sm_/compute_ architecture" in sass_for(".visible .entry k()\n{\n\tret;\n}\n", "lto_90").note


@pytest.mark.skipif(not find_tool("ptxas"), reason="ptxas is not installed")
def test_a_kernel_that_needs_its_module_gets_a_note_not_an_error():
    ptx = ".visible .entry k()\n{\n\t.reg .b64 %rd<2>;\n\tmov.u64 %rd1, missing_global;\n\tret;\n}\n"
    result = sass_for(ptx, "sm_90")
    if find_tool("cuobjdump") or find_tool("nvdisasm"):
        assert result.text is None and "ptxas could not assemble the kernel on its own" in result.note
