"""Round model on hand-computed small cases."""

from __future__ import annotations

import pytest

from wanreduce.planner import schedules as S
from wanreduce.planner.roundmodel import RoundModel
from wanreduce.planner.topology import topology_from_dict

C = 1000  # chunk bytes


def line(n: int, lat_ms: float, bw_gbps: float, rate_gbps: float, memory: int):
    """Sites S0 - S1 - ... on a line."""
    return topology_from_dict({
        "defaults": {"fpga_memory": memory, "line_rate_gbps": rate_gbps},
        "sites": [f"S{i}" for i in range(n)],
        "links": [{"a": f"S{i}", "b": f"S{i + 1}", "latency_ms": lat_ms, "bandwidth_gbps": bw_gbps}
                  for i in range(n - 1)],
    })


def test_two_sites_bandwidth_bound() -> None:
    # 10 ms, 1 Gb/s link, 10 Gb/s ports, plenty of memory: the link is the bottleneck.
    t = line(2, 10, 1, 10, 10**9)
    b = 10**6
    r = RoundModel(t, b, C).round_time(S.clique_round([[0, 1]]))
    x = 1e9 / 8
    latency = 0.010 + C / x + C / (10e9 / 8)  # propagation + last chunk on the link + ingress
    assert r.time == pytest.approx(b / x + latency, rel=1e-9)
    assert r.bound == "link"


def test_two_sites_memory_bound() -> None:
    # 4 slots only: chunks leave in windows of 4, one window per slot cycle (RTT + serialisation).
    t = line(2, 10, 10, 10, 4 * C)
    b = 100 * C
    r = RoundModel(t, b, C).round_time(S.clique_round([[0, 1]]))
    rate = 10e9 / 8
    one_way = 0.010 + C / rate + C / rate  # last byte at the receiver after leaving the port
    cycle = one_way + C / rate + 0.010  # + egress serialisation + ack back
    expected = (25 - 1) * cycle + 4 * C / rate + one_way
    assert r.time == pytest.approx(expected, rel=1e-9)
    assert r.bound == "memory"
    assert r.components[0].slots == 4


def test_multicast_sends_one_copy_per_sender_per_link() -> None:
    # Line S0 - S1 - S2, 1 Gb/s links. In a clique of three, link S1->S2 carries the streams of
    # S0 and S1 (two copies), S1->S0 those of S1 and S2; so each sender gets half a link.
    # Unicast (one copy per receiver) would put three streams on S1->S2.
    t = line(3, 1, 1, 10, 10**9)
    b = 10**6
    r = RoundModel(t, b, C).round_time(S.clique_round([[0, 1, 2]]))
    comp = r.components[0]
    assert comp.rate == pytest.approx(1e9 / 8 / 2)
    assert comp.bound == "link"


def test_receiver_ingress_limits_large_groups() -> None:
    # Star: hub H with 4 leaves over 100 Gb/s links, 10 Gb/s FPGA ports. In an all-to-all of 5
    # every FPGA ingests 4 streams, so each sender gets a quarter of the line rate.
    t = topology_from_dict({
        "defaults": {"fpga_memory": 10**9, "line_rate_gbps": 10},
        "sites": ["H", "A", "B", "C", "D"],
        "links": [{"a": "H", "b": x, "latency_ms": 1, "bandwidth_gbps": 100} for x in "ABCD"],
    })
    r = RoundModel(t, 10**6, C).round_time(S.all_to_all(5).rounds[0])
    assert r.components[0].rate == pytest.approx(10e9 / 8 / 4)
    assert r.bound == "ingress"


def test_disjoint_groups_run_in_parallel_and_round_is_the_slowest() -> None:
    t = line(4, 5, 10, 10, 10**9)
    m = RoundModel(t, 10**6, C)
    both = m.round_time(S.clique_round([[0, 1], [2, 3]])).time
    alone = [m.round_time(S.Round((S.clique([0, 1]), S.clique([2]), S.clique([3])))).time,
             m.round_time(S.Round((S.clique([2, 3]), S.clique([0]), S.clique([1])))).time]
    assert both == pytest.approx(max(alone))


def test_per_sender_memory_divides_slots_by_senders() -> None:
    t = line(3, 10, 10, 10, 12 * C)
    shared = RoundModel(t, 10**5, C, "shared").round_time(S.all_to_all(3).rounds[0])
    per = RoundModel(t, 10**5, C, "per-sender").round_time(S.all_to_all(3).rounds[0])
    assert shared.components[0].slots == 12
    assert per.components[0].slots == 6
    assert per.time > shared.time


def test_ring_allreduce_alpha_beta() -> None:
    # Ring S0->S1->S2->S3->S0 on a line: the hop S3->S0 routes back over the reverse links, so
    # no link carries two hops and the ring runs at line rate. T = 2(n-1)/n B/x + the longest
    # run of 2(n-1) consecutive hop latencies (two of them include the 3-link hop).
    t = line(4, 1, 10, 10, 10**9)
    b = 4 * 10**6
    r = RoundModel(t, b, C).round_time(S.ring_allreduce(4).rounds[0])
    x = 10e9 / 8
    assert r.components[0].rate == pytest.approx(x)
    l1 = 0.001 + C / x + C / x
    l3 = 0.003 + 3 * C / x + C / x
    assert r.time == pytest.approx(2 * 3 / 4 * b / x + 4 * l1 + 2 * l3, rel=1e-9)


def test_colocated_is_never_slower() -> None:
    t = line(5, 20, 10, 10, 2**20)
    for sched in (S.all_to_all(5), S.exponential(5), S.rotating_cliques(5, 2)):
        wan = RoundModel(t, 10**7, C).schedule_round_times(sched)
        co = RoundModel(t.colocated(), 10**7, C).schedule_round_times(sched)
        assert all(c <= w + 1e-12 for c, w in zip(co, wan, strict=True))
