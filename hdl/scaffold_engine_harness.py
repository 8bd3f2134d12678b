"""The read-modify-write engine with the scaffold record modify (``hdl/record_modify_scaffold.py``)
as the benches simulate it: inside an :class:`~wanreduce.hdl.axi_latency.AxiLatencyHarness`
(delay lines on R and B, a ``latency`` input), on its own AXI ID (1 by default, the record
store's). The second instance of the engine beside ``DramSlotStoreHarness``'s slot store."""

from __future__ import annotations

from functools import partial

from .axi_latency import AxiLatencyHarness
from .dram_rmw_engine import DramRmwEngine
from .record_modify_scaffold import ScaffoldRecordModify

__all__ = ["ScaffoldEngineHarness"]


class ScaffoldEngineHarness(AxiLatencyHarness):
    """The engine (``**engine``: its parameters) with the scaffold modify, plus delay lines of
    ``delay_depth`` beats on R and B. ``side_width``: the engine's ``side_shape``, the
    scaffold's count increment (``cmd.side``, echoed on ``rsp.side``)."""

    def __init__(self, data_width: int, *, delay_depth: int = 512, axi_id: int = 1,
                 side_width: int | None = None, **engine: int) -> None:
        modify = partial(ScaffoldRecordModify, side_width=side_width)
        self.engine = DramRmwEngine(data_width, modify=modify, axi_id=axi_id, side_shape=side_width, **engine)
        super().__init__(self.engine, delay_depth=delay_depth)
