"""When a timing may stop before its rounds are done: the candidate is clearly not faster, or
(in a search's first timing of it) clearly faster.

A search times every verified candidate against nvcc's code (:func:`superopt.judge.timing.time_pair`,
60 interleaved rounds by default) and most are not faster: on the economy bench's tune build
(2026-12-02) timing held the GPU alone for 46 of 148 leased seconds. :func:`decide`'s first
condition, "the median gain exceeds the spread" (``median_A - median_B > (IQR_A + IQR_B) / 2``),
does not get easier with more rounds: the spread is the distribution's, not an error that shrinks.
So once the measured gain lies far below the spread, further rounds only confirm "not faster".

The rule (:func:`clearly_not_faster`): after at least ``first`` rounds, and then every ``every``,
stop when

    gain < spread - z * se,    se = 1.2533 * sqrt((s_A^2 + s_B^2) / n),  s = IQR / 1.349

(``se``: the standard error of a difference of two medians, each side's sigma estimated from its
IQR). A candidate stopped by it is never "faster" (its gain is below the spread), so stopping can
lose a win, never make one. With ``z = 3`` a candidate whose true gain equals the spread is
stopped with probability about 0.1% per look.

The mirror (:func:`clearly_faster`, asked only when the request's rule says ``"faster": true``):
stop when ``gain > spread + z * se``. The timing's result is still :func:`decide`'s on the rounds
run, so a stop can only end a win's measurement sooner, never make one. Stopping on a win
biases the measured speed-up upwards (a sample stopped when it looks good); a search asks for it
only in its first timing of each candidate, because the candidate it keeps is timed again on
fresh inputs with every round (:func:`superopt.search.loop._choose`) and that measurement, not the
first, decides and is reported. On the economy bench's tune build (2026-12-04, ea2fb50) the 73
timings that found a candidate faster ran all 60 rounds: a third of the rounds timed.

Pure numpy with no imports from the judge: the GPU worker applies it between rounds.
"""
from __future__ import annotations

import numpy as np

FIRST = 20          # rounds before the rule is first asked
EVERY = 5           # then every this many rounds
Z = 3.0


def clearly_not_faster(a_ms, b_ms, z: float = Z) -> bool:
    """Whether paired timings ``a_ms`` (baseline) and ``b_ms`` (candidate) already show that
    the candidate will not be faster beyond the spread (see the module's docstring)."""
    got = _gain_spread_se(a_ms, b_ms)
    if got is None:
        return False
    gain, spread, se = got
    return bool(gain < spread - z * se)


def _gain_spread_se(a_ms, b_ms):
    """(gain, spread, se) of paired timings, or None with fewer than 8 pairs."""
    a = np.asarray(a_ms, dtype=np.float64)
    b = np.asarray(b_ms, dtype=np.float64)
    n = min(a.size, b.size)
    if n < 8:
        return None
    a, b = a[:n], b[:n]
    qa = np.percentile(a, [25, 50, 75])
    qb = np.percentile(b, [25, 50, 75])
    iqr_a, iqr_b = qa[2] - qa[0], qb[2] - qb[0]
    se = 1.2533 * np.sqrt(((iqr_a / 1.349) ** 2 + (iqr_b / 1.349) ** 2) / n)
    return qa[1] - qb[1], (iqr_a + iqr_b) / 2, se


def clearly_faster(a_ms, b_ms, z: float = Z) -> bool:
    """Whether paired timings already show the candidate faster beyond the spread by ``z``
    standard errors (the mirror of :func:`clearly_not_faster`; see the module's docstring)."""
    got = _gain_spread_se(a_ms, b_ms)
    if got is None:
        return False
    gain, spread, se = got
    return bool(gain > spread + z * se)


NOT_FASTER = "not faster"
FASTER = "faster"


def next_look(rounds_done: int, rule: dict | None, reps: int) -> int:
    """The round count after ``rounds_done`` at which :func:`should_stop` next looks (``reps``
    when it never does): the worker runs the rounds up to there without waiting between them."""
    if not rule:
        return reps
    first, every = int(rule.get("first", FIRST)), max(1, int(rule.get("every", EVERY)))
    if rounds_done < first:
        return min(reps, first)
    return min(reps, rounds_done + every - (rounds_done - first) % every)


def should_stop(rounds_done: int, a_ms, b_ms, rule: dict | None) -> str | None:
    """The worker's question after a round: ``rule`` is the request's ``stop_not_faster``
    ({"first", "every", "z", and "faster": whether a clear win may stop too}) or None (every
    round runs). The answer: :data:`NOT_FASTER`, :data:`FASTER` (why the rounds stop) or None."""
    if not rule:
        return None
    first, every = int(rule.get("first", FIRST)), max(1, int(rule.get("every", EVERY)))
    if rounds_done < first or (rounds_done - first) % every:
        return None
    z = float(rule.get("z", Z))
    if clearly_not_faster(a_ms, b_ms, z):
        return NOT_FASTER
    if rule.get("faster") and clearly_faster(a_ms, b_ms, z):
        return FASTER
    return None
