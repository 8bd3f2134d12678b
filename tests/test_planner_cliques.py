"""Mixed-size clique constructions for any n: valid rounds, exact in the stated rounds, few rounds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wanreduce.planner import cliques as C
from wanreduce.planner import schedules as S
from wanreduce.planner.consensus import consensus_error, rounds_to_consensus


def _check_construction(cons: C.Construction, k: int, at_most: bool) -> None:
    sched = cons.schedule(f"cliques-{k}")
    S.validate(sched)  # every round: receivers partition the sites, weights sum to 1
    for rnd in sched.rounds:
        weight: dict[int, float] = {}
        for g in rnd.groups:
            assert set(g.receivers) <= set(g.senders)  # every receiver contributes itself
            if at_most:
                assert len(g.senders) <= k
            for s, w in zip(g.senders, g.weights, strict=True):
                # one weight per sender per round: it scales its update once before sending
                assert weight.setdefault(s, w) == pytest.approx(w)
    t = cons.exact_rounds
    assert t == len(sched.rounds)
    assert consensus_error(sched, t) < 1e-9
    if t > 1:
        assert consensus_error(sched, t - 1) > 1e-3  # not exact any earlier: the count is tight


@given(st.integers(2, 90), st.integers(2, 5), st.booleans())
@settings(max_examples=60, deadline=None)
def test_mixed_cliques_are_valid_and_exact_for_any_n(n: int, k: int, at_most: bool) -> None:
    cons = C.mixed_cliques(n, k, at_most)
    _check_construction(cons, k, at_most)
    if at_most:  # blocks of at most k: the fewest rounds any schedule of <= k senders can have
        assert cons.exact_rounds == math.ceil(math.log(n, k) - 1e-9)


@pytest.mark.parametrize("n", [10, 16, 32, 64])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_constructions_beat_the_covering_heuristic(n: int, k: int) -> None:
    """10, 32, 64 sites in cliques of ~3: the greedy covering needs 6, 17, 70 rounds."""
    covering = S.rotating_cliques(n, k)
    old = rounds_to_consensus(covering, 1e-3)
    for at_most in (True, False):
        cons = C.mixed_cliques(n, k, at_most)
        _check_construction(cons, k, at_most)
        new = rounds_to_consensus(cons.schedule(f"cliques-{k}"), 1e-3)
        assert new == cons.exact_rounds
        if "covering" in covering.label:  # no exact Z_k^m design for this n
            assert new < old, (n, k, cons.name, old)
            assert new <= math.ceil(math.log(n, k) - 1e-9)


def test_ten_sites_in_three_plus_three_plus_four() -> None:
    """The near-resolvable 3 + 3 + 4 design: two rounds, exact (the issue's example)."""
    cons = C.mixed_cliques(10, 3, at_most=False)
    assert C.levels(10, 3, at_most=False) == [[3, 3, 4], [3]]
    assert cons.exact_rounds == 2
    sched = cons.schedule("cliques-3")
    assert sorted(len(g.senders) for g in sched.rounds[0].groups) == [3, 3, 4]
    assert consensus_error(sched, 2) < 1e-12


def test_equal_blocks_are_the_grid() -> None:
    """With equal children every lane is a plain clique: the mixed-radix grid's rounds."""
    cons = C.mixed_cliques(27, 3)
    grid = S.grid(27, [3, 3, 3])  # digit 0 most significant: its last round is our first
    for a, b in zip(cons.schedule("x").rounds, grid.rounds[::-1], strict=True):
        assert {g.receivers for g in a.groups} == {g.receivers for g in b.groups}
        assert all(g.receivers == g.senders for g in a.groups)


def test_levels_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match="k >= 2"):
        C.levels(10, 1)


@pytest.mark.parametrize("memory, model", [(4 * 2**20, "shared"), (4 * 2**20, "per-sender"),
                                           (2**30, "shared")])
def test_mixed_rounds_simulate_as_the_round_model_says(memory: int, model: str) -> None:
    """Borrowed senders (one stream to several lanes) in the packet simulator: within 10 %."""
    from wanreduce.planner.optimiser import Optimiser
    from wanreduce.planner.roundmodel import RoundModel
    from wanreduce.planner.topology import load_topology
    from wanreduce.planner.wansim import simulate_round

    nbytes = 10**7
    topo = load_topology("nine-city").with_memory(memory)
    chunk = min(nbytes // 100, memory // 16)
    opt = Optimiser(topo, nbytes, chunk_bytes=chunk, memory_model=model)
    m = RoundModel(topo, nbytes, chunk, model)
    borrowed = 0
    for k in (2, 4):
        plan = opt.cliques_plan(k)
        assert "mixed" in plan.schedule.label
        for rnd in plan.schedule.rounds:
            borrowed += sum(len(set(g.senders) - set(g.receivers)) for g in rnd.groups)
            analytic = m.round_time(rnd)
            sim = simulate_round(topo, rnd, nbytes, chunk, model, pacing=analytic.pacing())
            assert sim.time == pytest.approx(analytic.transfer, rel=0.10), (k, analytic.bound)
    assert borrowed > 0  # the rounds exercised senders that feed lanes they do not receive in
