"""A read-modify-write engine whose late operand is a ``DecisionState``'s (docs/large_slots.md,
"The record store"; ``hdl/dram_rmw_engine.py``, "Late operand"): the two wired once by
``connect_owner``, the engine's ports (but ``LATE_PORTS``) passed through, the state's
``error`` as ``state_error`` and its released runs as ``released`` / ``released_valid`` (and,
with the state's release queue, its stream ``release``; with its regions, ``region`` and the
window reset's stream ``reset``). What the record store's owner will hold; the scaffold harness
simulates it and ``bench/bench_rmw_engine.py --late`` synthesizes it."""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from .decision_state import DecisionState, connect_owner
from .dram_rmw_engine import LATE_PORTS, DramRmwEngine
from .forward_ports import forward_ports

__all__ = ["STATE_PORTS", "EngineWithState"]

STATE_PORTS = ("release", "region", "reset")  # the state's optional ports, passed through as they are


class EngineWithState(wiring.Component):
    """``engine`` with ``state`` as its late operand's owner; ``job_of`` / ``release_of``: the job
    and the release flag from a command's side (see ``connect_owner``)."""

    def __init__(self, engine: DramRmwEngine, state: DecisionState,
                 job_of: Callable[[Value], Value] | None = None,
                 release_of: Callable[[Value], Value] | None = None) -> None:
        self.engine, self.state, self.job_of, self.release_of = engine, state, job_of, release_of
        super().__init__({**{k: v for k, v in engine.signature.members.items() if k not in LATE_PORTS},
                          "state_error": Out(1), "released": Out(state.released_layout),
                          "released_valid": Out(1),
                          **{k: state.signature.members[k] for k in STATE_PORTS if k in state.signature.members}})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.engine, m.submodules.state = self.engine, self.state
        forward_ports(m, self, self.engine, skip=lambda name: name in LATE_PORTS)
        connect_owner(m, self.engine, self.state, self.job_of, self.release_of)
        m.d.comb += [self.state_error.eq(self.state.error), self.released.eq(self.state.released),
                     self.released_valid.eq(self.state.released_valid)]
        forward_ports(m, self, self.state, skip=lambda name: name not in STATE_PORTS)
        return m
