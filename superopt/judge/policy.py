"""How a differential check compares outputs: the policy (exact by default; a tolerance only
by opt-in). Its own module, free of numpy, so that settings are validated without loading the
check."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class Policy:
    """How outputs are compared. ``exact``: bit-identical, any NaN equals any NaN.
    ``ulp``: float elements within ``bound`` units in the last place. ``rel``: float
    elements with |c - b| <= bound * max(|b|, |c|). Integers are always exact; NaN never
    equals a number; infinities must match exactly."""
    kind: str = "exact"
    bound: float = 0.0

    def __post_init__(self):
        if self.kind not in ("exact", "ulp", "rel"):
            raise ValueError(f"unknown policy {self.kind!r} (exact | ulp:N | rel:X)")
        if self.kind != "exact" and not (self.bound >= 0 and math.isfinite(self.bound)):
            raise ValueError(f"policy bound must be a finite number >= 0, not {self.bound}")

    @classmethod
    def parse(cls, text: Union[str, "Policy", None]) -> "Policy":
        if text is None:
            return EXACT
        if isinstance(text, Policy):
            return text
        t = str(text).strip().lower()
        if t in ("", "exact"):
            return EXACT
        kind, sep, arg = t.partition(":")
        if not sep:
            raise ValueError(f"policy {text!r}: write exact, ulp:N or rel:X")
        return cls(kind, float(arg))

    @property
    def exact(self) -> bool:
        return self.kind == "exact"

    def describe(self) -> str:
        if self.exact:
            return "exact (bit-identical; any NaN equals any NaN)"
        if self.kind == "ulp":
            return f"ulp:{self.bound:g} (float elements within {self.bound:g} ULP; ints exact; opt-in)"
        return f"rel:{self.bound:g} (float elements |c-b| <= {self.bound:g}*max(|b|,|c|); ints exact; opt-in)"

    def __str__(self) -> str:
        return "exact" if self.exact else f"{self.kind}:{self.bound:g}"


EXACT = Policy()
