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
Timing: the row that extends the burst is kept in a register (``start + beats``), so the
decision is one compare of ``row`` with a flip-flop, no adder; and it ends at the flip-flop
``close_r``: the queue's write enable no longer runs on from the compare into the FIFO's level
and write pointer in the same cycle (the Versa DRAM build's ``aw_bursts`` / ``ar_bursts`` queue
paths, 8.7-9.2 ns at 125 MHz, docs/benchmarks.md, session 43).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
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
            "push": In(1),
            "more": In(1),
            "m": Out(stream.Signature(burst_layout(address_bits))),
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
        new_page = self.row[:page_bits] == 0 if page_bits else 1
        extend = is_open & (self.row == following) & (beats < self.max_beats) & ~new_page

        # The queue is written a cycle after the close, from flip-flops: `closed_r` loads the open
        # burst every cycle (no enable), `close_r` the decision.
        close, close_r = Signal(), Signal()
        closed, closed_r = Signal(layout), Signal(layout)
        m.d.comb += [closed.start.eq(start), closed.len_m1.eq(beats - 1), q.w_data.eq(closed_r), q.w_en.eq(close_r)]
        m.d.sync += [closed_r.eq(closed), close_r.eq(close)]
        # Hold: the last row pushed said `more`, the burst can still grow (below hold_beats, not
        # at a page end) and the timer has not run out. All three are flip-flops or compares
        # of flip-flops.
        waiting = Signal()  # the last row pushed came with `more`
        left = Signal(range(self.hold + 1))  # idle cycles the burst may still wait
        grows = (beats < self.hold_beats) & (following[:page_bits] != 0 if page_bits else 0)
        hold = waiting & (left != 0) & grows if self.hold else 0
        with m.If(self.push):
            m.d.sync += [waiting.eq(self.more), left.eq(self.hold)]
            with m.If(extend):
                m.d.sync += [beats.eq(beats + 1), following.eq(following + 1)]
            with m.Else():
                m.d.comb += close.eq(is_open)
                m.d.sync += [is_open.eq(1), start.eq(self.row), beats.eq(1), following.eq(self.row + 1)]
        with m.Elif(is_open & hold):
            m.d.sync += left.eq(left - 1)
        with m.Elif(is_open):
            m.d.comb += close.eq(1)
            m.d.sync += is_open.eq(0)
        return m
