"""The faithful sharded plan (host/sharded_allreduce.py over the emulator): reduce-scatter to each
shard's owner only, all-gather passed through to the hosts, exact against NumPy; a site killed
mid-phase is named and nothing hangs."""

import multiprocessing
import time

import numpy as np
import pytest
from test_emulator_forwarder import DELAYS, Net, _datagram, _sock, _wait_for
from test_emulator_network import SQUARE, _ended

from wanreduce import fixedpoint, wire
from wanreduce.emulator.forwarder import Routes
from wanreduce.emulator.runner import run_rounds, site_tensor
from wanreduce.emulator.wan_emulator import WanEmulator, sharded_routes
from wanreduce.host.driver import AggregatorClient
from wanreduce.host.reference import expected_allreduce
from wanreduce.host.sharded_allreduce import agreed_tensor, shard_bounds
from wanreduce.host.softagg import SoftAggregator
from wanreduce.model import Outcome
from wanreduce.packetize import packetize
from wanreduce.planner import sharded
from wanreduce.planner.group_table import group_table
from wanreduce.planner.topology import topology_from_dict

E = 499  # the emulator's elements per packet (wire.MAX_ELEMENTS_DEFAULT)


def test_shard_bounds_split_evenly_and_refuse_too_few_elements():
    assert shard_bounds(10, 4) == [0, 3, 6, 8, 10]
    assert shard_bounds(8, 4) == [0, 2, 4, 6, 8]
    with pytest.raises(ValueError, match="3 elements cannot be split into 4 shards"):
        shard_bounds(3, 4)


def test_agreed_tensor_gives_the_one_int32_header_of_the_call():
    """The sharded and the ring calls packetize their int32 partial sums with one header, the
    agreement's (``agreed_tensor``): agreed exponent, elements per packet, job, round, session;
    no n_contributors (packetize refuses it for int32)."""
    with SoftAggregator(slots=64, elements=16, groups=8, jobs=2) as agg:
        agg.configure(groups={2: (0,)}, jobs=[1])
        with AggregatorClient(agg.address, sender_id=0, elements_per_packet=16, rtt=0.002,
                              session=77, timeout=10) as c:
            x = np.linspace(-3, 3, 40, dtype=np.float32)
            a = agreed_tensor(c, x, None, job=1, group=2, round=5, max_abs=None, who="test",
                              why="it is a test")
    assert a.exp == c.stats.last_exponent and a.members == 1
    assert a.head == {"exp": a.exp, "elements_per_packet": 16, "job_id": 1, "round_id": 5,
                      "session": c.session}
    assert np.array_equal(a.held, fixedpoint.quantize(x, a.exp, 1)[0])
    pk = packetize(a.held, group_id=2, first_chunk=9, sender_id=0, **a.head)
    for field, want in (("scale_exp", a.exp), ("job_id", 1), ("round_id", 5), ("session", c.session)):
        assert (pk.headers[field] == want).all()


def test_group_table_numbers_reduce_and_gather_groups_per_owner():
    t = group_table(sharded.sharded(9, radices=(3, 3)))
    sh = t.sharded_steps(0)
    assert t.steps(0) == ({s: sh.everyone for s in range(9)},)  # the agreement (and warm-up)
    assert t.groups[sh.everyone] == tuple(range(9))
    blocks = sh.site_blocks(4)
    assert [4 in b.sites for b in blocks] == [True, True] and len(blocks) == 2
    for level in sh.levels:
        for b in level:
            for k, owner in enumerate(b.sites):
                assert t.reduce_owner[b.reduce[k]] == owner == t.gather_owner[b.gather[k]]
                assert t.groups[b.reduce[k]] == tuple(sorted(b.sites))
    assert len(t.groups) == 1 + 2 * 9 * 2  # 36 shard groups fit the one-byte group id


def test_routes_send_shards_to_their_owner_and_pass_the_all_gather_through():
    topo = topology_from_dict(SQUARE)
    t = group_table(sharded.sharded(4))
    r = sharded_routes(topo, t)
    [blk] = t.sharded_steps(0).levels[0]
    for k, owner in enumerate(blk.sites):
        red, gat = blk.reduce[k], blk.gather[k]
        assert r.deliver[red] == {owner} and r.acks[red] == tuple(s for s in range(4) if s != owner)
        assert {s for g, s in r.trees if g == red} == set(range(4)) - {owner}
        assert {s for g, s in r.trees if g == gat} == {owner}  # only the owner sends
        assert gat in r.passthrough and r.deliver[gat] == set(range(4)) - {owner}
        assert not r.delivers(red, (owner + 1) % 4) and r.delivers(gat, (owner + 1) % 4)
    assert Routes(members={0: (0, 1)}).delivers(0, 1)  # cliques: every member (as before)


def test_forwarder_reduce_goes_to_the_owner_its_results_ack_and_gather_passes_through():
    """Line A - B - C - D; reduce group 6 = {A, C, D} owned by D, gather group 7 sent by D. A's
    contribution reaches D's aggregator only (not A's, not C's); D's result reaches D's host and,
    as an ack one path delay later and without taking link capacity, A's and C's hosts; D's
    gather copy reaches A's and C's hosts, and no aggregator."""
    net = Net()
    topo = net.topo
    routes = Routes({6: (0, 2, 3), 7: (0, 2, 3)},
                    {(6, 0): topo.multicast_tree(0, [3]), (6, 2): topo.multicast_tree(2, [3]),
                     (7, 3): topo.multicast_tree(3, [0, 2])},
                    deliver={6: frozenset({3}), 7: frozenset({0, 2})},
                    passthrough=frozenset({7}), acks={6: (0, 2)})
    net.conn.send(("routes", routes))
    assert net.conn.recv() == ("ok",)
    hosts = [_sock(10) for _ in range(4)]
    try:
        for s in (0, 2, 3):  # hosts register at their edge by contributing (C: group 6 too)
            hosts[s].sendto(_datagram(wire.MsgType.CONTRIBUTION, 6, 0, s), net.edges[s])
        assert _wait_for(lambda: len(net.got[3]) == 3)
        time.sleep(0.3)
        assert [len(g) for g in net.got] == [0, 0, 0, 3]  # the owner's aggregator only
        before = sum(r["bytes"] for r in net.stats()["links"].values())
        t0 = time.monotonic()
        net.aggs[3].sendto(_datagram(wire.MsgType.RESULT, 6, 0), net.got[3][0][2])
        for s, delay in ((3, 0.0), (2, DELAYS[("C", "D")]),
                         (0, sum(DELAYS.values()))):
            pkt, frm = hosts[s].recvfrom(65536)
            assert frm == net.edges[s] and pkt[3] == wire.MsgType.RESULT
            assert time.monotonic() - t0 >= delay
        assert sum(r["bytes"] for r in net.stats()["links"].values()) == before  # acks: free
        hosts[3].sendto(_datagram(wire.MsgType.CONTRIBUTION, 7, 0, 3), net.edges[3])
        for s in (0, 2):
            pkt, frm = hosts[s].recvfrom(65536)
            assert frm == net.edges[s] and pkt[3] == wire.MsgType.CONTRIBUTION and pkt[5] == 7
        time.sleep(0.3)
        assert [len(g) for g in net.got] == [0, 0, 0, 3]  # passed through: no aggregator
        assert net.stats()["counters"]["acks"] == 2
    finally:
        for h in hosts:
            h.close()
        net.close()


def rounds_on_square(table, nbytes: int, rounds: int, **emulator):
    """``rounds`` of ``table`` with ``nbytes`` per site over the SQUARE WAN (64 KiB slots):
    the run (no errors, every site checked every round), each aggregator's counters, the
    forwarder's statistics and the (closed) emulator."""
    with WanEmulator(topology_from_dict(SQUARE), memory=64 << 10, lifetime=150, **emulator) as net:
        net.configure(table, jobs=[0])
        res = run_rounds(net, table, nbytes=nbytes, rounds=rounds, timeout=20, lifetime=120)
        assert res.errors == [], "; ".join(e for e in res.errors if "Barrier" not in e)
        counters = [agg.model.counters for agg in net.aggregators]
        stats = net.stats()
    assert [r.checked for r in res.reports] == [rounds] * 4
    return res, counters, stats, net


def test_sharded_rounds_over_a_wan_are_exact_and_reach_only_the_owners():
    """Flat sharding of 4 sites on a WAN with two-hop routes: every result bit for bit the
    fixed-point sum of all four (host/reference, NumPy), close to the float64 sum; each
    aggregator merged only its own shards (no contribution of another shard, nor an all-gather
    copy, reached it: those would be counted as aggregated or refused)."""
    rounds = 2
    res, counters, stats, net = rounds_on_square(group_table(sharded.sharded(4)), 12_000, rounds)
    # 3000 elements: shards of 750 = 2 chunks each
    xs = [site_tensor(0, s, 1, 3000) for s in range(4)]
    want = expected_allreduce(xs, elements=E)
    assert np.abs(want - np.sum(np.asarray(xs, np.float64), axis=0)).max() < 1e-5
    assert max(r.max_abs_err for r in res.reports) < 1e-5
    # per aggregator: warm-up (agreement + 1 chunk) x 4 members, and per round the agreement's
    # 4 and its own shard's 2 chunks x 4 members
    for c in counters:
        assert c[Outcome.AGGREGATED] == 8 + rounds * (4 + 2 * 4)
        assert not any(c[o] for o in Outcome if o.name.startswith("REJECT") or o in (
            Outcome.OUT_OF_WINDOW, Outcome.STALE))
    assert stats["counters"]["acks"] >= rounds * 4 * 2 * 3  # each contributor's chunks acked
    assert _ended(net, 1)


def test_a_site_killed_mid_phase_is_named_and_nothing_hangs():
    topo = topology_from_dict(SQUARE)
    table = group_table(sharded.sharded(4))
    net = WanEmulator(topo, memory=8 << 10, lifetime=120)  # 4 slots: a phase takes a while
    try:
        net.configure(table, jobs=[0])
        t0 = time.monotonic()
        res = run_rounds(net, table, nbytes=400_000, rounds=2, timeout=3, lifetime=90,
                         kill=(2, 1), kill_after=0.3)
        took = time.monotonic() - t0
    finally:
        net.close()
    errors = res.errors
    assert errors[2].startswith("site 2: process exited with code 9")
    assert len(errors) == 4 and all(errors[s].startswith(f"site {s}:") for s in range(4))
    # every other site, blocked in a phase, says whose contribution (or copies) never came, e.g.
    # "own shard 0 of reduce-scatter level 0: no result for chunks 75, ... within 3 s: no
    # contribution from member 2 of group 1 to chunk 75 (have 0, 1, 3)"
    for e in errors[:2] + errors[3:]:
        assert "no contribution from member 2 " in e or "from site 2: no copy" in e, e
    assert took < 90  # well before the lifetime: no hang
    assert multiprocessing.active_children() == []
    assert _ended(net, 1)
