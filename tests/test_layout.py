"""The tree's shape (issue 22): the phase layout, the import arrows, no import circle through
the pipeline, and a pass that describes itself (adding one touches nothing outside passes/)."""
from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("superopt", "ptx_ir", "nvcc_plus", "reports")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def import_graph() -> nx.DiGraph:
    """Module -> module it imports (function-level imports included; ``from pkg import name``
    counts as importing ``pkg.name`` when that is a module, else ``pkg``)."""
    mods = _modules()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    for name, path in mods.items():
        graph.add_node(name)
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                dep = owner(t)
                if dep and dep != name:
                    graph.add_edge(name, dep)
    return graph


def test_superopt_top_level_holds_six_modules_at_most():
    top = sorted(p.stem for p in (REPO / "superopt").glob("*.py"))
    assert len(top) <= 6, top
    assert {"__init__", "__main__", "api", "optimize", "cli"} <= set(top)


def _phase(module: str) -> str:
    """superopt.judge.check -> superopt.judge; superopt.optimize -> superopt.optimize."""
    return ".".join(module.split(".")[:2])


def test_no_import_circle_through_the_pipeline():
    """No circle between superopt's phases (optimize, decide, search, specs, judge, store, model,
    generate, ...): a circle inside one phase folder is that folder's business."""
    graph = import_graph()
    circles = [sorted(c) for c in nx.strongly_connected_components(graph)
               if len(c) > 1 and any(m.startswith("superopt") for m in c) and len({_phase(m) for m in c}) > 1]
    assert circles == [], f"import circles across phases: {circles}"


def test_the_arrows_point_down():
    graph = import_graph()
    bad = []
    for a, b in graph.edges:
        if a.startswith("ptx_ir") and not b.startswith("ptx_ir"):
            bad.append((a, b))
        if a.startswith("superopt") and b.startswith("nvcc_plus") or \
                a.startswith("superopt") and a != "superopt.cli" and b.startswith("reports"):
            bad.append((a, b))
        if a.startswith("reports") and b.startswith("nvcc_plus"):
            bad.append((a, b))
        # The driver reaches the optimizer through superopt.api; besides it, only the light
        # pieces it shares with the toolbox: the settings table, where files live, the
        # owner-checked private folder, the safe file opener (docs/architecture.md says why).
        if a.startswith("nvcc_plus") and b.startswith("superopt") and b not in (
                "superopt", "superopt.api", "superopt.config", "superopt.config.settings",
                "superopt.store.locations", "superopt.store.private_dir", "superopt.store.safe_files"):
            bad.append((a, b))
    assert bad == []


def test_a_pass_says_what_the_search_gives_it(tmp_path):
    """A new pass file that asks for the timed block gets it from the search; no other file
    names it (what stage-stores needed an edit of optimize.py and rules.py for)."""
    from superopt.passes import load_pass_file, registry
    from superopt.search.choices import kernel_search_options
    from superopt.search.options import SearchOptions
    from superopt.search.rules import ordered_pass_names
    from superopt.specs.launch_spec import LaunchSpec

    path = tmp_path / "block_pass.py"
    path.write_text(
        "from superopt.passes import register\n"
        "@register(name='test-wants-block', summary='s', assumes='a', order=5,\n"
        "          launch_params={'block': 'timed_block'})\n"
        "def wants_block(fn, *, block=None):\n"
        "    return []\n")
    (info,) = load_pass_file(path)
    try:
        assert ordered_pass_names()[0] == "test-wants-block"          # order=5: before stage-stores (10)
        spec = LaunchSpec.from_dict({"kernel": "k", "grid": [4, 1, 1], "block": [64, 2, 1], "params": [
            {"name": "out", "kind": "buffer", "type": "f32", "length": 64, "direction": "out"}]})
        opts = kernel_search_options(SearchOptions(), SimpleNamespace(specs=[spec], origin="inferred"), None)
        assert opts.extra_params["test-wants-block"] == {"block": (64, 2, 1)}
        assert "occupancy" not in opts.extra_params        # contract_block: not from inferred specs
    finally:
        from superopt import passes
        passes._REGISTRY.pop(info.name, None)
    assert "test-wants-block" not in registry()


def test_a_pass_asking_an_unknown_launch_fact_is_refused():
    import pytest

    from superopt.passes import register
    with pytest.raises(ValueError, match="unknown launch fact"):
        register(name="x", summary="s", assumes="a", launch_params={"block": "the_moon"})


def test_the_model_rewrite_registers_itself_and_carries_code():
    import superopt.decide.stored  # noqa: F401 - the stored path loads it (model wins re-apply without a model)
    from superopt.passes import registry
    info = registry()["model-rewrite"]
    assert info.carries_code and info.source == "superopt.model.rewrite"
    assert not (REPO / "superopt" / "passes" / "model_rewrite.py").exists()


def test_the_pass_names_a_decision_key_holds_are_read_without_importing_the_passes():
    """decide.run keys decisions by every pass's name, read from the pass files' text so that a
    build applying stored decisions imports no pass; it must be what the registry holds."""
    from superopt.passes import declared_names, registry
    builtin = sorted(n for n, p in registry().items() if p.source.startswith("superopt.passes."))
    assert declared_names() == builtin


def test_ptxas_version_is_asked_once_per_ptxas(tmp_path, monkeypatch):
    from superopt.judge import ptxas
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\necho 'Cuda compilation tools, release 99.9'\n"
                    + "#" * (1 << 16) + "\n")
    fake.chmod(0o755)
    monkeypatch.setenv("NVCC_PLUS_PTXAS", str(fake))
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ptxas, "_VERSIONS", {})
    assert ptxas.ptxas_version() == "Cuda compilation tools, release 99.9"
    monkeypatch.setattr(ptxas, "_VERSIONS", {})                # a new compilation
    monkeypatch.setattr(ptxas, "_ask_version", lambda path: pytest.fail("ptxas asked again"))
    assert ptxas.ptxas_version() == "Cuda compilation tools, release 99.9"
    fake.write_text(fake.read_text() + "# changed\n")           # another ptxas: asked again
    monkeypatch.setattr(ptxas, "_VERSIONS", {})
    with pytest.raises(pytest.fail.Exception):
        ptxas.ptxas_version()
