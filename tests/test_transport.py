"""UdpTransport's batching: segmented sends (UDP GSO), batched receives (UDP GRO), fallbacks.

Offload only changes system calls: whatever path a batch takes, the receiver must get the same
datagrams in the same order. The fallback paths are forced with a socket wrapper that refuses
``UDP_SEGMENT`` (as a kernel or device without GSO does) or reports a full buffer.
"""

from __future__ import annotations

import errno
import time

import pytest

from wanreduce.host import transport as tp
from wanreduce.host.transport import (
    GSO_MAX_BYTES,
    GSO_MAX_SEGMENTS,
    SOL_UDP,
    UDP_GRO,
    UDP_SEGMENT,
    UdpTransport,
    gso_batch,
)


def _datagrams(k: int, seg: int, last: int) -> list[bytes]:
    """``k`` datagrams of ``seg`` bytes (the last of ``last``), each with distinct content."""
    out = [bytes((i * 7 + j) & 0xFF for j in range(seg)) for i in range(k - 1)]
    return out + [bytes((0xA5 ^ j) & 0xFF for j in range(last))]


def _drain_plain(t: UdpTransport, want: int, timeout: float = 30.0) -> list[bytes]:
    """Datagrams received one per recvfrom (a socket without GRO). ``timeout`` bounds the wait
    for ``want`` datagrams (generous: it ends as soon as they are there)."""
    buf = bytearray(65536)
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        r = t.recv_into(buf)
        if r is None:
            t.wait_readable(0.05)
            continue
        got.append(bytes(buf[: r[0]]))
    return got


def _drain_batches(t: UdpTransport, want: int, timeout: float = 30.0) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Datagrams received with recv_batch and split by segment size; also the (n, seg) seen."""
    buf = bytearray(65536)
    got: list[bytes] = []
    shapes: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        r = t.recv_batch([buf])
        if r is None:
            t.wait_readable(0.05)
            continue
        n, seg, _src = r
        shapes.append((n, seg))
        got += [bytes(buf[o : min(o + seg, n)]) for o in range(0, n, seg)]
    return got, shapes


class _Sock:
    """Wraps a real socket; ``sendmsg`` with UDP_SEGMENT fails with ``gso_errno``, and the first
    ``full`` sendmsg calls report a full send buffer. Counts the calls."""

    def __init__(self, sock, *, gso_errno: int | None = None, full: int = 0) -> None:
        self._sock, self.gso_errno, self.full = sock, gso_errno, full
        self.calls: list[int] = []  # bytes of each sendmsg that went out

    def sendmsg(self, parts, anc=(), flags=0, addr=None):
        if self.full:
            self.full -= 1
            raise BlockingIOError(errno.EAGAIN, "full")
        if self.gso_errno is not None and any(a[:2] == (SOL_UDP, UDP_SEGMENT) for a in anc):
            raise OSError(self.gso_errno, "refused")
        n = self._sock.sendmsg(parts, anc, flags, addr)
        self.calls.append(n)
        return n

    def __getattr__(self, name):
        return getattr(self._sock, name)


@pytest.fixture
def pair():
    a, b = UdpTransport(bind=("127.0.0.1", 0)), UdpTransport(bind=("127.0.0.1", 0))
    yield a, b
    a.close()
    b.close()


def test_gso_batch_limits():
    assert gso_batch(100) == GSO_MAX_SEGMENTS
    assert gso_batch(22 + 4 * 256) == GSO_MAX_BYTES // (22 + 4 * 256) == 62
    assert gso_batch(22 + 4 * 2048) == GSO_MAX_BYTES // (22 + 4 * 2048) < GSO_MAX_SEGMENTS
    assert gso_batch(GSO_MAX_BYTES) == 1
    assert gso_batch(GSO_MAX_BYTES + 1) == 1  # never 0: a batch of one is a plain datagram


@pytest.mark.parametrize("k,seg,last", [(2, 100, 100), (9, 100, 37), (64, 1000, 1000), (62, 1046, 1046), (7, 8214, 22)])
def test_segmented_send_arrives_as_separate_datagrams(pair, k, seg, last):
    a, b = pair
    dg = _datagrams(k, seg, last)
    sock = a.sock = _Sock(a.sock)
    a.send_segments(memoryview(b"".join(dg)), seg, b.address)
    assert _drain_plain(b, k) == dg  # b has no UDP_GRO: the kernel hands out single datagrams
    assert a.gso, "this kernel refused UDP_SEGMENT on loopback"
    assert sock.calls == [len(b"".join(dg))]  # one system call for the batch


@pytest.mark.parametrize("k,seg,last", [(9, 100, 37), (40, 1046, 1046), (5, 8214, 1000)])
def test_gro_receive_splits_a_batch(pair, k, seg, last):
    a, b = pair
    assert b.enable_gro()
    dg = _datagrams(k, seg, last)
    a.send_segments(memoryview(b"".join(dg)), seg, b.address)
    a.send_to(b"single datagram", b.address)
    got, shapes = _drain_batches(b, k + 1)
    assert got == dg + [b"single datagram"]
    assert shapes[0] == (len(b"".join(dg)), seg)  # the batch came in one recvmsg
    assert shapes[-1] == (15, 15)  # a plain datagram is a batch of one
    assert b.recv_batch([bytearray(65536)]) is None  # nothing left: never blocks


def test_recv_batch_parses_segment_size_and_skips_icmp_errors():
    """The GRO control message gives the segment size; a refused earlier send is skipped."""

    class Fake:
        def __init__(self):
            self.script = [
                ConnectionRefusedError(),
                (300, [(SOL_UDP, UDP_GRO, (100).to_bytes(4, tp._BYTEORDER))], 0, ("h", 1)),
                (50, [], 0, ("h", 2)),
                (50, [(SOL_UDP, UDP_GRO, (0).to_bytes(4, tp._BYTEORDER))], 0, ("h", 3)),
            ]

        def recvmsg_into(self, bufs, ancsize):
            if not self.script:
                raise BlockingIOError(errno.EAGAIN, "empty")
            r = self.script.pop(0)
            if isinstance(r, BaseException):
                raise r
            return r

    t = UdpTransport(bind=("127.0.0.1", 0))
    real = t.sock
    try:
        t.sock = Fake()
        assert t.recv_batch([bytearray(1)]) == (300, 100, ("h", 1))
        assert t.recv_batch([bytearray(1)]) == (50, 50, ("h", 2))
        assert t.recv_batch([bytearray(1)]) == (50, 50, ("h", 3))  # size 0 = one datagram
        assert t.recv_batch([bytearray(1)]) is None
    finally:
        real.close()


@pytest.mark.parametrize("err", sorted(tp.GSO_UNSUPPORTED))
def test_refused_offload_falls_back_to_single_datagrams(pair, err):
    a, b = pair
    dg = _datagrams(9, 100, 37)
    sock = a.sock = _Sock(a.sock, gso_errno=err)
    a.send_segments(memoryview(b"".join(dg)), 100, b.address)
    assert not a.gso  # turned off for this transport
    assert sock.calls == [len(d) for d in dg]  # the batch went per datagram
    a.send_segments(memoryview(b"".join(dg)), 100, b.address)  # later batches: no new attempt
    assert sock.calls == [len(d) for d in dg] * 2
    assert _drain_plain(b, 18) == dg + dg


def test_gso_off_sends_per_datagram(pair):
    a, b = pair
    a.gso = False
    dg = _datagrams(5, 64, 10)
    sock = a.sock = _Sock(a.sock)
    a.send_segments(memoryview(b"".join(dg)), 64, b.address)
    assert sock.calls == [len(d) for d in dg]
    assert _drain_plain(b, 5) == dg


def test_other_send_errors_are_not_taken_for_missing_offload(pair):
    a, b = pair
    a.sock = _Sock(a.sock, gso_errno=errno.EPERM)
    with pytest.raises(PermissionError):
        a.send_segments(memoryview(bytes(300)), 100, b.address)
    assert a.gso


def test_full_buffer_waits_then_counts_as_loss(pair):
    a, b = pair
    dg = _datagrams(4, 100, 100)
    sock = a.sock = _Sock(a.sock, full=1)  # full once: the retry after select goes out
    a.send_segments(memoryview(b"".join(dg)), 100, b.address)
    assert sock.calls == [400]
    assert _drain_plain(b, 4) == dg
    sock.full = 2  # full twice: the batch is lost, as on a wire (no exception, gso kept)
    a.send_segments(memoryview(b"".join(dg)), 100, b.address)
    assert sock.calls == [400] and a.gso
    sock.full = 2
    assert not a.send_to(b"x", b.address)  # one datagram: the same rule
    assert _drain_plain(b, 1, timeout=0.2) == []
