"""One emulated transmitter: a FIFO of bounded bytes drained at a rate, then a propagation delay.

Used for every directed WAN link and for each site's egress and FPGA-ingress ports (delay 0).
Times are the emulator's clock (seconds, any origin): :meth:`LinkQueue.offer` is a pure function
of the times it is given, so tests drive it with an injected clock. Store and forward, as the
planner's simulator (``planner/wansim.py``): the datagram's last bit leaves at
``max(t, busy) + size / rate`` and arrives ``delay`` later.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class LinkQueue:
    """A transmitter of ``rate`` bytes/s, ``delay`` s, at most ``queue_bytes`` waiting."""

    rate: float
    delay: float = 0.0
    queue_bytes: float = float("inf")
    loss: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    busy_until: float = 0.0
    carried: int = 0  # bytes sent (not dropped)
    packets: int = 0
    dropped: int = 0  # queue full
    lost: int = 0  # random loss
    peak_backlog: float = 0.0  # most bytes waiting at once

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise ValueError(f"rate: must be > 0 bytes/s, got {self.rate}")
        if not self.delay >= 0:
            raise ValueError(f"delay: must be >= 0 s, got {self.delay}")
        if not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"loss: must be in [0, 1], got {self.loss}")

    def lose(self) -> bool:
        """Whether the random loss takes one datagram crossing this link (counted in ``lost``):
        also for what crosses it without taking its capacity (the emulator's acks)."""
        if self.loss and self.rng.random() < self.loss:
            self.lost += 1
            return True
        return False

    def offer(self, t: float, size: int, *, lossy: bool = True) -> float | None:
        """A datagram of ``size`` bytes enters at ``t``: its arrival time at the far end, or
        None when it is dropped (queue full: counted in ``dropped``; random loss, unless
        ``lossy`` is False: ``lost``)."""
        start = max(t, self.busy_until)
        backlog = (start - t) * self.rate
        if backlog + size > self.queue_bytes:
            self.dropped += 1
            return None
        if lossy and self.lose():
            return None
        self.peak_backlog = max(self.peak_backlog, backlog + size)
        self.busy_until = start + size / self.rate
        self.carried += size
        self.packets += 1
        return self.busy_until + self.delay
