"""The window reset on the record store (issue 16, large S step 4; docs/large_slots.md, "Window
reset"): FREE written into the job's region as record WRITEs through the record engine, and the
region's pending words and the job's head reset by ``DecisionState``'s ``reset`` stream.

A window reset (``reset``: job, new head chunk) of a job with region (base, log2_window) goes:

1. **Stop** (``stop``, combinational from ``reset.valid``, so no command is accepted in the
   cycle it arrives): the owner's commands (every job's contributions: they are one stream in
   message order) do not enter the engine until the reset is taken.
2. **Drain**: wait until every command already in the engine has answered (``in_flight``, the
   engine's ``cmd`` handshakes less its ``rsp`` handshakes, is 0). Then each earlier command has
   passed C2 and its effect is written: none of them can be decided against the new state.
3. **Sweep**: the 2**lw record WRITEs of a FREE record (``record_layout``'s tag state FREE,
   every other bit 0) to slots base, base + 1, ... (wrapping at S), ``more`` set but on the
   last, so the engine's write coalescer makes them long bursts; at the same time the reset goes
   to the state (``state_reset``), which holds C0 while it CLEARs the region's pending words and
   writes the head. The WRITEs have no effect on the state (the decision's effect is an ADD's).
4. **Done**: once every WRITE is accepted and the state took its reset, ``reset.ready`` (one
   cycle) and the owner's commands flow again. They enter the engine after the WRITEs, so the
   engine's in-order completion and its forwarding give each of them the FREE record of its
   slot (the WRITE's row, forwarded or read after the WRITE's B), and they reach C2 after the
   state's reset: the cleared pending bits and the new head.

Held: every job's commands, from the reset's arrival until it is taken: the engine's drain (its
read and write-response latency behind the last earlier command, and the owner taking their
responses) plus max(2**lw WRITEs at one a cycle, the state's CLEAR at one pending word a
cycle) plus 2 cycles. The reducer's own window reset stops and drains its whole pipeline too.

The WRITEs' responses are the sweep's: ``owns`` is set while the response at the engine's
output is one (``pending`` counts them: they come right after the drained commands' and before
any later one's), and the owner drops them (they are not decisions). A reset arriving while one
runs waits (the stream takes one at a time). Counters: ``sweeps`` (resets taken),
``records_freed`` (WRITEs accepted).
"""

from __future__ import annotations

from amaranth.hdl import Module, ShapeLike, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .decision_state import region_layout
from .layouts import ResetLayout
from .params import check_core_params, check_large_slots
from .payload_gate import COUNTER_BITS
from .reducer_config import select_job_entry
from .reducer_layouts import FREE, RECORD_BITS, record_layout
from .slot_store_signature import Op, cmd_layout
from .stage_room import nonzero_next

__all__ = ["FreeSweep"]

IN_FLIGHT_BITS = 16  # the engine's accepted commands not yet answered: its table + FIFOs, far below 2**16


class FreeSweep(wiring.Component):
    """The window reset as record WRITEs (module docstring). ``slots`` S, ``jobs`` J,
    ``row_width`` (the record engine's row), ``side_shape`` (its commands' side; the WRITEs' is 0).

    In: ``reset`` (stream, ``ResetLayout``), ``region`` (per job, ``region_layout``),
    ``cmd_fire`` / ``rsp_fire`` (every handshake on the engine's ``cmd`` / ``rsp``). Out: ``cmd``
    (stream, the engine's command layout: the WRITEs), ``state_reset`` (stream, to
    ``DecisionState.reset``), ``stop`` (the owner's commands wait), ``owns`` (the engine's
    response now is a WRITE's: drop it), ``sweeps``, ``records_freed``.
    """

    def __init__(self, *, slots: int, jobs: int, row_width: int = RECORD_BITS,
                 side_shape: ShapeLike | None = None) -> None:
        check_large_slots(slots)
        check_core_params(jobs=jobs)
        self.slots, self.jobs = slots, jobs
        self.slot_bits = (slots - 1).bit_length()
        self.record = record_layout(jobs, row_width)
        self.cmd_layout = cmd_layout(row_width, self.slot_bits, side_shape=side_shape)
        super().__init__({
            "reset": In(stream.Signature(ResetLayout(jobs))),
            "region": In(data.ArrayLayout(region_layout(slots), jobs)),
            "cmd_fire": In(1), "rsp_fire": In(1),
            "cmd": Out(stream.Signature(self.cmd_layout)),
            "state_reset": Out(stream.Signature(ResetLayout(jobs))),
            "stop": Out(1), "owns": Out(1),
            "sweeps": Out(COUNTER_BITS), "records_freed": Out(COUNTER_BITS),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb = self.slot_bits
        in_flight, pending = Signal(IN_FLIGHT_BITS), Signal(IN_FLIGHT_BITS)
        base, last, idx = Signal(sb), Signal(sb), Signal(sb)
        written, state_done = Signal(), Signal()
        m.d.sync += in_flight.eq(in_flight + self.cmd_fire - self.rsp_fire)
        # ``owns`` (== ``pending != 0``) a flip-flop (issue 16 round 7): the 16-bit compare reaches
        # no response handshake (the owner FIFO's head, the engine's ``inflight``)
        owns = Signal(name="owns_r")
        inc, dec = self.cmd.valid & self.cmd.ready, self.rsp_fire & owns
        m.d.comb += self.owns.eq(owns)
        m.d.sync += [pending.eq(pending + inc - dec), owns.eq(nonzero_next(pending, inc=inc, dec=dec))]

        free = Signal(self.record)  # a FREE record: the tag's state FREE, every other bit 0
        m.d.comb += free.tag.state.eq(FREE)
        c = self.cmd.payload
        m.d.comb += [c.op.eq(Op.WRITE), c.row.eq((base + idx)[:sb]), c.data.eq(free), c.more.eq(idx != last),
                     self.state_reset.payload.eq(self.reset.payload)]
        region = select_job_entry(m, self.region, self.jobs, self.reset.payload.job, "reset_region")

        m.d.comb += self.stop.eq(self.reset.valid)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.reset.valid):
                    m.d.sync += [base.eq(region.base), last.eq((1 << region.log2_window) - 1), idx.eq(0), written.eq(0),
                                 state_done.eq(0)]
                    m.next = "DRAIN"
            with m.State("DRAIN"):  # every earlier command answered: its effect is written
                with m.If(in_flight == 0):
                    m.next = "SWEEP"
            with m.State("SWEEP"):  # the WRITEs in slot order, and the state's reset
                m.d.comb += [self.cmd.valid.eq(~written), self.state_reset.valid.eq(~state_done)]
                with m.If(self.cmd.ready & ~written):
                    m.d.sync += [idx.eq(idx + 1), self.records_freed.eq(self.records_freed + 1)]
                    with m.If(idx == last):
                        m.d.sync += written.eq(1)
                with m.If(self.state_reset.ready):
                    m.d.sync += state_done.eq(1)
                with m.If(written & state_done):
                    m.d.comb += self.reset.ready.eq(1)
                    m.d.sync += self.sweeps.eq(self.sweeps + 1)
                    m.next = "IDLE"
        return m
