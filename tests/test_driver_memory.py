"""The driver's memory: a tensor pass streams through a ring of datagram rows (host/chunk_ring.py),
an overflow redo still has the input of the chunks it redoes when ``out is x``, and nothing
writes into ``out`` before the chunk's contribution was sent."""

from __future__ import annotations

import socket
import threading
import tracemalloc

import numpy as np
import pytest
from driver_helpers import FAST, golden

from wanreduce import wire
from wanreduce.host import agreement
from wanreduce.host.driver import AggregatorClient
from wanreduce.host.reference import agreed_exponent
from wanreduce.host.softagg import SoftAggregator

ELEMENTS = 1024


def _agg(n_sites: int) -> SoftAggregator:
    a = SoftAggregator(slots=64, elements=ELEMENTS).start()
    a.configure(groups={0: range(n_sites)}, jobs=(0,))
    return a


@pytest.mark.parametrize("inplace,limit", [(True, 0.2), (False, 1.2)])
def test_peak_memory_is_a_ring_not_a_tensor_copy(inplace, limit):
    """Traced peak of one all-reduce of a 16 MiB tensor (4096 chunks, window 32; the
    agreement's blocked max|x| holds 1 MiB) over the tensor's size: ``out=x`` allocates only the ring (was the whole packet buffer, >= 1.0),
    ``y = allreduce(x)`` only ``y`` besides (was >= 2.0)."""
    x = np.random.default_rng(0).uniform(-1, 1, 1 << 22).astype(np.float32)
    want = golden([x], agreed_exponent([x]), 1, np.float32, ELEMENTS)
    with _agg(1) as a, AggregatorClient(a.address, sender_id=0, elements_per_packet=ELEMENTS,
                                        window=32, **FAST) as c:
        c.allreduce(np.zeros(4 * ELEMENTS, np.float32), job=0, group=0, round=0)  # warm-up
        tracemalloc.start()
        try:
            y = c.allreduce(x, job=0, group=0, round=1, out=x if inplace else None)
            peak = tracemalloc.get_traced_memory()[1] / x.nbytes
        finally:
            tracemalloc.stop()
    np.testing.assert_array_equal(y, want)
    assert (y is x) == inplace
    assert peak <= limit, f"peak {peak:.2f} x the tensor"


@pytest.mark.parametrize("n_sites", [3, 4])
def test_overflow_redo_in_place(n_sites):
    """With ``out=x`` the overflowed chunks are redone from their input (their results were
    not written into x) and the whole result equals the golden model's."""
    rng = np.random.default_rng(n_sites)
    xs = [(3.0 + rng.uniform(0, 0.9, 1500)).astype(np.float32) for _ in range(n_sites)]
    for x in xs:
        x[700:] *= -1e-3  # the later chunks stay small: only some chunks overflow
    e = agreed_exponent(xs, headroom="optimistic")
    want = golden(xs, e, n_sites, np.float32, ELEMENTS, headroom="optimistic")
    res, redos, errs = [None] * n_sites, [0] * n_sites, [None] * n_sites

    def site(i):
        try:
            with AggregatorClient(a.address, sender_id=i, elements_per_packet=ELEMENTS,
                                  headroom="optimistic", window=2, **FAST) as c:
                res[i] = c.allreduce(xs[i], job=0, group=0, round=0, out=xs[i])
                redos[i] = c.stats.redo_chunks
        except Exception as exc:  # noqa: BLE001 - reported below
            errs[i] = exc

    with _agg(n_sites) as a:
        threads = [threading.Thread(target=site, args=(i,)) for i in range(n_sites)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errs == [None] * n_sites
    assert min(redos) >= 1
    for i in range(n_sites):
        assert res[i] is xs[i]
        np.testing.assert_array_equal(res[i], want)


def test_result_for_a_chunk_not_yet_sent_is_ignored():
    """An aggregator-address "result" for a chunk this site has not sent yet cannot be genuine
    (a result needs every contribution): it is counted and ignored, so with ``out=x`` it never
    overwrites an input that is still to be quantised. A one-member echo aggregator answers
    each contribution; before answering the tensor's first chunk it sends a result for the
    tensor's last chunk (window 1: not sent yet)."""
    chunks = 8
    x = np.random.default_rng(3).uniform(-1, 1, chunks * ELEMENTS).astype(np.float32)
    want = golden([x], agreed_exponent([x]), 1, np.float32, ELEMENTS)
    agg = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agg.bind(("127.0.0.1", 0))
    agg.settimeout(0.2)
    stop = threading.Event()
    off = {k: wire.FIELD[k].agg_offset for k in ("msg_type", "chunk")}
    first_tensor = -(-agreement.LANES // ELEMENTS)  # chunks 0.. are the agreement's

    def echo():
        forged = False
        while not stop.is_set():
            try:
                d, src = agg.recvfrom(65536)
            except TimeoutError:
                continue
            r = bytearray(d)
            r[off["msg_type"]] = int(wire.MsgType.RESULT)
            ch = int.from_bytes(r[off["chunk"] : off["chunk"] + 4], "big")
            if ch == first_tensor and not forged:
                forged = True
                f = bytearray(r)
                f[off["chunk"] : off["chunk"] + 4] = (first_tensor + chunks - 1).to_bytes(4, "big")
                f[wire.AGG_HEADER_BYTES :] = np.full(ELEMENTS, 12345, "<i4").tobytes()
                agg.sendto(bytes(f), src)
            agg.sendto(bytes(r), src)

    t = threading.Thread(target=echo)
    t.start()
    try:
        with AggregatorClient(agg.getsockname(), sender_id=0, elements_per_packet=ELEMENTS,
                              window=1, use_control=False, group_sizes={0: 1},
                              job_windows={0: 64}, first_chunk=0, **FAST) as c:
            y = c.allreduce(x, job=0, group=0, round=0, out=x)
            ignored = c.stats.ignored
    finally:
        stop.set()
        t.join()
        agg.close()
    np.testing.assert_array_equal(y, want)
    assert ignored >= 1  # the forged result (counted as a duplicate)
