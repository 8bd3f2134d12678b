"""Burst coalescer: a sequence of row addresses, one per cycle at most, into AXI4 INCR bursts.

Each cycle ``push`` may append one row. A row that follows the open burst's last row, while the
burst has fewer than ``max_beats`` beats and the row does not start a new 4 KiB page
(``page_beats`` rows, a power of two; rows are 4 KiB-aligned because the store's base address
is), extends the burst; otherwise the open burst is closed and the row opens a new one. A cycle
without a push closes the open burst, unless the last row pushed came with ``more`` (the owner's
word that the next row of its message is coming: its upstream pauses, e.g. a DRAM-bound store
admits one command per freed entry) and the burst can still grow (fewer than ``hold_beats``
beats, not at a page end): then the burst stays open for up to ``hold`` idle cycles in a row, so a message whose rows trickle in still leaves as one long
burst (LiteDRAM turns its bus around per burst: short bursts cost most of its bandwidth). The
timer bounds the wait, so nothing deadlocks; ``hold`` = 0: any pause closes the burst.

Closed bursts ``{start, len_m1}`` (``len_m1`` = beats − 1, as ``axlen``) queue in a FIFO of
``depth`` entries read on ``m`` (a :class:`RegisteredFIFO`: ``m.valid``/``m.payload`` come from
flip-flops, not from the FIFO's block-RAM output). A burst closed in cycle t is written into the
queue in t + 1, from flip-flops (``close_r`` / ``closed_r``), and shows on ``m`` in t + 4 at the
earliest. The owner guarantees room: each burst holds at least one row the owner still tracks
(the one in ``closed_r`` too), so ``depth`` = the owner's outstanding rows never overflows.
Timing: the decision is taken from flip-flops only: ``close`` is ``push``, ``is_open`` and four
flags, each worked out a cycle early from ``row_next`` (the owner's promise: ``row`` in cycle
t + 1 is ``row_next`` in cycle t; both owners feed ``row`` from a register loaded every cycle,
so ``row_next`` is that register's input, itself a flip-flop) and the state's next value:
``match`` == (``row`` == the open burst's next row), ``room`` == (beats < ``max_beats``),
``new_page`` (``row`` starts a page) and ``can_hold`` (the hold's condition). No compare of
``row``, no count compare in the decision's cycle; the compares run the cycle before, into
those flip-flops. (The decision was the compare of ``row`` with the registered next row, the
count and page compares and the hold's terms: the Versa DRAM build's ``ar_bursts`` close,
``beats`` -> ``w_en``, 9.13 ns, docs/benchmarks.md, session 44.) The decision still ends at the
flip-flop ``close_r``: the queue's write enable does not run on into the FIFO's level and write
pointer in the same cycle (the ``aw_bursts`` / ``ar_bursts`` queue paths, 8.7-9.2 ns at 125 MHz,
session 43). ``push`` must be low in the first cycle after reset (``row_next`` had no cycle
before it; both owners' pushes come from valid flags that reset low). ``next_error``: a row
pushed that is not the last cycle's ``row_next`` (never, if the owner keeps its promise; a
check for simulation, as the ``copy_error`` of flip-flop copies elsewhere).
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_core_params
from .registered_fifo import RegisteredFIFO

__all__ = ["BurstCoalescer", "burst_layout"]


def burst_layout(address_bits: int) -> data.StructLayout:
    """One burst: first row and beats − 1."""
    return data.StructLayout({"start": address_bits, "len_m1": 8})


class BurstCoalescer(wiring.Component):
    """Rows in (``row``/``push``), bursts out (``m``); see the module docstring."""

    def __init__(self, address_bits: int, *, max_beats: int, page_beats: int, depth: int,
                 hold: int = 0, hold_beats: int | None = None) -> None:
        if not 1 <= max_beats <= min(256, page_beats) or page_beats & (page_beats - 1):
            raise ValueError(f"max_beats must be 1..min(256, page_beats={page_beats}), got {max_beats}")
        check_core_params(burst_hold=hold)
        self.address_bits, self.max_beats, self.page_beats, self.depth, self.hold = (
            address_bits, max_beats, page_beats, depth, hold)
        self.hold_beats = min(max_beats, hold_beats or max_beats)
        self.queue = RegisteredFIFO(burst_layout(address_bits), depth)  # the closed bursts
        super().__init__({
            "row": In(address_bits),
            "row_next": In(address_bits),
            "push": In(1),
            "more": In(1),
            "m": Out(stream.Signature(burst_layout(address_bits))),
            "next_error": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        layout = burst_layout(self.address_bits)
        m.submodules.queue = q = self.queue
        wiring.connect(m, q.m, wiring.flipped(self.m))

        is_open = Signal()
        start = Signal(self.address_bits)
        following = Signal(self.address_bits)  # == start + beats (mod rows): the row that extends
        beats = Signal(range(self.max_beats + 1))
        page_bits = self.page_beats.bit_length() - 1
        # The decision's terms, each a flip-flop worked out a cycle early from `row_next` (== the
        # next cycle's `row`) and the state's next value:
        # `match` == (row == following) (`following` after a push is row + 1, `row_p1`),
        # `room` == (beats < max_beats), `new_page` == (row starts a page), `can_hold` == the
        # hold's condition (`more` of the last row pushed, the timer not run out, below
        # hold_beats, `following` not at a page start).
        row_p1 = Signal(self.address_bits)  # == row + 1 (mod rows)
        match, room, new_page, can_hold = (Signal(name=n) for n in ("match", "room", "new_page", "can_hold"))
        m.d.sync += [row_p1.eq(self.row_next + 1),
                     match.eq(self.row_next == Mux(self.push, row_p1, following)),
                     new_page.eq(self.row_next[:page_bits] == 0 if page_bits else 1)]
        extend = is_open & match & room & ~new_page
        # the owner's promise checked (never, if right): a pushed row is the last cycle's row_next
        row_next_r = Signal(self.address_bits)
        m.d.sync += row_next_r.eq(self.row_next)
        m.d.comb += self.next_error.eq(self.push & (self.row != row_next_r))

        # The queue is written a cycle after the close, from flip-flops: `closed_r` loads the open
        # burst every cycle (no enable), `close_r` the decision.
        close, close_r = Signal(name="close"), Signal(name="close_r")
        closed, closed_r = Signal(layout), Signal(layout)
        m.d.comb += [closed.start.eq(start), closed.len_m1.eq(beats - 1), q.w_data.eq(closed_r), q.w_en.eq(close_r)]
        m.d.sync += [closed_r.eq(closed), close_r.eq(close)]
        # Hold: the last row pushed said `more`, the burst can still grow (below hold_beats, not
        # at a page end) and the timer has not run out: `can_hold`, set by the push.
        left = Signal(range(self.hold + 1))  # idle cycles the burst may still wait
        not_last = self.row[:page_bits] != (1 << page_bits) - 1 if page_bits else Const(0)  # row + 1 starts no page
        with m.If(self.push):
            m.d.sync += left.eq(self.hold)
            with m.If(extend):
                m.d.sync += [beats.eq(beats + 1), following.eq(following + 1),
                             room.eq(beats < self.max_beats - 1),
                             can_hold.eq(self.more & (beats < self.hold_beats - 1) & not_last)]
            with m.Else():
                m.d.comb += close.eq(is_open)
                m.d.sync += [is_open.eq(1), start.eq(self.row), beats.eq(1), following.eq(self.row + 1),
                             room.eq(int(self.max_beats > 1)),
                             can_hold.eq(self.more & not_last if self.hold_beats > 1 else 0)]
        with m.Elif(is_open & can_hold if self.hold else 0):
            m.d.sync += [left.eq(left - 1), can_hold.eq(left != 1)]
        with m.Elif(is_open):
            m.d.comb += close.eq(1)
            m.d.sync += is_open.eq(0)
        return m
