"""Host driver against the software aggregator (threads, 127.0.0.1, ephemeral ports)."""

from __future__ import annotations

import math
import socket
import time

import numpy as np
import pytest
from driver_helpers import FAST, golden, run_sites

from wanreduce import fixedpoint, wire
from wanreduce.fixedpoint import BFLOAT16
from wanreduce.host import agreement
from wanreduce.host import driver as drv
from wanreduce.host.control import ControlClient
from wanreduce.host.driver import (
    AggregatorClient,
    AggregatorUnreachable,
    ChunksMissing,
    ConfigMismatch,
    OverflowReported,
    iter_blocks,
)
from wanreduce.host.reference import agreed_exponent
from wanreduce.host.softagg import SoftAggregator
from wanreduce.model import ReleaseMode

DTYPES = [np.float32, np.float16, BFLOAT16]


def _agg(n_sites, *, slots=64, elements=256, jobs=(0,), release=ReleaseMode.IN_ORDER, group=0):
    a = SoftAggregator(slots=slots, elements=elements, release=release).start()
    a.configure(groups={group: range(n_sites)}, jobs=jobs)
    return a


def _tensors(rng, n_sites, shape, dtype, scale=1.0):
    return [(rng.standard_normal(shape) * scale).astype(dtype) for _ in range(n_sites)]


def _agreed_exponent(xs, n):
    assert n == len(xs)
    return agreed_exponent(xs)


def _agree_chunks(epp=256):
    """Chunks of one agreement exchange."""
    return -(-agreement.LANES // epp)


@pytest.mark.parametrize(
    "n_sites,size,dtype,epp",
    [
        (1, 1, np.float32, 256),
        (1, 1000, np.float16, 256),
        (2, 256, np.float32, 256),
        (2, 257, BFLOAT16, 256),
        (3, 4099, np.float32, 256),
        (3, (17, 31), np.float16, 64),
        (4, 2000, BFLOAT16, 100),
        (5, 999, np.float32, 7),
        (8, 3000, np.float32, 256),
        (8, 513, BFLOAT16, 128),
        (2, 5000, np.float32, 2048),
    ],
)
def test_allreduce_matches_golden(n_sites, size, dtype, epp):
    rng = np.random.default_rng(n_sites * 100003 + int(np.prod(size)) * 7 + epp)
    xs = _tensors(rng, n_sites, size, dtype, scale=rng.uniform(1e-3, 1e3))
    with _agg(n_sites, elements=max(epp, 256)) as a:
        res, stats, errs = run_sites(
            a.address, [xs], n_sites=n_sites, client_kw={"elements_per_packet": epp}
        )
        assert errs == [None] * n_sites
        e = _agreed_exponent(xs, n_sites)
        assert all(s.last_exponent == e for s in stats)
        want = golden(xs, e, n_sites, np.dtype(dtype), epp)
        for r in res:
            assert r[0].dtype == np.dtype(dtype) and r[0].shape == np.shape(xs[0])
            np.testing.assert_array_equal(r[0], want)
        # Close to the float sum within the documented bound.
        exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
        bound = fixedpoint.error_bound(want, e, n_sites, dtype)
        assert np.all(np.abs(want.astype(np.float64) - exact) <= bound + 1e-300)
        c = a.counters()
        chunks = -(-int(np.prod(size)) // epp) + _agree_chunks(epp)
        assert c["OUTCOME_AGGREGATED"] == n_sites * chunks
        assert c["RESULTS_OUT"] == chunks + c["OUTCOME_RESULT_RESENT"]


def test_multiple_jobs_and_rounds_chunk_counters():
    n = 3
    rng = np.random.default_rng(7)
    calls = [_tensors(rng, n, sz, np.float32) for sz in (300, 1, 1024, 700, 5)]
    jobs = [0, 1, 0, 1, 0]
    with _agg(n, jobs=(0, 1), slots=32) as a:
        res, stats, errs = run_sites(a.address, calls, n_sites=n, job=jobs, rounds=[1, 1, 2, 2, 3])
        assert errs == [None] * n
        for k, xs in enumerate(calls):
            want = golden(xs, _agreed_exponent(xs, n), n, np.float32, 256)
            for i in range(n):
                np.testing.assert_array_equal(res[i][k], want)
        # Chunk counters advanced identically (agreement chunk + data chunks per call).
        job0 = sum(_agree_chunks() + -(-x[0].size // 256)
                   for x, j in zip(calls, jobs, strict=True) if j == 0)
        assert a.model.job_table[0].head == job0
        assert stats[0].allreduces == 5


def test_configured_bound_sets_the_scale_and_counts_clipping():
    n = 2
    rng = np.random.default_rng(3)
    xs = _tensors(rng, n, 1000, np.float32)
    xs[0][5] = 50.0  # breaks the bound below: clipped, counted
    with _agg(n) as a:
        res, stats, errs = run_sites(a.address, [xs], n_sites=n, client_kw={"max_abs": 8.0})
        assert errs == [None] * n
        e = fixedpoint.choose_exponent(8.0, n)
        assert stats[0].last_exponent == e
        assert stats[0].agreements == 1 and stats[0].clipped == 1 and stats[1].clipped == 0
        want = golden(xs, e, n, np.float32, 256)
        np.testing.assert_array_equal(res[0][0], want)
        assert a.counters()["RESULTS_OUT"] == 4 + _agree_chunks()


def test_out_in_place_and_iterator_form():
    n = 2
    rng = np.random.default_rng(11)
    big = _tensors(rng, n, 3000, np.float32)
    orig = [b.copy() for b in big]
    with _agg(n) as a:
        import threading

        errs = []

        def site(i):
            try:
                with AggregatorClient(a.address, sender_id=i, **FAST) as c:
                    list(c.allreduce_iter(iter_blocks(big[i], 1000), job=0, group=0, round=0,
                                          inplace=True))
                    out = np.empty((10, 10), np.float16)
                    r = c.allreduce(orig[i][:100].reshape(10, 10).astype(np.float16), job=0,
                                    group=0, round=1, out=out)
                    assert r is out
            except Exception as exc:  # noqa: BLE001
                errs.append(exc)

        ts = [threading.Thread(target=site, args=(i,)) for i in range(n)]
        [t.start() for t in ts]
        [t.join() for t in ts]  # each driver ends by itself (its timeout)
        assert errs == []
        for s in range(0, 3000, 1000):
            blocks = [o[s : s + 1000] for o in orig]
            want = golden(blocks, _agreed_exponent(blocks, n), n, np.float32, 256)
            np.testing.assert_array_equal(big[0][s : s + 1000], want)
            np.testing.assert_array_equal(big[1][s : s + 1000], want)


@pytest.mark.parametrize("n_sites", [3, 5])
def test_overflow_redo(n_sites):
    rng = np.random.default_rng(n_sites)
    # Same-sign values near the bound: with optimistic headroom the sum saturates.
    xs = [(3.0 + rng.uniform(0, 0.9, 600)).astype(np.float32) for _ in range(n_sites)]
    for x in xs:
        x[300:] *= -1e-3  # the later chunks stay small: only some chunks overflow
    with _agg(n_sites) as a:
        res, stats, errs = run_sites(a.address, [xs], n_sites=n_sites,
                                     client_kw={"headroom": "optimistic"})
        assert errs == [None] * n_sites
        e = stats[0].last_exponent
        assert e == agreed_exponent(xs, headroom="optimistic")
        want = golden(xs, e, n_sites, np.float32, 256, headroom="optimistic")
        assert stats[0].redo_chunks >= 1
        for r in res:
            np.testing.assert_array_equal(r[0], want)


def test_overflow_raise_names_chunks():
    n = 3
    xs = [np.full(300, 3.0, np.float32) for _ in range(n)]
    with _agg(n) as a:
        _, _, errs = run_sites(a.address, [xs], n_sites=n,
                               client_kw={"headroom": "optimistic", "on_overflow": "raise"})
        for err in errs:
            assert isinstance(err, OverflowReported)
            assert err.job == 0 and err.chunks == [2, 3]  # chunks 0, 1 were the agreement
            assert "chunks 2, 3 overflowed" in str(err)


def test_release_on_completion_mode():
    n = 3
    rng = np.random.default_rng(5)
    xs = _tensors(rng, n, 2500, np.float32)
    with _agg(n, release=ReleaseMode.ON_COMPLETION) as a:  # fresh: its window starts at 0
        res, _, errs = run_sites(a.address, [xs], n_sites=n, client_kw={"first_chunk": 0})
        assert errs == [None] * n
        want = golden(xs, _agreed_exponent(xs, n), n, np.float32, 256)
        np.testing.assert_array_equal(res[2][0], want)


def _dead_address():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    addr = s.getsockname()
    s.close()
    return addr


# Timeouts are checked strictly from below (never give up early) and loosely from above: a
# loaded machine wakes a waiting thread late, but a driver that ignored its timeout would run
# into the retry limit only after minutes (max_retries=40 with backoff) and fail the bound.
SLACK = 10.0


@pytest.mark.parametrize("known_config", [False, True])
def test_dead_aggregator_clear_error_within_timeout(known_config):
    kw = {"group_sizes": {0: 1}, "job_windows": {0: 16}} if known_config else {}
    with AggregatorClient(_dead_address(), sender_id=0, **{**FAST, "timeout": 0.6}, **kw) as c:
        t0 = time.monotonic()
        with pytest.raises(AggregatorUnreachable, match="unreachable"):
            c.allreduce(np.ones(1000, np.float32), job=0, group=0, round=0, max_abs=1.0)
        elapsed = time.monotonic() - t0
        assert elapsed >= 0.6  # a CONTROL look-up or the silence waits the whole timeout
        assert elapsed <= 1.5 * 0.6 + SLACK  # + at most timeout/2 of CONTROL diagnosis


def test_missing_member_names_chunks_and_job():
    with _agg(2, jobs=(3,)) as a:
        with AggregatorClient(a.address, sender_id=0, **{**FAST, "timeout": 0.6}) as c:
            t0 = time.monotonic()
            with pytest.raises(ChunksMissing) as ei:
                c.allreduce(np.ones(600, np.float32), job=3, group=0, round=9, max_abs=1.0)
            elapsed = time.monotonic() - t0
            assert 0.6 <= elapsed <= 1.75 * 0.6 + SLACK
            assert ei.value.job == 3 and ei.value.chunks == [0, 1]  # the agreement's chunks
            assert "job 3 round 9" in str(ei.value) and "0, 1" in str(ei.value)


def test_max_retries_exhausted():
    with _agg(2) as a:
        kw = {**FAST, "max_retries": 2, "min_rto": 0.01, "max_rto": 0.02, "initial_rto": 0.01}
        with AggregatorClient(a.address, sender_id=0, **kw) as c:
            with pytest.raises(ChunksMissing, match="after 2 retries"):
                c.allreduce(np.ones(10, np.float32), job=0, group=0, round=0, max_abs=1.0)
            assert c.stats.retransmissions == 2  # only the chunk blocking the window, twice


def test_config_mismatch_errors():
    with _agg(2, jobs=(0,)) as a:
        # Unconfigured group, read through CONTROL.
        with AggregatorClient(a.address, sender_id=0, **FAST) as c:
            with pytest.raises(ConfigMismatch, match="group 5 has no members"):
                c.allreduce(np.ones(4, np.float32), job=0, group=5, round=0)
        # Not a member.
        with AggregatorClient(a.address, sender_id=7, **FAST) as c:
            with pytest.raises(ConfigMismatch, match="not a member"):
                c.allreduce(np.ones(4, np.float32), job=0, group=0, round=0)
        # Disabled job.
        with AggregatorClient(a.address, sender_id=0, **FAST) as c:
            with pytest.raises(ConfigMismatch, match="job 2 is not enabled"):
                c.allreduce(np.ones(4, np.float32), job=2, group=0, round=0)
        # Job disabled but the client was told otherwise: the aggregator's reject counter names it.
        kw = {**FAST, "timeout": 0.8, "group_sizes": {0: 2}, "job_windows": {1: 16}}
        with AggregatorClient(a.address, sender_id=0, **kw) as c:
            with pytest.raises(ConfigMismatch, match="REJECT_UNCONFIGURED"):
                c.allreduce(np.ones(4, np.float32), job=1, group=0, round=0, max_abs=1.0)


def test_sites_disagreeing_on_scale_is_a_mismatch():
    with _agg(2) as a:
        xs = [np.ones(10, np.float32)] * 2
        _, _, errs = run_sites(
            a.address, [xs], n_sites=2, client_kw={"timeout": 0.8},
            per_site_kw={0: {"max_abs": 1.0}, 1: {"max_abs": 100.0}},
        )
        # Every member learns it from the agreement and raises the same error.
        assert all(isinstance(e, ConfigMismatch) for e in errs), errs
        assert len({str(e) for e in errs}) == 1
        assert "members disagree on the scale setting" in str(errs[0])


def test_result_with_wrong_shape_raises_config_mismatch():
    """A fake aggregator answering with another element count."""
    from wanreduce.packetize import AGG_HEADER_STRUCT

    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    srv.settimeout(60)  # waits for the client's datagram, which comes as soon as it runs
    import threading

    def fake():
        data, addr = srv.recvfrom(65536)
        h = list(AGG_HEADER_STRUCT.unpack_from(data))
        h[2], h[10] = wire.MsgType.RESULT, h[10] - 1
        srv.sendto(AGG_HEADER_STRUCT.pack(*h) + bytes(4 * h[10]), addr)

    t = threading.Thread(target=fake)
    t.start()
    kw = {**FAST, "group_sizes": {0: 1}, "job_windows": {0: 2}, "use_control": False,
          "first_chunk": 0}
    with AggregatorClient(srv.getsockname(), sender_id=0, **kw) as c:
        with pytest.raises(ConfigMismatch, match="does not match the contribution"):
            c.allreduce(np.ones(10, np.float32), job=0, group=0, round=0, max_abs=1.0)
    t.join()
    srv.close()


def test_nan_at_one_site_raises_everywhere():
    xs = [np.ones(10, np.float32), np.array([1.0] * 9 + [np.nan], np.float32)]
    with _agg(2) as a:
        _, _, errs = run_sites(a.address, [xs], n_sites=2)
        assert all(isinstance(e, ValueError) and "NaN or Inf" in str(e) for e in errs)


def test_window_sizing_default_and_half_job_window():
    with _agg(1, slots=256) as a:
        with AggregatorClient(a.address, sender_id=0) as c:  # 10 Gb/s x 150 ms >> W/2
            assert c.effective_window(0) == 128
        with AggregatorClient(a.address, sender_id=0, rate_bps=1e6, rtt=0.15) as c:
            assert c.effective_window(0) == math.ceil(1e6 * 0.15 / 8 / wire.datagram_bytes(256))
        with AggregatorClient(a.address, sender_id=0, window=1000) as c:
            assert c.effective_window(0) == 128
        assert c.initial_rto >= 0.15  # above the path RTT


def test_redo_exponent():
    assert drv.redo_exponent(20, 4) == 17 and drv.redo_exponent(20, 5) == 16


@pytest.mark.parametrize(
    "kwargs",
    [{"sender_id": 32}, {"sender_id": 0, "headroom": "x"}, {"sender_id": 0, "window": 0},
     {"sender_id": 0, "elements_per_packet": 3000}, {"sender_id": 0, "timeout": 0},
     {"sender_id": 0, "max_abs": math.nan}],
)
def test_bad_client_arguments(kwargs):
    with pytest.raises(ValueError):
        AggregatorClient(("127.0.0.1", 1), **kwargs)


def test_bad_call_arguments():
    with _agg(1) as a, AggregatorClient(a.address, sender_id=0, **FAST) as c:
        with pytest.raises(TypeError):
            c.allreduce(np.ones(3, np.int32), job=0, group=0, round=0)
        with pytest.raises(ValueError):
            c.allreduce(np.ones(3, np.float32), job=0, group=0, round=0, out=np.empty(4, np.float32))
        with pytest.raises(ValueError):
            c.allreduce(np.ones(0, np.float32), job=0, group=0, round=0)
        with pytest.raises(ValueError):
            c.allreduce(np.ones(3, np.float32), job=70000, group=0, round=0)


def test_control_reconfigures_and_driver_follows():
    """Configure entirely over CONTROL (as for the RTL), then all-reduce."""
    with SoftAggregator(slots=32).start() as a:
        with ControlClient(a.address) as cc:
            cc.set_group(1, [0, 1])
            cc.set_job(2, log2_window=3, base=8)
        xs = [np.arange(100, dtype=np.float32), -np.arange(100, dtype=np.float32) * 2]
        res, _, errs = run_sites(a.address, [xs], n_sites=2, group=1, job=2)
        assert errs == [None, None]
        np.testing.assert_array_equal(res[0][0], -np.arange(100, dtype=np.float32))
