"""Spec inference for kernels that reach memory through pointer fields of a by-value struct
(superopt.specs.virtual_pointers): the bench programs' layernorm_rows (LayerNormParams: two
pointers, a float, two ints; affine indexing) and spmv_csr_* (CsrMatrix: three ints, three
pointers; data-dependent indexing through row_ptr and col_idx).

The fixtures are nvcc 13.0 output of the bench programs; regenerate with
    nvcc -arch=sm_90 -O3 -ptx bench/programs/rowops/rowops.cu -o tests/spec_inference/data/rowops.ptx
    nvcc -arch=sm_90 -O3 -ptx bench/programs/spmv/spmv.cu -o tests/spec_inference/data/spmv.ptx
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import ptx_ir
from superopt.specs.inference import check_spec, infer_specs
from superopt.specs.launch_spec import Buffer, Bytes, LaunchSpec

HERE = Path(__file__).parent
BENCH = HERE.parent.parent / "bench" / "programs"


@lru_cache(maxsize=None)
def load(prog: str):
    ptx = (HERE / "data" / f"{prog}.ptx").read_text()
    src = (BENCH / prog / f"{prog}.cu").read_text()
    return ptx, src, ptx_ir.parse(ptx)


@lru_cache(maxsize=None)
def infer(prog: str, short: str):
    ptx, src, module = load(prog)
    fn = next(k for k in module.kernels if k.signature.startswith(short + "("))
    return fn, infer_specs(module, fn.name, source_text=src)


def assert_round_trips(spec: LaunchSpec):
    assert LaunchSpec.from_toml(spec.to_toml()).to_dict() == spec.to_dict()
    assert LaunchSpec.from_dict(spec.to_dict()) == spec


def test_layernorm_rows_params_struct_gets_embedded_buffers():
    fn, r = infer("rowops", "layernorm_rows")
    assert r.verifiable, r.reason
    spec = r.specs[0]
    assert_round_trips(spec)
    _, _, module = load("rowops")
    assert check_spec(module, fn, spec) == []
    p = spec.params[0]
    # LayerNormParams {const float *gamma, *beta; float eps; int rows, cols;}
    assert isinstance(p, Bytes) and p.size == 32 and p.pointers == {0: "p_0", 8: "p_8"}
    rows = int.from_bytes(p.raw[20:24], "little")
    cols = int.from_bytes(p.raw[24:28], "little")
    assert rows > 32 and cols > 32 and rows != cols         # loops over a row run several rounds
    assert p.raw[0:16] == bytes(16)                         # pointer fields: set at launch
    embedded = {b.name: b for b in spec.buffers if b.embedded}
    assert set(embedded) == {"p_0", "p_8"}
    for b in embedded.values():                             # gamma[c], beta[c]
        assert b.type == "f32" and b.direction == "in" and int(b.length_expr) == cols
    assert [q.name for q in spec.kernel_params] == ["p", "in", "out"]
    assert int(spec.param("in").length_expr) == rows * cols
    assert int(spec.param("out").length_expr) == rows * cols and spec.param("out").direction == "out"
    # its rsqrt.approx is not bit-reproducible on the CPU emulator, so it is judged on the GPU
    # only; spmv and real_code.cu's saxpy_params are judged here


def test_spmv_csr_struct_pointers_with_data_dependent_indices():
    for short in ("spmv_csr_scalar", "spmv_csr_vector"):
        fn, r = infer("spmv", short)
        assert r.verifiable, (short, r.reason)
        spec = r.specs[0]
        assert_round_trips(spec)
        assert check_spec(load("spmv")[2], fn, spec) == []
        a = spec.params[0]
        # CsrMatrix {int num_rows, num_cols, nnz; int *row_ptr, *col_idx; float *values;}
        assert isinstance(a, Bytes) and a.size == 40 and a.pointers == {16: "A_16", 24: "A_24", 32: "A_32"}
        rows = int.from_bytes(a.raw[0:4], "little")
        row_ptr, col_idx, vals = (spec.param(n) for n in ("A_16", "A_24", "A_32"))
        assert all(b.embedded and b.direction == "in" for b in (row_ptr, col_idx, vals))
        assert row_ptr.type == "u32" and int(row_ptr.length_expr) == rows + 1
        assert row_ptr.distribution.startswith("index:0..")    # loop bounds, drawn from a range
        assert col_idx.distribution.startswith("index:0..")    # gathers x[col_idx[j]]
        hi = int(col_idx.distribution.split("..")[1])
        assert int(spec.param("x").length_expr) >= hi
        assert vals.type == "f32" and int(vals.length_expr) >= hi
        assert int(spec.param("y").length_expr) == rows and spec.param("y").direction == "out"


def test_spmv_is_judged_and_a_broken_candidate_is_rejected():
    from superopt.judge.check import check
    fn, r = infer("spmv", "spmv_csr_scalar")
    ptx = load("spmv")[0]
    spec = r.specs[0]
    v = check(ptx, ptx, spec, backend="emulator", sets=2)
    assert v.status == "accepted", v
    at = ptx.index(f".entry {fn.name}")
    end = ptx.index(".entry", at + 1)
    # the dot product starts at 1.0 instead of 0.0
    bad = ptx[:at] + ptx[at:end].replace("0f00000000", "0f3F800000") + ptx[end:]
    assert bad != ptx
    v = check(ptx, bad, spec, backend="emulator", sets=2)
    assert v.status == "rejected", v
