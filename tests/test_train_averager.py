"""train/averager.py: schedule-driven averaging through a LocalNetwork follows the planner's
mixing matrices (x <- W_r x each round) and reaches its consensus in the planner's rounds."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from wanreduce.host.driver import AggregatorClient
from wanreduce.planner import schedules as S
from wanreduce.planner import sharded
from wanreduce.planner.consensus import consensus_error, mixing_matrix, rounds_to_consensus
from wanreduce.planner.group_table import group_table
from wanreduce.train.averager import AVERAGER_JOB, ScheduleAverager
from wanreduce.train.local_network import LocalNetwork

ELEMENTS = 300


def _average_in_threads(schedule, rounds: int, x0: np.ndarray) -> np.ndarray:
    """Every site in its own thread, ``rounds`` outer steps; the sites' vectors afterwards."""
    n = schedule.n
    table = group_table(schedule)
    x = x0.astype(np.float32).copy()
    errors: list[BaseException] = []
    with LocalNetwork(n) as net:
        net.configure(table, jobs=[0, AVERAGER_JOB])

        def site(s: int) -> None:
            try:
                with AggregatorClient(**net.client_kwargs(s), sender_id=s, first_chunk=0,
                                      rtt=0.01, rate_bps=1e9, on_overflow="raise") as c:
                    avg = ScheduleAverager(s, ELEMENTS, table=table, client=c)
                    for k in range(rounds):
                        avg.average(x[s], k)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
                errors.append(exc)

        threads = [threading.Thread(target=site, args=(s,)) for s in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return x


@pytest.mark.parametrize("schedule", [S.rotating_cliques(9, 3), sharded.sharded(9, radices=(3, 3))],
                         ids=["cliques-3", "sharded-3x3"])
def test_averaging_follows_the_planners_mixing_matrices(schedule):
    n = schedule.n
    x0 = np.random.default_rng(1).normal(size=(n, ELEMENTS))
    rounds = len(schedule.rounds) + 1  # a whole cycle and the first round again
    x = _average_in_threads(schedule, rounds, x0)
    expect = x0.copy()
    for k in range(rounds):
        expect = mixing_matrix(schedule.rounds[k % len(schedule.rounds)], n) @ expect
    # fixed point: 2^-(31 - ceil(log2 3)) of the max |x| (< 8) per exchange, a few exchanges
    np.testing.assert_allclose(x, expect, atol=1e-6)


def test_cliques_3_over_9_sites_reach_consensus_in_the_planners_rounds():
    """Column 0 of the sites' vectors is the worst case of the planner's consensus error one
    round short of its rounds_to_consensus: still above eps there, within eps after the plan."""
    schedule = S.rotating_cliques(9, 3)
    eps = 1e-3
    planned = rounds_to_consensus(schedule, eps)
    assert planned is not None
    short = np.eye(9)
    for k in range(planned - 1):
        short = mixing_matrix(schedule.rounds[k % len(schedule.rounds)], 9) @ short
    j = np.full((9, 9), 1 / 9)
    worst = np.linalg.svd(short - j)[2][0]  # unit vector, sums to 0 (orthogonal to 1)
    assert consensus_error(schedule, planned - 1) > eps >= consensus_error(schedule, planned)
    x0 = np.random.default_rng(2).normal(size=(9, ELEMENTS))
    x0[:, 0] = worst
    for rounds, close in ((planned - 1, False), (planned, True)):
        x = _average_in_threads(schedule, rounds, x0)
        dev = np.linalg.norm(x[:, 0] - x0[:, 0].mean())  # ||(W - J/n) worst||, worst unit
        assert bool(dev <= eps + 1e-6) is close, (rounds, dev)


def test_a_site_alone_in_a_step_skips_it():
    """Sharded over 5 sites has levels with a site alone: it keeps its value in that step."""
    schedule = sharded.sharded(5)
    table = group_table(schedule)
    lonely = [s for s in range(5) if not table.site_steps(0, s)]
    x0 = np.random.default_rng(3).normal(size=(5, ELEMENTS))
    x = _average_in_threads(schedule, 1, x0)
    expect = mixing_matrix(schedule.rounds[0], 5) @ x0
    np.testing.assert_allclose(x, expect, atol=1e-6)
    for s in lonely:
        np.testing.assert_array_equal(x[s], x0[s].astype(np.float32))
