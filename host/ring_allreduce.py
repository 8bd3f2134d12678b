"""Ring all-reduce between the hosts of the sites, over the same network and driver pieces.

The planner's baseline (``planner/schedules.ring_allreduce``: no in-network aggregation) as the
sites run it over the emulated WAN, so its time is measured on the same links as the in-network
schedules (issue 15). The site's aggregator only does the scale agreement; the data go host to
host:

1. **Scale agreement** in the group of all sites (``AggregatorClient.agree``), as every other
   schedule: one exponent e for N = all sites; the tensor is quantised once at e and from here on
   the data are int32 partial sums at e (never re-quantised), so the result is bit for bit the
   fixed-point all-reduce of all sites (``host/reference.expected_allreduce``).
2. **Reduce-scatter, N - 1 steps, then all-gather, N - 1 steps**, around the planner's ring order
   (``RingSteps``): the tensor is cut into N shards (``shard_bounds``); at step k the site at ring
   position p sends one shard to its successor and receives one from its predecessor, which it
   adds (saturating int32, ``fixedpoint.saturating_add``: an overflow raises, never a clipped
   sum) or, in the all-gather, takes. A send is the sharded all-gather's open-loop cast
   (``_Cast``: paced at the site's line rate ``client.rate_bps``) in the site's *hop* group
   {site, successor}, whose copies the successor's FPGA passes straight through to its hosts;
   a receive is its receive-only stream (``_Stream``, run by ``_run_phase``).
3. Steps are not separated by barriers (a site waits only for its predecessor's shard, as the
   planner's pipelined ring model assumes), so a predecessor may be steps ahead: its copies of a
   later step are kept by that step's stream (``_Inbox``), never dropped. Every step's chunks
   have their own numbers (step k: the job's counter after the agreement + k x the longest
   shard's chunks); afterwards every site moves its counter and its own aggregator's head past
   them (``ControlClient.reset_window``), so chunk numbers are never reused.

**WAN loss** is recovered as in the sharded all-gather (``host/wan_recovery.py``): a receiver
NACKs its predecessor for lost copies of the current step (``WanRecovery.missing_copies``), the
predecessor's responder re-multicasts them from its log, which keeps every step's cast of the
call (``record(keep=)``). A step that makes no progress for the driver's ``timeout`` fails the
call with ``ChunksMissing`` naming the predecessor site and the chunks: never a partial result.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from wanreduce import fixedpoint, wire
from wanreduce.packetize import chunk_counts, packetize

from .errors import OverflowReported
from .sharded_allreduce import _Cast, _owner_timer, _run_phase, _Stream, agreed_tensor, shard_bounds

if TYPE_CHECKING:
    from .driver import AggregatorClient

_U32 = 0xFFFFFFFF
_CONTRIBUTION = int(wire.MsgType.CONTRIBUTION)
_CHUNK = wire.FIELD["chunk"].agg_offset


class Ring(Protocol):
    """A ring round's groups (``planner.group_table.RingSteps``)."""

    everyone: int
    order: tuple[int, ...]
    hop: dict[int, int]


def ring_shards(position: int, n: int, step: int) -> tuple[int, int]:
    """(shard sent, shard received) at ``step`` (0 .. 2(n-1) - 1) by the site at ring
    ``position``: reduce-scatter steps 0 .. n-2 (afterwards position p holds the whole sum of
    shard p + 1), then all-gather steps n-1 .. 2n-3 (each passes on the shard it got last)."""
    k = step if step < n - 1 else step - (n - 1) - 1
    return (position - k) % n, (position - k - 1) % n


class _Inbox:
    """The receive-only streams of every step from the predecessor (one hop group): a copy is
    given to the stream of its step by its chunk number, so copies of a step ahead of ours are
    kept; everything else (``_run_phase``'s view: completion, NACKs, errors, counters) is the
    current step's stream."""

    def __init__(self, streams: list[_Stream], first: int, span: int) -> None:
        self.streams, self.first, self.span, self.cur = streams, first, span, 0

    def activate(self, step: int, now: float) -> None:
        """Make ``step`` the current one; its silence (before NACKing a tail) counts from now."""
        self.cur = step
        s = self.streams[step]
        s.quiet = max(s.quiet, now)

    def take(self, buf: Any, off: int, size: int, arrived: float) -> bool:
        step = self.cur
        if size >= _CHUNK + 4:
            k = ((int.from_bytes(buf[off + _CHUNK:off + _CHUNK + 4], "big") - self.first)
                 & _U32) // self.span
            if self.cur < k < len(self.streams):
                step = k
        return self.streams[step].take(buf, off, size, arrived) and step == self.cur

    def ask(self, client: AggregatorClient, now: float) -> float:
        """NACK the predecessor for the current step's missing copies (``_Stream.ask``), but
        never give up on NACKs unanswered: unlike an all-gather's owner, which casts at once,
        a predecessor may not have sent them yet (it waits for its own predecessor, who may be
        recovering a loss), so only the driver's timeout without progress fails the step."""
        s = self.streams[self.cur]
        due = s.ask(client, now)
        s.strikes.clear()
        return due

    def __getattr__(self, name: str) -> Any:
        return getattr(self.streams[self.cur], name)


def ring_allreduce(client: AggregatorClient, x: np.ndarray, ring: Ring, *, job: int,
                   round: int, out: np.ndarray | None = None,  # noqa: A002
                   max_abs: float | None = None) -> np.ndarray:
    """Sum ``x`` over all sites by a ring all-reduce around ``ring.order`` (module docstring);
    the result (bit for bit the fixed-point all-reduce) goes into ``out``.

    Every site calls it with the same shape, ``job``, ``round``, ``ring`` and scale setting."""
    a = agreed_tensor(client, x, out, job=job, group=ring.everyone, round=round,
                      max_abs=max_abs, who="ring_allreduce",
                      why="it moves the job's head past the ring's chunks")
    x, out, e, agree_s, held, head = a.x, a.out, a.exp, a.seconds, a.held, a.head
    site, E, rid = client.sender_id, client.elements, round & _U32
    order = tuple(ring.order)
    n = len(order)
    pos = order.index(site)
    pred = order[pos - 1]
    if n > 1:
        b = shard_bounds(held.size, n)
        span = len(chunk_counts(b[1] - b[0], E))  # chunks of the longest shard (the first)
        base = client.next_chunk[job]
        steps = 2 * (n - 1)
        timer = _owner_timer(client, pred, agree_s)
        now = time.monotonic()
        streams = []
        for k in range(steps):
            got = ring_shards(pos, n, k)[1]
            pk = packetize(np.zeros(b[got + 1] - b[got], np.int32), group_id=ring.hop[pred],
                           first_chunk=(base + k * span) & _U32, sender_id=pred, **head)
            streams.append(_Stream(client, pk, what=f"ring step {k}: shard {got} from site "
                                   f"{pred}", window=None, msg_type=_CONTRIBUTION, job=job,
                                   round_id=rid, exp=e, now=now, timer=timer, owner=pred))
        inbox = _Inbox(streams, base, span)
        for k in range(steps):
            send, got = ring_shards(pos, n, k)
            now = time.monotonic()
            inbox.activate(k, now)
            pk = packetize(held[b[send]:b[send + 1]], group_id=ring.hop[site],
                           first_chunk=(base + k * span) & _U32, sender_id=site, **head)
            _run_phase(client, [inbox], _Cast(client, pk, now, job, keep=steps * span))
            part = streams[k].pk.pk.payload.reshape(-1)[: b[got + 1] - b[got]]
            if k < n - 1:
                held[b[got]:b[got + 1]], over = fixedpoint.saturating_add(held[b[got]:b[got + 1]],
                                                                          part)
                if over:
                    raise OverflowReported(f"job {job} round {round}: ring reduce-scatter step "
                                           f"{k} overflowed (scale exponent {e})", job=job,
                                           chunks=[(base + k * span) & _U32])
            else:
                held[b[got]:b[got + 1]] = part
        nxt = (base + steps * span) & _U32
        client.control.reset_window(job, nxt)  # our aggregator saw none of the ring's chunks
        client.set_next_chunk(job, nxt)
    fixedpoint.dequantize(held.reshape(x.shape), e, fixedpoint.check_dtype(x.dtype), out=out)
    client.stats.allreduces += 1
    return out
