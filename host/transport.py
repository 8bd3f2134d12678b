"""UDP transport of the host side: one socket per endpoint, unicast or IPv4 multicast.

A wanreduce datagram is exactly the aggregation header + payload of the wire format
(``wire.datagram_bytes``); nothing here knows whether a software aggregator, a UDP bridge to the
simulated RTL or a real FPGA is on the other side. The socket is non-blocking: the hot paths try
the system call first and only wait (``select``) when there is nothing to read, which saves a
``poll`` per datagram compared with a socket timeout.
"""

from __future__ import annotations

import errno
import select
import socket
import struct
from dataclasses import dataclass

from wanreduce import wire

Address = tuple[str, int]

# Large socket buffers: a window of in-flight chunks must fit (the kernel caps these at
# net.core.rmem_max / wmem_max; we ask and live with what we get).
DEFAULT_BUFFER_BYTES = 8 << 20
MAX_DATAGRAM = 65535


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

    # ---- data ----
    def send_to(self, data: bytes | memoryview, addr: Address, *, wait: float = 0.05) -> bool:
        """Send one datagram; if the send buffer is full wait up to ``wait`` s for room.

        Returns False when the datagram had to be dropped (a full buffer is loss, as on a wire).
        """
        try:
            self.sock.sendto(data, addr)
            return True
        except BlockingIOError:
            pass
        except OSError as exc:  # e.g. ENOBUFS on a busy loopback: treat as loss
            if exc.errno in (errno.ENOBUFS, errno.ECONNREFUSED):
                return False
            raise
        if select.select([], [self.sock], [], wait)[1]:
            try:
                self.sock.sendto(data, addr)
                return True
            except OSError:
                return False
        return False

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
