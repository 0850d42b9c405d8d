"""The model of nvcc's command line (no nvcc needed)."""
from __future__ import annotations

import pytest

from nvcc_plus import argv as A
from nvcc_plus import depfile


def names(cmd):
    return [(it.kind, it.name, it.value) for it in cmd.items]


@pytest.mark.parametrize("args,value", [
    (["-o", "x.o"], "x.o"), (["-o=x.o"], "x.o"), (["--output-file=x.o"], "x.o"),
    (["--output-file", "x.o"], "x.o"),
])
def test_output_forms(args, value):
    cmd = A.parse(["-c", "a.cu", *args])
    assert cmd.last_value("output-file") == value
    assert cmd.inputs == ["a.cu"]


def test_glued_short_options():
    cmd = A.parse(["-DX=1", "-Iinc", "-O3", "-lfoo", "-Lpath", "-UY", "-t2", "a.cu"])
    assert cmd.values("define-macro") == ["X=1"]
    assert cmd.last_value("include-path") == "inc"
    assert cmd.last_value("optimize") == "3"
    assert cmd.last_value("library") == "foo"
    assert cmd.last_value("library-path") == "path"
    assert cmd.last_value("undefine-macro") == "Y"
    assert cmd.last_value("threads") == "2"
    assert cmd.inputs == ["a.cu"]


def test_exact_names_win_over_glued():
    cmd = A.parse(["-lineinfo", "-lib", "-link", "-ldir", "d", "-Ofc", "0", "a.cu"])
    assert [it.name for it in cmd.items if it.kind == "option"] == [
        "generate-line-info", "lib", "link", "libdevice-directory", "Ofast-compile"]
    assert cmd.inputs == ["a.cu"]


@pytest.mark.parametrize("args", [
    ["-Xcompiler", "-fPIC"], ["-Xcompiler=-fPIC"], ["--compiler-options", "-fPIC"],
    ["--compiler-options=-fPIC"], ["-Xcompiler", "-fPIC,-Wall"],
])
def test_xcompiler_forms(args):
    cmd = A.parse(["-c", *args, "a.cu", "-o", "a.o"])
    assert "-fPIC" in cmd.values("compiler-options")
    assert cmd.inputs == ["a.cu"]
    assert not [it for it in cmd.items if it.kind == "unknown"]


def test_hidden_x_options_take_values():
    cmd = A.parse(["-Xcudafe", "--diag_suppress=177", "-Xcicc", "-O3", "-Xfatbin", "-compress-all",
                   "a.cu"])
    assert cmd.inputs == ["a.cu"]


def test_boolean_values_and_gencode():
    cmd = A.parse(["-rdc", "true", "-gencode", "arch=compute_80,code=sm_80",
                   "-gencode=arch=compute_90,code=[sm_90,compute_90]", "a.cu"])
    assert cmd.last_value("relocatable-device-code") == "true"
    assert len(cmd.options("generate-code")) == 2
    assert cmd.inputs == ["a.cu"]


def test_unknown_options_are_flags():
    cmd = A.parse(["-forward-unknown-to-host-compiler", "-fPIC", "a.cu"])
    assert names(cmd)[1] == ("unknown", None, None)
    assert cmd.inputs == ["a.cu"]


def test_options_file(tmp_path):
    f = tmp_path / "opts.txt"
    f.write_text('-DA=1 -I"dir with space" -c\n-o out.o\n')
    cmd = A.parse(["--options-file", str(f), "a.cu"])
    assert cmd.last_value("include-path") == "dir with space"
    assert cmd.last_value("output-file") == "out.o"
    assert {it.origin for it in cmd.items if it.name == "compile"} == {"options-file"}
    assert A.classify(cmd).replay
    assert cmd.argv_tokens() == ["--options-file", str(f), "a.cu"]


def test_unreadable_options_file_passes_through(tmp_path):
    cmd = A.parse(["-optf", str(tmp_path / "missing"), "-c", "a.cu"])
    assert not A.classify(cmd).replay


def test_environment_flags():
    cmd = A.parse(["-c", "a.cu"], {"NVCC_PREPEND_FLAGS": "-DP=1 -lineinfo",
                                   "NVCC_APPEND_FLAGS": "-Xcompiler -fPIC"})
    origins = [(it.name, it.origin) for it in cmd.items if it.kind == "option"]
    assert origins[0] == ("define-macro", "NVCC_PREPEND_FLAGS")
    assert origins[-1] == ("compiler-options", "NVCC_APPEND_FLAGS")
    assert cmd.argv_tokens() == ["-c", "a.cu"]
    assert A.classify(cmd).replay
    # -MD coming from the environment cannot be rewritten: hand the run to nvcc.
    cmd = A.parse(["-c", "a.cu"], {"NVCC_APPEND_FLAGS": "-MD"})
    assert not A.classify(cmd).replay


def test_plus_flags_are_removed():
    rest, found, problems = A.split_plus_flags(
        ["-c", "--plus-mode=roundtrip", "a.cu", "--plus-timeout", "5", "--plus-verbose",
         "--plus-bogus", "-o", "a.o"])
    assert rest == ["-c", "a.cu", "-o", "a.o"]
    assert found == {"mode": "roundtrip", "timeout": "5", "verbose": "1"}
    assert problems and "--plus-bogus" in problems[0]


@pytest.mark.parametrize("args", [
    ["--version"], ["-V"], ["-h"], ["-v", "-c", "a.cu"], ["-dryrun", "-c", "a.cu"],
    ["-E", "a.cu"], ["-M", "a.cu"], ["-MM", "a.cu"], ["--list-gpu-arch"], ["--list-gpu-code"],
    ["-dlink", "a.o", "-o", "dl.o"], ["a.o", "b.o", "-o", "app"], ["-cubin", "a.ptx"],
    ["-fatbin", "a.cubin"], ["-dc", "-dlto", "-arch=sm_90", "a.cu"],
    ["-dc", "-gencode", "arch=compute_90,code=lto_90", "a.cu"], ["-c", "-time", "t.csv", "a.cu"],
    ["-c", "-fdevice-time-trace", "t.json", "a.cu"], ["-run", "a.cu"], ["-c", "b.cpp"],
    ["-c", "-x", "c++", "a.cu"], [],
])
def test_passthrough(args):
    assert not A.classify(A.parse(args)).replay


@pytest.mark.parametrize("args", [
    ["-c", "a.cu"], ["a.cu", "-o", "app"], ["-dc", "a.cu"], ["-dw", "a.cu"],
    ["-rdc=true", "-c", "a.cu"], ["-lib", "a.cu", "-o", "liba.a"], ["-ptx", "a.cu"],
    ["-cubin", "-arch=sm_90a", "a.cu"], ["-fatbin", "a.cu"], ["-x", "cu", "-c", "b.cpp"],
    ["-c", "-G", "a.cu"], ["-c", "-lineinfo", "a.cu"], ["-c", "--threads", "2", "a.cu"],
    ["-c", "-MD", "a.cu", "-o", "a.o"], ["-c", "-MMD", "-MF", "x.d", "-MT", "t", "a.cu"],
    ["-c", "a.cu", "b.cpp"],
])
def test_replay(args):
    assert A.classify(A.parse(args)).replay


def test_md_with_two_sources_passes_through():
    assert not A.classify(A.parse(["-c", "-MD", "a.cu", "b.cu"])).replay


@pytest.mark.parametrize("args,target", [
    (["-c", "-MD", "a.cu", "-o", "sub/x.o"], "sub/x.o"),
    (["-c", "-MD", "a.cu"], None),
    (["-c", "-MD", "-MT", "t1", "-MT", "t2", "a.cu", "-o", "x.o"], "t2"),
    (["-c", "-MD", "a.cu", "-odir", "o", "-o", "q.o"], "o/q.o"),
    (["-c", "-MD", "a.cu", "-odir", "o", "-o", "/abs/q.o"], "/abs/q.o"),
])
def test_dep_target(args, target):
    assert depfile.dep_target(A.parse(args)) == target


def test_dep_args():
    cmd = A.parse(["-c", "-MMD", "-MP", "-MF", "x.d", "-MT", "x.o", "-DA=1", "a.cu", "-o", "x.o"])
    assert depfile.dep_args(cmd, "x.d") == ["-c", "-MP", "-DA=1", "a.cu", "-MM", "-MF", "x.d",
                                            "-MT", "x.o"]
