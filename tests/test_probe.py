"""JOBj_PROBE / JOBj_PROBE_BITMAP (issue 13): the aggregator tells which members' contributions
to a chunk it holds, and ``ChunksMissing`` names the members whose contributions are missing.

Model, software aggregator (over CONTROL, ``ControlClient.chunk_contributors``) and driver; the
RTL core is checked against the model by ``sim/tb_core_control.py::probe_bitmap``.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from driver_helpers import FAST, wait_until

from wanreduce import regs, wire
from wanreduce.host.chunk_probe import ChunkProbe, rows_per_message
from wanreduce.host.control import ControlClient
from wanreduce.host.driver import AggregatorClient, ChunksMissing
from wanreduce.host.softagg import SoftAggregator
from wanreduce.host.transport import UdpTransport
from wanreduce.model import AggregatorModel, Message, ReleaseMode
from wanreduce.packetize import AGG_HEADER_STRUCT


def _m(chunk, sender, job=0):
    return Message(int(wire.MsgType.CONTRIBUTION), 0, 0, job, 0, chunk, sender, 0, 2,
                   np.array([1, 2], np.int32))


@pytest.mark.parametrize("release", list(ReleaseMode))
def test_model_probe_bitmap_states(release):
    mdl = AggregatorModel(slots=8, elements=2, groups=1, jobs=2, release=release)
    mdl.set_group(0, 0b1011)
    mdl.set_job(0, enabled=True, base=0, log2_window=2)
    mdl.set_job(1, enabled=True, base=4, log2_window=2)
    assert mdl.probe_bitmap(0, 1) == 0  # free slot
    for s in (0, 3):
        mdl.contribute(_m(1, s))
    assert mdl.probe_bitmap(0, 1) == 0b1001  # collecting: members 0 and 3 in
    assert mdl.probe_bitmap(0, 5) == 0  # same slot, another chunk
    assert mdl.probe_bitmap(1, 1) == 0  # another job
    assert mdl.probe_bitmap(2, 1) == 0  # outside the job table
    for s in (0, 1, 3):
        mdl.contribute(_m(2, s))
    # complete behind the head (in order): held until chunk 0 and 1 are released
    assert mdl.probe_bitmap(0, 2) == (0b1011 if release == ReleaseMode.IN_ORDER else 0)
    mdl.contribute(_m(1, 1))
    assert mdl.probe_bitmap(0, 1) == (0b1011 if release == ReleaseMode.IN_ORDER else 0)
    for s in (0, 1, 3):
        mdl.contribute(_m(0, s))  # releases 0, 1, 2 in order
    assert [mdl.probe_bitmap(0, c) for c in range(3)] == [0, 0, 0]


def test_softagg_probe_registers_over_control():
    with SoftAggregator(slots=8, elements=64, groups=2, jobs=2) as agg:
        agg.configure(groups={0: [0, 1, 2]}, jobs=(0, 1))
        agg.model.contribute(_m(3, 2))
        agg.model.contribute(_m(3, 0))
        with ControlClient(agg.address, timeout=10) as c:
            assert c.chunk_contributors(0, 3) == 0b101
            assert c.chunk_contributors(0, 4) is None
            assert c.chunk_contributors(1, 3) is None
            # the registers themselves: PROBE reads back, PROBE_BITMAP is read-only
            got = c.transact([(regs.job_probe(0), 3), (regs.job_probe_bitmap(0), 7),
                              (regs.job_probe(0), None), (regs.job_probe(1), None)])
            assert got == [3, 0b101, 3, 3]  # job 1's probe register is its own



def test_chunk_probe_asks_without_waiting_and_splits_the_window_into_messages():
    """The loss recovery's question (host/chunk_probe.py): rows 0..5 of an exchange starting at
    chunk 10, in messages of 2 rows (plus the JOBj_HEAD read) posted at once; the answers
    carry each row's bitmap and the head relative to the exchange. A message given up (here
    after 0.1 s) hands back its rows to be asked again."""
    with SoftAggregator(slots=16, elements=64, groups=1, jobs=1) as agg:
        agg.configure(groups={0: [0, 1]}, jobs=(0,))
        agg.write_register(regs.job_head(0), 10)
        for c in (10, 11, 13):
            agg.model.contribute(_m(c, 0))
        agg.model.contribute(_m(10, 1))  # 10 complete and released: head 11
        agg.model.contribute(_m(12, 1))
        with ControlClient(agg.address, timeout=10) as c:
            assert rows_per_message(64) == 15 and rows_per_message(5) == 1
            probe = ChunkProbe(c, 0, 10, per_message=2)
            probe.post(range(6), 0.0)
            assert probe.messages == 3 and probe.busy
            answers = []
            assert wait_until(lambda: answers.extend(probe.poll(1.0)) or len(answers) == 3)
            assert not probe.busy and probe.expire(2.0, 0.5) == []
            got = sorted((r, b) for a in answers for r, b in zip(a.rows, a.bitmaps, strict=True))
            assert got == [(0, 0), (1, 0b01), (2, 0b10), (3, 0b01), (4, 0), (5, 0)]
            assert {a.head for a in answers} == {1}
            probe.post([4, 5], 3.0)
            assert probe.expire(3.5, 0.1) == [4, 5] and not probe.busy
            probe.post([2, 3], 4.0)  # given up long after (more than 100 waits): its rows still
            assert probe.expire(40.0, 0.1) == [2, 3]  # come back (this raised KeyError)
            # an older core without JOBj_PROBE (reads 0): its answers are not taken as "nothing
            # held" (which would resend the whole window) but mark the probe unsupported
            agg.read_register = lambda addr, read=agg.read_register: (
                0 if addr in (regs.job_probe(0), regs.job_probe_bitmap(0)) else read(addr))
            agg._probe_pairs = lambda words, n_ops: 0  # every operation through read_register
            assert not probe.unsupported
            probe.post([1], 41.0)
            assert wait_until(lambda: probe.poll(42.0) == [] and probe.unsupported)



def test_chunk_probe_ignores_a_reply_with_its_number_to_another_question():
    """Another client's CONTROL_REPLY carrying our sequence number (each process counts from 1;
    seen in the RTL loopback as a KeyError) is not taken as our answer, nor as a core without
    probe registers; our own reply is still taken when it comes."""
    with UdpTransport(bind=("127.0.0.1", 0)) as silent, ControlClient(silent.address, timeout=1) as c:
        probe = ChunkProbe(c, 0, 10, per_message=4)
        probe.post([1], 0.0)
        (seq,) = probe._live
        me = ("127.0.0.1", c.transport.address[1])

        def reply(echo: int, bitmap: int) -> None:
            words = wire.control_words([(True, regs.job_probe(0), echo), (False, regs.job_probe_bitmap(0), bitmap),
                                        (False, regs.job_head(0), 10)])
            silent.send_to(AGG_HEADER_STRUCT.pack(wire.MAGIC, wire.VERSION, wire.MsgType.CONTROL_REPLY, 0, 0, 0,
                                                  0, seq, 0, 0, 6, 0) + words.astype("<i4").tobytes(), me)

        reply(99, 0b11)  # someone else's question about chunk 99
        assert wait_until(lambda: c.transport.wait_readable(0.01)) and probe.poll(0.1) == []
        assert probe.busy and not probe.unsupported and probe.expire(0.2, 1.0) == []
        reply(11, 0b01)  # ours: chunk 10 + row 1
        got = []
        assert wait_until(lambda: got.extend(probe.poll(0.3)) or got)
        assert got[0].rows == [1] and got[0].bitmaps == [1] and got[0].head == 0 and not probe.busy


def test_chunks_missing_names_the_missing_members():
    """Group 0 = members 0..5; 2 and 5 never contribute: each of the others fails with a
    ChunksMissing that names 2 and 5 and the members the aggregator has."""
    errors = {}
    with SoftAggregator(slots=16, elements=64, groups=1, jobs=1) as agg:
        agg.configure(groups={0: range(6)}, jobs=(0,))

        def site(i):
            # timeout: covers the four members' start-up on a busy machine, since the message
            # names the members the aggregator has (0, 1, 3, 4), all of which must have sent
            kw = {**FAST, "elements_per_packet": 64, "timeout": 4.0}
            with AggregatorClient(agg.address, sender_id=i, **kw) as c:
                try:
                    c.allreduce(np.ones(100, np.float32), job=0, group=0, round=4, max_abs=1.0)
                except ChunksMissing as exc:
                    errors[i] = exc

        threads = [threading.Thread(target=site, args=(i,)) for i in (0, 1, 3, 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(errors) == [0, 1, 3, 4]
    for exc in errors.values():
        assert exc.chunks == list(range(6))  # the agreement's chunks (358 lanes at E = 64)
        assert "no contribution from members 2, 5 of group 0 to chunk 0 (have 0, 1, 3, 4)" in str(exc)


def test_chunks_missing_when_nothing_is_held():
    """A lone member whose chunk's slot is free at diagnosis (its contribution was refused as
    stale: the job's head is far ahead, and the client was told to start at chunk 0) gets the "holds no contribution" explanation."""
    with SoftAggregator(slots=16, elements=64, groups=1, jobs=1) as agg:
        agg.configure(groups={0: [0, 1]}, jobs=(0,))
        agg.model.reset_window(0, 1000)
        with AggregatorClient(agg.address, sender_id=0, **{**FAST, "timeout": 0.6,
                                                           "elements_per_packet": 64,
                                                           "first_chunk": 0}) as c:
            with pytest.raises(ChunksMissing, match="holds no contribution to chunk 0") as ei:
                c.allreduce(np.ones(10, np.float32), job=0, group=0, round=0, max_abs=1.0)
    assert "STALE" in str(ei.value)
