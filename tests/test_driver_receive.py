"""What the driver accepts as a result: only well-formed results of its call, from the aggregator.

Forged results from other addresses, stray results of other rounds, and garbage (empty,
truncated, random, mutated datagrams) arrive while all-reduces run: every result stays exact,
nothing aborts the call, and the driver counts what it ignored (``DriverStats.foreign``,
``malformed``, ``stray``).
"""

from __future__ import annotations

import random
import socket
import threading

import numpy as np
import pytest
from driver_helpers import FAST, golden

from wanreduce import wire
from wanreduce.host import driver as drv
from wanreduce.host.driver import AggregatorClient
from wanreduce.host.result_filter import IGNORE, ResultFilter, ResultMismatch
from wanreduce.host.softagg import SoftAggregator
from wanreduce.packetize import AGG_HEADER_STRUCT

N_SITES, E, MAX_ABS = 3, 256, 4.0
PRIME = 8  # datagrams per source and port sent before the calls start


def _result(job=0, group=0, round_id=0, chunk=0, scale=0, count=E, fill=0x7FFF) -> bytes:
    hdr = AGG_HEADER_STRUCT.pack(wire.MAGIC, wire.VERSION, int(wire.MsgType.RESULT), 0, group, job,
                                 round_id, chunk, 0, scale, count, 0)
    return hdr + np.full(count, fill, "<i4").tobytes()


def _garbage(rng: random.Random, e: int) -> bytes:
    """One datagram that is not a well-formed result of this call (random kind)."""
    good = bytearray(_result(scale=e, chunk=rng.randrange(0, 64), round_id=rng.randrange(0, 4)))
    kind = rng.randrange(8)
    if kind == 0:
        return b""
    if kind == 1:
        return rng.randbytes(rng.randrange(0, 9001))
    if kind == 2:
        return bytes(good[: rng.randrange(0, wire.AGG_HEADER_BYTES)])  # truncated header
    if kind == 3:
        return bytes(good[: rng.randrange(wire.AGG_HEADER_BYTES, len(good))])  # truncated payload
    F = wire.FIELD
    if kind == 4:
        good[F["magic"].agg_offset] ^= 0xFF
    elif kind == 5:
        good[F["version"].agg_offset] ^= 0x5A
    elif kind == 6:
        good[F["msg_type"].agg_offset] = int(wire.MsgType.CONTRIBUTION)
    else:  # element count disagreeing with the length
        off = F["element_count"].agg_offset
        good[off : off + 2] = rng.randrange(0, 65536).to_bytes(2, "big")
    return bytes(good)


def _run(a: SoftAggregator, xs, *, sources, make, rounds=(0,), client_kw=None):
    """N sites all-reduce xs (round by round) while a thread sends ``make(rng, e)`` datagrams to
    every site's port from each socket in ``sources``; returns (results, clients' stats, errors)."""
    e = drv.exponent_for(MAX_ABS, N_SITES)
    clients = [AggregatorClient(a.address, sender_id=i, **{**FAST, "group_sizes": {0: N_SITES},
                                                             "job_windows": {0: 64}, "max_abs": MAX_ABS,
                                                             **(client_kw or {})})
               for i in range(N_SITES)]
    ports = [("127.0.0.1", c.transport.address[1]) for c in clients]
    stop = threading.Event()
    sent = [0]

    def attacker():
        rng = random.Random(7)
        while not stop.is_set():
            for s in sources:
                for p in ports:
                    try:
                        s.sendto(make(rng, e), p)
                        sent[0] += 1
                    except OSError:
                        pass

    # A first burst before any call starts, so every counter the tests assert on sees traffic
    # however the threads are scheduled on a loaded machine (it waits in the sockets' buffers
    # and is read during the first call).
    rng0 = random.Random(3)
    for _ in range(PRIME):
        for s in sources:
            for p in ports:
                s.sendto(make(rng0, e), p)
                sent[0] += 1

    out = [[None] * len(rounds) for _ in range(N_SITES)]
    errs = [None] * N_SITES

    def site(i):
        try:
            for k, r in enumerate(rounds):
                out[i][k] = clients[i].allreduce(xs[i], job=0, group=0, round=r)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errs[i] = exc

    t_att = threading.Thread(target=attacker, daemon=True)
    t_att.start()
    ts = [threading.Thread(target=site, args=(i,)) for i in range(N_SITES)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    stop.set()
    t_att.join()
    stats = [c.stats for c in clients]
    for c in clients:
        c.close()
    assert sent[0] > 0
    return out, stats, errs


def _xs(seed=0, chunks=40):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, E * chunks).astype(np.float32) for _ in range(N_SITES)]


def _check(out, xs, errs):
    assert errs == [None] * N_SITES, errs
    want = golden(xs, drv.exponent_for(MAX_ABS, N_SITES), N_SITES, np.float32, E)
    for per_site in out:
        for y in per_site:
            np.testing.assert_array_equal(y, want)


def test_forged_results_from_another_address_are_ignored():
    """A forger floods every site with plausible results (right job, group, round, scale,
    chunk numbers) from its own socket: none is taken; each is counted as foreign."""
    xs = _xs(1)
    with SoftAggregator(slots=128) as a, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as forger:
        a.configure(groups={0: range(N_SITES)}, jobs=[0])
        out, stats, errs = _run(
            a, xs, sources=[forger],
            make=lambda rng, e: _result(scale=e, chunk=rng.randrange(0, 40)),
        )
    _check(out, xs, errs)
    assert sum(s.foreign for s in stats) > 0
    assert all(s.stray == 0 for s in stats)


def test_stray_results_from_the_aggregator_do_not_abort():
    """Results of another round (and group) for this job arrive from the aggregator's own
    address (a late result of an earlier call, another group on the same job id): counted as
    stray and ignored; the call completes exactly."""
    xs = _xs(2)
    with SoftAggregator(slots=128) as a:
        a.configure(groups={0: range(N_SITES)}, jobs=[0])
        agg_sock = a.transport.sock  # send from the aggregator's address and port

        def stray(rng, e):
            return _result(scale=e, round_id=5 + rng.randrange(3), group=rng.randrange(2),
                           chunk=rng.randrange(0, 40))

        out, stats, errs = _run(a, xs, sources=[agg_sock], make=stray)
    _check(out, xs, errs)
    assert sum(s.stray for s in stats) > 0


def test_zero_byte_datagram_is_ignored():
    """The reported crash: one empty datagram to the driver's port raised
    ``ValueError: range() arg 3 must not be zero``."""
    xs = _xs(3, chunks=8)
    with SoftAggregator(slots=128) as a:
        a.configure(groups={0: range(N_SITES)}, jobs=[0])
        out, stats, errs = _run(a, xs, sources=[a.transport.sock], make=lambda rng, e: b"")
    _check(out, xs, errs)
    assert sum(s.malformed for s in stats) > 0


@pytest.mark.parametrize("from_aggregator", [False, True])
def test_garbage_fuzz_while_allreduces_run(from_aggregator):
    """Random lengths 0..9000, random bytes, truncated headers and payloads, wrong magic,
    version, type, element count: from a foreign socket and from the aggregator's own address
    (which passes the source check and reaches the parser). Results stay exact."""
    xs = _xs(4)
    with SoftAggregator(slots=128) as a, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
        a.configure(groups={0: range(N_SITES)}, jobs=[0])
        src = a.transport.sock if from_aggregator else other
        out, stats, errs = _run(a, xs, sources=[src], make=_garbage, rounds=(0, 1, 2))
    _check(out, xs, errs)
    if from_aggregator:
        assert sum(s.malformed for s in stats) > 0
    else:
        assert sum(s.foreign for s in stats) > 0


def test_result_filter_source_and_counters():
    """The filter alone: the aggregator's address is the one accepted source; counters name
    what was dropped."""
    done = bytearray(4)
    f = ResultFilter(job=1, group=2, round_id=3, exp=5, first=10, counts=[E] * 4, done=done,
                     source=("127.0.0.1", 999))
    good = _result(job=1, group=2, round_id=3, chunk=11, scale=5)
    assert not f.from_source(len(good), len(good), ("127.0.0.2", 999)) and f.foreign == 1
    assert not f.from_source(3 * len(good), len(good), ("127.0.0.1", 998)) and f.foreign == 4
    assert not f.from_source(0, 0, ("127.0.0.1", 998)) and f.foreign == 5  # an empty datagram
    assert f.from_source(len(good), len(good), ("127.0.0.1", 999))
    assert f.check(good, 0, len(good)) == (1, 0)
    assert f.check(good[:-1], 0, len(good) - 1)[0] == IGNORE and f.malformed == 1
    other_round = _result(job=1, group=2, round_id=4, chunk=12, scale=5)
    assert f.check(other_round, 0, len(other_round))[0] == IGNORE and f.stray == 1
    other_job = _result(job=2, group=2, round_id=3, chunk=12, scale=5)
    assert f.check(other_job, 0, len(other_job))[0] == IGNORE and f.stray == 2
    done[1] = 1
    assert f.check(good, 0, len(good))[0] == IGNORE and f.duplicate == 1
    assert f.ignored == 5 + 1 + 2 + 1
    other_scale = _result(job=1, group=2, round_id=3, chunk=12, scale=6)  # our call, not our data
    with pytest.raises(ResultMismatch, match="members disagree on the scale"):
        f.check(other_scale, 0, len(other_scale))


def test_result_source_defaults_and_multicast_needs_it():
    with AggregatorClient(("127.0.0.1", 9), sender_id=0) as c:
        assert c.result_source == ("127.0.0.1", 9)
    with AggregatorClient(("239.255.1.1", 9000), sender_id=0, control_address=("127.0.0.1", 9000),
                          use_control=False) as c:
        assert c.result_source == ("127.0.0.1", 9000)  # the FPGA's LOCAL_IP:UDP_PORT
    with AggregatorClient(("239.255.1.1", 9000), sender_id=0, result_source=("10.0.0.1", 9000)) as c:
        assert c.result_source == ("10.0.0.1", 9000)
    with pytest.raises(ValueError, match="result_source"):
        AggregatorClient(("239.255.1.1", 9000), sender_id=0, use_control=False)
