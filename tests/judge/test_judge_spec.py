"""Launch specs: parsing, round trips, safe length expressions (CPU only)."""
from pathlib import Path

import pytest

from superopt.specs.launch_spec import (Buffer, LaunchSpec, Scalar, SpecError, elem_type, eval_expr, expr_names,
                                  load_spec, load_specs)

KDIR = Path(__file__).parent / "kernels"


def test_eval_expr_allowed():
    env = {"n": 1000, "m": 7}
    assert eval_expr("n", env) == 1000
    assert eval_expr("m*n + 1", env) == 7001
    assert eval_expr("(n - 1) // 256 + 1", env) == 4
    assert eval_expr("n % 256", env) == 1000 % 256
    assert eval_expr("cdiv(n, 256)", env) == 4
    assert eval_expr("min(n, 64) + max(m, 2)", env) == 71
    assert eval_expr("-m + 10", env) == 3
    assert eval_expr(42, env) == 42
    assert expr_names("cdiv(m*n, 32) + k") == {"m", "n", "k"}


@pytest.mark.parametrize("bad", [
    "__import__('os').system('true')", "n.real", "n ** 2", "n / 2", "open('x')", "[n]", "n if n else 1",
    "lambda: 1", "1.5 * n", "x", "n // 0", "min()", "cdiv(n)", "'abc'", "n[0]",
])
def test_eval_expr_refuses(bad):
    with pytest.raises(SpecError):
        eval_expr(bad, {"n": 10})


def test_eval_expr_length_limit():
    with pytest.raises(SpecError):
        eval_expr("n+" * 200 + "n", {"n": 1})


def test_judge_toml_loads_and_resolves():
    spec = load_spec(str(KDIR / "judge.toml"))
    assert spec.kernel == "judge_kernel"
    assert [p.name for p in spec.params] == ["x", "y", "out", "a", "n"]
    assert spec.size_params() == ["n"]
    assert not spec.is_resolved
    r = spec.resolved({"n": 1000})
    assert r.grid == (4, 1, 1)
    assert r.param("out").length == 1000 and r.param("out").nbytes == 4000
    assert r.param("n").value == 1000 and spec.param("n").value == 100000   # original untouched
    assert r.is_resolved


def test_round_trips():
    spec = load_spec(str(KDIR / "judge.toml"))
    again = LaunchSpec.from_json(spec.to_json())
    assert again.to_dict() == spec.to_dict()
    text = spec.to_toml()
    again = LaunchSpec.from_toml(text)
    assert again.to_dict() == spec.to_dict()


def test_shorthand_and_multi_kernel_file(tmp_path):
    f = tmp_path / "specs.toml"
    f.write_text('''
[kernels.k1]
grid = 4
block = [128]
params = [
  { name = "p", buffer = "float", length = "n*2", direction = "inout", distribution = "specials" },
  { name = "n", scalar = "unsigned", value = 64 },
]
[kernels.k2]
grid = [1, 1, 1]
block = [32, 1, 1]
shared_bytes = 4096
params = [{ name = "q", buffer = "u8", length = 17, direction = "out" }]
''')
    specs = load_specs(str(f))
    assert set(specs) == {"k1", "k2"}
    k1 = specs["k1"].resolved()
    assert k1.grid == (4, 1, 1) and k1.block == (128, 1, 1)
    assert k1.param("p").type == "f32" and k1.param("p").length == 128
    assert k1.param("n").type == "u32"
    assert specs["k2"].shared_bytes == 4096 and specs["k2"].param("q").length == 17
    assert load_spec(str(f), kernel="k2").kernel == "k2"
    with pytest.raises(SpecError):
        load_spec(str(f))                  # two specs, no kernel named
    with pytest.raises(SpecError):
        load_spec(str(f), kernel="nope")


@pytest.mark.parametrize("d,msg", [
    ({"kernel": "k", "grid": [1], "block": [2048], "params": []}, "1024"),
    ({"kernel": "k", "grid": [1], "block": [32], "params": [{"name": "b", "kind": "buffer", "type": "f32", "length": "m"}]}, "not scalar"),
    ({"kernel": "k", "grid": [1], "block": [32], "params": [{"name": "b", "kind": "buffer", "type": "f33", "length": 4}]}, "unknown element type"),
    ({"kernel": "k", "grid": [1], "block": [32], "params": [{"name": "s", "kind": "scalar", "type": "u8", "value": 300}]}, "does not fit"),
    ({"kernel": "k", "grid": [1], "block": [32], "params": [{"name": "b", "kind": "buffer", "type": "f32", "length": 4, "direction": "sideways"}]}, "direction"),
    ({"kernel": "k", "grid": [1], "block": [32], "params": [], "colour": "red"}, "unknown keys"),
    ({"kernel": "k", "grid": ["q"], "block": [32], "params": []}, "grid"),
])
def test_bad_specs(d, msg):
    with pytest.raises(SpecError, match=msg):
        LaunchSpec.from_dict(d)


def test_scalar_and_types():
    assert elem_type("float").name == "f32" and elem_type(".b32").name == "u32" and elem_type("half").name == "f16"
    s = Scalar("n", "u64", "0xffffffffffffffff")
    assert s.value == 2**64 - 1
    spec = LaunchSpec("k", (1, 1, 1), (1, 1, 1), [s])
    assert LaunchSpec.from_toml(spec.to_toml()).param("n").value == 2**64 - 1
    b = Buffer("b", "f64", "n", "out")
    assert b.elem.size == 8


def test_toml_text_starting_with_a_table_header_is_toml():
    from superopt.specs.launch_spec import load_specs
    text = ('[kernels."saxpy"]\ngrid = ["cdiv(n, 256)", 1, 1]\nblock = [256, 1, 1]\n'
            'params = [{name = "n", kind = "scalar", type = "s32", value = 1000}]\n')
    assert list(load_specs(text)) == ["saxpy"]


# ----------------------------------------------------------------- structs by value (kind "bytes")

def _struct_spec(**kw):
    from superopt.specs.launch_spec import Bytes
    raw = (7).to_bytes(4, "little") + bytes(4) + bytes(8)
    params = kw.pop("params", None) or [Bytes("s", 16, raw.hex(), {8: "s_8"}),
                                        Buffer("s_8", "f32", 10, embedded=True)]
    return LaunchSpec(kernel="k", grid=(1,), block=(32,), params=params, **kw)


def test_bytes_param_round_trips_through_toml_and_json():
    spec = _struct_spec()
    assert LaunchSpec.from_toml(spec.to_toml()) == spec
    assert LaunchSpec.from_json(spec.to_json()) == spec
    assert [p.name for p in spec.kernel_params] == ["s"] and [b.name for b in spec.buffers] == ["s_8"]


def test_bytes_param_packs_addresses_into_pointer_fields():
    s = _struct_spec().params[0]
    packed = s.packed({"s_8": 0x1234_5678_9abc})
    assert packed[:4] == (7).to_bytes(4, "little") and packed[8:] == (0x1234_5678_9abc).to_bytes(8, "little")


@pytest.mark.parametrize("params, match", [
    ([{"name": "s", "kind": "bytes", "size": 16, "hex": "00" * 15}], "15 bytes of hex for size 16"),
    ([{"name": "s", "kind": "bytes", "hex": "zz"}], "not hexadecimal"),
    ([{"name": "s", "kind": "bytes", "size": 16, "hex": "00" * 16, "pointers": {"4": "b"}},
      {"name": "b", "kind": "buffer", "type": "u8", "length": 4, "embedded": True}], "aligned 8-byte field"),
    ([{"name": "s", "kind": "bytes", "size": 16, "hex": "00" * 16, "pointers": {"8": "nope"}}], "not an embedded buffer"),
    ([{"name": "s", "kind": "bytes", "size": 16, "hex": "00" * 16},
      {"name": "b", "kind": "buffer", "type": "u8", "length": 4, "embedded": True}], "exactly one pointer field"),
])
def test_bad_bytes_params_are_refused_with_the_reason(params, match):
    with pytest.raises(SpecError, match=match):
        LaunchSpec.from_dict({"kernel": "k", "grid": [1], "block": [32], "params": params})
