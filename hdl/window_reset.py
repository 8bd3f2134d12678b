"""The reducer's window-reset engine (docs/reducer.md, "Window reset").

A ``reset`` transfer (job, new head) closes the input at the end of the current message
(``in_msg``: it never splits one), waits until the pipeline has drained (``drained``: input
stages, stages 1 and 2, the release queue and the emitter empty; registered, so a cycle late),
registers the job's base and
region size, then writes FREE into the region's 2**log2_window tags, one per cycle (``clear``
with ``slot``; the reducer writes them through its tag-write register and clears their
``pending`` bits), and finally raises ``reset.ready`` for one cycle, in which the reducer sets
the job's head to ``reset.payload.head``.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import JobCfgLayout, ResetLayout
from .reducer_config import select_job_entry

__all__ = ["SLOT_REGISTER_MAX_SLOTS", "WindowReset"]

# Up to this many slots (the default core's 16, pinned) ``slot`` is ``base + idx`` after the
# registers; above it ``WindowReset(slot_register=True)`` keeps the slot in a register of its own
# (loaded with the base, counted up with ``idx``), so the reducer's clear mask and its stage-1
# pending bit start from flip-flops: at S 128 ``idx`` -> that adder -> the 128-bit clear mask ->
# the 128:1 select into ``pre_p`` was 12.15 ns placed (docs/benchmarks.md, session 38).
SLOT_REGISTER_MAX_SLOTS = 16


class WindowReset(wiring.Component):
    """Window-reset engine (see the module docstring). ``stop``: ``s_msg`` must not move.
    ``slot_register``: ``slot`` from a register of its own (``SLOT_REGISTER_MAX_SLOTS``), the
    same value in every cycle."""

    def __init__(self, *, slots: int, jobs: int, slot_register: bool = False) -> None:
        self.slots, self.jobs, self.slot_register = slots, jobs, slot_register
        sb = (slots - 1).bit_length()
        self.slot_bits = sb
        super().__init__({
            "reset": In(stream.Signature(ResetLayout(jobs))),
            "job_cfg": In(data.ArrayLayout(JobCfgLayout, jobs)),
            "in_msg": In(1),
            "drained": In(1),
            "stop": Out(1),
            "clear": Out(1),
            "slot": Out(sb),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb = self.slot_bits
        busy = Signal()  # clearing the region
        idx = Signal(sb + 1)
        # reset.valid through a register (cleared on the ready pulse); a window reset stops
        # s_msg at the next message boundary, then waits for everything accepted to drain
        req = Signal()
        m.d.sync += req.eq(self.reset.valid & ~self.reset.ready)
        block = req & ~self.in_msg
        m.d.comb += self.stop.eq(block | busy)
        # The job's base and region size are registered when the engine starts; ``clear`` (a
        # flip-flop) marks the cycles that write FREE into one slot of the region each.
        cfg = select_job_entry(m, self.job_cfg, self.jobs, self.reset.payload.job, "cfg_rst")
        base = Signal(sb)
        last = Signal(sb + 1)  # region size - 1
        if self.slot_register:  # == (base + idx[:sb])[:sb] in every cycle, kept as a register
            slot_r = Signal(sb, name="slot_r")
            m.d.comb += self.slot.eq(slot_r)
        else:
            m.d.comb += self.slot.eq((base + idx[:sb])[:sb])
        m.d.comb += self.reset.ready.eq(0)
        # ``drained`` registered (it gathers the whole pipeline's state): taken only while the
        # input was already closed a cycle ago, so nothing can have entered since
        drained_r = Signal()
        m.d.sync += drained_r.eq(block & self.drained)
        with m.If(~busy):
            with m.If(block & drained_r):
                lw = Mux(cfg.log2_window > sb, sb, cfg.log2_window)
                m.d.sync += [busy.eq(1), self.clear.eq(1), idx.eq(0), base.eq(cfg.base[:sb]),
                             last.eq((Const(1, sb + 1) << lw) - 1)]
                if self.slot_register:
                    m.d.sync += slot_r.eq(cfg.base[:sb])
        with m.Elif(self.clear):
            m.d.sync += idx.eq(idx + 1)
            if self.slot_register:
                m.d.sync += slot_r.eq(slot_r + 1)
            with m.If(idx == last):
                m.d.sync += self.clear.eq(0)
        with m.Else():
            m.d.comb += self.reset.ready.eq(1)
            m.d.sync += busy.eq(0)
        return m
