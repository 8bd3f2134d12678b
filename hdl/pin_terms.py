"""Pinning, out of ``Reducer.elaborate`` (issue 16 item 6; docs/reducer.md, "Pinning"): a
queued or emitting result holds its slots' data, so a contribution that would start a new chunk
in one of them waits. ``pin_terms`` is the chunk-distance form (every S with ``pending="words"``,
S > ``Reducer.RUN_TABLE_MAX_SLOTS`` otherwise; the per-slot masks take its place below that);
``chunk_key`` is the (job, chunk) pair that tells two beats of the same chunk from two chunks on
one slot.

Functions that build their logic into the caller's module, not components: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed). ``PinCheck`` wraps ``pin_terms`` for the unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Cat, Module, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .params import check_core_params
from .reducer_layouts import bits_for, release_entry_layout

__all__ = ["PinCheck", "chunk_key", "emitter_pin_layout", "pin_terms"]


def emitter_pin_layout(jobs: int, slots: int) -> data.StructLayout:
    """What the emitter holds (``ResultEmitter``'s ports of these names): the result it is
    emitting (``busy``, ``job``, ``chunk``) and the rest of its entry's run (``rest_left``
    chunks from ``rest_chunk`` of ``rest_job``)."""
    return data.StructLayout({"busy": 1, "job": bits_for(jobs), "chunk": 32, "rest_job": bits_for(jobs),
                              "rest_chunk": 32, "rest_left": (slots - 1).bit_length() + 1})


def pin_terms(job: Value, chunk: Value, wm: Value, *, entries: Sequence[data.View], occupied: Value,
              push_now: Value, entry: data.View, emit: object) -> list[Value]:
    """One term per holder of chunk ``chunk``'s slot in job ``job`` (``wm``: window - 1, its
    width the slot index's): each occupied queue entry (``release_entry_layout``: its chunk and
    the ``more`` chunks of its run), the entry stage 2 pushes now (``push_now``, ``entry``), the
    emitter's result and the rest of its run (``emit``: ``emitter_pin_layout``'s fields)."""
    sb = len(wm)
    terms = []
    for i, e in enumerate(entries):
        terms.append(occupied[i] & (e.job == job)
                     & (((chunk[:sb] - e.chunk[:sb]) & wm) <= e.more))
    terms.append(push_now & (entry.job == job)
                 & (((chunk[:sb] - entry.chunk[:sb]) & wm) <= entry.more))
    terms.append(emit.busy & (emit.job == job) & (((chunk[:sb] - emit.chunk[:sb]) & wm) == 0))
    terms.append((emit.rest_job == job) & (((chunk[:sb] - emit.rest_chunk[:sb]) & wm) < emit.rest_left))
    return terms


def chunk_key(hdr: data.View, job_bits: int) -> Value:
    """A beat's (job, chunk) of its header (``AggHeaderLayout``), one value to compare."""
    return Cat(hdr.job_id[:job_bits], hdr.chunk)


class PinCheck(wiring.Component):
    """``pin_terms`` as a component (the unit tests): ``job``, ``chunk``, ``wmask``, the queue's
    ``entries`` and ``occupied`` bits, stage 2's ``push_now`` and ``entry``, the ``emit`` state
    in; ``pinned`` (any term) out. Combinational."""

    def __init__(self, *, slots: int, jobs: int, depth: int) -> None:
        check_core_params(slots=slots, jobs=jobs)
        el = release_entry_layout(jobs, slots)
        super().__init__({
            "job": In(bits_for(jobs)), "chunk": In(32), "wmask": In((slots - 1).bit_length()),
            "entries": In(data.ArrayLayout(el, depth)), "occupied": In(depth), "push_now": In(1),
            "entry": In(el), "emit": In(emitter_pin_layout(jobs, slots)), "pinned": Out(1),
        })
        self.depth = depth

    def elaborate(self, platform: object) -> Module:
        m = Module()
        terms = pin_terms(self.job, self.chunk, self.wmask, entries=[self.entries[i] for i in range(self.depth)],
                          occupied=self.occupied, push_now=self.push_now, entry=self.entry, emit=self.emit)
        m.d.comb += self.pinned.eq(Cat(*terms).any())
        return m
