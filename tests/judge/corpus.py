"""A corpus of wrong candidates (tests/judge/cheats, tests/judge/cheats_races): nvcc's PTX of
each kernel, the variants written from it, their explicit and inferred specs, and the
manifest's verdict and reason for each."""
from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

import ptx_ir
from superopt.judge.check import REJECTED
from superopt.specs.inference import infer_specs
from superopt.specs.launch_spec import load_spec


class Corpus:
    def __init__(self, folder: Path):
        self.folder = folder
        self.manifest = tomllib.loads((folder / "manifest.toml").read_text())
        self.variants = {v["name"]: v for v in self.manifest["variant"]}
        self.kernels = self.manifest["kernels"]
        self.spec_of = lru_cache(maxsize=None)(self._spec_of)

    def base_ptx(self, kernel: str) -> str:
        return (self.folder / self.kernels[kernel]["ptx"]).read_text()

    def variant_ptx(self, name: str) -> str:
        return (self.folder / "variants" / f"{name}.ptx").read_text()

    def _spec_of(self, kernel: str, which: str):
        k = self.kernels[kernel]
        if which == "explicit":
            return load_spec(str(self.folder / k["spec"]))
        # as superopt.specs.sources.find_spec: the first spec the inference gives
        res = infer_specs(ptx_ir.parse(self.base_ptx(kernel)), k["entry"],
                          source_text=(self.folder / k["source"]).read_text())
        assert res.specs, f"no inferred spec for {kernel}: {getattr(res, 'reason', res)}"
        return res.specs[0]


def assert_verdict(v, want: dict, where: str):
    assert v.status == want["verdict"], f"{where}: expected {want['verdict']}, got {v.summary()}"
    if want["verdict"] == REJECTED:
        phrases = want.get("reason", [])
        assert any(p in v.reason for p in phrases), f"{where}: reason lacks {phrases}: {v.reason}"
