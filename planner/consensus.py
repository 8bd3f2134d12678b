"""Consensus metric: mixing matrices, error over a window, time to epsilon-consensus.

Round t replaces the vector of site values x by W_t x. After rounds 1..T the deviation from the
exact average is (W_T ... W_1 - J/n) x, so the worst-case consensus error is the spectral norm
||W_T ... W_1 - J/n||_2 (J = all-ones). A single round of disjoint groups never mixes everyone,
so the error is measured over a window of rounds, never from one round's spectral gap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .schedules import Round, Schedule


def mixing_matrix(rnd: Round, n: int) -> np.ndarray:
    """W with W[r, s] = weight of sender s in receiver r's group (ring: exact average J/n)."""
    if rnd.ring is not None:
        return np.full((n, n), 1.0 / n)
    w = np.zeros((n, n))
    for g in rnd.groups:
        for r in g.receivers:
            for s, a in zip(g.senders, g.weights, strict=True):
                w[r, s] += a
    return w


def consensus_error(schedule: Schedule, rounds: int) -> float:
    """||W_T...W_1 - J/n||_2 after ``rounds`` rounds of the (cyclically repeated) schedule."""
    n = schedule.n
    prod = np.eye(n)
    mats = [mixing_matrix(r, n) for r in schedule.rounds]
    for t in range(rounds):
        prod = mats[t % len(mats)] @ prod
    return float(np.linalg.norm(prod - np.full((n, n), 1.0 / n), 2))


def rounds_to_consensus(schedule: Schedule, eps: float, max_rounds: int = 400) -> int | None:
    """Fewest rounds T with consensus error <= eps, or None if not reached in ``max_rounds``."""
    n = schedule.n
    if n == 1:
        return 0
    mats = [mixing_matrix(r, n) for r in schedule.rounds]
    j = np.full((n, n), 1.0 / n)
    prod = np.eye(n)
    for t in range(max_rounds):
        prod = mats[t % len(mats)] @ prod
        if np.linalg.norm(prod - j, 2) <= eps:
            return t + 1
    return None


def time_to_consensus(
    schedule: Schedule, round_times: Sequence[float], eps: float, max_rounds: int = 400
) -> tuple[float, int | None]:
    """(seconds, rounds) to epsilon-consensus: the sum of the round times actually run."""
    rounds = rounds_to_consensus(schedule, eps, max_rounds)
    if rounds is None:
        return float("inf"), None
    k = len(round_times)
    return float(sum(round_times[t % k] for t in range(rounds))), rounds
