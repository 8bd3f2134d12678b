"""The reducer's side of ``PendingWords`` (``pending="words"``, docs/reducer.md "Pending words"):
which operation goes on the words' one port each cycle, and the PEEK's answer kept for stage 1.

One port, in this order of priority:

* the window reset's ``CLEAR`` of the job's region, in the first cycle its engine clears;
* the decision's ``SET`` (it completed its chunk behind the head: ``fxs_n``) or ``RELEASE`` (it
  completed at the head in order: ``fxc_n``; clears the run its PEEK found);
* the ``PEEK`` for the first beat stage 1 holds next cycle, unless that beat's PEEK is out or
  answered already (stage 1 holds with it).

Stage 1 may advance (``gate``) unless it holds a first beat whose PEEK has not been answered;
``run`` is that answer (kept in ``run_pk`` while stage 1 holds). ``error`` (the reducer ORs it
into ``copy_error``) rises if the reset's or the decision's operation is not taken when made,
if a RELEASE clears another run than its PEEK found, or if a decision follows one that changed
a pending bit in the cycle before (its operation took the port from the PEEK).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .pending_words import PendingOp, pending_op_layout
from .reducer_config import select_job_entry

__all__ = ["PendingControl"]


class PendingControl(wiring.Component):
    """Operations for ``PendingWords`` from the reducer's decision (module docstring).

    From stage 1 / the decision: ``adv`` (stage 1 takes a beat this cycle), ``take`` (that beat is
    valid), ``v1`` / ``first1`` (stage 1 holds a valid / first beat), ``first_in`` (the incoming
    beat is a first beat), ``job_in`` / ``job1`` (their jobs), ``slot1`` (stage 1's slot),
    ``slot_n1`` (stage 1's slot next cycle), ``decide``, ``in_order``, ``fxc_n`` / ``fxs_n``
    (this decision completes at / behind the head), ``fx_c`` / ``fx_s`` (the last one did).
    From the window reset: ``reset_clear`` (its engine clears), ``reset_job``. ``probe_slot``:
    the probe's slot. Configuration: ``job_base`` and (clamped) ``log2_window`` per job.
    To ``PendingWords``: ``op``, ``rd_slot``; from it ``pw_run`` / ``pw_done``.
    """

    def __init__(self, *, slots: int, jobs: int, job_bits: int) -> None:
        self.slots, self.jobs = slots, jobs
        sb = (slots - 1).bit_length()
        self.slot_bits = sb
        super().__init__({
            **{name: In(1) for name in ("adv", "take", "v1", "first1", "first_in", "decide", "in_order",
                                        "fxc_n", "fxs_n", "fx_c", "fx_s", "reset_clear")},
            "job_in": In(job_bits), "job1": In(job_bits), "reset_job": In(job_bits),
            "slot1": In(sb), "slot_n1": In(sb), "probe_slot": In(sb),
            "job_base": In(data.ArrayLayout(sb, jobs)),
            "log2_window": In(data.ArrayLayout(range(sb + 1), jobs)),
            "op": Out(stream.Signature(pending_op_layout(slots))),
            "rd_slot": Out(data.ArrayLayout(sb, 2)),
            "pw_run": In(sb), "pw_done": In(1),
            "gate": Out(1), "run": Out(sb), "error": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb = self.slot_bits
        pk_wait, pk_have, run_pk = Signal(), Signal(), Signal(sb)  # PEEK out / answered, its run
        pk_now = pk_wait & self.pw_done
        m.d.comb += [self.gate.eq(~(self.v1 & self.first1) | pk_have | pk_now),
                     self.run.eq(Mux(pk_have, run_pk, self.pw_run))]

        def region(job: Value, tag: str) -> tuple[Value, Value]:
            """The job's region: base and (clamped) log2 window."""
            return (select_job_entry(m, self.job_base, self.jobs, job, f"pw_base_{tag}"),
                    select_job_entry(m, self.log2_window, self.jobs, job, f"pw_lw_{tag}"))

        dec_rel = self.decide & self.in_order & self.fxc_n  # fx_c next cycle
        dec_op = dec_rel | (self.decide & self.in_order & self.fxs_n)  # fx_c or fx_s next cycle
        clear_d = Signal()  # the window reset's engine was clearing a cycle ago
        m.d.sync += clear_d.eq(self.reset_clear)
        rst_op = self.reset_clear & ~clear_d
        adv = self.adv
        v1_n, first_n = Mux(adv, self.take, self.v1), Mux(adv, self.first_in, self.first1)  # next cycle
        keep = ~adv & (pk_have | pk_wait)  # stage 1 holds a first beat whose PEEK is out or in
        pk_valid = v1_n & first_n & ~keep & ~dec_op & ~rst_op
        pp = self.op.payload
        m.d.comb += self.op.valid.eq(rst_op | dec_op | pk_valid)
        with m.If(rst_op):
            base, lw = region(self.reset_job, "r")
            m.d.comb += [pp.kind.eq(PendingOp.CLEAR), pp.base.eq(base), pp.log2_window.eq(lw)]
        with m.Elif(dec_op):
            base, lw = region(self.job1, "d")
            m.d.comb += [pp.kind.eq(Mux(dec_rel, PendingOp.RELEASE, PendingOp.SET)), pp.slot.eq(self.slot1),
                         pp.base.eq(base), pp.log2_window.eq(lw)]
        with m.Else():
            base, lw = region(Mux(adv, self.job_in, self.job1), "n")
            m.d.comb += [pp.kind.eq(PendingOp.PEEK), pp.slot.eq(self.slot_n1), pp.base.eq(base),
                         pp.log2_window.eq(lw)]
        m.d.sync += [pk_have.eq(keep & (pk_have | pk_now)),
                     pk_wait.eq(Mux(keep, pk_wait & ~pk_now, pk_valid & self.op.ready))]
        with m.If(~pk_have):
            m.d.sync += run_pk.eq(self.pw_run)
        # the bit ports: stage 1's own pending bit (a cycle ahead), the probe's (with its tag read)
        m.d.comb += [self.rd_slot[0].eq(self.slot_n1), self.rd_slot[1].eq(self.probe_slot)]
        # a RELEASE clears exactly the run its PEEK found (the decision's run, kept until done)
        rel_wait, rel_run = Signal(), Signal(sb)
        with m.If(dec_rel):
            m.d.sync += [rel_wait.eq(1), rel_run.eq(self.run)]
        with m.Elif(self.pw_done):
            m.d.sync += rel_wait.eq(0)
        m.d.comb += self.error.eq(((rst_op | dec_op) & ~self.op.ready)
                                  | (rel_wait & self.pw_done & (self.pw_run != rel_run))
                                  | (self.decide & (self.fx_c | self.fx_s)))
        return m
