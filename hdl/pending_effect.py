"""The previous decision's effect on pending bits, applied one cycle late from registers (out of
``hdl/reducer.py``; issue 16 item 6, docs/reducer.md "The decision as a component").

A decision that completes a chunk in in-order mode either releases a run at its job's head (the
run's pending bits clear: the model's COMPLETE -> RELEASED in ``_maybe_complete``) or completes
behind the head (its own slot's bit sets: COMPLETE). The reducer applies that to the S pending
bits (``pend_eff``) and to stage 1's own bit (``pend1``) with ``pending_effect``, inline (its
RTLIL, pinned by tests/test_default_rtl.py, keeps its hierarchy); ``PendingEffect`` wraps it as a
component for the unit tests and a record engine.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PendingEffect", "pending_effect"]

# which effect the previous decision had (at most one): released a run at the head / set its slot
EffectLayout = data.StructLayout({"clr": 1, "set": 1})


def pending_effect(bits: Value, clr: Value, set_: Value) -> Value:
    """``bits`` with the bits in ``clr`` cleared (a release run) and those in ``set_`` set (the
    decision's own slot): ``(bits & ~clr) | set_``."""
    return (bits & ~clr) | set_


class PendingEffect(wiring.Component):
    """``pending_effect`` as a component: ``bits``, the run ``clr`` and the one-hot slot ``set``
    (each ``width`` bits) and ``effect`` (EffectLayout: which of the two happened) in, ``out``
    out. Combinational."""

    def __init__(self, width: int) -> None:
        if width < 1:
            raise ValueError(f"width must be at least 1, got {width}")
        super().__init__({"bits": In(width), "clr": In(width), "set": In(width), "effect": In(EffectLayout),
                          "out": Out(width)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        e = self.effect
        m.d.comb += self.out.eq(pending_effect(self.bits, Mux(e.clr, self.clr, 0), Mux(e.set, self.set, 0)))
        return m
