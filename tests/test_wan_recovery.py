"""WAN-link loss recovery by NACKs (host/wan_recovery.py, docs/protocol.md "NACK"): the message
is defined once and dropped by the core and the golden model; a driver answers only real NACKs;
an emulated run with WAN loss completes exactly, with the NACKs and resends counted."""

import random
import time

import numpy as np
import pytest
from test_ingress_parser import LOCAL_IP, LOCAL_MAC, UDP_PORT, Run, good_frame

from wanreduce import wire
from wanreduce.emulator.prediction import choose_plan, predict
from wanreduce.emulator.runner import run_rounds
from wanreduce.emulator.scaling import scale_topology, slot_plan
from wanreduce.emulator.wan_emulator import WanEmulator
from wanreduce.hdl.ingress_parser import IngressParser
from wanreduce.host.driver import AggregatorClient
from wanreduce.host.softagg import SoftAggregator
from wanreduce.model import Drop, PortConfig, parse_frame
from wanreduce.planner import schedules
from wanreduce.planner.group_table import group_table
from wanreduce.planner.topology import load_topology, topology_from_dict

# A line: A and C are two hops apart, so NACKs between them are relayed by B.
LINE = {
    "sites": ["A", "B", "C"],
    "links": [
        {"a": "A", "b": "B", "latency_ms": 10, "bandwidth_gbps": 0.1},
        {"a": "B", "b": "C", "latency_ms": 15, "bandwidth_gbps": 0.1},
    ],
}


def _nack(**kw) -> wire.Nack:
    base = dict(target=2, chunks=(7, 8, 0xFFFFFFFF), job=3, group=1, round_id=9, requester=0,
                session=5)
    return wire.Nack(**{**base, **kw})


def test_nack_datagram_round_trips_and_malformed_ones_are_refused():
    n = _nack()
    d = wire.nack_datagram(n)
    assert len(d) == wire.AGG_HEADER_BYTES + 4 * 4
    assert wire.parse_nack(d) == n
    hello = _nack(chunks=())
    assert wire.parse_nack(wire.nack_datagram(hello)) == hello
    assert wire.parse_nack(d[:-1]) is None  # length != header + element_count words
    assert wire.parse_nack(d + b"\0\0\0\0") is None
    bad_type = bytearray(d)
    bad_type[wire.FIELD["msg_type"].agg_offset] = wire.MsgType.CONTRIBUTION
    assert wire.parse_nack(bytes(bad_type)) is None
    bad_target = bytearray(d)
    bad_target[wire.AGG_HEADER_BYTES] = wire.MAX_SENDERS  # word 0, little-endian
    assert wire.parse_nack(bytes(bad_target)) is None


def test_core_parser_and_golden_model_drop_a_nack_and_count_it():
    """The RTL parser (network and host port) drops a NACK with AGG_HEADER, as the golden
    model's parse_frame and the software aggregator do; the next contribution passes."""
    d = wire.nack_datagram(_nack(chunks=(1, 2)))
    nack_frame = wire.frame(wire.AggHeader.unpack(d), d[wire.AGG_HEADER_BYTES:])
    cfg = PortConfig(local_mac=LOCAL_MAC, local_ip=LOCAL_IP, udp_port=UDP_PORT, max_elements=8,
                     elements=8)
    assert parse_frame(nack_frame, cfg) == Drop.AGG_HEADER
    assert parse_frame(nack_frame, cfg, accept=(wire.MsgType.CONTRIBUTION,
                                                wire.MsgType.CONTROL)) == Drop.AGG_HEADER
    good = good_frame(random.Random(1), 4)
    for control in (False, True):
        run = Run(IngressParser(64, max_elements=8, accept_control=control),
                  [(nack_frame, None), (good, None)], p_valid=1.0, p_ready=1.0, seed=3).run()
        run.check()
        assert run.verdicts == [int(Drop.AGG_HEADER), "accept"]
    agg = SoftAggregator(slots=8, elements=8, groups=2, jobs=1)
    before = agg.drops[Drop.AGG_HEADER]
    agg.handle_datagram(len(d), ("127.0.0.1", 9), d)
    assert agg.drops[Drop.AGG_HEADER] == before + 1


def test_a_driver_resends_only_what_a_real_nack_names():
    """Forged and stray NACKs are counted and ignored; a real one re-sends the logged
    contribution (RETRANSMIT flag), once per interval."""
    with SoftAggregator(slots=64, elements=16, groups=2, jobs=1) as agg:
        agg.configure(groups={0: (0,)}, jobs=[0])
        with AggregatorClient(agg.address, sender_id=0, elements_per_packet=16, window=4,
                              rtt=0.002, timeout=10, wan_recovery=True, session=5) as c:
            c.allreduce(np.arange(40, dtype=np.float32), job=0, group=0, round=4)
            last = (c.next_chunk[0] - 1) & 0xFFFFFFFF
            sent = []
            c.transport.send_to = lambda data, addr, **kw: sent.append((bytes(data), addr))
            src, st = c.result_source, c.wan.stats

            def nack(**kw):
                return wire.nack_datagram(wire.Nack(**{**dict(
                    target=0, chunks=(last,), job=0, group=0, round_id=4, requester=1,
                    session=5), **kw}))

            assert c.wan.answer(nack(), ("127.0.0.1", 1)) == 0  # not from the aggregator
            assert c.wan.answer(nack(target=1), src) == 0  # another member's
            assert c.wan.answer(nack(session=6), src) == 0  # another run's
            assert c.wan.answer(nack()[:-2], src) == 0  # malformed
            assert st.nack_ignored == 4 and st.nacks_received == 0
            assert c.wan.answer(nack(chunks=(last + 1000,)), src) == 0  # never sent
            assert c.wan.answer(nack(group=1), src) == 0  # not this group's chunk
            assert st.nack_unknown == 2 and sent == []
            assert c.wan.answer(nack(), src) == 1
            (data, addr), = sent
            assert addr == c.aggregator
            h = wire.AggHeader.unpack(data)
            assert (h.msg_type, h.chunk, h.sender_id, h.group_id, h.round_id, h.session) == (
                wire.MsgType.CONTRIBUTION, last, 0, 0, 4, 5)
            assert h.flags & wire.Flags.RETRANSMIT
            assert len(data) == wire.datagram_bytes(h.element_count) and h.element_count == 8
            assert c.wan.answer(nack(), src) == 0  # again at once: one resend serves all
            assert st.nack_repeats == 1 and st.nack_resends == 1 and st.nacks_received == 4


def test_three_sites_with_wan_loss_complete_exactly_and_count_the_nacks():
    """5 % loss on every WAN link: every result is still bit for bit the fixed-point reference
    (run_rounds checks it), and the losses were recovered by NACKs and resends (before the
    recovery, the sites failed with ChunksMissing naming a member)."""
    table = group_table(schedules.all_to_all(3))
    with WanEmulator(topology_from_dict(LINE), memory=64 << 10, loss=0.05, seed=3,
                     lifetime=200) as net:
        net.configure(table, jobs=[0])
        res = run_rounds(net, table, nbytes=40_000, rounds=2, timeout=20, lifetime=150)
        stats = net.stats()
    assert res.errors == []
    assert [r.checked for r in res.reports] == [2, 2, 2]
    lost = sum(row["lost"] for row in stats["links"].values())
    assert lost > 0
    total = {k: sum(r.stats[k] for r in res.reports)
             for k in ("nacks_sent", "nacks_received", "nack_resends", "nack_ignored")}
    assert total["nacks_sent"] > 0 and total["nacks_received"] > 0 and total["nack_resends"] > 0
    assert total["nack_ignored"] == 0
    assert stats["counters"]["nacks_delivered"] > 0
    print(f"{lost} copies lost, recovery {total}")


def test_no_nack_without_loss_when_contributions_queue_behind_a_busy_link():
    """Bandwidth-bound (a 1.25 MB/s line, 100 chunks in flight per site): a member's chunk
    queued behind its link's backlog is late, not lost: no sequence gap, at most a spurious
    tail NACK per stall longer than an RTO."""
    slow = {**LINE, "links": [{**link, "bandwidth_gbps": 0.01} for link in LINE["links"]]}
    table = group_table(schedules.all_to_all(3))
    with WanEmulator(topology_from_dict(slow), memory=1 << 20, lifetime=200) as net:
        net.configure(table, jobs=[0])
        res = run_rounds(net, table, nbytes=200_000, rounds=2, timeout=20, lifetime=150)
    assert res.errors == []
    st = [r.stats for r in res.reports]
    assert [s["nacked_by_gap"] for s in st] == [0, 0, 0]  # FIFO paths: no sequence gap
    # the head chunk stalled for an RTO is NACKed, as TCP's timer would resend: at most one
    # per site and round here (the first version NACKed 195 chunks in this run)
    assert sum(s["nacked_chunks"] for s in st) <= 6
    assert sum(s["nack_resends"] for s in st) <= 6


def test_a_contribution_older_than_the_timeout_is_still_answered():
    """A call may last many timeouts while it progresses: a NACK arriving more than ``timeout``
    after the contribution was sent is still answered (a 1 x timeout linger made 5 % loss runs
    with 20 s rounds fail)."""
    with SoftAggregator(slots=64, elements=16, groups=2, jobs=1) as agg:
        agg.configure(groups={0: (0,)}, jobs=[0])
        with AggregatorClient(agg.address, sender_id=0, elements_per_packet=16, window=4,
                              rtt=0.002, timeout=0.5, wan_recovery=True) as c:
            c.allreduce(np.ones(16, dtype=np.float32), job=0, group=0, round=0)
            last = (c.next_chunk[0] - 1) & 0xFFFFFFFF
            time.sleep(0.8)
            nack = wire.Nack(0, (last,), 0, 0, 0, 1, c.session)
            assert c.wan.answer(wire.nack_datagram(nack), c.result_source) == 1


class _Window:
    """What ``WanRecovery.missing`` reads of a SendWindow: 8 rows in flight, none done."""

    def __init__(self, last_progress: float, rto_cap: float) -> None:
        self.done = bytearray(8)
        self.held = bytearray(b"\1" * 8)
        self.last_progress, self.rto_cap = last_progress, rto_cap
        self.fast = self.capped = 0

    def rto(self) -> float:
        return self.rto_cap

    def probe_fast(self) -> None:
        self.fast += 1

    def probe_at_least_every(self, interval: float) -> None:
        self.capped += 1


def _nacked_after(stall: float, bitmaps: list[int], *, head: int = 0) -> set[tuple[int, int]]:
    """(row, member) pairs two probe answers 0.35 s apart make us NACK (we are member 0 of
    group {0, 1, 2}), the second ``stall`` s after the last result, the window's RTO 0.3 s."""
    from wanreduce.host.chunk_probe import ProbeAnswer

    with SoftAggregator(slots=64, elements=16, groups=2, jobs=1) as agg:
        agg.configure(groups={0: (0, 1, 2)}, jobs=[0])
        with AggregatorClient(agg.address, sender_id=0, elements_per_packet=16, window=4,
                              rtt=0.002, timeout=10, wan_recovery=True) as c:
            win = _Window(time.monotonic(), rto_cap=0.3)
            first = 100
            rows = list(range(len(bitmaps)))
            for _ in range(2):  # the same rows: nothing new from anyone in between
                win.last_progress = time.monotonic() - stall
                c.wan.missing(ProbeAnswer(rows, bitmaps, head, time.monotonic()), win, job=0,
                              group=0, round_id=0, first=first)
                time.sleep(0.35)
            said = c.wan.describe(0, first)  # what a ChunksMissing about row 0 would add
            assert ("NACKed to member" in said) == any(ch == first for _j, ch, _m in c.wan._asked)
            return {(ch - first, m) for (_job, ch, m) in c.wan._asked}


def test_on_a_stall_each_members_first_missing_chunk_is_nacked_not_only_the_heads():
    """Memory-bound all-to-all at 5 % loss failed (ChunksMissing after 20 s). One part of it: a
    copy lost at the tail of its sender's burst (no later chunk shows the gap) was NACKed only
    once it was the head of a stall, so two such losses in one window were recovered one stall
    after the other. Now a stall NACKs each member's first missing chunk, head or not."""
    us, m1, m2 = 1, 2, 4
    # row 0 (the head) lacks member 2, rows 2-3 lack member 1 (its copy of 2 lost, 3 not yet
    # arrived behind it), row 1 is complete
    bitmaps = [us | m1, us | m1 | m2, us | m2, us | m2]
    assert _nacked_after(1.0, bitmaps) == {(0, 2), (2, 1)}
    # a member's later chunks missing behind its first missing one are not NACKed
    assert _nacked_after(1.0, [us | m2, us, us, us]) == {(0, 1), (1, 2)}


def test_no_tail_nack_while_results_still_come():
    """Copies late behind a busy link, with results still arriving: nothing is NACKed."""
    us, m1 = 1, 2
    assert _nacked_after(0.05, [us | m1, us | m1, us, us]) == set()
    # the same answer once no result came for the RTO: each member's first missing
    assert _nacked_after(1.0, [us | m1, us | m1, us, us]) == {(0, 2), (2, 1)}


def test_many_nack_tries_fit_in_the_timeout():
    """The traced failure: 6 tries of one chunk in the 20 s timeout, 2.6-5 s apart (2 x SRTT,
    inflated by in-order release under loss, capped at timeout / 8, plus up to another interval
    of the probes' backoff), all lost on a 4-hop path at 5 % per link. Now a re-NACK is due after
    at most timeout / 16 and, while a member's contribution is lacking, the probes come at least
    every half interval, so it goes out when due: >= 12 tries in a timeout."""
    from wanreduce.host.chunk_probe import ProbeAnswer

    with SoftAggregator(slots=64, elements=16, groups=2, jobs=1) as agg:
        agg.configure(groups={0: (0, 1, 2)}, jobs=[0])
        with AggregatorClient(agg.address, sender_id=0, elements_per_packet=16, window=4,
                              rtt=0.002, timeout=20, wan_recovery=True) as c:
            c.timer.sample(3.0)  # SRTT of results under loss
            assert c.wan.interval() == 20 / 16
            win = _Window(time.monotonic(), rto_cap=5)
            caps = []
            win.probe_at_least_every = caps.append
            c.wan.missing(ProbeAnswer([0], [1], 0, time.monotonic()), win, job=0, group=0,
                          round_id=0, first=0)  # waiting for members 1 and 2, nothing lost yet
            assert caps == [20 / 32]


@pytest.mark.slow
def test_memory_bound_all_to_all_at_5_percent_loss_completes_exactly():
    """The failing case of issue 15 (``wanreduce emulate --schedule all-to-all --memory 64KiB
    --loss 0.05 --time-scale 4``, nine-city, 1 MB, 2 rounds): ChunksMissing within the 20 s
    timeout in every attempt before the tail rule and the re-NACK interval were fixed (traced:
    6 tries of one chunk in 20 s, all lost on a 4-hop path). A few minutes on 2 cores."""
    topo = scale_topology(load_topology("nine-city"), 1e-3, 4.0)
    mem, e = slot_plan(64 << 10, wire.MAX_ELEMENTS_DEFAULT).planner_memory, wire.MAX_ELEMENTS_DEFAULT
    pred = predict(topo, choose_plan(topo, "all-to-all", 1_000_000, mem, e), 1_000_000, mem, e)
    with WanEmulator(topo, memory=64 << 10, loss=0.05, seed=0, lifetime=1500) as net:
        net.configure(pred.table, jobs=[0])
        res = run_rounds(net, pred.table, nbytes=1_000_000, rounds=2, timeout=20, lifetime=1400)
    assert res.errors == []
    assert [r.checked for r in res.reports] == [2] * 9
    assert sum(r.stats["nack_resends"] for r in res.reports) > 0


@pytest.mark.slow
def test_sharded_plan_at_5_percent_loss_completes_exactly():
    """The sharded plan (9 shards) on nine-city at 5 % WAN loss (``wanreduce emulate --schedule
    sharded --memory 64KiB --loss 0.05 --time-scale 4``, 1 MB, 2 rounds): refused before the
    all-gather NACKed its lost copies (host/sharded_allreduce.py); every result exact, lost
    reduce-scatter contributions NACKed by their owner, all-gather copies NACKed to their owner
    (with the contributors' timers alone the reduce-scatter took 268 s a round, now ~45 s).
    A few minutes on 2 cores."""
    topo = scale_topology(load_topology("nine-city"), 1e-3, 4.0)
    mem, e = slot_plan(64 << 10, wire.MAX_ELEMENTS_DEFAULT).planner_memory, wire.MAX_ELEMENTS_DEFAULT
    pred = predict(topo, choose_plan(topo, "sharded", 1_000_000, mem, e), 1_000_000, mem, e)
    assert pred.table.sharded
    with WanEmulator(topo, memory=64 << 10, loss=0.05, seed=0, lifetime=1500) as net:
        net.configure(pred.table, jobs=[0])
        res = run_rounds(net, pred.table, nbytes=1_000_000, rounds=2, timeout=20, lifetime=1400)
    assert res.errors == []
    assert [r.checked for r in res.reports] == [2] * 9
    total = {k: sum(r.stats[k] for r in res.reports)
             for k in ("nacked_chunks", "nacked_copies", "nack_resends")}
    assert total["nacked_copies"] > 0 and total["nack_resends"] > 0
    assert total["nacked_chunks"] > total["nacked_copies"]  # contributions NACKed too


def test_one_lost_copy_with_four_sites_re_asks_its_tail_nacks_at_the_rto_pace():
    """4-site all-to-all (SQUARE): one copy lost, member 2's agreement chunk (chunk 0) on its way
    to site 1. Site 1 stalls until it has NACKed it and got the resend; meanwhile the other three
    sites, done with the agreement, wait for site 1's first data chunk and NACK it by the tail
    rule, though site 1 has not sent it yet. Each re-asked it at the loopback SRTT's pace: 14-16
    NACK names for that never-sent chunk (13-15 answered as unknown). Now a tail NACK is asked
    again no sooner than the RTO (at most timeout / 16): 6-8 names on a quiet machine.

    How many names that costs is (how long site 1 stalls) / (each receiver's RTO), and on a
    loaded machine site 1 stalls longer (CI: 13 names), so a count would test the load. What
    the fix changed is the pace, checked here by each driver: every tail re-ask came at least
    the RTO (as the driver's timer stood then) after the previous try (``tail_reasks_early``),
    two times of the same driver's clock, which load can only move apart. Not the forwarder's
    arrival times against the topology: under load they are read late and bunch up, and the old
    pace already exceeded the paths' round trips (first re-asks 65-165 ms apart, SQUARE's NACK
    round trips 24-40 ms; now 250-450 ms). Fails with the pacing reverted (the old pace,
    2 x SRTT backed off from ~50 ms, re-asks well within an RTO backed off to 0.3-1.9 s)."""
    from test_emulator_network import SQUARE

    table = group_table(schedules.all_to_all(4))
    with WanEmulator(topology_from_dict(SQUARE), memory=64 << 10, drop=((2, 0, 1),),
                     lifetime=150) as net:
        net.configure(table, jobs=[0])
        res = run_rounds(net, table, nbytes=40_000, rounds=1, timeout=20, lifetime=120)
        c = net.stats()["counters"]
    assert res.errors == [] and [r.checked for r in res.reports] == [1] * 4
    assert c["dropped_injected"] == 1
    st = {k: sum(r.stats[k] for r in res.reports)
          for k in ("nack_resends", "nack_unknown", "tail_reasks", "tail_reasks_early")}
    assert st["nack_resends"] >= 1  # the lost copy was NACKed and resent
    # site 1's stall outlasts the receivers' RTOs (the longer the more load): tail re-asks
    # happened, so the pace below was exercised
    assert st["tail_reasks"] >= 1, st
    assert st["tail_reasks_early"] == 0, st  # none sooner than the RTO after the previous try
    print(f"NACK names {c['nack_names']} (most for one chunk {c['nack_names_max']}), {st}")
