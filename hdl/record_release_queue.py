"""The record store's release queue (issue 16, large-S step 4; docs/large_slots.md, "The record
store"): the runs ``DecisionState`` releases at the jobs' heads (``released``: job, start, run;
1 + run chunks from the slot ``start``), queued in order for the emitter, which reads each
run's records and data.

A ``RegisteredFIFO`` (block RAM, its head from flip-flops) of ``release_item_layout`` entries.
The producer cannot wait: a release's entries come from C2's effect (and, for a run longer than
``RUN_STEP``, from its background scan's end), so the queue says ahead whether one more release
fits: ``room`` is high only while at least ``RESERVE`` entries are free (a flip-flop: the
level and the push of the cycle before) — two for the release
about to enter C1 (a long run is two parts) and one for a release whose first entry is being
pushed in the cycle ``room`` is looked at (``DecisionState`` lets one candidate past C0 at a time
and holds every command while a long run's second part is pending, so no more are in flight).
When ``room`` is low **the release candidates wait in C0** (``DecisionState``'s ``hold``), and
with them every command behind (C0 is in order); commands ahead go on.
Counted: ``pushed`` (entries in), ``waits`` (cycles ``room`` was low: a candidate may have
waited); ``error`` (sticky) if an entry came while the FIFO was full (the reserve was wrong).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .registered_fifo import RegisteredFIFO

__all__ = ["COUNTER_BITS", "RESERVE", "RecordReleaseQueue", "release_item_layout"]

RESERVE = 3  # free entries for ``room``: a release's two parts + one being pushed now
COUNTER_BITS = 32


def release_item_layout(slots: int, jobs: int) -> data.StructLayout:
    """A queued run: the ``job``, ``1 + run`` chunks from the slot ``start`` (wrapping in the
    job's region); ``resent``: a resend's (RESULT_RESENT) one chunk, emitted again with RESENT;
    ``own``: the first chunk's rows are its completing contribution's own store responses (a
    release's first part or an on-completion completion; not a long run's second part, not a
    resend), not read."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"job": (jobs - 1).bit_length(), "start": sb, "run": sb, "resent": 1, "own": 1})


class RecordReleaseQueue(wiring.Component):
    """``depth`` entries (module docstring). In: ``push`` with ``item``. Out: the stream ``m``
    (the oldest entry, from flip-flops), ``room``, ``level``, ``pushed``, ``waits``, ``error``."""

    def __init__(self, *, slots: int, jobs: int, depth: int) -> None:
        if not RESERVE <= depth <= 4096:
            raise ValueError(f"release queue depth must be {RESERVE}..4096, got {depth}")
        self.depth = depth
        self.item_layout = release_item_layout(slots, jobs)
        super().__init__({"push": In(1), "item": In(self.item_layout), "m": Out(stream.Signature(self.item_layout)),
                          "room": Out(1), "level": Out(range(depth + 1)), "pushed": Out(COUNTER_BITS),
                          "waits": Out(COUNTER_BITS), "error": Out(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.fifo = q = RegisteredFIFO(self.item_layout, self.depth)
        # ``room`` from a flip-flop (the record path's ready chains, docs/large_slots.md): the
        # level a cycle ago and that cycle's push, which bound the level now (one push a cycle at
        # most), so ``room`` still implies ``RESERVE`` free entries; a cycle late only after a pop
        room_r = Signal(init=1)
        m.d.sync += room_r.eq(q.level + self.push <= self.depth - RESERVE)
        m.d.comb += [q.w_data.eq(self.item), q.w_en.eq(self.push), self.level.eq(q.level), self.room.eq(room_r)]
        wiring.connect(m, q.m, wiring.flipped(self.m))
        with m.If(self.push):
            m.d.sync += self.pushed.eq(self.pushed + 1)
            with m.If(~q.w_rdy):
                m.d.sync += self.error.eq(1)
        with m.If(~self.room):
            m.d.sync += self.waits.eq(self.waits + 1)
        return m
