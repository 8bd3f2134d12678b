"""The ring all-reduce over the emulated WAN (host/ring_allreduce.py): host to host around the
planner's ring order through the emulator's links, exact against the fixed-point reference, WAN
loss recovered; its groups (planner/group_table.py) and its prediction (emulator/prediction.py)."""

import time

import numpy as np
import pytest
from test_emulator_network import SQUARE, _ended
from test_sharded_allreduce import rounds_on_square
from test_sharded_loss import _cast_packets, _client

from wanreduce import wire
from wanreduce.emulator.prediction import choose_plan, predict
from wanreduce.emulator.runner import site_tensor
from wanreduce.emulator.scaling import scale_topology
from wanreduce.emulator.wan_emulator import sharded_routes
from wanreduce.host.errors import ChunksMissing
from wanreduce.host.reference import expected_allreduce
from wanreduce.host.ring_allreduce import _Inbox, ring_shards
from wanreduce.host.rtt import RttEstimator
from wanreduce.host.sharded_allreduce import _Cast, _run_phase, _Stream
from wanreduce.host.softagg import SoftAggregator
from wanreduce.model import Outcome
from wanreduce.planner import schedules as S
from wanreduce.planner.group_table import group_table
from wanreduce.planner.roundmodel import RoundModel
from wanreduce.planner.schedules import Round, clique
from wanreduce.planner.topology import load_topology, topology_from_dict

E = 499  # the emulator's elements per packet (wire.MAX_ELEMENTS_DEFAULT)
ORDER = (0, 2, 1, 3)  # not the site order: sends follow the ring, not the site numbers


@pytest.mark.parametrize("n", [2, 3, 4, 9])
def test_ring_steps_hold_the_whole_sum_of_every_shard_after_the_reduce_scatter(n):
    """Simulated with sets: after the n - 1 reduce-scatter steps every position holds the sum of
    all n contributions to the shard it sends first in the all-gather; after the all-gather every
    position has every shard's whole sum. What p receives at step k is what p - 1 sends."""
    held = [[{p} for _ in range(n)] for p in range(n)]  # position -> shard -> contributors
    for k in range(2 * (n - 1)):
        sent = [(ring_shards(p, n, k)[0], set(held[p][ring_shards(p, n, k)[0]])) for p in range(n)]
        for p in range(n):
            got = ring_shards(p, n, k)[1]
            assert got == sent[p - 1][0]
            held[p][got] = held[p][got] | sent[p - 1][1] if k < n - 1 else sent[p - 1][1]
        if k == n - 2:
            assert all(held[p][ring_shards(p, n, n - 1)[0]] == set(range(n)) for p in range(n))
    assert all(h == set(range(n)) for row in held for h in row)


def test_group_table_numbers_the_agreement_and_one_hop_group_per_site():
    t = group_table(S.ring_allreduce(4, ORDER))
    ring = t.ring_steps(0)
    assert t.ring_steps(5) is ring and t.sharded_steps(0) is None
    assert t.steps(0) == ({s: ring.everyone for s in range(4)},)  # the agreement (and warm-up)
    assert t.groups[ring.everyone] == (0, 1, 2, 3)
    for i, s in enumerate(ORDER):
        nxt = ORDER[(i + 1) % 4]
        assert ring.successor(s) == nxt and ring.predecessor(nxt) == s
        assert t.groups[ring.hop[s]] == tuple(sorted((s, nxt))) and t.gather_owner[ring.hop[s]] == s
    routes = sharded_routes(topology_from_dict(SQUARE), t)
    for s in range(4):  # only the sender casts, to its successor's hosts, through no aggregator
        g = ring.hop[s]
        assert {x for h, x in routes.trees if h == g} == {s}
        assert g in routes.passthrough and routes.deliver[g] == {ring.successor(s)}


def test_ring_rounds_over_a_wan_are_exact_and_touch_no_aggregator():
    """4 sites on a WAN with two-hop routes, the ring in another order than the sites': every
    result bit for bit the fixed-point sum of all four (run_rounds checks it, host/reference) and
    within the fixed-point error of the float64 sum; the aggregators merged the agreements only."""
    rounds = 2  # 3001 elements: shards of 751 and 750 (2 chunks each)
    res, counters, stats, net = rounds_on_square(group_table(S.ring_allreduce(4, ORDER)), 12_004,
                                                 rounds)
    xs = [site_tensor(0, s, 1, 3001) for s in range(4)]
    exact = np.sum(np.asarray(xs, np.float64), axis=0)
    assert np.abs(expected_allreduce(xs, elements=E) - exact).max() < 1e-5
    assert 0 < max(r.max_abs_err for r in res.reports) < 1e-5
    for c in counters:  # warm-up (agreement + 1 chunk) and one agreement per round, x 4 members
        assert c[Outcome.AGGREGATED] == 4 * 2 + rounds * 4
    # per site: the warm-up (2 chunks), per round the agreement (1) and 2 (n - 1) = 6 shards of
    # 2 chunks cast once each (a step whose copies all came early casts too: it used not to)
    assert [r.stats["datagrams_sent"] for r in res.reports] == [2 + rounds * (1 + 6 * 2)] * 4
    assert [r.stats["results"] for r in res.reports] == [2 + rounds * (1 + 6 * 2)] * 4
    assert stats["counters"]["copies_delivered"] > 0
    assert _ended(net, 1)


def test_ring_rounds_with_5_percent_wan_loss_are_exact():
    """The same ring with 5 % loss per WAN link copy, one round (each round waits on NACK
    timers, not CPU): every result still bit for bit the fixed-point sum (run_rounds checks it);
    copies were really lost, NACKed to the predecessor and re-sent from its log of the call."""
    res, _, stats, net = rounds_on_square(group_table(S.ring_allreduce(4, ORDER)), 40_000, 1,
                                          loss=0.05, seed=3)
    assert sum(row["lost"] for row in stats["links"].values()) > 0
    total = {k: sum(r.stats[k] for r in res.reports)
             for k in ("nacked_copies", "nack_resends", "nack_ignored")}
    assert total["nacked_copies"] > 0 and total["nack_resends"] > 0
    assert total["nack_ignored"] == 0
    assert _ended(net, 1)


def test_the_ring_is_predicted_as_the_planners_ring_plus_the_agreement():
    """What runs is the planner's ring plan (its order) after the scale agreement of all sites:
    the prediction adds the round model's agreement of the clique of all sites, nothing else."""
    topo = scale_topology(load_topology("nine-city"), 1e-3, 4.0)
    plan = choose_plan(topo, "ring", 500_000, 32 * 1996, 499)
    assert plan.schedule.family == "ring"
    pred = predict(topo, plan, 500_000, 32 * 1996, 499)
    agreement = RoundModel(topo.with_memory(32 * 1996), 500_000, 1996).agreement_time(
        Round((clique(range(9)),)))
    assert agreement > 0 and pred.agreement_time(0) == pytest.approx(agreement)
    assert pred.round_time(0) == pytest.approx(plan.round_times[0] + agreement)
    assert pred.table.ring_steps(0).order == plan.schedule.rounds[0].ring


def _copies(c, *, steps: int, span: int, first: int = 100) -> list[_Stream]:
    """Receive-only streams of ``steps`` ring steps from site 3 (group 5), ``span`` chunks each."""
    return [_Stream(c, _cast_packets(span, group=5, sender=3, first=first + k * span),
                    what=f"ring step {k}: shard 0 from site 3", window=None,
                    msg_type=int(wire.MsgType.CONTRIBUTION), job=0, round_id=1, exp=3,
                    now=time.monotonic(), timer=RttEstimator(0.05, min_rto=0.02, max_rto=60),
                    owner=3) for k in range(steps)]


def test_a_step_whose_copies_all_came_early_still_casts_and_ends_with_its_cast():
    """Every copy of the step had come while the site was in the step before: the phase starts
    with nothing to receive. It must still send its whole cast (it used not to enter its loop,
    and the ring's successor waited for copies never sent) and return once the cast is out (it
    used to wait in select for the driver's timeout, 60 s here, after its last datagram)."""
    with SoftAggregator(slots=64, elements=16, groups=8, jobs=1) as agg:
        agg.configure(groups={0: (0, 3), 5: (0, 3), 6: (0, 3)}, jobs=[0])
        with _client(agg, rate_bps=1e9, timeout=60) as c:
            [early] = _copies(c, steps=1, span=3)
            early.remaining = 0
            early.done[:] = b"\1" * 3
            cast = _Cast(c, _cast_packets(40, group=6, sender=0, first=100), time.monotonic(), 0)
            t0 = time.monotonic()
            _run_phase(c, [early], cast)
            took = time.monotonic() - t0
    assert cast.next == 40  # the whole shard was cast
    assert took < 30  # not the driver's timeout of 60 s


def test_copies_of_a_later_step_are_kept_for_it_and_do_not_complete_the_current_one():
    with SoftAggregator(slots=64, elements=16, groups=8, jobs=1) as agg:
        agg.configure(groups={0: (0, 3), 5: (0, 3)}, jobs=[0])
        with _client(agg) as c:
            streams = _copies(c, steps=3, span=2)
            inbox = _Inbox(streams, 100, 2)
            later = _cast_packets(2, group=5, sender=3, first=104)  # step 2's chunks
            for i in range(2):
                d = bytes(later.datagram(i))
                assert inbox.take(d, 0, len(d), time.monotonic()) is False  # not step 0's
            assert [s.remaining for s in streams] == [2, 2, 0]
            stale = bytes(_cast_packets(1, group=5, sender=3, first=98).datagram(0))
            assert inbox.take(stale, 0, len(stale), time.monotonic()) is False
            assert streams[0].filt.duplicate == 1  # an earlier step's: counted, ignored
            inbox.activate(1, time.monotonic())
            mine = bytes(_cast_packets(2, group=5, sender=3, first=102).datagram(1))
            assert inbox.take(mine, 0, len(mine), time.monotonic()) is True
            assert inbox.remaining == 1 and inbox.what.startswith("ring step 1")


def test_copies_that_come_during_the_agreement_are_kept_for_the_ring_steps():
    """A ring predecessor may cast its first steps while this site still waits for its
    agreement's result (the aggregators release it at slightly different times): the
    agreement's exchange used to drop those copies (counted malformed), and the step NACKed
    them only after an RTO of silence (1 s on the local network: its rounds took 1.1 s against
    all-to-all's 0.07 s). Now they are kept (``early_copies``) and the steps take them at once:
    no NACK, nothing waited for."""
    with SoftAggregator(slots=64, elements=16, groups=8, jobs=1) as agg:
        agg.configure(groups={0: (0,), 5: (0, 3)}, jobs=[0])
        with _client(agg, timeout=3) as c:
            to_us = ("127.0.0.1", c.transport.address[1])
            early = _cast_packets(4, group=5, sender=3, first=100)  # steps 0 and 1, 2 chunks each
            for i in range(4):  # from the aggregator's address: passed through its FPGA
                agg.transport.send_to(bytes(early.datagram(i)), to_us)
            c.agree(np.ones(8, np.float32), job=0, group=0, round=1)
            inbox = _Inbox(_copies(c, steps=2, span=2), 100, 2)
            for k in range(2):
                inbox.activate(k, time.monotonic())
                _run_phase(c, [inbox], None)  # fails after 3 s with ChunksMissing if dropped
            assert [s.remaining for s in inbox.streams] == [0, 0]
            assert c.wan.stats.nacks_sent == 0 and c.early_copies == []
            assert c.stats.early_copies == 4 and c.stats.malformed == 0


def test_a_ring_step_nacks_its_predecessor_until_the_timeout_and_then_names_it():
    """A predecessor may not have sent a step yet (it waits for its own predecessor), so NACKs
    left unanswered are no proof of loss: the step fails only after the driver's timeout
    without progress (not after max_retries NACKs), with ChunksMissing naming the site."""
    with SoftAggregator(slots=64, elements=16, groups=8, jobs=1) as agg:
        agg.configure(groups={0: (0, 3), 5: (0, 3)}, jobs=[0])
        with _client(agg, timeout=3, max_retries=2) as c:
            inbox = _Inbox(_copies(c, steps=2, span=3), 100, 3)
            inbox.activate(0, time.monotonic())
            with pytest.raises(ChunksMissing) as err:
                _run_phase(c, [inbox], None)
    msg = str(err.value)
    assert "ring step 0: shard 0 from site 3: no copy for chunks 100, 101, 102 within 3 s" in msg
    assert c.wan.stats.nacks_sent > 3  # more than max_retries + 1 tries
