"""The read-modify-write engine with the scaffold record modify (``hdl/record_modify_scaffold.py``)
as the benches simulate it: inside an :class:`~wanreduce.hdl.axi_latency.AxiLatencyHarness`
(delay lines on R and B, a ``latency`` input), on its own AXI ID (1 by default, the record
store's). The second instance of the engine beside ``DramSlotStoreHarness``'s slot store.
With ``jobs`` the engine's late operand comes from a ``DecisionState`` (``hdl/decision_state.py``)
wired inside, as the record store's owner will."""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Module
from amaranth.lib.wiring import Out

from .axi_latency import AxiLatencyHarness
from .decision_state import DecisionState, connect_owner, effect_layout, late_layout
from .dram_rmw_engine import LATE_PORTS, DramRmwEngine
from .record_modify_scaffold import ScaffoldRecordModify

__all__ = ["ScaffoldEngineHarness"]


class ScaffoldEngineHarness(AxiLatencyHarness):
    """The engine (``**engine``: its parameters) with the scaffold modify, plus delay lines of
    ``delay_depth`` beats on R and B. ``side_width``: the engine's ``side_shape``, the
    scaffold's count increment (``cmd.side``, echoed on ``rsp.side``). ``jobs`` (a power of two,
    with ``side_width``; default None: no late operand): a ``DecisionState`` of ``jobs`` heads and
    a pending bit per row, the job the side's low bits; its ``error`` is the port ``state_error``."""

    def __init__(self, data_width: int, *, delay_depth: int = 512, axi_id: int = 1,
                 side_width: int | None = None, jobs: int | None = None, **engine: int) -> None:
        late = {}
        if jobs is not None:
            if jobs & (jobs - 1) or side_width is None or side_width < (jobs - 1).bit_length():
                raise ValueError(f"jobs must be a power of two with side_width >= log2(jobs), got jobs {jobs}, "
                                 f"side_width {side_width}")
            self.state = DecisionState(slots=engine["slots"] << engine["row_bits"], jobs=jobs)
            late = {"late_shape": late_layout(self.state.slots), "effect_shape": effect_layout(self.state.slots)}
        modify = partial(ScaffoldRecordModify, side_width=side_width,
                         late_slots=None if jobs is None else self.state.slots)
        self.engine = DramRmwEngine(data_width, modify=modify, axi_id=axi_id, side_shape=side_width, **late,
                                    **engine)
        self.jobs = jobs
        super().__init__(self.engine, delay_depth=delay_depth, owned=LATE_PORTS if late else (),
                         members={"state_error": Out(1)} if late else None)

    def elaborate(self, platform: object) -> Module:
        m = super().elaborate(platform)
        if self.jobs is not None:
            m.submodules.state = self.state
            connect_owner(m, self.engine, self.state, job_of=lambda side: side[:self.state.job_bits])
            m.d.comb += self.state_error.eq(self.state.error)
        return m
