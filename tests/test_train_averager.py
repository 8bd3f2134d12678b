"""train/averager.py: schedule-driven averaging through a LocalNetwork follows the planner's
mixing matrices (x <- W_r x each round) and reaches its consensus in the planner's rounds."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from wanreduce.emulator.local_network import LocalNetwork
from wanreduce.host.control import ControlClient
from wanreduce.host.driver import AggregatorClient
from wanreduce.planner import schedules as S
from wanreduce.planner import sharded
from wanreduce.planner.consensus import consensus_error, mixing_matrix, rounds_to_consensus
from wanreduce.planner.group_table import group_table
from wanreduce.train.averager import AVERAGER_JOB, ScheduleAverager

ELEMENTS = 300


def _average_in_threads(schedule, rounds: int, x0: np.ndarray) -> np.ndarray:
    """Every site in its own thread with its own aggregator, ``rounds`` outer steps; the sites'
    vectors afterwards."""
    n = schedule.n
    table = group_table(schedule)
    x = x0.astype(np.float32).copy()
    errors: list[BaseException] = []
    barrier = threading.Barrier(n, timeout=60)
    with LocalNetwork(n) as net:
        net.configure(table, jobs=[0, AVERAGER_JOB])

        def site(s: int) -> None:
            kw = net.client_kwargs(s)
            try:
                with AggregatorClient(**{"rtt": 0.01, **kw}, sender_id=s, on_overflow="raise") as c, \
                        ControlClient(kw["aggregator"]) as control:
                    avg = ScheduleAverager(s, ELEMENTS, table=table, client=c, control=control,
                                           barrier=barrier.wait)
                    for k in range(rounds):
                        avg.average(x[s], k)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
                errors.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=site, args=(s,)) for s in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return x


@pytest.mark.parametrize("schedule", [S.rotating_cliques(9, 3), sharded.sharded(9, radices=(3, 3)),
                                      S.ring_allreduce(9, (4, 0, 8, 1, 7, 2, 6, 3, 5))],
                         ids=["cliques-3", "sharded-3x3", "ring"])
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


def test_a_site_alone_in_a_step_skips_it_and_stays_in_step():
    """Sites 2 and 3 are alone in round 0, 0 and 1 in round 2: they keep their values there, and
    their chunk counters and aggregators still agree with the others' in the rounds after."""
    blocks = [[[0, 1], [2], [3]], [[0, 2], [1, 3]], [[2, 3], [0], [1]], [[0, 3], [1, 2]]]
    schedule = S.Schedule("uneven", "uneven pairs", tuple(S.clique_round(b) for b in blocks), 4)
    x0 = np.random.default_rng(3).normal(size=(4, ELEMENTS))
    rounds = 2 * len(blocks) + 1
    x = _average_in_threads(schedule, rounds, x0)
    expect = x0.copy()
    for k in range(rounds):
        expect = mixing_matrix(schedule.rounds[k % len(blocks)], 4) @ expect
    np.testing.assert_allclose(x, expect, atol=1e-6)
