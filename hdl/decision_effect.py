"""The decision's effect on the pending bits and the heads, a cycle late, out of
``Reducer.elaborate`` (issue 16 item 6; docs/reducer.md, "Parts built inline"): the registers
``fx_*`` (the last decision completed a chunk in order at its job's head, ``fx_c``: release its
run and move the head to chunk + 1 + run; or behind it, ``fx_s``: set its pending bit), their
inverted copies for the wide fan-out, the pending bits with the effect applied (``pend_eff``),
the head checks a cycle ahead against the heads as they will be (``hc_r``, the new head
forwarded) and the head update itself.

Functions that build their logic into the caller's module, not a component: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed); the reducer calls each where its statements were, with its signal
names. ``DecisionEffect`` wraps them for the unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .head_check import head_checks
from .params import check_core_params
from .pending_effect import pending_effect
from .reducer_layouts import HeadChecks, bits_for

__all__ = ["DecisionEffect", "effect_layout", "effect_registers", "head_check_registers", "load_effect",
           "pending_with_effect", "update_heads"]


def effect_registers(*, slots: int, job_bits: int, vectors: bool, hi1: bool = False) -> SimpleNamespace:
    """The effect's registers, named as the reducer's: ``fx_c`` / ``fx_s`` and their inverted
    copies ``fxw_cn`` / ``fxw_sn`` (yosys merges identical flip-flops; the copies drive the S
    pending bits and the heads, ``fx_c`` / ``fx_s`` stay next to the decision loop; copy_error
    checks them), ``fx_job``, ``fx_run`` (chunks released after the completing one), ``fx_cp1``
    (its chunk + 1), ``fx_hn`` (the new head, cp1 + run), ``run_lt`` / ``run_ltw`` / ``run_eq``
    (the low bits of delta1 / deltaw1 against that run); with ``vectors`` ``fx_clr`` (the run's
    slots) and ``fx_set`` (its slot, one-hot); with ``hi1`` (DRAM) ``fx_hi1``: fx_cp1's bits above the
    run's plus 1, loaded with it (``head_check_registers``' forwarded equality; copy_error checks
    it), and ``fx_lo`` (session 48): fx_cp1's bits of the run's width plus fx_run (sb + 1 bits:
    the new head's low bits and the carry into fx_cp1's upper bits), loaded with them (the same
    equality as one chain, ``eq_hn_reg``; copy_error checks it), else None."""
    sb = (slots - 1).bit_length()
    fx = SimpleNamespace(
        fx_c=Signal(name="fx_c"), fx_s=Signal(name="fx_s"),
        fxw_cn=Signal(init=1, name="fxw_cn"), fxw_sn=Signal(init=1, name="fxw_sn"),
        fx_job=Signal(job_bits, name="fx_job"), fx_run=Signal(sb, name="fx_run"), fx_cp1=Signal(32, name="fx_cp1"),
        fx_hn=Signal(32, name="fx_hn"),
        # unnamed ("$signal"), as in the pinned netlist (tests/test_default_rtl.py)
        run_lt=Signal(name="$signal"), run_ltw=Signal(name="$signal"), run_eq=Signal(name="$signal"),
    )
    if vectors:
        fx.fx_clr, fx.fx_set = Signal(slots, name="fx_clr"), Signal(slots, name="fx_set")
    fx.fx_hi1 = Signal(32 - sb, init=1, name="fx_hi1") if hi1 else None  # == fx_cp1[sb:] + 1 (init 0 + 1)
    fx.fx_lo = Signal(sb + 1, name="fx_lo") if hi1 else None  # == fx_cp1[:sb] + fx_run (init 0 + 0)
    return fx


def pending_with_effect(m: Module, fx: SimpleNamespace, pending: Value) -> Value:
    """``pend_eff``: the S pending bits with the last decision's effect applied (its run's bits
    cleared, or its slot's set; hdl/pending_effect.py)."""
    pend_eff = Signal(len(pending), name="pend_eff")
    m.d.comb += pend_eff.eq(pending_effect(pending, Mux(fx.fxw_cn, 0, fx.fx_clr), Mux(fx.fxw_sn, 0, fx.fx_set)))
    return pend_eff


def head_check_registers(m: Module, fx: SimpleNamespace, heads: Sequence[Value], *, adv: Value, job0: Value,
                         chunk0: Value, cw0: Value, job1: Value, chunk1: Value, cw1: Value,
                         per_job: bool = False, carry_eq: bool = False, hold: Value | None = None) -> Value:
    """``hc_r``: the head checks (``HeadChecks``, hdl/head_check.py) of the beat stage 1 holds next
    cycle (stage 0's ``job0`` / ``chunk0`` / ``cw0`` if it advances, else its own), a cycle ahead,
    against the heads as they will be then: the register, or the last decision's new head
    ``fx_hn`` forwarded (``fx_c`` at the same job). ``per_job``: ``head_checks``' (the job
    chooses the compares' results, not the head); ``carry_eq``: ``head_checks``' (the equalities
    as carry chains). ``hold`` (DRAM): a flip-flop equal to ``~adv`` every cycle (the reducer's
    ``hold_t``, checked by ``copy_error``) chooses between the two beats' checks instead of
    ``adv``, whose net (hundreds of loads) then is not on ``hc_r``'s paths; the same value every
    cycle, so the same ``hc_r``. With ``fx.fx_hi1`` (and ``carry_eq``) the forwarded equality
    compares the bits above the run's against fx_cp1's and ``fx_hi1`` (``eq_hn_split``), the run
    only in the low bits' sum; with ``fx.fx_lo`` too, that sum from the register (``eq_hn_reg``:
    one chain) and, with two jobs, the own head's equality one chain against the head the job
    selects (``head_checks``' ``hn_lo``)."""
    m.d.comb += fx.fx_hn.eq(fx.fx_cp1 + fx.fx_run)
    hi1 = getattr(fx, "fx_hi1", None) if carry_eq else None
    hn_lo = getattr(fx, "fx_lo", None) if hi1 is not None else None
    hc_r = Signal(HeadChecks, name="hc_r")
    fx_hc = (~fx.fxw_cn, fx.fx_job, fx.fx_cp1, fx.fx_run)
    hc0 = head_checks(m, job0, chunk0, cw0, heads, *fx_hc, per_job=per_job, carry_eq=carry_eq, hi1=hi1, hn_lo=hn_lo)
    hc1 = head_checks(m, job1, chunk1, cw1, heads, *fx_hc, per_job=per_job, carry_eq=carry_eq, hi1=hi1, hn_lo=hn_lo)
    m.d.sync += hc_r.eq(Mux(adv, hc0, hc1) if hold is None else Mux(hold, hc1, hc0))
    return hc_r


def load_effect(m: Module, fx: SimpleNamespace, *, decide: Value, in_order: Value, fxc_n: Value, fxs_n: Value,
                job: Value, run: Value, chunk_p1: Value, adv: Value, delta_n: Value, delta1: Value, deltaw_n: Value,
                deltaw1: Value, clr: Value | None = None, oh1: Value | None = None) -> None:
    """Register the decision made now (``decide``, in order): ``fx_c`` / ``fx_s`` from the table's
    ``fxc_n`` / ``fxs_n``, their copies, its ``job``, ``run``, ``chunk_p1`` (with ``vectors``:
    ``clr``, ``oh1``); and ``run_lt`` / ``run_ltw`` / ``run_eq``, the low bits of delta1 / deltaw1
    as they will be next cycle (``delta_n`` if stage 1 advances) against this run."""
    sb = len(fx.fx_run)
    m.d.sync += [
        fx.fx_c.eq(decide & in_order & fxc_n),
        fx.fx_s.eq(decide & in_order & fxs_n),
        fx.fxw_cn.eq(~(decide & in_order & fxc_n)),
        fx.fxw_sn.eq(~(decide & in_order & fxs_n)),
        fx.fx_job.eq(job), fx.fx_run.eq(run), fx.fx_cp1.eq(chunk_p1),
        # delta1 / deltaw1 low bits as they will be next cycle, against this run
        fx.run_lt.eq(Mux(adv, delta_n[:sb], delta1[:sb]) < run),
        fx.run_ltw.eq(Mux(adv, deltaw_n[:sb], deltaw1[:sb]) < run),
        fx.run_eq.eq(Mux(adv, delta_n[:sb], delta1[:sb]) == run),
        *([fx.fx_clr.eq(clr), fx.fx_set.eq(oh1)] if clr is not None else []),
    ]
    if getattr(fx, "fx_hi1", None) is not None:  # fx_cp1[sb:] + 1, loaded with fx_cp1
        m.d.sync += fx.fx_hi1.eq(chunk_p1[sb:] + 1)
    if getattr(fx, "fx_lo", None) is not None:  # fx_cp1[:sb] + fx_run, loaded with them
        m.d.sync += fx.fx_lo.eq(chunk_p1[:sb] + run)


def update_heads(m: Module, fx: SimpleNamespace, heads: Sequence[Value]) -> None:
    """The last decision completed at its job's head (``fxw_cn`` low): that head becomes
    ``fx_hn``."""
    with m.If(~fx.fxw_cn):
        for j in range(len(heads)):
            with m.If(fx.fx_job == j):
                m.d.sync += heads[j].eq(fx.fx_hn)


def effect_layout(slots: int, job_bits: int) -> data.StructLayout:
    """The effect's registers (``effect_registers``, with ``vectors``), by name."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"fx_c": 1, "fx_s": 1, "fxw_cn": 1, "fxw_sn": 1, "fx_job": job_bits, "fx_run": sb,
                              "fx_cp1": 32, "fx_hn": 32, "run_lt": 1, "run_ltw": 1, "run_eq": 1, "fx_clr": slots,
                              "fx_set": slots})


class DecisionEffect(wiring.Component):
    """The five as one component (the unit tests): the decision (``decide``, ``in_order``,
    ``fxc_n``, ``fxs_n``, ``job``, ``run``, ``chunk_p1``, ``clr``, ``oh1``), stage 1's deltas
    (``adv``, ``delta_n``, ``delta1``, ``deltaw_n``, ``deltaw1``), the pending bits and the two
    beats' ``job`` / ``chunk`` / ``cw`` (``beat0``, ``beat1``) in; ``fx`` (``effect_layout``),
    ``pend_eff``, ``heads`` (the registers, zero at start) and ``hc`` (``hc_r``) out. ``hold_copy``:
    ``hc_r`` chooses by the input ``hold`` (``head_check_registers``' ``hold``, driven ``~adv``).
    ``dram``: the DRAM reducer's head checks (``per_job``, ``carry_eq``, the registers ``fx_hi1``
    and ``fx_lo``)."""

    def __init__(self, *, slots: int, jobs: int, hold_copy: bool = False, dram: bool = False) -> None:
        check_core_params(slots=slots, jobs=jobs)
        self.slots, self.jobs, self.hold_copy, self.dram = slots, jobs, hold_copy, dram
        jb, sb = bits_for(jobs), (slots - 1).bit_length()
        beat = data.StructLayout({"job": jb, "chunk": 32, "cw": 32})
        super().__init__({
            "decide": In(1), "in_order": In(1), "fxc_n": In(1), "fxs_n": In(1), "job": In(jb), "run": In(sb),
            "chunk_p1": In(32), "clr": In(slots), "oh1": In(slots), "adv": In(1), "delta_n": In(32),
            "delta1": In(32), "deltaw_n": In(32), "deltaw1": In(32), "pending": In(slots), "beat0": In(beat),
            "beat1": In(beat),
            "fx": Out(effect_layout(slots, jb)), "pend_eff": Out(slots), "heads": Out(32).array(jobs),
            "hc": Out(HeadChecks), **({"hold": In(1)} if hold_copy else {}),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        fx = effect_registers(slots=self.slots, job_bits=bits_for(self.jobs), vectors=True, hi1=self.dram)
        heads = [Signal(32, name=f"head{j}") for j in range(self.jobs)]
        pend_eff = pending_with_effect(m, fx, self.pending)
        b0, b1 = self.beat0, self.beat1
        hc_r = head_check_registers(m, fx, heads, adv=self.adv, job0=b0.job, chunk0=b0.chunk, cw0=b0.cw, job1=b1.job,
                                    chunk1=b1.chunk, cw1=b1.cw, hold=self.hold if self.hold_copy else None,
                                    per_job=self.dram, carry_eq=self.dram)
        load_effect(m, fx, decide=self.decide, in_order=self.in_order, fxc_n=self.fxc_n, fxs_n=self.fxs_n,
                    job=self.job, run=self.run, chunk_p1=self.chunk_p1, adv=self.adv, delta_n=self.delta_n,
                    delta1=self.delta1, deltaw_n=self.deltaw_n, deltaw1=self.deltaw1, clr=self.clr, oh1=self.oh1)
        update_heads(m, fx, heads)
        m.d.comb += [getattr(self.fx, n).eq(getattr(fx, n)) for n in self.fx.shape().members]
        m.d.comb += [self.pend_eff.eq(pend_eff), self.hc.eq(hc_r), *[self.heads[j].eq(heads[j]) for j in range(self.jobs)]]
        return m
