"""Fault injection between drivers and an aggregator: a lossy, duplicating, reordering UDP proxy.

Clients send to the proxy's address instead of the aggregator's; the proxy forwards each
client's datagrams from its own upstream socket (so the aggregator still sees one source address
per client, and its results find their way back) and applies, independently per direction and
per datagram, loss, duplication and reordering (a datagram held back and sent after the next one,
or after ``hold`` seconds when no other datagram comes) and a fixed extra latency (``delay``: a
slow aggregator or a long path). Seeded, so a failing test reproduces.
Being a plain UDP proxy it works in front of any aggregator: the software one, the RTL bridge,
hardware.
"""

from __future__ import annotations

import random
import select
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass

from .transport import MAX_DATAGRAM, Address, UdpTransport, resolve


@dataclass(frozen=True)
class FaultSpec:
    """Per-datagram probabilities of one direction, and its added latency ``delay`` (s)."""

    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    delay: float = 0.0

    def __post_init__(self) -> None:
        for name in ("loss", "duplicate", "reorder"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} probability must be in [0, 1], got {p}")
        if not 0.0 <= self.delay <= 3600.0:
            raise ValueError(f"delay must be 0..3600 s, got {self.delay}")


class FaultProxy:
    """UDP proxy applying ``to_aggregator`` / ``to_client`` faults; see the module docstring."""

    def __init__(
        self,
        aggregator: Address,
        *,
        to_aggregator: FaultSpec = FaultSpec(),
        to_client: FaultSpec = FaultSpec(),
        host: str = "127.0.0.1",
        seed: int = 0,
        hold: float = 0.002,
    ) -> None:
        self.aggregator = resolve(*aggregator)
        self.specs = {"up": to_aggregator, "down": to_client}
        self.rng = random.Random(seed)
        self.hold = hold
        self.listen = UdpTransport(bind=(host, 0))
        self._host = host
        self._up: dict[Address, UdpTransport] = {}  # client address -> upstream socket
        self._down: dict[int, Address] = {}  # upstream fileno -> client address
        # (due, direction or None once only its due time releases it, socket, data, destination)
        self._held: list[tuple[float, str | None, UdpTransport, bytes, Address]] = []
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> Address:
        return self.listen.address

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._loop, name="faultproxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def close(self) -> None:
        self.stop()
        self.listen.close()
        for t in self._up.values():
            t.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- forwarding ----
    def _forward(self, direction: str, via: UdpTransport, data: bytes, dest: Address) -> None:
        spec, rng = self.specs[direction], self.rng
        self.counts[f"{direction}_in"] += 1
        if spec.loss and rng.random() < spec.loss:
            self.counts[f"{direction}_lost"] += 1
            return
        copies = 2 if spec.duplicate and rng.random() < spec.duplicate else 1
        self.counts[f"{direction}_duplicated"] += copies - 1
        if spec.reorder and rng.random() < spec.reorder:
            self.counts[f"{direction}_reordered"] += 1
            for _ in range(copies):
                self._held.append((time.monotonic() + self.hold + spec.delay, direction, via, data, dest))
            return
        for _ in range(copies):
            if spec.delay:
                self._held.append((time.monotonic() + spec.delay, None, via, data, dest))
            else:
                via.send_to(data, dest)
        self._release(direction)

    def _release(self, direction: str | None, now: float | None = None) -> None:
        """Send held datagrams of ``direction`` (after a newer one went out) or expired ones."""
        keep = []
        for item in self._held:
            due, d, via, data, dest = item
            if (d is not None and d == direction) or (now is not None and due <= now):
                via.send_to(data, dest)
            else:
                keep.append(item)
        self._held = keep

    def _loop(self) -> None:
        buf = bytearray(MAX_DATAGRAM)
        while not self._stop.is_set():
            socks = [self.listen.sock, self._wake_r, *(t.sock for t in self._up.values())]
            timeout = 0.2
            if self._held:
                timeout = max(0.0, min(h[0] for h in self._held) - time.monotonic())
            ready = select.select(socks, [], [], timeout)[0]
            self._release(None, time.monotonic())
            for s in ready:
                if s is self._wake_r:
                    continue
                if s is self.listen.sock:
                    while (got := self.listen.recv_into(buf)) is not None:
                        n, client = got
                        up = self._up.get(client)
                        if up is None:
                            up = self._up[client] = UdpTransport(bind=(self._host, 0))
                            self._down[up.fileno()] = client
                        self._forward("up", up, bytes(buf[:n]), self.aggregator)
                else:
                    client = self._down[s.fileno()]
                    up = self._up[client]
                    while (got := up.recv_into(buf)) is not None:
                        self._forward("down", self.listen, bytes(buf[: got[0]]), client)
