"""When a timing may stop before its rounds are done: the candidate is clearly not faster.

A search times every verified candidate against nvcc's code (:func:`superopt.judge.timing.time_pair`,
100 interleaved rounds by default) and most are not faster: on the economy bench's tune build
(2026-12-02) timing held the GPU alone for 46 of 148 leased seconds. :func:`decide`'s first
condition, "the median gain exceeds the spread" (``median_A - median_B > (IQR_A + IQR_B) / 2``),
does not get easier with more rounds: the spread is the distribution's, not an error that shrinks.
So once the measured gain lies far below the spread, further rounds only confirm "not faster".

The rule (:func:`clearly_not_faster`): after at least ``first`` rounds, stop when

    gain < spread - z * se,    se = 1.2533 * sqrt((s_A^2 + s_B^2) / n),  s = IQR / 1.349

(``se``: the standard error of a difference of two medians, each side's sigma estimated from its
IQR). A candidate stopped by it is never "faster" (its gain is below the spread), so stopping can
lose a win, never make one: the rule is one-sided on purpose, since stopping early on a win
would bias the kept candidates' speedups upwards. With ``z = 3`` a candidate whose true gain
equals the spread is stopped with probability about 0.1%.

Pure numpy with no imports from the judge: the GPU worker applies it between rounds.
"""
from __future__ import annotations

import numpy as np

FIRST = 30          # rounds before the rule is first asked
EVERY = 10          # then every this many rounds
Z = 3.0


def clearly_not_faster(a_ms, b_ms, z: float = Z) -> bool:
    """Whether paired timings ``a_ms`` (baseline) and ``b_ms`` (candidate) already show that
    the candidate will not be faster beyond the spread (see the module's docstring)."""
    a = np.asarray(a_ms, dtype=np.float64)
    b = np.asarray(b_ms, dtype=np.float64)
    n = min(a.size, b.size)
    if n < 8:
        return False
    a, b = a[:n], b[:n]
    qa = np.percentile(a, [25, 50, 75])
    qb = np.percentile(b, [25, 50, 75])
    iqr_a, iqr_b = qa[2] - qa[0], qb[2] - qb[0]
    gain = qa[1] - qb[1]
    spread = (iqr_a + iqr_b) / 2
    se = 1.2533 * np.sqrt(((iqr_a / 1.349) ** 2 + (iqr_b / 1.349) ** 2) / n)
    return bool(gain < spread - z * se)


def should_stop(rounds_done: int, a_ms, b_ms, rule: dict | None) -> bool:
    """The worker's question after a round: ``rule`` is the request's ``stop_not_faster``
    ({"first", "every", "z"}) or None (every round runs)."""
    if not rule:
        return False
    first, every = int(rule.get("first", FIRST)), max(1, int(rule.get("every", EVERY)))
    if rounds_done < first or (rounds_done - first) % every:
        return False
    return clearly_not_faster(a_ms, b_ms, float(rule.get("z", Z)))
