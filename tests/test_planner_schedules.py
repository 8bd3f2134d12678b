"""Schedules: every round is a partition of the receivers; exact designs reach J/n."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wanreduce.planner import schedules as S
from wanreduce.planner.consensus import consensus_error, mixing_matrix, rounds_to_consensus
from wanreduce.planner.optimiser import factorisations


def _families(n: int) -> list[S.Schedule]:
    out = [S.all_to_all(n), S.ring_allreduce(n), S.exponential(n)]
    out += [S.rotating_cliques(n, k) for k in range(2, n)]
    out += [S.grid(n, f) for f in factorisations(n)]
    if n >= 4:
        half = n // 2
        out.append(S.tree(n, [list(range(half)), list(range(half, n))], [0, half]))
    return out


@pytest.mark.parametrize("n", [2, 3, 5, 8, 9, 12])
def test_every_round_is_a_partition_with_stochastic_rows(n: int) -> None:
    for sched in _families(n):
        S.validate(sched)
        for rnd in sched.rounds:
            w = mixing_matrix(rnd, n)
            assert np.allclose(w.sum(axis=1), 1.0), sched.label


def test_affine_plane_classes_are_parallel_and_pairwise_orthogonal() -> None:
    classes = S.affine_plane_classes(3)
    assert len(classes) == 4
    pairs = set()
    for cls in classes:
        assert sorted(x for b in cls for x in b) == list(range(9))
        for b in cls:
            pairs |= {frozenset((x, y)) for x in b for y in b if x != y}
    assert len(pairs) == 36  # every pair of the 9 sites meets exactly once over the 4 classes
    n = 9
    for i in range(4):  # any two classes average exactly: W_j W_i = J/9
        for j in range(4):
            if i != j:
                wi = mixing_matrix(S.clique_round(classes[i]), n)
                wj = mixing_matrix(S.clique_round(classes[j]), n)
                assert np.allclose(wj @ wi, np.full((n, n), 1 / n))


@given(st.lists(st.integers(2, 4), min_size=1, max_size=3), st.randoms())
@settings(max_examples=25, deadline=None)
def test_grids_are_exact_in_m_rounds_for_any_assignment(radices: list[int], rnd) -> None:
    n = math.prod(radices)
    order = list(range(n))
    rnd.shuffle(order)
    sched = S.grid(n, radices, order)
    assert consensus_error(sched, len(radices)) < 1e-9
    if len(radices) > 1 and n > 2:
        assert consensus_error(sched, len(radices) - 1) > 0.5


def test_exact_designs() -> None:
    assert rounds_to_consensus(S.all_to_all(7), 1e-9) == 1
    assert rounds_to_consensus(S.rotating_cliques(9, 3), 1e-9) == 2
    assert rounds_to_consensus(S.exponential(16), 1e-9) == 4
    assert rounds_to_consensus(S.tree(6, [[0, 1], [2, 3, 4, 5]], [0, 2]), 1e-9) == 3
    # one-peer graphs are not exact when n is not a power of two, but converge
    assert consensus_error(S.exponential(9), 4) > 1e-3
    assert rounds_to_consensus(S.exponential(9), 1e-3) is not None


def test_covering_heuristic_converges_without_being_exact() -> None:
    sched = S.rotating_cliques(10, 3)
    assert "covering" in sched.label
    assert consensus_error(sched, len(sched.rounds)) > 1e-9
    assert rounds_to_consensus(sched, 1e-3) is not None


def test_validate_rejects_overlapping_groups() -> None:
    bad = S.Schedule("x", "x", (S.clique_round([[0, 1], [1, 2]]),), 3)
    with pytest.raises(ValueError, match="partition"):
        S.validate(bad)
