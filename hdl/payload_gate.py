"""The payload gate: a message's beats wait in block RAM until its record's decision, then go
to the slot store whole or not at all (issue 16, large S step 4; docs/large_slots.md, "Payload
wait").

Inputs, all valid/ready streams:

- ``beats`` (:func:`beat_layout`: ``data``, ``last``): the messages, one after the other;
- ``req`` (:func:`request_layout`: ``row`` the slot's first row, ``elements`` the int32 element
  count, ``tag``): one per message, taken with the message's first beat (that beat waits for it);
- ``decision`` (:func:`decision_layout`: ``op`` a :class:`Decision`, WRITE / ADD / DISCARD, and
  ``emit``): one per message, in message order, whenever the record is back (before, during or
  after the message's beats). ``emit``: the message completes its chunk and its store responses
  are the result's rows (docs/large_slots.md, "Results from the completing contribution's own
  ADD responses"): its commands' ``tag`` has ``EMIT_TAG`` set; if it is drained instead (a
  mismatch, or DISCARD) its chunk's rows are READ with ``EMIT_TAG`` after its beats are drained
  (``payload_beats(min(elements, max_elements))`` READs from ``row``), so the awaited rows always
  come.

Output ``cmd``: the slot store's command stream (``cmd_layout``): one command per beat, ``row`` =
base + beat, ``lanes`` = :func:`~.layouts.beat_lanes` (a short last beat's missing elements off),
``data`` the beat's with the lanes outside ``lanes`` zeroed (whatever the sender put there: a
WRITE stores 0 in them, an ADD leaves them; docs/slot_store.md, "The short last beat"), ``more``
on every beat but the last, ``tag`` the request's. A message is released only once its
last beat is in the :class:`PayloadFIFO` and its decision is in, so its commands go out whole
(WRITE / ADD) or not at all (DISCARD drains its beats with no command), at one per cycle while
``cmd`` is ready, after any backpressure on any stream.

Never silently wrong: a message whose beat count is not ``ceil(elements / (W/32))`` (or whose
``elements`` exceeds ``max_elements``) is drained with no command whatever its decision, and a
decision with no message waiting for one is dropped; each sets the sticky ``error`` and counts
(``mismatches``, ``orphans``). Beats of a too-long message beyond its count are not stored (but
its last), so a message never holds more than ``max_beats + 1`` entries of the FIFO. Counters
(32-bit, wrapping): ``written`` / ``added`` / ``discarded`` messages.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import beat_lanes, lane_bits, lanes, payload_beats
from .params import check_data_width
from .payload_fifo import PayloadFIFO, beat_layout, check_payload_fifo_params
from .registered_fifo import RegisteredFIFO
from .slot_store_signature import EMIT_TAG, TAG_BITS, Op, cmd_layout

__all__ = ["Decision", "PayloadGate", "beat_layout", "check_payload_gate_params", "decision_layout",
           "request_layout"]

COUNTER_BITS = 32


class Decision(enum.Enum, shape=2):
    """What the record's decision does with a message (WRITE / ADD: the store's ops)."""

    WRITE = Op.WRITE
    ADD = Op.ADD
    DISCARD = 3


def decision_layout() -> data.StructLayout:
    """A message's decision: ``op`` (:class:`Decision`) and ``emit`` (its responses are result
    rows; module docstring). A bare ``Decision``'s bits are one without ``emit``."""
    return data.StructLayout({"op": Decision, "emit": 1})


def request_layout(address_bits: int, max_elements: int, tag_bits: int = TAG_BITS) -> data.StructLayout:
    """What a message's store commands need: its slot's first ``row``, ``elements``, ``tag``."""
    return data.StructLayout({"row": address_bits, "elements": range(max_elements + 1), "tag": tag_bits})


def check_payload_gate_params(data_width: int, depth: int, address_bits: int, max_elements: int,
                              messages: int) -> None:
    """One-line errors naming the parameter and its range."""
    check_data_width(data_width)
    check_payload_fifo_params(data_width, depth)
    if not isinstance(address_bits, int) or not 1 <= address_bits <= 40:
        raise ValueError(f"address_bits must be 1..40, got {address_bits!r}")
    top = (depth - 1) * lanes(data_width)
    if not isinstance(max_elements, int) or not 1 <= max_elements <= top:
        raise ValueError(f"max_elements must be 1..{top} (a message and its last fit in depth {depth}), "
                         f"got {max_elements!r}")
    if not isinstance(messages, int) or not 2 <= messages <= 4096:
        raise ValueError(f"messages must be 2..4096, got {messages!r}")


class PayloadGate(wiring.Component):
    """Holds each message's beats until its decision; see the module docstring.

    Parameters: ``data_width`` W (64..512), ``depth`` (the payload FIFO's beats, a power of two:
    ≥ the record latency in beats), ``address_bits`` (the store's row address), ``max_elements``
    (default: what fits, ``(depth - 1) * W/32``), ``tag_bits``, ``messages`` (complete messages
    waiting for their decision; the input stalls beyond).
    Ports: ``beats``, ``req``, ``decision`` (in), ``cmd`` (out); ``error`` (sticky, a cycle after the event), counters
    ``written``, ``added``, ``discarded``, ``mismatches``, ``orphans``.
    """

    def __init__(self, data_width: int, depth: int, *, address_bits: int, max_elements: int | None = None,
                 tag_bits: int = TAG_BITS, messages: int = 32) -> None:
        if max_elements is None and isinstance(depth, int) and depth >= 2:
            max_elements = (depth - 1) * lanes(check_data_width(data_width))
        check_payload_gate_params(data_width, depth, address_bits, max_elements, messages)
        self.data_width, self.depth, self.address_bits = data_width, depth, address_bits
        if tag_bits != TAG_BITS:
            raise ValueError(f"tag_bits must be {TAG_BITS} (EMIT_TAG is its top bit), got {tag_bits}")
        self.max_elements, self.tag_bits, self.messages = max_elements, tag_bits, messages
        self.req_layout = request_layout(address_bits, max_elements, tag_bits)
        counters = {name: Out(COUNTER_BITS) for name in ("written", "added", "discarded", "mismatches", "orphans")}
        super().__init__({
            "beats": In(stream.Signature(beat_layout(data_width))),
            "req": In(stream.Signature(self.req_layout)),
            "decision": In(stream.Signature(decision_layout())),
            "cmd": Out(stream.Signature(cmd_layout(data_width, address_bits, tag_bits))),
            "error": Out(1), **counters,
        })

    def elaborate(self, platform: object) -> Module:  # noqa: PLR0915 - input side, then output side
        m = Module()
        w, d = self.data_width, self.depth
        m.submodules.fifo = fifo = PayloadFIFO(w, d)
        entry = data.StructLayout({"req": self.req_layout, "ok": 1})
        m.submodules.queue = queue = RegisteredFIFO(entry, self.messages)
        beats, req, dec, cmd = self.beats, self.req, self.decision, self.cmd

        # ---- input side: beats into the FIFO; a complete message's request into the queue ----
        # The count's compares for the next beat are flip-flops (``within_r``, ``ok_r``), made as
        # a beat is taken from ``cnt`` / ``exp_r`` or the request, so ``in_busy`` only chooses
        # between them: no carry chain from ``in_busy`` / ``cur`` into the FIFO's push and ready.
        # With ``seen`` beats before a beat and ``seen`` held once past ``expected``, the next
        # beat's ``seen' < expected`` is ``seen + 1 < expected`` and ``seen' + 1 == expected`` is
        # ``seen + 2 == expected`` in every case (past ``expected`` both are 0 either way).
        in_busy = Signal()  # inside a message (its request taken)
        cur = Signal(self.req_layout)
        exp_r = Signal(range(d))  # its expected beats
        cnt = Signal(range(d + 1))  # its beats so far (held at expected + 1)
        within_r = Signal()  # in a message: its next beat is within ``exp_r`` (cnt < exp_r)
        ok_r = Signal()  # in a message: its next beat is its expected last (cnt + 1 == exp_r)
        first = ~in_busy
        r_now = Signal(self.req_layout)
        m.d.comb += r_now.eq(Mux(first, req.payload, cur))

        def expected_of(elements: Value) -> Value:
            return Mux(elements > self.max_elements, 0, payload_beats(elements, w))

        exp_req = expected_of(req.payload.elements)  # a first beat's (seen 0)
        take = Signal()
        m.d.comb += [
            beats.ready.eq(fifo.s.ready & queue.w_rdy & (in_busy | req.valid)),
            take.eq(beats.valid & beats.ready),
            req.ready.eq(take & first),
            fifo.s.payload.eq(beats.payload),
            fifo.s.valid.eq(take & (beats.payload.last | Mux(first, exp_req > 0, within_r))),
            queue.w_data.req.eq(r_now), queue.w_data.ok.eq(Mux(first, exp_req == 1, ok_r)),
            queue.w_en.eq(take & beats.payload.last),
        ]
        with m.If(take):
            m.d.sync += [in_busy.eq(~beats.payload.last),
                         within_r.eq(Mux(first, exp_req > 1, cnt + 1 < exp_r)),
                         ok_r.eq(Mux(first, exp_req == 2, cnt + 2 == exp_r))]
            with m.If(first):
                m.d.sync += [cur.eq(req.payload), exp_r.eq(exp_req), cnt.eq(1)]
            with m.Else():
                m.d.sync += cnt.eq(Mux(cnt > exp_r, cnt, cnt + 1))

        # ---- output side: the head message, once complete and decided, as commands; an emitting
        # message drained (mismatch or DISCARD) then READs its chunk's rows (``reading``) ----
        busy, reading = Signal(name="busy"), Signal(name="reading")  # (named: tests look for ``busy``)
        rd_after, emit = Signal(name="rd_after"), Signal(name="emit")
        op = Signal(Decision)
        head = Signal(self.req_layout)
        beat = Signal(range(d))
        n_read = Signal(range(d))  # the READs' last beat
        discard = op == Decision.DISCARD
        pm = fifo.m
        pop = Signal()
        beat_ok = Signal(lanes(w))  # the lanes of this beat that hold an element
        r_last = beat == n_read
        m.d.comb += [
            pm.ready.eq(busy & ~reading & (discard | cmd.ready)),
            pop.eq(pm.valid & pm.ready),
            cmd.valid.eq(reading | (busy & ~discard & pm.valid)),
            cmd.payload.op.eq(Mux(reading, Op.READ, op.as_value())), cmd.payload.row.eq(head.row + beat),
            beat_ok.eq(Mux(reading, (1 << lanes(w)) - 1, beat_lanes(head.elements, beat, w))),
            cmd.payload.data.eq(Mux(reading, 0, pm.payload.data & lane_bits(beat_ok, w))),
            cmd.payload.tag.eq(head.tag | Mux(emit, EMIT_TAG, 0)),
            cmd.payload.lanes.eq(beat_ok), cmd.payload.more.eq(Mux(reading, ~r_last, ~pm.payload.last)),
        ]
        finishing = pop & pm.payload.last
        read_end = reading & cmd.ready & r_last
        undecided = Signal(range(2 * self.messages + 3))  # requests taken, decisions not yet
        orphan = dec.valid & (undecided == 0)
        start = Signal()
        free = ~busy | (finishing & ~rd_after) | read_end
        m.d.comb += [start.eq(~orphan & dec.valid & queue.m.valid & free),
                     dec.ready.eq(orphan | start), queue.m.ready.eq(start)]
        m.d.sync += undecided.eq(undecided + req.ready - start)  # (req.ready: a request taken)
        with m.If(pop | (reading & cmd.ready)):
            m.d.sync += beat.eq(beat + 1)
        with m.If(finishing):
            m.d.sync += [busy.eq(rd_after), reading.eq(rd_after), beat.eq(0)]
        with m.If(read_end):
            m.d.sync += [busy.eq(0), reading.eq(0)]
        with m.If(start):
            ok, dp = queue.m.payload.ok, dec.payload
            r_elem = queue.m.payload.req.elements
            m.d.sync += [busy.eq(1), beat.eq(0), head.eq(queue.m.payload.req), emit.eq(dp.emit),
                         op.eq(Mux(ok, dp.op, Decision.DISCARD)),
                         rd_after.eq(dp.emit & (~ok | (dp.op == Decision.DISCARD))),
                         n_read.eq(payload_beats(Mux(r_elem > self.max_elements, self.max_elements, r_elem), w) - 1)]
            for name, hit in (("written", ok & (dp.op == Decision.WRITE)),
                              ("added", ok & (dp.op == Decision.ADD)),
                              ("discarded", ok & (dp.op == Decision.DISCARD)), ("mismatches", ~ok)):
                with m.If(hit):
                    m.d.sync += getattr(self, name).eq(getattr(self, name) + 1)
        with m.If(dec.valid & orphan):
            m.d.sync += self.orphans.eq(self.orphans + 1)
        # ``error`` loads from a flip-flop (``bad``: a mismatched head started or an orphan decision
        # last cycle), not from ``start``, which the command ready reaches through the FIFO's pop
        # (docs/large_slots.md, "(session 40, round 9)"): it rises a cycle later, nothing else moves
        bad = Signal()
        m.d.sync += bad.eq((start & ~queue.m.payload.ok) | orphan)
        with m.If(bad):
            m.d.sync += self.error.eq(1)
        return m
