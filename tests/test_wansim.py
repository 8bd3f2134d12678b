"""Discrete-event simulator (simpy) against the analytic round model."""

from __future__ import annotations

import pytest

from wanreduce.planner import schedules as S
from wanreduce.planner.optimiser import Optimiser
from wanreduce.planner.roundmodel import RoundModel
from wanreduce.planner.topology import load_topology, topology_from_dict
from wanreduce.planner.wansim import simulate_round

B = 10**7
CHUNK = B // 100


@pytest.mark.parametrize("name", ["nine-city", "nine-city-public-rtt"])
@pytest.mark.parametrize("memory, model", [(4 * 2**20, "shared"), (4 * 2**20, "per-sender"),
                                           (1 * 2**30, "shared")])
def test_sim_matches_analytic_within_10_percent(name: str, memory: int, model: str) -> None:
    topo = load_topology(name).with_memory(memory)
    chunk = min(CHUNK, memory // 16)
    plans = Optimiser(topo, B, chunk_bytes=chunk, memory_model=model).run(
        ["all-to-all", "cliques-3", "tree", "exponential"])
    m = RoundModel(topo, B, chunk, model)
    for fam, p in plans.items():
        for rnd in p.schedule.rounds[:2]:
            analytic = m.round_time(rnd)
            sim = simulate_round(topo, rnd, B, chunk, model, pacing=analytic.pacing())
            assert sim.time == pytest.approx(analytic.time, rel=0.10), (fam, analytic.bound)


def test_sim_hand_case_and_memory_window() -> None:
    # Two sites, 10 ms, 10 Gb/s: 100 chunks through 4 slots take 25 slot cycles of ~20 ms.
    topo = topology_from_dict({
        "defaults": {"fpga_memory": 4000, "line_rate_gbps": 10},
        "sites": ["A", "B"],
        "links": [{"a": "A", "b": "B", "latency_ms": 10, "bandwidth_gbps": 10}],
    })
    rnd = S.clique_round([[0, 1]])
    sim = simulate_round(topo, rnd, 100_000, 1000)
    assert 24 * 0.020 < sim.time < 24 * 0.0201 + 0.011
    more = simulate_round(topo.with_memory(400_000), rnd, 100_000, 1000)
    assert more.time < 0.011  # one window: serialisation + one-way latency


def test_unpaced_senders_are_not_faster_than_line_rate_physics() -> None:
    topo = load_topology("nine-city").with_memory(2**30)
    rnd = S.all_to_all(9).rounds[0]
    sim = simulate_round(topo, rnd, B, CHUNK)
    ingress = 8 * B / (10e9 / 8)  # every FPGA ingests 8 streams through one 10 Gb/s port
    assert sim.time >= ingress
