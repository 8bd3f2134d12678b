"""The read-modify-write engine with the scaffold record modify (``hdl/record_modify_scaffold.py``)
as the benches simulate it: inside an :class:`~wanreduce.hdl.axi_latency.AxiLatencyHarness`
(delay lines on R and B, a ``latency`` input), on its own AXI ID (1 by default, the record
store's). The second instance of the engine beside ``DramSlotStoreHarness``'s slot store.
With ``jobs`` the engine's late operand comes from a ``DecisionState`` (``hdl/decision_state.py``)
wired inside (``EngineWithState``), as the record store's owner will."""

from __future__ import annotations

from functools import partial

from .axi_latency import AxiLatencyHarness
from .decision_state import DecisionState, effect_layout, late_layout
from .dram_rmw_engine import DramRmwEngine
from .engine_with_state import EngineWithState
from .record_modify_scaffold import ScaffoldRecordModify

__all__ = ["ScaffoldEngineHarness", "scaffold_engine"]


def scaffold_engine(data_width: int, *, axi_id: int = 1, side_width: int | None = None,
                    jobs: int | None = None, release_depth: int | None = None, regions: bool = False,
                    **engine: int) -> DramRmwEngine | EngineWithState:
    """The engine with the scaffold modify (``**engine``: its parameters); ``side_width``: its
    ``side_shape``, the scaffold's count increment. ``jobs`` (a power of two, with ``side_width``
    above log2(jobs); default None: no late operand): with a ``DecisionState`` of ``jobs`` heads
    and a pending bit per row as its late operand (``EngineWithState``), the job the side's low
    bits, the release flag (the head's chunk completes) its top bit; ``release_depth``: the
    state's release queue (its stream ``release``); ``regions``: the state's per-job regions and
    window reset (ports ``region``, ``reset``)."""
    if jobs is None:
        return DramRmwEngine(data_width, modify=partial(ScaffoldRecordModify, side_width=side_width),
                             axi_id=axi_id, side_shape=side_width, **engine)
    if jobs & (jobs - 1) or side_width is None or side_width <= (jobs - 1).bit_length():
        raise ValueError(f"jobs must be a power of two with side_width > log2(jobs), got jobs {jobs}, "
                         f"side_width {side_width}")
    state = DecisionState(slots=engine["slots"] << engine.get("row_bits", 0), jobs=jobs, release_depth=release_depth,
                          regions=regions)
    modify = partial(ScaffoldRecordModify, side_width=side_width, late_slots=state.slots)
    e = DramRmwEngine(data_width, modify=modify, axi_id=axi_id, side_shape=side_width,
                      late_shape=late_layout(state.slots), effect_shape=effect_layout(state.slots), **engine)
    return EngineWithState(e, state, job_of=lambda side: side[:state.job_bits], release_of=lambda side: side[-1])


class ScaffoldEngineHarness(AxiLatencyHarness):
    """:func:`scaffold_engine` (``side_width``, ``jobs``, ``**engine``: its parameters) plus delay
    lines of ``delay_depth`` beats on R and B; with ``jobs`` the ``DecisionState``'s ``error`` is
    the port ``state_error``, its released runs ``released`` / ``released_valid``; ``release_depth``
    and ``regions`` as :func:`scaffold_engine`'s."""

    def __init__(self, data_width: int, *, delay_depth: int = 512, axi_id: int = 1,
                 side_width: int | None = None, jobs: int | None = None, release_depth: int | None = None,
                 regions: bool = False, **engine: int) -> None:
        inner = scaffold_engine(data_width, axi_id=axi_id, side_width=side_width, jobs=jobs,
                                release_depth=release_depth, regions=regions, **engine)
        self.engine = inner if jobs is None else inner.engine
        super().__init__(inner, delay_depth=delay_depth)
