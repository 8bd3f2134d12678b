"""Sharded all-reduce through per-site aggregators: reduce-scatter, then all-gather, phase by phase.

What a site runs for a sharded round of the planner (``planner/sharded.py``; its groups from
``planner/group_table.ShardedSteps``), with only the driver's own pieces:

1. **Scale agreement** in the group of all sites (``AggregatorClient.agree``): one exponent e for
   the whole tensor with N = all sites, so every partial sum below is at the same scale. The
   tensor is quantised once at e; from here on the data are int32 and the scale is carried
   through every phase (never re-quantised), so the result is bit for bit the fixed-point
   all-reduce of all sites (``host/reference.expected_allreduce``).
2. **Reduce-scatter, level by level.** A level's block of g sites splits what each holds into g
   shards (``shard_bounds``: sizes differ by at most one element). Shard k goes to the
   aggregator of the block's k-th site (its *reduce* group; the network routes it there only):
   the owner contributes its own shard and awaits the sums (results of its own aggregator); every
   other site *contributes only*: its window is clocked by the owner aggregator's results, which
   reach it as acknowledgements (the FPGA acks remote contributors, as the planner's slot model
   assumes), so it may keep the owner's W slots busy (a window of W chunks; the owner's own
   stream keeps the driver's W/2). All g streams of a site run at once in one event loop. The
   chunks of every shard are numbered from the job's common counter; afterwards each site moves
   its own aggregator's head and its counter past the longest shard (``ControlClient.
   reset_window``), so every aggregator's head agrees again.
3. **All-gather, back down.** The owner multicasts its summed shard (int32 at e, open loop paced
   at ``client.rate_bps``) in its *gather* group; the other sites' FPGAs pass the copies through
   to their hosts (no slots), whose *receive-only* streams take them (CONTRIBUTION datagrams of
   that group, from the site's aggregator address).

Phases are separated by ``barrier`` (as the planner models them). The first failure raises the
driver's errors: ``ChunksMissing`` naming the member whose contribution the own aggregator lacks,
or the site whose acknowledgements or all-gather copies never came.

**WAN loss.** A reduce-scatter contribution lost on its way to the owner is NACKed by the
owner: its own stream probes its aggregator on a stall (SACK, ``exchange.sack_step``) and
``WanRecovery.missing`` NACKs the contributors lacking; a contribute stream logs what it sends
(``record``, per group), and its window's timer (no ack came) stays the safety net. A lost
ack (the owner's result on its way back) is covered by the next: an ack acknowledges every
chunk sent before it (in-order release), and a logging contribute stream does not await its
last chunks' acks (``_Stream.pending``; a resend for one could not be answered once the owner has
reset its head). A lost
all-gather copy is asked for, with ``wan_recovery`` on (``host/wan_recovery.py``,
``WanRecovery.missing_copies``: the same NACK pacing, datagram and responder as for the other
schedules): a receiver NACKs the shard's owner for a missing row below the highest one arrived
(the owner casts in order over a FIFO path) at once, and for every missing row once nothing
new came for the owner path's RTO estimate (a lost tail); each row at most once per re-NACK
interval (two owner round trips, at most ``timeout`` / 16). The owner logs its whole cast
(``record(keep=)``: a shard, not a window) and its responder thread re-multicasts the rows
named, also after its own phase has ended. A row NACKed more than ``max_retries`` times without
any new copy in between, or ``timeout`` without progress, fails the call with ``ChunksMissing``
naming the owner site, the chunks and what was NACKed: never a partial result.
"""

from __future__ import annotations

import math
import select
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

from wanreduce import fixedpoint, regs, wire
from wanreduce.packetize import Packets, chunk_counts, packetize

from .chunk_probe import ChunkProbe, rows_per_message
from .chunk_ring import WholeBuffer
from .errors import ChunksMissing, ConfigMismatch, OverflowReported
from .exchange import sack_step
from .result_filter import ResultFilter, ResultMismatch, blocks
from .rtt import RttEstimator
from .send_window import SendWindow

if TYPE_CHECKING:
    from .driver import AggregatorClient

_U32 = 0xFFFFFFFF
_OVERFLOW = int(wire.Flags.OVERFLOW)
_CONTRIBUTION = int(wire.MsgType.CONTRIBUTION)
_GROUP = wire.FIELD["group_id"].agg_offset
#: per client, one RTT estimator per shard owner it contributes to (kept across calls: a new
#: estimator's first timeout is a guess, and a far owner's acks take longer than 1 s here)
_OWNER_TIMERS: weakref.WeakKeyDictionary[AggregatorClient, dict[int, RttEstimator]] = \
    weakref.WeakKeyDictionary()


def _owner_timer(client: AggregatorClient, owner: int, agree_s: float) -> RttEstimator:
    """The estimator of the round trip to ``owner``'s aggregator and back (its acks). A new one
    starts at 2.5 x the agreement's duration (at least ``initial_rto``): the agreement completed
    when the farthest member's contribution had arrived, so it bounds a one-way delay, and no
    ack comes later than two of those plus queueing."""
    timers = _OWNER_TIMERS.setdefault(client, {})
    if owner not in timers:
        timers[owner] = RttEstimator(max(client.initial_rto, 2.5 * agree_s),
                                     min_rto=client.min_rto, max_rto=client.max_rto)
    return timers[owner]


class Block(Protocol):
    """Sites of one level's block in shard order and the group ids of each shard."""

    sites: tuple[int, ...]
    reduce: tuple[int, ...]
    gather: tuple[int, ...]


class Steps(Protocol):
    """A sharded round's groups (``planner.group_table.ShardedSteps``)."""

    everyone: int

    def site_blocks(self, site: int) -> list[Block]: ...


def shard_bounds(length: int, g: int) -> list[int]:
    """Boundaries of ``g`` shards of ``length`` elements (the first ``length % g`` one longer)."""
    if length < g:
        raise ValueError(f"tensor of {length} elements cannot be split into {g} shards: "
                         f"a sharded round needs at least {g} elements")
    base, extra = divmod(length, g)
    return [k * base + min(k, extra) for k in range(g + 1)]


class _Stream:
    """One flow of a phase at this site (see the module docstring)."""

    def __init__(self, client: AggregatorClient, pk: Packets, *, what: str, window: int | None,
                 msg_type: int, job: int, round_id: int, exp: int, now: float,
                 timer: RttEstimator | None = None, owner: int | None = None,
                 probe: bool = False, log: bool = False) -> None:
        """``probe``: the owner's own reduce stream asks its aggregator what it lacks (SACK,
        ``host/chunk_probe.py``) and, with WAN recovery, NACKs the contributors whose shard
        chunks it lacks; ``log``: a contribute stream logs what it sends for those NACKs."""
        self.what = what  # in error messages
        self.log = log and client.wan is not None
        self.job, self.round_id, self.timer, self.owner = job, round_id, timer, owner
        self.hi = -1  # receive-only: the highest row arrived
        self.quiet = now  # receive-only: when the latest new copy came (or the stream began)
        self.strikes: dict[int, int] = {}  # receive-only: NACKs per row since the last copy
        self.pk = WholeBuffer(pk)
        self.group = self.pk.group
        self.flags = np.zeros(len(pk), np.uint8)
        self.win = None
        # a contribute stream to another site's owner: an ack also acknowledges the chunks
        # sent before it (``_acked_below``)
        self.cumulative = window is not None and not probe
        ctl = client.control if probe else None
        self.probe = None if ctl is None else ChunkProbe(ctl, job, self.pk.first,
                                                         rows_per_message(client.elements))
        if window is not None:  # we send: contributions whose results (or acks) we await
            self.win = SendWindow(self.pk, window, client.transport, client.aggregator, timer,
                                  rto_cap=client.timeout / 4, max_retries=client.max_retries,
                                  now=now, sender=None if ctl is None else client.sender_id,
                                  rtt_hint=None if ctl is None else (ctl.timer.srtt
                                                                     or ctl.timer.rto / 2),
                                  probe_floor=client.probe_floor)
            done = self.win.done
        else:  # receive-only: copies passed through the FPGA
            done = bytearray(len(pk))
        self.done = done
        self.remaining = len(pk)
        self.filt = ResultFilter(job=job, group=self.group, round_id=round_id, exp=exp,
                                 first=self.pk.first, counts=pk.counts, done=done,
                                 source=client.result_source, session=client.session,
                                 msg_type=msg_type)

    def pending(self) -> bool:
        """Whether the phase still waits for this stream: chunks lack their result, ack or copy.
        A contribute stream that logs for the owner's NACKs (``log``) is done once every chunk
        was sent: the acks of its last chunks are not awaited. A lost one could not be asked
        for again: the owner, complete, moves its aggregator's head past the shard at once
        (``reset_window``, which frees the slots holding the results), so its contributor
        would wait for the timeout. A contribution really lost is NACKed by the owner and
        re-sent from the log by the responder thread, also after this phase (issue 15 review:
        lost acks)."""
        if not self.remaining:
            return False
        return not (self.log and self.win is not None and self.win.nxt >= len(self.done))

    def take(self, buf, off: int, size: int, arrived: float) -> bool:
        """One datagram of our group: take it if it is ours and new."""
        a = self.filt.accept(buf, off, 1, size, sent=None if self.win is None else self.win.nxt)
        if not len(a.index):
            return False
        self.pk.take_many(a.index, a.flags, a.payload, a.run)
        self.flags[a.index] = a.flags
        if self.win is not None:
            self.win.complete_many(a.index, arrived, a.run)
            if self.cumulative:
                self._acked_below(int(a.index.max()), arrived)
        else:
            i = int(a.index[0])
            self.done[i] = 1
            self.hi, self.quiet = max(self.hi, i), arrived
            self.strikes.clear()
        self.remaining -= len(a.index)
        return True

    def _acked_below(self, top: int, arrived: float) -> None:
        """The owner's ack of row ``top`` acknowledges every row sent before it still lacking
        one: the owner's aggregator releases in chunk order (in-order release, which the head
        reset between phases assumes too), so those chunks completed, their acks were lost.
        Without this a contributor whose ack was lost waits for its timer, and with its window
        of W chunks the others may meanwhile have reused the slot holding that result, so the
        resend finds it gone (STALE) and the phase stalls until the timeout (a window of W/2,
        the driver's, keeps the result; W is what the owner's slots allow, the planner's
        model). Issue 15 review: lost acks."""
        w = self.win
        lo = w.base
        if lo < top:
            rows = np.flatnonzero(np.frombuffer(self.done, np.uint8)[lo:top] == 0) + lo
            if len(rows):
                w.complete_many(rows, arrived)
                self.remaining -= len(rows)

    def sack(self, client: AggregatorClient, now: float) -> float:
        """The owner's own stream: one pass of probes (``exchange.sack_step``); when to look
        again."""
        return sack_step(self.probe, self.win, client.wan, now, job=self.job, group=self.group,
                         round_id=self.round_id, first=self.pk.first)

    def ask(self, client: AggregatorClient, now: float) -> float:
        """Receive-only, WAN recovery on: NACK the owner for the copies lost on the way
        (``WanRecovery.missing_copies``); returns when to look again. Fails once a row was
        NACKed more than ``max_retries`` times without any new copy coming."""
        rows, due = client.wan.missing_copies(
            self.owner, self.done, self.hi, self.quiet, job=self.job, group=self.group,
            round_id=self.round_id, first=self.pk.first, timer=self.timer, now=now)
        for i in rows:
            self.strikes[i] = self.strikes.get(i, 0) + 1
            if self.strikes[i] > client.max_retries:
                return -1.0
        return due

    def missing(self) -> list[int]:
        return [(self.pk.first + i) & _U32 for i in range(len(self.done)) if not self.done[i]]


class _Cast:
    """The owner's all-gather multicast: every chunk once, paced at ``rate`` bytes/s."""

    def __init__(self, client: AggregatorClient, pk: Packets, now: float, job: int,
                 keep: int | None = None) -> None:
        """``keep``: chunks the group's NACK log holds (default this cast's; a ring casts in one
        group at every step and keeps them all, host/ring_allreduce.py)."""
        self.client, self.pk, self.next, self.job = client, pk, 0, job
        self.keep = len(pk) if keep is None else keep
        self.rate = client.rate_bps / 8
        self.t0 = now
        self.sent_bytes = 0

    def pump(self, now: float) -> float:
        """Send what the pace allows by ``now``; returns when the next one is due (inf: done).
        With WAN recovery every chunk sent is logged whole, so a receiver's NACK is answered by
        the responder thread (a re-multicast in the gather group), also after this phase."""
        n, sent = len(self.pk), self.next
        while self.next < n and self.t0 + self.sent_bytes / self.rate <= now:
            d = self.pk.datagram(self.next)
            self.client.transport.send_to(d, self.client.aggregator)
            self.client.stats.datagrams_sent += 1
            self.sent_bytes += len(d)
            self.next += 1
        if self.client.wan is not None and self.next > sent:
            self.client.wan.record(self.job, WholeBuffer(self.pk), sent, self.next,
                                   keep=self.keep)
        return math.inf if self.next >= n else self.t0 + self.sent_bytes / self.rate


def _run_phase(client: AggregatorClient, streams: list[_Stream], cast: _Cast | None) -> None:
    """Run ``streams`` (and ``cast``) together until every stream has all its chunks."""
    by_group = {s.group: s for s in streams}
    transport, stats = client.transport, client.stats
    probing = [s for s in streams if s.probe is not None]
    socks = [transport, *(s.probe for s in probing)]
    rbuf = client._rbuf
    rmv = memoryview(rbuf)
    mono = time.monotonic
    last = mono()
    cast_due = math.inf if cast is None else last  # a cast is due at once (even if every
    # stream is already complete: a ring step whose copies all came early, host/ring_allreduce.py)
    for d in client.early_copies:  # came during the exchange before (the agreement's:
        # ResultFilter ``keep``), e.g. a ring predecessor's first steps: taken, not NACKed later
        s = by_group.get(d[_GROUP])
        if s is not None:
            s.take(d, 0, len(d), last)  # what it does not take, its filter counts
        else:
            stats.stray += 1
            stats.ignored += 1
    client.early_copies.clear()
    try:
        while any(s.pending() for s in streams) or (cast is not None and cast_due < math.inf):
            now = mono()
            for s in streams:
                if s.win is not None:
                    sent = s.win.nxt
                    s.win.send_new(now)
                    if s.log and s.win.nxt > sent:  # kept for the owner's NACKs
                        client.wan.record(s.job, s.pk, sent, s.win.nxt,
                                          keep=min(s.win.w, len(s.done)))
            if cast is not None:
                sent = cast.next
                cast_due = cast.pump(now)
                if cast.next > sent:  # sending our shard is progress too (a long paced cast)
                    last = now
                if cast_due == math.inf and not any(s.remaining for s in streams):
                    break  # the cast ended last: done (the select below would wait a timeout)
            progressed: set[int] = set()
            while (got := transport.recv_batch([rmv])) is not None:
                ktot, seg, src = got
                if src != client.result_source:
                    stats.foreign += 1
                    stats.ignored += 1
                    continue
                arrived = mono()
                for off, count, size in blocks(ktot, seg):
                    for j in range(count):
                        at = off + j * size
                        s = by_group.get(rbuf[at + _GROUP]) if size > _GROUP else None
                        if s is None:  # another phase's (a late duplicate) or garbage
                            stats.stray += 1
                            stats.ignored += 1
                        elif s.take(rbuf, at, size, arrived):
                            progressed.add(s.group)
            now = mono()
            if progressed:
                last = now
                for g in progressed:
                    if by_group[g].win is not None:
                        by_group[g].win.progressed(now)
                for s in probing:
                    if s.probe.busy:
                        s.sack(client, now)
                continue
            due = cast_due
            for s in probing:
                if s.remaining:
                    due = min(due, s.sack(client, now))
            for s in streams:
                if s.win is not None and s.pending():
                    d, over = s.win.resend_due(now)
                    if over is not None:
                        _fail(client, streams, f"after {client.max_retries} retries")
                    due = min(due, d)
                elif s.win is None and s.remaining and client.wan is not None:  # receive-only:
                    # NACK lost copies
                    d = s.ask(client, now)
                    if d < 0:
                        _fail(client, [s], f"after {client.max_retries} NACKs to site {s.owner} "
                                           "without a new copy")
                    due = min(due, d)
            if now - last >= client.timeout:
                _fail(client, streams, f"within {client.timeout:g} s")
            select.select(socks, [], [], max(0.0, min(due, last + client.timeout) - now))
    except ResultMismatch as exc:
        raise ConfigMismatch(str(exc)) from None
    finally:
        for s in streams:
            f = s.filt
            stats.foreign += f.foreign
            stats.malformed += f.malformed
            stats.stray += f.stray
            stats.ignored += f.ignored
            stats.results += len(s.done) - s.remaining
            if s.win is not None:
                stats.datagrams_sent += s.win.nxt + s.win.retransmissions
                stats.retransmissions += s.win.retransmissions
                stats.timer_resends += s.win.timer_resends
                stats.fast_resends += s.win.fast_resends
                stats.recovery_resends += s.win.recovery_resends
                stats.sack_resends += s.win.sack_resends
                stats.probes += s.win.probes
            if s.probe is not None:
                client.probe_floor = s.win.probe_floor
            stats.chunks += len(s.done)


def _fail(client: AggregatorClient, streams: list[_Stream], why: str) -> None:
    """The first incomplete stream, diagnosed: the owner's own sums name the member its
    aggregator lacks; otherwise the site whose acks or copies never came."""
    stuck = [s for s in streams if s.pending()]
    stuck.sort(key=lambda s: 0 if s.what.startswith("own") else 1)
    s = stuck[0]
    missing = s.missing()
    head = (f"{s.what}: no {'copy' if s.win is None else 'result'} for chunks "
            f"{', '.join(map(str, missing[:8]))}{' ...' if len(missing) > 8 else ''} {why}")
    job = int(s.pk.pk.headers["job_id"][0])
    if client.wan is not None and (s.win is None or s.probe is not None):  # what was NACKed
        head += client.wan.describe(job, missing[0])
    if s.what.startswith("own") and client.control is not None:
        try:
            members = client.control.read_many([regs.group(s.group)],
                                               timeout=client.timeout / 4)[0]
            head += ": " + client._contributors(job, s.group, members, missing[0],
                                                client.timeout / 4)
        except Exception:  # noqa: BLE001 - the diagnosis is best effort; the failure stands
            pass
    raise ChunksMissing(head, job=job, chunks=missing)


class Agreed(NamedTuple):
    """What ``agreed_tensor`` returns: the checked tensor and ``out``, the agreement's outcome,
    the int32 tensor and the one packet header of every int32 stream of the call."""

    x: np.ndarray
    out: np.ndarray
    exp: int  # the agreed scale exponent
    members: int  # N of the agreement
    window: int  # the window the aggregator granted
    seconds: float  # how long the agreement took (bounds a one-way delay: ``_owner_timer``)
    held: np.ndarray  # the tensor quantised once at ``exp`` (flat int32)
    head: dict[str, int]  # packetize's header fields but group_id, first_chunk, sender_id


def agreed_tensor(client: AggregatorClient, x: np.ndarray, out: np.ndarray | None, *, job: int,
                  group: int, round: int, max_abs: float | None, who: str,  # noqa: A002
                  why: str) -> Agreed:
    """The start of a call that quantises a whole tensor once (sharded, ring): checks ``x``,
    ``out`` and CONTROL access (``who`` needs it because ``why``), runs the scale agreement in
    ``group`` and quantises. The header (``Agreed.head``) is the one both callers packetize
    their int32 partial sums with: exponent, elements per packet, job, round, session, and no
    ``n_contributors`` (int32 sums carry none; ``packetize`` refuses it)."""
    x = np.asarray(x)
    dt = fixedpoint.check_dtype(x.dtype)
    if out is None:
        out = np.empty(x.shape, dt)
    elif out.shape != x.shape or not out.flags.c_contiguous:
        raise ValueError(f"out must be C-contiguous with shape {x.shape}")
    if client.control is None:
        raise ValueError(f"{who} needs CONTROL access to the site's aggregator ({why})")
    t0 = time.monotonic()
    e, n, w = client.agree(x, job=job, group=group, round=round, max_abs=max_abs)
    agree_s = time.monotonic() - t0
    q, clipped = fixedpoint.quantize(x.reshape(-1), e, n)
    client.stats.clipped += clipped
    head = dict(exp=e, elements_per_packet=client.elements, job_id=job, round_id=round & _U32,
                session=client.session)
    return Agreed(x, out, e, n, w, agree_s, q, head)


def sharded_allreduce(client: AggregatorClient, x: np.ndarray, steps: Steps, *, job: int,
                      round: int, out: np.ndarray | None = None,  # noqa: A002
                      barrier: Callable[[], None] | None = None,
                      max_abs: float | None = None) -> np.ndarray:
    """Sum ``x`` over all sites by the reduce-scatter/all-gather phases of ``steps`` (module
    docstring); the result (bit for bit the fixed-point all-reduce) goes into ``out``.

    Every site calls it with the same shape, ``job``, ``round``, ``steps`` and scale setting.
    ``barrier``: waits for every site (between phases, as the planner models them)."""
    a = agreed_tensor(client, x, out, job=job, group=steps.everyone, round=round,
                      max_abs=max_abs, who="sharded_allreduce",
                      why="it moves the job's head after each reduce-scatter")
    x, out, e, w, agree_s, head = a.x, a.out, a.exp, a.window, a.seconds, a.head
    site, E, rid = client.sender_id, client.elements, round & _U32
    blocks_ = steps.site_blocks(site)
    W = client.job_window(job)
    held = a.held  # the int32 partial sums this site holds
    spans = []  # per level: (bounds of the shards, my index)
    for lv, blk in enumerate(blocks_):
        g = len(blk.sites)
        k_me = blk.sites.index(site)
        b = shard_bounds(held.size, g)
        base = client.next_chunk[job]
        now = time.monotonic()
        streams = []
        for k in range(g):
            pk = packetize(held[b[k]:b[k + 1]], group_id=blk.reduce[k], first_chunk=base,
                           sender_id=site, **head)
            what = (f"own shard {k} of reduce-scatter level {lv}" if k == k_me else
                    f"reduce-scatter level {lv}: shard {k} to site {blk.sites[k]}")
            timer = (client.timer if k == k_me  # our own aggregator: the client's estimator
                     else _owner_timer(client, blk.sites[k], agree_s))
            streams.append(_Stream(client, pk, what=what, window=w if k == k_me else W,
                                   msg_type=int(wire.MsgType.RESULT), job=job, round_id=rid,
                                   exp=e, now=now, timer=timer, probe=k == k_me,
                                   log=k != k_me))
        _run_phase(client, streams, None)
        mine = streams[k_me]
        over = np.flatnonzero(mine.flags & _OVERFLOW)
        if over.size:
            raise OverflowReported(f"job {job} round {round}: reduce-scatter level {lv} sums "
                                   f"overflowed (scale exponent {e})", job=job,
                                   chunks=[(base + int(i)) & _U32 for i in over])
        longest = max(len(chunk_counts(b[k + 1] - b[k], E)) for k in range(g))
        nxt = (base + longest) & _U32
        client.control.reset_window(job, nxt)  # our aggregator saw shard k_me only
        client.set_next_chunk(job, nxt)
        spans.append((b, k_me))
        held = mine.pk.pk.payload.reshape(-1)[: b[k_me + 1] - b[k_me]].copy()
        if barrier is not None:
            barrier()
    for lv in range(len(blocks_) - 1, -1, -1):
        blk, (b, k_me) = blocks_[lv], spans[lv]
        whole = np.empty(b[-1], np.int32)
        whole[b[k_me]:b[k_me + 1]] = held
        now = time.monotonic()
        first = client.next_chunk[job]
        streams = [_Stream(client, packetize(np.zeros(b[k + 1] - b[k], np.int32),
                                             group_id=blk.gather[k], first_chunk=first,
                                             sender_id=blk.sites[k], **head),
                           what=f"all-gather level {lv}: shard {k} from site {blk.sites[k]}",
                           window=None, msg_type=_CONTRIBUTION, job=job, round_id=rid, exp=e,
                           now=now, timer=_owner_timer(client, blk.sites[k], agree_s),
                           owner=blk.sites[k])
                   for k in range(len(blk.sites)) if k != k_me]
        cast = _Cast(client, packetize(held, group_id=blk.gather[k_me], first_chunk=first,
                                       sender_id=site, **head), now, job)
        _run_phase(client, streams, cast)
        for k, s in zip((k for k in range(len(blk.sites)) if k != k_me), streams, strict=True):
            whole[b[k]:b[k + 1]] = s.pk.pk.payload.reshape(-1)[: b[k + 1] - b[k]]
        held = whole
        if barrier is not None and lv:
            barrier()
    fixedpoint.dequantize(held.reshape(x.shape), e, fixedpoint.check_dtype(x.dtype), out=out)
    client.stats.allreduces += 1
    return out
