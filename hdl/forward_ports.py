"""Pass a wrapped component's members through to the wrapper's own (same name, same signature):
the wrappers that add something around a component (``AxiLatencyHarness``, ``EngineWithState``)
expose most of its ports unchanged."""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Module
from amaranth.lib import wiring

__all__ = ["forward_ports"]


def forward_ports(m: Module, outer: wiring.Component, inner: wiring.Component,
                  skip: Callable[[str], bool] = lambda name: False) -> None:
    """Connect each member of ``inner`` to ``outer``'s of the same name (ports by direction,
    interfaces with ``wiring.connect``), but those ``skip`` names."""
    for name, member in inner.signature.members.items():
        if skip(name):
            continue
        ours, theirs = getattr(outer, name), getattr(inner, name)
        if member.is_port:
            m.d.comb += ours.eq(theirs) if member.flow == wiring.Out else theirs.eq(ours)
        elif member.flow == wiring.In:
            wiring.connect(m, wiring.flipped(ours), theirs)
        else:
            wiring.connect(m, theirs, wiring.flipped(ours))
