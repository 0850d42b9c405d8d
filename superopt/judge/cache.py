"""The one caching wrapper for judges: verdicts and timings remembered by
(hash of the baseline text, hash of the candidate text, the spec's canonical JSON).

The spec is part of the key: a candidate accepted on one launch shape says nothing about
another, so every shape the search checks is really checked (``launch_shapes_checked`` in
records is true). ``fresh`` calls -- a check on new inputs, a confirmation timing -- are
never answered from the cache and never stored in it.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

from superopt.judge.protocol import Judge


def text_digest(text: str) -> str:
    """A short content hash of a PTX text (the same as the search's candidate hash)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def spec_key(spec: Any) -> str:
    """A launch spec's canonical JSON (sorted keys): equal specs give equal keys."""
    data = spec.to_dict() if hasattr(spec, "to_dict") else spec
    return json.dumps(data, sort_keys=True, default=repr, separators=(",", ":"))


class CachingJudge(Judge):
    """A :class:`~superopt.judge.protocol.Judge` in front of another that answers a repeated
    (baseline, candidate, spec) question from memory."""

    def __init__(self, judge: Judge):
        self.inner = judge
        self._verdicts: dict = {}
        self._timings: dict = {}

    @property
    def backend(self) -> str:
        return self.inner.backend

    @property
    def policy(self) -> str:
        return self.inner.policy

    @property
    def can_time(self) -> bool:
        return self.inner.can_time

    @staticmethod
    def key(base_ptx: str, cand_ptx: str, spec: Any) -> tuple[str, str, str]:
        return text_digest(base_ptx), text_digest(cand_ptx), spec_key(spec)

    def verify(self, base_ptx: str, cand_ptx: str, spec: Any, *, fresh: bool = False):
        if fresh:                           # a new check on new inputs: never from the cache
            return self.inner.verify(base_ptx, cand_ptx, spec, fresh=True)
        key = self.key(base_ptx, cand_ptx, spec)
        if key not in self._verdicts:
            self._verdicts[key] = self.inner.verify(base_ptx, cand_ptx, spec)
        return self._verdicts[key]

    def time(self, base_ptx: str, cand_ptx: str, spec: Any, *, fresh: bool = True):
        if fresh:                           # a confirmation: a new measurement
            return self.inner.time(base_ptx, cand_ptx, spec, fresh=True)
        key = self.key(base_ptx, cand_ptx, spec)
        if key not in self._timings:
            self._timings[key] = self.inner.time(base_ptx, cand_ptx, spec, fresh=False)
        return self._timings[key]

    def prefetch_inputs(self, base_ptx: str, spec: Any, what: tuple = ("check", "time")) -> bool:
        prefetch = getattr(self.inner, "prefetch_inputs", None)
        return bool(prefetch(base_ptx, spec, what)) if prefetch is not None else False

    def timing_window(self):
        window = getattr(self.inner, "timing_window", None)
        if window is None:
            from contextlib import nullcontext
            return nullcontext()
        return window()

    def sanitize(self, base_ptx: str, cand_ptx: str, spec: Any, tools: Iterable[str]):
        return self.inner.sanitize(base_ptx, cand_ptx, spec, tools)
