"""A window reset's effect on the reducer's own state, out of ``Reducer.elaborate`` (issue 16
item 6; docs/reducer.md, "Parts built inline"): when the reset may start (the reducer drained),
the heads it loads, and the pending bits' next value (the last decision's effect, or the region
the reset clears) with stage 1's pending-bit inputs registered a cycle ahead from it.

``WindowReset`` (hdl/window_reset.py) sequences the reset; these functions are what the reducer
does with it. They build their logic into the caller's module, not a component: a component
boundary would add ports and a hierarchy level to the reducer's RTLIL, which
tests/test_default_rtl.py pins (the netlist being placed); the reducer calls each where its
statements were. ``WindowResetEffect`` wraps them for the unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .params import check_core_params

__all__ = ["WindowResetEffect", "drain_layout", "pending_next", "reset_drained", "reset_heads",
           "stage1_pending_layout"]


def reset_drained(*, empty: Value, v1: Value, v2: Value, q_count: Value, emit_busy: Value, rest_left: Value,
                  store_idle: Value) -> Value:
    """Nothing of a message is left in the reducer: input stages ``empty``, stages 1 and 2
    (``v1``, ``v2``) empty, no release entry queued (``q_count``), the emitter neither busy nor
    holding a rest (``rest_left``), the slot store's command port ``store_idle``. A window reset
    frees the region's tags only then, so no result in flight reads a freed slot."""
    return empty & ~v1 & ~v2 & (q_count == 0) & ~emit_busy & (rest_left == 0) & store_idle


def reset_heads(m: Module, heads: Sequence[Value], *, valid: Value, job: Value, head: Value) -> None:
    """A reset request (``valid``) sets job ``job``'s head register to ``head`` (synchronous;
    written after the decision's head update, so the reset wins)."""
    with m.If(valid):
        for j in range(len(heads)):
            with m.If(job == j):
                m.d.sync += heads[j].eq(head)


def pending_next(m: Module, pending: Value, pend_eff: Value, *, clear: Value, clear_slot: Value, clr: Value,
                 adv: Value, slot0: Value, slot1: Value, pre_p: Value, cclr_p: Value, sset_p: Value,
                 clear_apart: bool = False) -> None:
    """Register the S pending bits: ``pend_eff`` (the last decision's effect applied) without the
    slot a reset frees this cycle (``clear`` at ``clear_slot``); and, for the slot stage 1 holds
    next cycle (stage 0's ``slot0`` if it advances, else its own ``slot1``), that bit
    (``pre_p``), whether the decision made now would clear it (its slot is in the release run
    ``clr``: ``cclr_p``) or set it (it is stage 1's own slot: ``sset_p``). ``clear_apart``
    (above ``SLOT_REGISTER_MAX_SLOTS``, hdl/window_reset.py): ``pre_p`` selects from ``pend_eff``
    and drops the reset's slot by a compare with the selected slot after the select, the same
    bit, so the S-bit clear mask is not in front of the S:1 select."""
    rst_clr = Mux(clear, Const(1, len(pending)) << clear_slot, 0)
    m.d.sync += pending.eq(pend_eff & ~rst_clr)
    slot_n1 = Mux(adv, slot0, slot1)  # the slot in stage 1 next cycle
    if clear_apart:  # (pend_eff & ~rst_clr)[slot_n1] == pend_eff[slot_n1] & ~rst_clr[slot_n1]
        pre = pend_eff.bit_select(slot_n1, 1) & ~(clear & (clear_slot == slot_n1))
    else:
        pre = (pend_eff & ~rst_clr).bit_select(slot_n1, 1)
    m.d.sync += [pre_p.eq(pre),
                 cclr_p.eq(clr.bit_select(slot_n1, 1)), sset_p.eq(slot_n1 == slot1)]


def drain_layout(slot_bits: int, count_bits: int) -> data.StructLayout:
    """``reset_drained``'s inputs, by name (``q_count`` / ``rest_left``: ``count_bits`` and
    ``slot_bits`` wide)."""
    return data.StructLayout({"empty": 1, "v1": 1, "v2": 1, "q_count": count_bits, "emit_busy": 1,
                              "rest_left": slot_bits, "store_idle": 1})


def stage1_pending_layout() -> data.StructLayout:
    """Stage 1's pending-bit inputs registered a cycle ahead (``pending_next``)."""
    return data.StructLayout({"pre": 1, "cclr": 1, "sset": 1})


class WindowResetEffect(wiring.Component):
    """The three as one component (the unit tests): ``drain`` (``drain_layout``) in, ``drained``
    out; a reset request (``reset_valid``, ``reset_job``, ``reset_head``) loads ``heads``; the
    pending bits (``pending``, registered from ``pend_eff``, ``clear`` / ``clear_slot``) and
    ``stage1`` (``stage1_pending_layout``) for ``slot0`` / ``slot1`` / ``adv`` and ``clr``
    (``clear_apart``: ``pending_next``'s)."""

    def __init__(self, *, slots: int, jobs: int, count_bits: int = 4, clear_apart: bool = False) -> None:
        check_core_params(slots=slots, jobs=jobs)
        if not 1 <= count_bits <= 16:
            raise ValueError(f"count_bits must be 1..16, got {count_bits}")
        self.slots, self.jobs, self.clear_apart = slots, jobs, clear_apart
        sb = max(1, (slots - 1).bit_length())
        super().__init__({
            "drain": In(drain_layout(sb, count_bits)), "drained": Out(1),
            "reset_valid": In(1), "reset_job": In(max(1, (jobs - 1).bit_length())), "reset_head": In(32),
            "heads": Out(32).array(jobs),
            "pend_eff": In(slots), "clear": In(1), "clear_slot": In(sb), "clr": In(slots), "adv": In(1),
            "slot0": In(sb), "slot1": In(sb), "pending": Out(slots), "stage1": Out(stage1_pending_layout()),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        d = self.drain
        m.d.comb += self.drained.eq(reset_drained(empty=d.empty, v1=d.v1, v2=d.v2, q_count=d.q_count,
                                                  emit_busy=d.emit_busy, rest_left=d.rest_left,
                                                  store_idle=d.store_idle))
        heads = [Signal(32, name=f"head{j}") for j in range(self.jobs)]
        m.d.comb += [self.heads[j].eq(heads[j]) for j in range(self.jobs)]
        reset_heads(m, heads, valid=self.reset_valid, job=self.reset_job, head=self.reset_head)
        pending = Signal(self.slots)
        pre_p, cclr_p, sset_p = Signal(name="pre_p"), Signal(name="cclr_p"), Signal(name="sset_p")
        m.d.comb += [self.pending.eq(pending), self.stage1.pre.eq(pre_p), self.stage1.cclr.eq(cclr_p),
                     self.stage1.sset.eq(sset_p)]
        pending_next(m, pending, self.pend_eff, clear=self.clear, clear_slot=self.clear_slot, clr=self.clr,
                     adv=self.adv, slot0=self.slot0, slot1=self.slot1, pre_p=pre_p, cclr_p=cclr_p, sset_p=sset_p,
                     clear_apart=self.clear_apart)
        return m
