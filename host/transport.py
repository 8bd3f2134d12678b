"""UDP transport of the host side: one socket per endpoint, unicast or IPv4 multicast.

A wanreduce datagram is exactly the aggregation header + payload of the wire format
(``wire.datagram_bytes``); nothing here knows whether a software aggregator, a UDP bridge to the
simulated RTL or a real FPGA is on the other side. The socket is non-blocking: the hot paths try
the system call first and only wait (``select``) when there is nothing to read, which saves a
``poll`` per datagram compared with a socket timeout.

Linux UDP segmentation offload saves system calls, never changes the datagrams: one ``sendmsg``
with ``UDP_SEGMENT`` carries up to ``GSO_MAX_SEGMENTS`` datagrams of the same size (the last may
be shorter) that leave as separate datagrams (:meth:`UdpTransport.send_segments`), and a socket
with ``UDP_GRO`` (:meth:`UdpTransport.enable_gro`) receives such a batch in one ``recvmsg`` with
its segment size in a control message (:meth:`UdpTransport.recv_batch`). A kernel that refuses
``UDP_SEGMENT`` turns it off for the transport (``gso = False``): batches go per datagram.
"""

from __future__ import annotations

import errno
import select
import socket
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from wanreduce import wire

Address = tuple[str, int]

# Large socket buffers: a window of in-flight chunks must fit (the kernel caps these at
# net.core.rmem_max / wmem_max; we ask and live with what we get).
DEFAULT_BUFFER_BYTES = 8 << 20
MAX_DATAGRAM = 65535
RX_BATCHES = 16  # GRO batches a receive loop takes back to back as one block (serve, driver;
# 16: 112 results of 8 KiB per NumPy pass, 0.8x the CPU per GB of 4 in bench_driver)

# Segmentation offload (Linux; the numbers are the kernel's where Python lacks the names).
SOL_UDP = getattr(socket, "SOL_UDP", 17)
UDP_SEGMENT = getattr(socket, "UDP_SEGMENT", 103)
UDP_GRO = getattr(socket, "UDP_GRO", 104)
GSO_MAX_SEGMENTS = 64  # datagrams per segmented sendmsg (kernel limit UDP_MAX_SEGMENTS)
GSO_MAX_BYTES = 65000  # bytes per segmented sendmsg (one IP datagram's worth, with headers)
# errno of a sendmsg whose UDP_SEGMENT the kernel (or the route's device) refuses.
GSO_UNSUPPORTED = frozenset({errno.EIO, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOPROTOOPT})
_ANC_SIZE = socket.CMSG_SPACE(4) if hasattr(socket, "CMSG_SPACE") else 64
_BYTEORDER = sys.byteorder  # UDP_SEGMENT / UDP_GRO control data are host-order integers


def is_multicast_address(host: str) -> bool:
    """True for an IPv4 multicast address (224.0.0.0/4)."""
    try:
        return wire.is_multicast(wire.ip_to_int(host))
    except ValueError:
        return False


def resolve(host: str, port: int) -> Address:
    """``(host, port)`` with the host resolved to a dotted quad; clear errors for bad input."""
    if not 0 <= port <= 65535:
        raise ValueError(f"UDP port must be 0..65535, got {port}")
    try:
        return socket.gethostbyname(host), port
    except OSError as exc:
        raise ValueError(f"cannot resolve host {host!r}: {exc}") from None


@dataclass(frozen=True)
class MulticastOptions:
    """Options for sending to / receiving from IPv4 multicast groups.

    ``ttl``: hops a multicast datagram may cross (1 = the local network, the default of the OS).
    ``interface``: IPv4 address of the interface to send on and to join groups on (None: the
    routing table's choice). ``loop``: deliver our own multicast datagrams locally too (needed
    when the aggregator or other sites run on the same machine).
    """

    ttl: int = 1
    interface: str | None = None
    loop: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.ttl <= 255:
            raise ValueError(f"multicast TTL must be 0..255, got {self.ttl}")


class UdpTransport:
    """A bound, non-blocking UDP socket with the options wanreduce needs.

    ``bind``: local address (port 0 = ephemeral). ``join``: multicast groups to receive (e.g. the
    aggregator's multicast result stream). ``multicast`` options apply to datagrams sent to a
    multicast destination.
    """

    def __init__(
        self,
        *,
        bind: Address = ("0.0.0.0", 0),
        join: tuple[str, ...] = (),
        multicast: MulticastOptions | None = None,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        reuse_port: bool = False,
    ) -> None:
        self.multicast = multicast or MulticastOptions()
        self.gso = True  # segmented sends allowed; cleared when the kernel refuses UDP_SEGMENT
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s = self.sock
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                try:
                    s.setsockopt(socket.SOL_SOCKET, opt, buffer_bytes)
                except OSError:  # pragma: no cover - some kernels refuse large buffers
                    pass
            if reuse_port or join:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, self.multicast.ttl)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, int(self.multicast.loop))
            if self.multicast.interface:
                s.setsockopt(
                    socket.IPPROTO_IP,
                    socket.IP_MULTICAST_IF,
                    socket.inet_aton(resolve(self.multicast.interface, 0)[0]),
                )
            s.bind(resolve(*bind))
            for group in join:
                self.join(group)
            s.setblocking(False)
        except BaseException:
            self.sock.close()
            raise

    # ---- set-up ----
    def join(self, group: str) -> None:
        """Receive datagrams sent to the IPv4 multicast ``group`` (on the configured interface)."""
        if not is_multicast_address(group):
            raise ValueError(f"{group!r} is not an IPv4 multicast address")
        iface = resolve(self.multicast.interface, 0)[0] if self.multicast.interface else "0.0.0.0"
        mreq = struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton(iface))
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)

    @property
    def address(self) -> Address:
        """The bound local address (with the ephemeral port filled in)."""
        return self.sock.getsockname()

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> UdpTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def enable_gro(self) -> bool:
        """Ask the kernel to coalesce received batches (``UDP_GRO``); only for a socket read
        with :meth:`recv_batch`, which splits them. False when the kernel does not offer it
        (every ``recvmsg`` then returns one datagram)."""
        try:
            self.sock.setsockopt(SOL_UDP, UDP_GRO, 1)
            return True
        except OSError:
            return False

    # ---- data ----
    def send_to(self, data: bytes | memoryview, addr: Address, *, wait: float = 0.05) -> bool:
        """Send one datagram; if the send buffer is full wait up to ``wait`` s for room.

        Returns False when the datagram had to be dropped (a full buffer is loss, as on a wire).
        """
        return self.send_parts((data,), addr, wait=wait)

    def send_parts(
        self, parts: Sequence, addr: Address, *, wait: float = 0.05, anc: Sequence = ()
    ) -> bool:
        """Send the concatenation of ``parts`` (buffers; one ``sendmsg``, no copy) with control
        messages ``anc``: one datagram, or a segmented batch when ``anc`` has ``UDP_SEGMENT``.

        A full send buffer waits up to ``wait`` s, then counts as loss (False), as do ENOBUFS and
        a refused destination. With ``anc``, an error in ``GSO_UNSUPPORTED`` is raised so the
        caller can fall back to single datagrams.
        """
        sock = self.sock
        try:
            sock.sendmsg(parts, anc, 0, addr)
            return True
        except BlockingIOError:
            pass
        except OSError as exc:  # e.g. ENOBUFS on a busy loopback: treat as loss
            if exc.errno in (errno.ENOBUFS, errno.ECONNREFUSED):
                return False
            raise
        if select.select([], [sock], [], wait)[1]:
            try:
                sock.sendmsg(parts, anc, 0, addr)
                return True
            except OSError as exc:
                if anc and exc.errno in GSO_UNSUPPORTED:
                    raise
                return False
        return False

    def send_segments(self, view: memoryview, seg: int, addr: Address) -> None:
        """Send ``view`` as datagrams of ``seg`` bytes (the last may be shorter): one segmented
        ``sendmsg`` when there are several and ``gso`` is on, else one datagram at a time.

        Up to :func:`gso_batch` ``(seg)`` datagrams per call. Loss semantics of
        :meth:`send_parts` (a full buffer loses the whole batch). A kernel that refuses
        ``UDP_SEGMENT`` clears ``gso`` and the batch goes per datagram.
        """
        if self.gso and len(view) > seg:
            try:
                self.send_parts((view,), addr, anc=[(SOL_UDP, UDP_SEGMENT, seg.to_bytes(2, _BYTEORDER))])
                return
            except OSError as exc:
                if exc.errno not in GSO_UNSUPPORTED:
                    raise
                self.gso = False
        for off in range(0, len(view), seg):
            self.send_parts((view[off : off + seg],), addr)

    def recv_batch(self, bufs: list) -> tuple[int, int, Address] | None:
        """Receive one datagram, or one ``UDP_GRO`` batch of them, into ``bufs`` (a list of
        one buffer) if one is waiting, else None (never blocks).

        Returns ``(n, seg, source)``: ``n`` bytes holding datagrams of ``seg`` bytes each, the
        last possibly shorter (``seg == n`` for a single datagram). A pending ICMP error (a
        refused earlier send) is skipped.
        """
        while True:
            try:
                n, anc, _flags, src = self.sock.recvmsg_into(bufs, _ANC_SIZE)
            except (BlockingIOError, InterruptedError):
                return None
            except ConnectionRefusedError:
                continue
            seg = n
            for level, typ, data in anc:
                if level == SOL_UDP and typ == UDP_GRO:  # a batch of datagrams of seg bytes
                    seg = int.from_bytes(data[:4], _BYTEORDER) or n
            return n, seg, src

    def recv_into(self, buf: bytearray | memoryview) -> tuple[int, Address] | None:
        """Receive one datagram into ``buf`` if one is waiting, else None (never blocks)."""
        try:
            return self.sock.recvfrom_into(buf)
        except (BlockingIOError, ConnectionRefusedError):
            return None

    def wait_readable(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a datagram to arrive."""
        return bool(select.select([self.sock], [], [], max(0.0, timeout))[0])


def max_datagram(elements: int) -> int:
    """Receive-buffer size for datagrams of up to ``elements`` elements (plus slack)."""
    return wire.datagram_bytes(elements) + 64


def gso_batch(seg: int) -> int:
    """Most datagrams of ``seg`` bytes that one segmented ``sendmsg`` may carry."""
    return max(1, min(GSO_MAX_SEGMENTS, GSO_MAX_BYTES // seg))
