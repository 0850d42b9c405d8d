"""Symbolic address arithmetic: polynomials over thread indices and kernel parameters.

An address like ``out + 4*(ctaid.x*ntid.x + tid.x)`` is an :class:`Affine`: a constant
plus integer coefficients on *monomials* (products of atoms). Atoms are ``%tid.x`` …
``%nctaid.z``, ``param:<name>`` (a value loaded from a kernel parameter) and
``reg:<name>`` (a register with several reaching definitions, e.g. a loop counter: the
expression is still exact, but not over the launch and parameters alone).

Assumption, stated once: 32→64-bit widening (``mul.wide``, ``cvt.s64.s32``) is modelled
as exact, i.e. the 32-bit index does not overflow. That is how nvcc itself reasons about
``int`` indices (signed overflow is undefined in CUDA C++).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

Monomial = tuple  # sorted tuple of atom names; () is the constant term


@dataclass(frozen=True)
class Affine:
    terms: tuple = ()          # ((monomial, coefficient), ...) sorted, no zero coefficients

    # -- construction
    @staticmethod
    def const(value: int) -> "Affine":
        return Affine(((((), value),) if value else ()))

    @staticmethod
    def atom(name: str) -> "Affine":
        return Affine(((((name,)), 1),))

    @staticmethod
    def _from(d: dict) -> "Affine":
        return Affine(tuple(sorted((m, c) for m, c in d.items() if c)))

    def as_dict(self) -> dict:
        return dict(self.terms)

    # -- arithmetic
    def __add__(self, other: "Affine") -> "Affine":
        d = self.as_dict()
        for m, c in other.terms:
            d[m] = d.get(m, 0) + c
        return Affine._from(d)

    def __neg__(self) -> "Affine":
        return Affine(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: "Affine") -> "Affine":
        return self + (-other)

    def __mul__(self, other: "Affine") -> "Affine":
        d: dict = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2))
                d[m] = d.get(m, 0) + c1 * c2
        return Affine._from(d)

    def scale(self, k: int) -> "Affine":
        return Affine._from({m: c * k for m, c in self.terms})

    # -- queries
    @property
    def constant(self) -> int:
        return self.as_dict().get((), 0)

    @property
    def is_constant(self) -> bool:
        return all(m == () for m, _ in self.terms)

    @property
    def degree(self) -> int:
        return max((len(m) for m, _ in self.terms), default=0)

    def atoms(self) -> set[str]:
        return {a for m, _ in self.terms for a in m}

    def coefficient(self, *atoms: str) -> int:
        return self.as_dict().get(tuple(sorted(atoms)), 0)

    @property
    def over_launch_and_params(self) -> bool:
        """True when no atom is an opaque register."""
        return not any(a.startswith("reg:") for a in self.atoms())

    def without(self, monomial: Monomial) -> "Affine":
        d = self.as_dict()
        d.pop(monomial, None)
        return Affine._from(d)

    def alignment(self, atom_alignment: dict[str, int] | None = None, cap: int = 256) -> int:
        """The largest power of two (≤ cap) that provably divides the value.

        Each atom is assumed to be only 1-aligned unless ``atom_alignment`` says more
        (e.g. a pointer parameter declared ``.ptr .align 16``).
        """
        atom_alignment = atom_alignment or {}
        result = cap
        for m, c in self.terms:
            a = _pow2_factor(c, cap)
            for atom in m:
                a = min(cap, a * atom_alignment.get(atom, 1))
            result = min(result, a)
        return result

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for m, c in sorted(self.terms, key=lambda t: (len(t[0]) == 0, t[0])):
            name = "*".join(a.replace("param:", "") for a in m)
            if not m:
                parts.append(str(c))
            elif c == 1:
                parts.append(name)
            elif c == -1:
                parts.append("-" + name)
            else:
                parts.append(f"{c}*{name}")
        return " + ".join(parts).replace("+ -", "- ")


def _pow2_factor(c: int, cap: int) -> int:
    if c == 0:
        return cap
    return min(cap, (abs(c) & -abs(c)))


def gcd_alignment(values) -> int:
    g = 0
    for v in values:
        g = math.gcd(g, v)
    return g & -g if g else 0
