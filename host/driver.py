"""Host driver: all-reduce NumPy tensors through a wanreduce aggregator over UDP.

What a training process at a site calls. The driver speaks only wanreduce datagrams
(aggregation header + payload, ``wanreduce.wire``) to one UDP address, so the aggregator behind it
can be the software aggregator (``host/softagg.py``), a UDP bridge to the simulated RTL core, or
the FPGA's host-facing port. Protocol decisions (chunk numbering, scale agreement, window,
retransmission, overflow redo) are documented in docs/host.md.

Quantisation, packet layout and reassembly are the golden-model code: a tensor pass streams
through ``host/chunk_ring.py`` (``packetize.packetize_into`` quantises chunks into a ring of
datagram rows as the window sends them, ``fixedpoint.dequantize`` turns each int32 result
payload into floats in ``out`` as it arrives; docs/host.md, "Memory").
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from wanreduce import fixedpoint, regs, wire
from wanreduce.model import Outcome
from wanreduce.packetize import Packets, packetize

from . import agreement
from .chunk_ring import ChunkRing, WholeBuffer
from .control import ControlClient, ControlTimeout
from .errors import (  # noqa: F401 - the driver's errors, importable from here as before
    AggregatorUnreachable,
    ChunksMissing,
    ConfigMismatch,
    DriverError,
    OverflowReported,
    WindowWarning,
)
from .exchange import run_exchange
from .job_config import JobConfig
from .result_filter import ResultMismatch
from .rtt import RttEstimator
from .transport import (
    MAX_DATAGRAM,
    RX_BATCHES,
    Address,
    MulticastOptions,
    UdpTransport,
    is_multicast_address,
    resolve,
)
from .wan_recovery import WanRecovery

_HDR = wire.AGG_HEADER_BYTES
_OVERFLOW = int(wire.Flags.OVERFLOW)

# Outcome counters read to diagnose chunks that never complete.
_REJECTS = (
    Outcome.REJECT_UNCONFIGURED,
    Outcome.REJECT_NON_MEMBER,
    Outcome.REJECT_MISMATCH,
    Outcome.REJECT_BUSY,
    Outcome.OUT_OF_WINDOW,
    Outcome.STALE,
)


@dataclass
class DriverStats:
    """Counters of one client (cumulative)."""

    allreduces: int = 0
    chunks: int = 0  # distinct chunks sent (data, agreement and redo)
    datagrams_sent: int = 0  # including retransmissions
    retransmissions: int = 0
    fast_resends: int = 0  # of which: lost results seen as gaps below later results
    timer_resends: int = 0  # the retransmission timer expired (a stall: no new result in an RTO)
    recovery_resends: int = 0  # the next chunk holding up in-order results, during recovery
    sack_resends: int = 0  # contributions (or released results) a probe found missing
    probes: int = 0  # probe rounds: stalls that asked the aggregator what it holds (CONTROL)
    results: int = 0  # results accepted
    ignored: int = 0  # datagrams ignored, all kinds: the three below + duplicate results
    foreign: int = 0  # datagrams not from the aggregator (address and port, docs/host.md)
    malformed: int = 0  # from the aggregator but not a well-formed RESULT (short, bad header)
    stray: int = 0  # well-formed results of another job/round/group (not for this call)
    early_copies: int = 0  # passed-through copies (ring, all-gather) that came during another
    # exchange, kept for the call's next phase (result_filter.ResultFilter ``keep``)
    agreements: int = 0  # scale-agreement exchanges
    redo_chunks: int = 0  # chunks redone after an overflow
    clipped: int = 0  # values clipped in quantisation (a configured max_abs was exceeded)
    last_exponent: int | None = None  # scale exponent of the last tensor's first pass


def _chunk_list(first: int, idx: Iterable[int]) -> list[int]:
    return [(first + int(i)) & 0xFFFFFFFF for i in idx]


def _fmt_chunks(chunks: list[int], limit: int = 12) -> str:
    s = ", ".join(str(c) for c in chunks[:limit])
    return s + (f", ... ({len(chunks)} in all)" if len(chunks) > limit else "")


def exponent_for(bound: float, n: int, headroom: str = "safe") -> int:
    """Scale exponent all sites use for a bound ``M`` on max|x| with ``n`` contributors."""
    return fixedpoint.choose_exponent(bound, 1 if headroom == "optimistic" else n)


def redo_exponent(e: int, n: int) -> int:
    """Exponent of an overflow redo: e - ceil(log2 N) - 1 (sum of N bounded by INT32_MAX/2)."""
    return e - math.ceil(math.log2(n)) - 1 if n > 1 else e - 1


SESSION_ENV = "WANREDUCE_SESSION"


def resolve_session(session: int | None) -> int:
    """The run's session tag: ``session``, else the ``WANREDUCE_SESSION`` environment variable,
    else 0; range-checked 0..65535 (docs/protocol.md, "Sessions")."""
    name = "session"
    if session is None:
        text = os.environ.get(SESSION_ENV, "").strip()
        if not text:
            return 0
        name = SESSION_ENV
        try:
            session = int(text, 0)
        except ValueError:
            raise ValueError(f"{name} must be an integer 0..{wire.SESSION_MAX}, got {text!r}") from None
    if isinstance(session, bool) or not isinstance(session, int) or not 0 <= session <= wire.SESSION_MAX:
        raise ValueError(f"{name} must be 0..{wire.SESSION_MAX}, got {session!r}")
    return session


def iter_blocks(x: np.ndarray, block_elements: int) -> Iterator[np.ndarray]:
    """Views of consecutive blocks of a contiguous tensor (for ``allreduce_iter(inplace=True)``)."""
    if not x.flags.c_contiguous:
        raise ValueError("iter_blocks needs a C-contiguous array")
    flat = x.reshape(-1)
    for s in range(0, flat.size, block_elements):
        yield flat[s : s + block_elements]


class AggregatorClient:
    """All-reduce client of one site (``sender_id``) toward one aggregator address.

    Window: at most ``window`` chunks between the lowest chunk still lacking a result and the
    next one sent; default ``ceil(rate_bps * rtt / (8 * datagram bytes))`` (the bandwidth-delay
    product of the path), never more than half the job's slot window W (docs/protocol.md,
    lost-result recovery). Retransmission timeout: :class:`~wanreduce.host.rtt.RttEstimator`
    (RFC 6298, Karn's rule) on result round trips, initially ``initial_rto`` (default
    max(1 s, 2 * rtt)), SRTT + max(min_rto, 4 RTTVAR) up to max_rto, backed off on expiry and
    restarted by each new result; it follows a slow aggregator (docs/host.md, "Timers"). ``timeout``: the call fails after this long without any
    new result (then at most ``timeout / 2`` more to diagnose over CONTROL); ``max_retries``:
    resends of one chunk before it fails. Group sizes and job windows come from the mappings given
    or are read from the aggregator's registers (CONTROL messages, each allowed ``timeout``).
    Chunk numbers of a job start, on the job's first use, at the aggregator's ``JOBj_HEAD`` (where
    an earlier run of the job ended), or at ``first_chunk`` when given (needed without CONTROL
    access and in release-on-completion mode; the same on every member). ``wan_recovery``:
    recover contributions lost on WAN links to other members' aggregators by NACKs
    (``host/wan_recovery.py``; needs CONTROL and a network that carries NACKs, e.g. the emulator).
    """

    def __init__(
        self,
        aggregator: Address,
        *,
        sender_id: int,
        elements_per_packet: int = wire.DEFAULT_ELEMENTS,
        group_sizes: Mapping[int, int] | None = None,
        job_windows: Mapping[int, int] | None = None,
        window: int | None = None,
        rate_bps: float = 10e9,
        rtt: float = 0.15,
        initial_rto: float | None = None,
        min_rto: float = 0.02,
        max_rto: float = 60.0,
        max_retries: int = 10,
        timeout: float = 10.0,
        max_abs: float | None = None,
        headroom: str = "safe",
        on_overflow: str = "redo",
        max_redo: int = 3,
        bind: Address = ("0.0.0.0", 0),
        multicast: MulticastOptions | None = None,
        result_group: str | None = None,
        control_address: Address | None = None,
        use_control: bool = True,
        first_chunk: int | None = None,
        session: int | None = None,
        result_source: Address | None = None,
        wan_recovery: bool = False,
    ) -> None:
        if not 0 <= sender_id < wire.MAX_SENDERS:
            raise ValueError(f"sender_id must be 0..{wire.MAX_SENDERS - 1}, got {sender_id}")
        if not 1 <= elements_per_packet <= wire.MAX_ELEMENTS_JUMBO:
            raise ValueError(f"elements_per_packet must be 1..{wire.MAX_ELEMENTS_JUMBO}")
        if headroom not in ("safe", "optimistic"):
            raise ValueError("headroom must be 'safe' or 'optimistic'")
        if on_overflow not in ("redo", "raise"):
            raise ValueError("on_overflow must be 'redo' or 'raise'")
        if window is not None and window < 1:
            raise ValueError("window must be >= 1 chunk")
        if rate_bps <= 0 or rtt <= 0 or timeout <= 0 or min_rto <= 0 or max_rto < min_rto:
            raise ValueError("rate_bps, rtt, timeout, min_rto must be > 0 and max_rto >= min_rto")
        if max_retries < 0 or max_redo < 0:
            raise ValueError("max_retries and max_redo must be >= 0")
        if max_abs is not None and not (math.isfinite(max_abs) and max_abs >= 0):
            raise ValueError("max_abs must be a finite non-negative number")
        if first_chunk is not None and not 0 <= first_chunk <= 0xFFFFFFFF:
            raise ValueError(f"first_chunk must be 0..2**32-1, got {first_chunk}")
        # every member of a run passes the same session; another run on the same job id with
        # another session is refused by the aggregator (REJECT_MISMATCH), its results ignored
        self.session = resolve_session(session)
        self.aggregator = resolve(*aggregator)
        self.result_source = self._result_source(result_source, control_address)
        self.sender_id = sender_id
        self.elements = elements_per_packet
        self.window, self.rate_bps, self.rtt = window, rate_bps, rtt
        self.min_rto, self.max_rto = min_rto, max_rto
        self.initial_rto = initial_rto if initial_rto is not None else max(1.0, 2 * rtt)
        self.max_retries, self.timeout = max_retries, timeout
        self.max_abs, self.headroom = max_abs, headroom
        self.on_overflow, self.max_redo = on_overflow, max_redo
        self.stats = DriverStats()
        self.next_chunk: dict[int, int] = {}
        self._window_warned: set[int] = set()
        self.timer = RttEstimator(self.initial_rto, min_rto=min_rto, max_rto=max_rto)
        self.probe_floor = 0.0  # s: the loss-recovery probe pace's floor, kept across calls (SendWindow.stall)
        self.transport = UdpTransport(
            bind=bind, multicast=multicast, join=(result_group,) if result_group else ()
        )
        if control_address is None and not is_multicast_address(self.aggregator[0]):
            control_address = self.aggregator
        # Diagnosis after a failure: each CONTROL probe may take a quarter of the timeout.
        self._probe_timeout = timeout / 4
        self.control = (
            ControlClient(control_address, timeout=timeout, initial_rto=min(self.initial_rto, 0.25),
                          min_rto=min_rto, max_rto=max_rto)
            if use_control and control_address is not None
            else None
        )
        # What the client knows of the aggregator's configuration (given, or looked up on first use)
        self.config = JobConfig(
            self.control, where=self._where(), port=self.aggregator[1], timeout=timeout,
            sender_id=sender_id, elements=elements_per_packet, group_sizes=group_sizes,
            job_windows=job_windows, next_chunk=self.next_chunk, first_chunk=first_chunk,
        )
        self.group_sizes, self.job_windows = self.config.group_sizes, self.config.job_windows
        self._rbuf = bytearray(RX_BATCHES * MAX_DATAGRAM)  # GRO batches back to back (exchange.py)
        # copies for a later phase that came during the latest exchange (exchange.py keeps,
        # sharded_allreduce._run_phase takes them)
        self.early_copies: list[bytes] = []
        self._ever_heard = False
        # Segmentation offload (several equal-size datagrams per sendmsg) for unicast only;
        # cleared if the kernel refuses it. The datagrams on the wire are the same.
        self.transport.gso = not is_multicast_address(self.aggregator[0])
        self.transport.enable_gro()  # a batch of results arrives in one recvmsg
        # contributions lost on WAN links on their way to other members' aggregators: NACKs
        self.wan = WanRecovery(self) if wan_recovery else None

    @property
    def gso(self) -> bool:
        """Contributions go in segmented batches (False: multicast aggregator, or refused)."""
        return self.transport.gso

    @gso.setter
    def gso(self, on: bool) -> None:
        self.transport.gso = on

    # ---- life cycle ----
    def close(self) -> None:
        if self.wan is not None:
            self.wan.close()
        self.transport.close()
        if self.control is not None:
            self.control.close()

    def __enter__(self) -> AggregatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_next_chunk(self, job: int, chunk: int) -> None:
        """Set the job's chunk counter (all sites must agree; e.g. 0 after a window reset)."""
        self.next_chunk[job] = chunk & 0xFFFFFFFF

    # ---- configuration lookups ----
    def group_size(self, group: int) -> int:
        """Members N of ``group`` (given, or read over CONTROL on first use)."""
        self.config.configure(group=group)
        n = self.group_sizes[group]
        if not 1 <= n <= wire.MAX_SENDERS:
            raise ConfigMismatch(
                f"group {group} size {n} outside 1..{wire.MAX_SENDERS}: fix group_sizes="
            )
        return n

    def job_window(self, job: int) -> int:
        """Slots W of ``job``'s window (given, or read over CONTROL on first use)."""
        self.config.configure(job=job)
        return self.job_windows[job]

    def effective_window(self, job: int, *, stacklevel: int = 3) -> int:
        """Chunks in flight for ``job``: min(bandwidth-delay product, W/2) (``stacklevel``: of
        the WindowWarning, counted from here)."""
        W = self.job_window(job)
        if W < 2:
            raise ConfigMismatch(
                f"job {job} window of {W} slot cannot hold W/2 >= 1 chunks: configure the job "
                f"with a window of at least 2 slots (log2_window >= 1)"
            )
        size = wire.datagram_bytes(self.elements)
        bdp = math.ceil(self.rate_bps * self.rtt / (8 * size))
        w = self.window if self.window is not None else bdp
        if w > W // 2 and job not in self._window_warned:
            self._window_warned.add(job)
            warnings.warn(
                f"job {job}: the aggregator's window of {W} slots lets {W // 2} chunks "
                f"({W // 2 * size / 1e6:.3g} MB) be in flight, less than the "
                + (f"window={w} asked for" if self.window is not None else
                   f"{w} chunks ({w * size / 1e6:.3g} MB) of rate x RTT ({self.rate_bps / 1e9:g} "
                   f"Gb/s x {self.rtt * 1e3:g} ms)")
                + ": goodput is capped near W/2 chunks per round trip and each loss stalls "
                "the link. Raise the job's window on the aggregator (wanreduce serve --slots; "
                "ControlClient.set_job(log2_window=)) or give rate_bps=/rtt= of this path",
                WindowWarning, stacklevel=stacklevel,
            )
        return max(1, min(w, W // 2))

    def _result_source(self, given: Address | None, control: Address | None) -> Address:
        """The one address results are accepted from (docs/host.md, "Results")."""
        if given is not None:
            return resolve(*given)
        if not is_multicast_address(self.aggregator[0]):
            host, port = self.aggregator
            return ("127.0.0.1" if host == "0.0.0.0" else host), port  # 0.0.0.0 reaches lo
        if control is not None:  # the aggregator's host port: its LOCAL_IP:UDP_PORT
            return resolve(*control)
        raise ValueError(
            "result_source: with a multicast aggregator address give result_source= (the "
            "aggregator's unicast IP and UDP port, the source of its results) or control_address="
        )

    def _where(self) -> str:
        return f"{self.aggregator[0]}:{self.aggregator[1]}"

    # ---- public API ----
    def allreduce(
        self,
        x: np.ndarray,
        *,
        job: int,
        group: int,
        round: int,  # noqa: A002 - the protocol's name
        out: np.ndarray | None = None,
        max_abs: float | None = None,
    ) -> np.ndarray:
        """Sum ``x`` over every member of ``group``; the result goes into ``out`` (may be ``x``).

        Every member must call this with the same shape, ``job``, ``group``, ``round`` and scale
        setting, in the same order (chunk numbers follow from that, see docs/host.md).
        """
        x = np.asarray(x)
        dt = fixedpoint.check_dtype(x.dtype)
        if x.size == 0:
            raise ValueError("cannot all-reduce an empty tensor")
        if out is None:
            out = np.empty(x.shape, dt)
        else:
            if out.shape != x.shape:
                raise ValueError(f"out has shape {out.shape}, expected {x.shape}")
            fixedpoint.check_dtype(out.dtype)
            if not out.flags.c_contiguous or not out.flags.writeable:
                raise ValueError("out must be a writeable C-contiguous array")
        if not 0 <= job <= 0xFFFF or not 0 <= group <= 0xFF or not 0 <= round <= 0xFFFFFFFF:
            raise ValueError("job must be 0..65535, group 0..255, round 0..2**32-1")
        e, n, w = self.agree(x, job=job, group=group, round=round, max_abs=max_abs)
        flat = x.reshape(-1)
        oflat = out.reshape(-1)
        ring = self._ring(flat, oflat, e, 1 if self.headroom == "optimistic" else n, job, group,
                          round, w)
        first, counts = ring.first, ring.counts
        flags = self._run(ring, job=job, group=group, round_id=round, exp=e, w=w)
        # Overflowed results were not written (host/chunk_ring.py): those chunks of out still
        # hold what they held before, with out is x their input, which the redo re-quantises.
        over = np.flatnonzero(flags & _OVERFLOW)
        cur = e
        redos = 0
        while over.size:
            chunks = _chunk_list(first, over)
            if self.on_overflow == "raise" or redos >= self.max_redo:
                raise OverflowReported(
                    f"job {job} round {round}: results of chunks {_fmt_chunks(chunks)} overflowed"
                    f" (scale exponent {cur}){' after ' + str(redos) + ' redo(s)' if redos else ''}",
                    job=job, chunks=chunks,
                )
            cur = redo_exponent(cur, n)
            if cur < wire.SCALE_EXP_MIN:
                raise OverflowReported(
                    f"job {job}: chunks {_fmt_chunks(chunks)} overflow even at the smallest scale",
                    job=job, chunks=chunks,
                )
            E = self.elements
            sub = np.concatenate([flat[i * E : i * E + int(counts[i])] for i in over])
            ring2 = self._ring(sub, oflat, cur, n, job, group, round, w, target=over)
            self.stats.redo_chunks += len(ring2)
            f2 = self._run(ring2, job=job, group=group, round_id=round, exp=cur, w=w)
            over = over[(f2 & _OVERFLOW) != 0]
            redos += 1
        self.stats.allreduces += 1
        return out

    def agree(self, x: np.ndarray, *, job: int, group: int, round: int,  # noqa: A002
              max_abs: float | None = None) -> tuple[int, int, int]:
        """The agreement exchange alone (``allreduce`` starts with it): every member of ``group``
        calls it with its tensor and gets the same ``(scale exponent, members N, window w)``, or
        the same error. ``host/sharded_allreduce.py`` quantises a whole tensor at it once."""
        x = np.asarray(x)
        dt = fixedpoint.check_dtype(x.dtype)
        bound = max_abs if max_abs is not None else self.max_abs
        if bound is not None and not (math.isfinite(bound) and bound >= 0):
            raise ValueError(f"max_abs must be a finite non-negative number, got {bound}")
        self.config.configure(group=group, job=job, head=True)
        if job not in self.next_chunk and self.config.first_chunk is not None:
            self.next_chunk[job] = self.config.first_chunk
        n = self.group_size(group)
        w = self.effective_window(job, stacklevel=4)  # the warning names allreduce's caller
        fixed = None if bound is None else exponent_for(bound, n, self.headroom)
        e = self._agree(x, dt, job=job, group=group, round_id=round, n=n, w=w, fixed_exp=fixed)
        self.stats.last_exponent = e
        return e, n, w

    def allreduce_iter(
        self,
        blocks: Iterable[np.ndarray],
        *,
        job: int,
        group: int,
        round: int,  # noqa: A002
        max_abs: float | None = None,
        inplace: bool = False,
    ) -> Iterator[np.ndarray]:
        """Streaming form: all-reduce each block in turn and yield its result.

        With ``inplace=True`` each block is overwritten with its sum (no second copy of the
        tensor is ever held: use :func:`iter_blocks` for views of one large array). Each block
        is a separate tensor for chunk numbering and its own agreement round trip.
        """
        for b in blocks:
            yield self.allreduce(
                b, job=job, group=group, round=round, max_abs=max_abs, out=b if inplace else None
            )

    # ---- internals ----
    def _packets(self, flat, e, nq, job, group, round_id) -> Packets:
        """``flat`` packetized whole (the agreement vector: its results are read back)."""
        first = self.next_chunk.get(job, 0)
        pk = packetize(
            flat, exp=e, n_contributors=nq, elements_per_packet=self.elements, job_id=job,
            round_id=round_id, first_chunk=first, sender_id=self.sender_id, group_id=group,
            session=self.session,
        )
        self.next_chunk[job] = (first + len(pk)) & 0xFFFFFFFF
        return pk

    def _ring(self, flat, out, e, nq, job, group, round_id, w, target=None) -> ChunkRing:
        """``flat``'s chunks streamed through a ring of ``w`` rows, results into ``out``
        (tensor chunk ``target[i]`` for chunk ``i``, default ``i``)."""
        first = self.next_chunk.get(job, 0)
        ring = ChunkRing(flat, out, rows=w, elements=self.elements, exp=e, n_contributors=nq,
                         first=first, group=group, target=target, job_id=job,
                         round_id=round_id, sender_id=self.sender_id, session=self.session)
        self.next_chunk[job] = (first + len(ring)) & 0xFFFFFFFF
        return ring

    def _agree(self, x, dt, *, job, group, round_id, n, w, fixed_exp) -> int:
        """All-reduce this member's agreement vector (``host/agreement.py``) and return the
        scale exponent every member uses; every member raises the same error when the members
        disagree on the tensor (element count, dtype, scale setting) or one has NaN/Inf."""
        vec = agreement.vector(
            self.sender_id, x.size, dt, agreement.max_abs(x), fixed_exp=fixed_exp,
            optimistic=self.headroom == "optimistic",
        )
        pk = WholeBuffer(self._packets(vec, 0, n, job, group, round_id))
        self._run(pk, job=job, group=group, round_id=round_id, exp=0, w=w)
        self.stats.agreements += 1
        a = agreement.decode(pk.pk.payload.reshape(-1)[: agreement.LANES])
        where = f"job {job} round {round_id}"
        why = agreement.disagreement(a, n)
        if why is not None:
            raise ConfigMismatch(
                f"{where}: {why}; every member must call allreduce with the same tensor size, "
                f"dtype, max_abs and headroom, in the same order"
            )
        bad = agreement.nonfinite_members(a)
        if bad:
            raise ValueError(
                f"{where}: NaN or Inf in the tensor of member(s) {', '.join(map(str, bad))}; "
                f"nothing was summed (every member raises this)"
            )
        return fixed_exp if fixed_exp is not None else exponent_for(a.bound, n, self.headroom)

    def _run(self, pk: ChunkRing | WholeBuffer, *, job: int, group: int, round_id: int, exp: int,
             w: int) -> np.ndarray:
        """Send every chunk of ``pk`` within the window until each has its result (each
        received batch of result payloads goes to ``pk.take_many``); returns the result flags."""
        try:
            return run_exchange(self, pk, job=job, group=group, round_id=round_id, exp=exp, w=w)
        except ResultMismatch as exc:
            raise ConfigMismatch(str(exc)) from None
        finally:
            self.stats.clipped += pk.clipped

    def _fail(self, pk: ChunkRing | WholeBuffer, done: bytearray, nxt: int, job: int, round_id: int,
              why: str):
        first = pk.first
        missing = _chunk_list(first, (i for i in range(len(pk)) if not done[i]))
        base_msg = (
            f"job {job} round {round_id}: no result for chunks {_fmt_chunks(missing)} {why}"
        )
        if self.control is None:
            if not self._ever_heard:
                raise AggregatorUnreachable(
                    f"aggregator {self._where()} unreachable: {base_msg}, nothing ever received"
                )
            raise ChunksMissing(base_msg, job=job, chunks=missing)
        probe = self._probe_timeout
        group = pk.group
        try:  # the reject counters, and the group's members (to name the missing ones)
            *before, members = self.control.read_many(
                [regs.outcome_counter(o) for o in _REJECTS] + [regs.group(group)], timeout=probe
            )
        except ControlTimeout:
            raise AggregatorUnreachable(
                f"aggregator {self._where()} unreachable: {base_msg}, and no reply to a CONTROL "
                f"probe"
            ) from None
        # Diagnose: resend the first missing chunk once; a reject counter that moves names the
        # configuration problem, otherwise other members have not contributed (or results were
        # lost beyond recovery).
        i = (missing[0] - first) & 0xFFFFFFFF
        self.transport.send_to(pk.datagram(i), self.aggregator)
        time.sleep(min(0.05, probe))
        try:
            after = self.control.read_many([regs.outcome_counter(o) for o in _REJECTS], timeout=probe)
        except ControlTimeout:
            after = before
        moved = [o.name for o, a, b in zip(_REJECTS, after, before, strict=True) if a != b]
        if any(m in ("REJECT_UNCONFIGURED", "REJECT_NON_MEMBER", "REJECT_MISMATCH") for m in moved):
            raise ConfigMismatch(
                f"{base_msg}: the aggregator rejects them ({', '.join(moved)}): job/group not "
                f"configured, sender not a member, or members disagree on round/scale/size/"
                f"session (another run on this job id?)"
            )
        hint = f" (aggregator counted {', '.join(moved)})" if moved else ""
        who = self._contributors(job, group, members, missing[0], probe)
        raise ChunksMissing(f"{base_msg}: {who}{hint}", job=job, chunks=missing)

    def _contributors(self, job: int, group: int, bitmap: int, chunk: int, timeout: float) -> str:
        """Whose contribution to ``chunk`` the aggregator lacks (JOBj_PROBE_BITMAP; ``bitmap``:
        the group's members), in words."""
        try:
            have = self.control.chunk_contributors(job, chunk, timeout=timeout)
        except ControlTimeout:
            return "aggregator reachable, but no reply to the chunk probe"
        members = [i for i in range(wire.MAX_SENDERS) if bitmap >> i & 1]
        if have is None:
            return (f"the aggregator holds no contribution to chunk {chunk} (none accepted, or "
                    f"its result was already released)")
        lacking = [i for i in members if not have >> i & 1]
        held = ", ".join(str(i) for i in members if have >> i & 1)
        if not lacking:
            return (f"chunk {chunk} has every contribution of group {group} and waits for "
                    f"earlier chunks to be released")
        return (f"no contribution from member{'s' if len(lacking) > 1 else ''} "
                f"{', '.join(map(str, lacking))} of group {group} to chunk {chunk} (have {held})")
