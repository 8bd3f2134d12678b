"""External slot store: the rows of partial sums in DRAM behind an AXI4 burst master
(issue 16, "external backend"; interface in ``hdl/slot_store_signature.py``; docs/slot_store.md).

:class:`DramSlotStore` is the read-modify-write engine (``hdl/dram_rmw_engine.py``: in-flight
table with a hashed index of its rows, read on a miss, forward on a hit, in-order completion, burst coalescers,
free on B) with the lane-wise int32 :class:`SaturatingAdder` as its modify (WRITE data, ADD the
saturating sum, READ the row) and AXI ID 0. Row ``r`` lives at ``base_address + r * W/8`` on
``m_axi_mem``.
"""

from __future__ import annotations

from .dram_rmw_engine import AXI_PREFIX, DramRmwEngine
from .saturating_adder import SaturatingAdder

__all__ = ["AXI_PREFIX", "DramSlotStore"]


class DramSlotStore(DramRmwEngine):
    """Slot store on an AXI4 master (``m_axi_mem_*``): the engine with the saturating adder.

    Parameters (the engine's, ``hdl/dram_rmw_engine.py``): ``data_width`` W (64..512),
    ``slots`` S and ``row_bits`` (rows = S << row_bits), ``base_address`` (4 KiB-aligned),
    ``address_width`` (AXI), ``outstanding`` (in-flight table entries), ``burst_beats``
    (longest burst), ``burst_hold`` (idle cycles a burst waits for the next row of a message
    whose commands say ``more``; 0 = a pause closes it), ``index_bits`` (the in-flight table's
    index: 2**index_bits sets of two ways), ``tag_bits``.
    Ports: ``cmd``, ``rsp`` (the slot-store signature), ``m_axi_mem_*``, ``mem_error``,
    ``set_waits`` (cycles commands waited for a conflict in the in-flight index).
    """

    def __init__(self, data_width: int, *, slots: int, row_bits: int, **params: int) -> None:
        super().__init__(data_width, slots=slots, row_bits=row_bits, modify=SaturatingAdder,
                         axi_id=0, **params)
