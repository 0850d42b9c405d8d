"""Which block the search gives stage-stores and stage-loads: the first (timed) spec's, from specs as objects or
as dicts (a lockfile's or a toml's), and none beside dynamic shared memory."""
from types import SimpleNamespace

from superopt.search.choices import kernel_search_options as _kernel_options, launch_facts
from superopt.search.options import SearchOptions
from superopt.specs.launch_spec import LaunchSpec


def _staging_block(choice):
    """The block stage-stores/stage-loads ask for (their launch_params: the timed block)."""
    return launch_facts(choice).get("timed_block")


def _spec(block, shared=0):
    return LaunchSpec.from_dict({"kernel": "k", "grid": [4, 4, 1], "block": list(block), "shared_bytes": shared,
                                 "params": [{"name": "out", "kind": "buffer", "type": "f32", "length": 64,
                                             "direction": "out"}]})


def test_the_first_specs_block_is_given_to_stage_stores():
    choice = SimpleNamespace(specs=[_spec((32, 8, 1)), _spec((16, 16, 1))], origin="captured")
    assert _staging_block(choice) == (32, 8, 1)
    opts = _kernel_options(SearchOptions(), choice, None)
    assert opts.extra_params["stage-stores"] == {"block": (32, 8, 1)}
    assert opts.extra_params["stage-loads"] == {"block": (32, 8, 1)}


def test_dict_specs_and_dynamic_shared_memory():
    assert _staging_block(SimpleNamespace(specs=[{"block": [64, 4, 1]}])) == (64, 4, 1)
    assert _staging_block(SimpleNamespace(specs=[_spec((32, 8, 1)), _spec((32, 8, 1), shared=1024)])) is None
    assert _staging_block(SimpleNamespace(specs=[])) is None
    assert _staging_block(None) is None
    opts = _kernel_options(SearchOptions(), SimpleNamespace(specs=[_spec((32, 8, 1), shared=4096)], origin="inferred"), None)
    assert "stage-stores" not in opts.extra_params and "stage-loads" not in opts.extra_params
