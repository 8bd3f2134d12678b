"""Round model on hand-computed small cases."""

from __future__ import annotations

import pytest

from wanreduce.host import agreement
from wanreduce.planner import schedules as S
from wanreduce.planner.roundmodel import AGREEMENT_BYTES, RoundModel
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
    # The driver's scale agreement first: 1432 B (2 chunks of <= C) at the same link rate, one
    # window (plenty of slots), the same last-chunk latency; then the data.
    agree = AGREEMENT_BYTES / x + latency
    assert r.transfer == pytest.approx(b / x + latency, rel=1e-9)
    assert r.agreement == pytest.approx(agree, rel=1e-9)
    assert r.time == pytest.approx(agree + b / x + latency, rel=1e-9)
    assert r.bound == "link"


def test_agreement_is_the_drivers_vector_once_per_round() -> None:
    """The agreement is what the driver exchanges (``host/agreement.py``'s LANES int32 lanes, in
    the round's aggregating groups): 358 lanes at E = 499 are one 1432 B chunk, which on a
    10 ms line at 1 Gb/s costs one one-way delay; a bigger tensor does not change it; a ring
    round (hosts reduce, no aggregator) has none."""
    assert AGREEMENT_BYTES == agreement.LANES * 4 == 1432
    t = line(3, 10, 1, 10, 10**9)
    x, c = 1e9 / 8, 1996
    small, big = (RoundModel(t, b, c).round_time(S.clique_round([[0, 1], [2]]))
                  for b in (10**5, 10**7))
    one_way = 0.010 + 1432 / x + 1432 / (10e9 / 8)  # one chunk: propagation, link, ingress
    assert small.agreement == big.agreement == pytest.approx(1432 / x + one_way, rel=1e-9)
    assert big.time - small.time == pytest.approx(big.transfer - small.transfer, rel=1e-12)
    assert RoundModel(t, 10**5, c).round_time(S.ring_allreduce(3).rounds[0]).agreement == 0.0


def test_two_sites_memory_bound() -> None:
    # 4 slots only: chunks leave in windows of 4, one window per slot cycle (RTT + serialisation).
    t = line(2, 10, 10, 10, 4 * C)
    b = 100 * C
    r = RoundModel(t, b, C).round_time(S.clique_round([[0, 1]]))
    rate = 10e9 / 8
    one_way = 0.010 + C / rate + C / rate  # last byte at the receiver after leaving the port
    cycle = one_way + C / rate + 0.010  # + egress serialisation + ack back
    expected = (25 - 1) * cycle + 4 * C / rate + one_way
    # the agreement's 2 chunks fit one window of 4 slots: its bytes at line rate + one_way
    assert r.time == pytest.approx(AGREEMENT_BYTES / rate + one_way + expected, rel=1e-9)
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
    assert r.agreement == 0.0  # hosts reduce exact floats: no scale agreement


def test_colocated_is_never_slower() -> None:
    t = line(5, 20, 10, 10, 2**20)
    for sched in (S.all_to_all(5), S.exponential(5), S.rotating_cliques(5, 2)):
        wan = RoundModel(t, 10**7, C).schedule_round_times(sched)
        co = RoundModel(t.colocated(), 10**7, C).schedule_round_times(sched)
        assert all(c <= w + 1e-12 for c, w in zip(co, wan, strict=True))


def test_most_constrained_receiver_limits_the_group() -> None:
    # S0 -10ms- S1 -10ms- S2, all-to-all. S1 (4 slots) waits one 20 ms round trip for either
    # neighbour; S0 and S2 (16 slots) a 40 ms one. Caps: S1 4c/P1, S0 and S2 16c/P0, so S1
    # limits the group with its own (S, P), not the smallest S with the largest P.
    t = topology_from_dict({
        "defaults": {"line_rate_gbps": 10},
        "sites": [{"name": "S0", "fpga_memory": 16 * C}, {"name": "S1", "fpga_memory": 4 * C},
                  {"name": "S2", "fpga_memory": 16 * C}],
        "links": [{"a": f"S{i}", "b": f"S{i + 1}", "latency_ms": 10, "bandwidth_gbps": 10}
                  for i in range(2)],
    })
    r = RoundModel(t, 100 * C, C).round_time(S.all_to_all(3).rounds[0])
    rate, bw = 10e9 / 8, 10e9 / 8
    p1 = 0.020 + C / bw + C / rate + C / rate  # S0 -> S1: RTT + egress, one link, ingress
    (comp,) = r.components
    assert (comp.slots, comp.period) == (4, pytest.approx(p1, rel=1e-12))
    assert comp.rate == pytest.approx(4 * C / p1) and r.bound == "memory"


def test_skew_only_holds_a_slot_from_first_to_last_arrival() -> None:
    # Same line, 4 slots everywhere, skew-only: S0 hears S1 after 10 ms and S2 after 20 ms (one
    # more link), so a slot is held 10 ms + one link chunk time + two ingress chunk times (its
    # two streams may queue at the port); S1 hears both after 10 ms and holds a slot two
    # ingress chunk times. One of the 5 slots is kept spare for jitter: S0 and S2 limit the rate
    # to 4c/H.
    t = line(3, 10, 100, 10, 5 * C)
    b = 100 * C
    r = RoundModel(t, b, C, "skew-only").round_time(S.all_to_all(3).rounds[0])
    rate, bw = 10e9 / 8, 100e9 / 8
    hold = 0.010 + C / bw + 2 * C / rate
    latency = 0.020 + 2 * C / bw + C / rate  # S2's last chunk reaches S0
    (comp,) = r.components
    assert comp.period == pytest.approx(hold, rel=1e-12) and comp.slots == 4
    assert comp.rate == pytest.approx(4 * C / hold) and r.bound == "memory"
    assert r.transfer == pytest.approx(b / (4 * C / hold) + latency, rel=1e-9)
    # A round trip is 20 ms or more: the round-trip models need at least twice the time.
    assert RoundModel(t, b, C, "shared").round_time(S.all_to_all(3).rounds[0]).transfer > 2 * r.transfer


def test_skew_only_group_of_equidistant_senders_needs_two_slots() -> None:
    # S1 hears S0 and S2 at the same time: zero skew, two slots (one chunk of each stream at the
    # port) + one spare run at twice the ingress limit.
    t = line(3, 10, 100, 10, 3 * C)
    rnd = S.Round((S.Group((1,), (0, 1, 2), (1 / 3,) * 3), S.Group((0,), (0,), (1.0,)),
                   S.Group((2,), (2,), (1.0,))))
    r = RoundModel(t, 100 * C, C, "skew-only").round_time(rnd)
    assert r.components[0].rate == pytest.approx(10e9 / 8 / 2) and r.bound == "ingress"


def test_unknown_memory_model_names_the_choices() -> None:
    with pytest.raises(ValueError, match="memory_model: must be one of shared, per-sender, skew-only"):
        RoundModel(line(2, 1, 1, 1, 10**6), 10, C, "skew")
