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
            assert sim.time == pytest.approx(analytic.transfer, rel=0.10), (fam, analytic.bound)


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


@pytest.mark.parametrize("name", ["nine-city", "nine-city-public-rtt"])
def test_skew_only_sim_matches_analytic_and_never_overflows(name: str) -> None:
    # Open-loop senders paced at the planned rate: the simulator's own slot count (from first
    # remote byte to last remote contribution, with queueing) stays within S at every receiver.
    memory = 4 * 2**20
    topo = load_topology(name).with_memory(memory)
    chunk = min(CHUNK, memory // 64)
    plans = Optimiser(topo, B, chunk_bytes=chunk, memory_model="skew-only").run(
        ["all-to-all", "cliques-3", "tree"])
    m = RoundModel(topo, B, chunk, "skew-only")
    bounds = set()
    for fam, p in plans.items():
        for rnd in p.schedule.rounds[:2]:
            analytic = m.round_time(rnd)
            bounds.add(analytic.bound)
            sim = simulate_round(topo, rnd, B, chunk, "skew-only", pacing=analytic.pacing())
            assert sim.time == pytest.approx(analytic.transfer, rel=0.10), (fam, analytic.bound)
            assert sim.overflows == 0 and max(sim.peak_slots.values()) <= memory // chunk, fam
    assert "memory" in bounds  # the memory cap was exercised, not only bandwidth


def test_skew_only_sim_counts_overflow_when_paced_too_fast() -> None:
    memory = 4 * 2**20
    topo = load_topology("nine-city").with_memory(memory)
    chunk = memory // 64
    rnd = S.all_to_all(9).rounds[0]
    analytic = RoundModel(topo, B, chunk, "skew-only").round_time(rnd)
    assert analytic.bound == "memory"
    fast = {s: 2 * x for s, x in analytic.pacing().items()}
    sim = simulate_round(topo, rnd, B, chunk, "skew-only", pacing=fast)
    assert sim.overflows > 0 and max(sim.peak_slots.values()) > 64
    with pytest.raises(ValueError, match="skew-only"):
        simulate_round(topo, rnd, B, chunk, "skew-only")


def test_sites_with_different_memory_sim_matches_analytic() -> None:
    # Per-site memory from the file: one small site limits its groups; the simulator (slots per
    # receiver) and the model (most constrained receiver's S and round trip) agree.
    doc_sites = [{"name": s.name, "fpga_memory": (2 if s.name in ("SIN", "LON") else 64) * 2**20}
                 for s in load_topology("nine-city").sites]
    base = load_topology("nine-city")
    topo = topology_from_dict({
        "sites": doc_sites,
        "links": [{"a": lk.a, "b": lk.b, "latency_ms": lk.latency_s * 1e3,
                   "bandwidth_gbps": lk.bandwidth_bps / 1e9} for lk in base.links],
    })
    assert topo.memory_from_file
    # 128 KiB chunks: 16 slots at the 2 MiB sites, so a 10 MB stream still cycles their window
    # ~5 times (chunks / slots = B / M whatever the chunk size) at 1/5 of the events of 32 KiB.
    chunk = 2**20 // 8
    for model in ("shared", "per-sender", "skew-only"):
        m = RoundModel(topo, B, chunk, model)
        for rnd in (S.all_to_all(9).rounds[0], *S.rotating_cliques(9, 3).rounds):
            analytic = m.round_time(rnd)
            sim = simulate_round(topo, rnd, B, chunk, model, pacing=analytic.pacing())
            assert sim.time == pytest.approx(analytic.transfer, rel=0.10), (model, analytic.bound)
            assert sim.overflows == 0
            assert analytic.bound == "memory", (model, rnd)  # the small sites' window limits it
