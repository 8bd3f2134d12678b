"""The driver's batch receive path: a whole GRO batch filtered at once (``ResultFilter.accept``),
its payloads dequantised into ``out`` (``ChunkRing.take_many``) and completed in one call
(``SendWindow.complete_many``), each equal to doing it one datagram at a time.

The reference classifier here is the per-datagram filter the driver used before (one
``AGG_HEADER_STRUCT`` unpack per datagram, in arrival order): the batch filter must put every
datagram of a batch in the same class and take the same payloads.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from wanreduce import wire
from wanreduce.fixedpoint import dequantize
from wanreduce.host.chunk_ring import ChunkRing
from wanreduce.host.result_filter import ResultFilter, ResultMismatch, blocks
from wanreduce.host.rtt import RttEstimator
from wanreduce.host.send_window import SendWindow
from wanreduce.packetize import AGG_HEADER_STRUCT, chunk_counts, packetize

E = 8
JOB, GROUP, ROUND, EXP, SES, FIRST = 3, 1, 7, 5, 9, 1000


def _dgram(chunk, *, count=E, job=JOB, group=GROUP, round_id=ROUND, scale=EXP, ses=SES,
           flags=0, magic=wire.MAGIC, typ=int(wire.MsgType.RESULT), fill=None) -> bytes:
    hdr = AGG_HEADER_STRUCT.pack(magic, wire.VERSION, typ, flags, group, job, round_id,
                                 chunk & 0xFFFFFFFF, 0, scale, count, ses)
    pay = np.arange(count, dtype="<i4") + 100 * (chunk - FIRST if fill is None else fill)
    return hdr + pay.tobytes()


def _reference(datagrams, counts, done, sent):
    """The per-datagram filter: (taken [(index, flags, payload)], counters, mismatch)."""
    c = dict(malformed=0, stray=0, duplicate=0)
    taken, done = [], bytearray(done)
    n = len(counts)
    for d in datagrams:
        k = len(d)
        if k < wire.AGG_HEADER_BYTES:
            c["malformed"] += 1
            continue
        mg, ver, typ, fl, grp, jb, rnd, ch, _s, sc, cnt, ses = AGG_HEADER_STRUCT.unpack_from(d)
        if typ != 2 or mg != wire.MAGIC or ver != wire.VERSION or cnt == 0 or k != 22 + 4 * cnt:
            c["malformed"] += 1
            continue
        if jb != JOB or rnd != ROUND or grp != GROUP or ses != SES:
            c["stray"] += 1
            continue
        i = (ch - FIRST) & 0xFFFFFFFF
        if i >= min(n, sent) or done[i]:
            c["duplicate"] += 1
            continue
        if cnt != counts[i] or sc != EXP:
            return taken, c, True
        done[i] = 1
        taken.append((i, fl, bytes(d[22:])))
    return taken, c, False


def _batch_filter(datagrams, counts, done, sent):
    """The batch filter on the same datagrams, as the kernel would deliver them: GRO batches
    of consecutive equal-size datagrams (the last of a batch may be shorter)."""
    f = ResultFilter(job=JOB, group=GROUP, round_id=ROUND, exp=EXP, first=FIRST, counts=counts,
                     done=bytearray(done), source=("127.0.0.1", 1), session=SES)
    taken = []
    j = 0
    try:
        while j < len(datagrams):
            seg = len(datagrams[j])
            k = 1
            while j + k < len(datagrams) and len(datagrams[j + k]) == seg and k < 64:
                k += 1
            if j + k < len(datagrams) and 0 < len(datagrams[j + k]) < seg:
                k += 1  # a shorter last segment
            buf = bytearray(b"".join(datagrams[j : j + k]) + b"\xee" * 16)  # slack as in rbuf
            ktot = sum(len(d) for d in datagrams[j : j + k])
            for off, count, size in blocks(ktot, seg):
                a = f.accept(buf, off, count, size, sent=sent)
                f._done[a.index] = 1  # completed, as the exchange does before the next batch
                for i, fl, p in zip(a.index.tolist(), a.flags.tolist(), a.payload, strict=True):
                    taken.append((i, fl, p.tobytes()))
            j += k
    except ResultMismatch:
        return taken, dict(malformed=f.malformed, stray=f.stray, duplicate=f.duplicate), True
    return taken, dict(malformed=f.malformed, stray=f.stray, duplicate=f.duplicate), False


def _random_datagrams(rng: random.Random, n: int, counts) -> list[bytes]:
    out = []
    for _ in range(rng.randrange(1, 80)):
        ch = FIRST + rng.randrange(-2, n + 3)
        i = ch - FIRST
        cnt = int(counts[i]) if 0 <= i < n else E
        kind = rng.randrange(12)
        if kind < 5:
            d = _dgram(ch, count=cnt, flags=rng.choice([0, 0, int(wire.Flags.RESENT),
                                                        int(wire.Flags.OVERFLOW)]))
        elif kind == 5:
            d = _dgram(ch, count=cnt, round_id=ROUND + 1)
        elif kind == 6:
            d = _dgram(ch, count=cnt, ses=SES + 1)
        elif kind == 7:
            d = _dgram(ch, count=cnt, magic=0x1234)
        elif kind == 8:
            d = _dgram(ch, count=cnt, typ=int(wire.MsgType.CONTRIBUTION))
        elif kind == 9:
            d = _dgram(ch, count=cnt)[: rng.randrange(0, 22 + 4 * cnt)]
        elif kind == 10:
            d = _dgram(ch, count=cnt, group=GROUP + 1)
        else:  # a run of in-order results (what the aggregator sends as one batch)
            lo = rng.randrange(0, n)
            out.extend(_dgram(FIRST + j, count=int(counts[j])) for j in range(lo, min(n, lo + 9)))
            continue
        out.append(d)
    return out


def test_batch_filter_classifies_and_takes_like_one_datagram_at_a_time():
    """Random mixes of results, resent and overflowed results, duplicates (within a batch too),
    strays, malformed and truncated datagrams, results of chunks not yet sent or outside the
    exchange: the same counters, the same results taken with the same payloads and flags.
    200 seeds in one test (they were 200 test items: most of their time was per-item overhead);
    a failure names its seed."""
    for seed in range(200):
        rng = random.Random(seed)
        n = rng.randrange(1, 30)
        counts = chunk_counts(n * E - rng.randrange(0, E), E)
        done = bytearray(rng.random() < 0.2 for _ in range(n))
        sent = rng.randrange(0, n + 1)
        datagrams = _random_datagrams(rng, n, counts)
        got = _batch_filter(datagrams, counts, done, sent)
        assert got == _reference(datagrams, counts, done, sent), f"seed {seed}"


def test_mismatched_result_of_a_sent_chunk_raises_but_of_an_unsent_one_is_ignored():
    counts = chunk_counts(4 * E, E)
    bad = [_dgram(FIRST + 1, scale=EXP + 1)]
    assert _batch_filter(bad, counts, bytearray(4), 4)[2] is True
    # a result cannot precede its contribution: forged or another run's, never a proof that
    # this call is misconfigured (it used to raise ConfigMismatch when it arrived)
    taken, c, mismatch = _batch_filter(bad, counts, bytearray(4), 1)
    assert not mismatch and not taken and c["duplicate"] == 1


def test_in_order_batch_takes_the_fast_path_without_copying():
    counts = chunk_counts(20 * E, E)
    buf = bytearray(b"".join(_dgram(FIRST + j) for j in range(5, 12)))
    f = ResultFilter(job=JOB, group=GROUP, round_id=ROUND, exp=EXP, first=FIRST, counts=counts,
                     done=bytearray(20), source=("x", 1), session=SES)
    a = f.accept(buf, 0, 7, wire.datagram_bytes(E), sent=12)
    assert a.run == 5 and a.index.tolist() == list(range(5, 12))
    assert np.shares_memory(a.payload, np.frombuffer(buf, np.uint8))  # a view of the batch
    assert a.payload[3].tolist() == (np.arange(E) + 100 * 8).tolist()
    assert f.accept(buf, 0, 7, wire.datagram_bytes(E), sent=11).run == -1  # 11 not sent yet


def test_take_many_dequantises_into_out_and_leaves_overflowed_chunks():
    """Runs, shuffled chunks, an overflowed result (its elements keep the input for the redo),
    a short last chunk and a redo's target mapping: out is what dequantise gives per chunk."""
    n, exp = 6, 4
    x = np.random.default_rng(1).uniform(-1, 1, n * E - 3).astype(np.float32)
    pay = np.random.default_rng(2).integers(-1000, 1000, (n, E), dtype=np.int32)
    counts = chunk_counts(x.size, E)

    def ring(target=None):
        out = x.copy()
        return ChunkRing(x, out, rows=n, elements=E, exp=exp, n_contributors=2, first=0,
                         group=0, target=target), out

    r, out = ring()
    fl = np.zeros(n - 1, np.uint8)
    fl[2] = wire.Flags.OVERFLOW
    r.take_many(np.array([4, 0, 1, 2, 3]), fl, pay[[4, 0, 1, 2, 3]])
    r.take_many(np.array([5]), np.zeros(1, np.uint8), pay[5:6, : counts[5]], run=5)
    want = x.copy()
    for i in (0, 2, 3, 4, 5):  # chunk 1 overflowed (position 2 of the first batch)
        want[i * E : i * E + counts[i]] = dequantize(pay[i, : counts[i]], exp)
    np.testing.assert_array_equal(out, want)

    r, out = ring(target=np.array([4, 2]))  # a redo: exchange chunk j is tensor chunk target[j]
    r.take_many(np.array([0, 1]), np.zeros(2, np.uint8), pay[:2])
    want = x.copy()
    want[4 * E : 5 * E] = dequantize(pay[0], exp)
    want[2 * E : 3 * E] = dequantize(pay[1], exp)
    np.testing.assert_array_equal(out, want)


def _window(n=24, w=24):
    pk = packetize(np.zeros(E * n, np.float32), exp=0, n_contributors=2, elements_per_packet=E)

    class Quiet:
        gso = True

        def send_segments(self, *a):
            pass

        def send_to(self, *a):
            return True

    timer = RttEstimator(0.1, min_rto=0.01, max_rto=1.0)
    return SendWindow(pk, w, Quiet(), ("127.0.0.1", 9), timer, rto_cap=10.0, max_retries=3,
                      now=0.0), timer


@pytest.mark.parametrize("seed", range(20))
def test_complete_many_equals_complete_on_each(seed):
    """Batches of results (in order, shuffled, with resent chunks) completed at once leave the
    window and its round-trip estimator exactly as completing them one by one."""
    rng = random.Random(seed)
    (a, ta), (b, tb) = _window(), _window()
    t = 0.0
    for win in (a, b):
        win.send_new(0.0)
    todo = list(range(24))
    while todo:
        t += rng.uniform(0.001, 0.05)
        if rng.random() < 0.3:  # a stall: the blocker is resent (Karn's rule applies to it)
            for win in (a, b):
                win.resend_due(t)
        k = rng.randrange(1, 8)
        if rng.random() < 0.5:
            batch, todo = todo[:k], todo[k:]
        else:
            batch = rng.sample(todo, min(k, len(todo)))
            todo = [i for i in todo if i not in batch]
        for i in batch:
            a.complete(i, t)
        consecutive = batch == list(range(batch[0], batch[0] + len(batch)))
        b.complete_many(np.array(batch), t, batch[0] if consecutive else -1)
        for win in (a, b):
            win.progressed(t)
            win.send_new(t)
        assert (a.done, a.hi, a.remaining, a.base, a._timed) == (b.done, b.hi, b.remaining, b.base, b._timed)
        assert (ta.srtt, ta.rttvar, ta.samples, ta.min_rtt) == (tb.srtt, tb.rttvar, tb.samples, tb.min_rtt)
    assert a.remaining == 0


def test_exchange_takes_back_to_back_gro_batches_as_one_block(monkeypatch):
    """Results waiting at the driver's socket in several GRO batches (a window of 256 results
    of 16 elements: 4 segmented sends of at most 64) are received back to back and taken by one
    ``ResultFilter.accept`` of more than one batch; the all-reduce is exact."""
    import select as select_mod
    import types

    from driver_helpers import FAST, wait_until

    from wanreduce.host import exchange
    from wanreduce.host.driver import AggregatorClient
    from wanreduce.host.softagg import SoftAggregator

    counts: list[int] = []
    accept = ResultFilter.accept
    monkeypatch.setattr(ResultFilter, "accept",
                        lambda self, buf, off, count, *a, **kw: (
                            counts.append(count), accept(self, buf, off, count, *a, **kw))[1])
    sent = {"contributions": 0, "results": 0}

    def counting(transport, key):
        seg_send, one_send = transport.send_segments, transport.send_to

        def send_segments(view, seg, addr):
            sent[key] += -(-len(view) // seg)
            return seg_send(view, seg, addr)

        def send_to(data, addr):
            sent[key] += 1
            return one_send(data, addr)
        transport.send_segments, transport.send_to = send_segments, send_to

    def select_after_results(r, w, x, timeout):
        """Wait (on the events, not a fixed time) until every contribution sent so far has had
        its result sent, so that they all wait at the socket, then select."""
        wait_until(lambda: sent["results"] >= sent["contributions"])
        return select_mod.select(r, w, x, timeout)

    monkeypatch.setattr(exchange, "select", types.SimpleNamespace(select=select_after_results))
    x = (np.arange(256 * 16, dtype=np.float32) % 2048 - 1024) / 1024  # exact at any scale used
    with SoftAggregator(slots=1024, elements=16) as agg:
        agg.configure(groups={0: [0]}, jobs=[0])
        counting(agg.transport, "results")
        with AggregatorClient(agg.address, sender_id=0, elements_per_packet=16,
                              **{**FAST, "rtt": 1.0}) as c:
            counting(c.transport, "contributions")
            y = c.allreduce(x, job=0, group=0, round=0, max_abs=1.0)
    assert np.array_equal(y, x)
    assert max(counts) > 64  # more than one GRO batch taken at once
