"""Slot capacity per board and slot memory, and the DRAM bandwidth budget (pure Python).

What ``wanreduce plan --board`` takes as the memory axis and what docs/boards.md derives:

* **on-chip**: the largest S × E' of int32 sums that fits the FPGA's block RAM
  (:data:`ONCHIP_MAX_ELEMENTS`), E' being the slot's footprint in the reducer's accumulator
  memory (:func:`onchip_footprint`: beats rounded up to a power of two);
* **DRAM** (``dram`` and ``records``): the board's DDR3
  (:data:`~wanreduce.hdl.boards.litedram_controller.DRAM_CONFIGS`) divided into slots of
  :func:`dram_slot_stride` bytes plus :data:`STATE_BYTES_PER_SLOT` of per-slot state
  (:attr:`SlotCapacity.memory_slots`), of which the core takes at most
  :func:`~wanreduce.hdl.params.max_slots` (:attr:`SlotCapacity.slots`): with ``dram``
  :data:`~wanreduce.hdl.params.MAX_SLOTS_DRAM`, its per-slot state being on chip; with
  ``records`` (the state in DRAM too, docs/large_slots.md)
  :data:`~wanreduce.hdl.params.MAX_SLOTS_LARGE`.

S is a power of two and passes :func:`wanreduce.hdl.params.check_slot_memory`.
"""

from __future__ import annotations

from dataclasses import dataclass

from wanreduce.hdl.boards.litedram_controller import DRAM_CONFIGS
from wanreduce.hdl.params import check_slot_memory, max_slots

__all__ = ["BOARD_PORTS", "DRAM_EFFICIENCY", "ONCHIP_MAX_ELEMENTS", "STATE_BYTES_PER_SLOT", "SlotCapacity",
           "board_capacity", "dram_budget", "dram_slot_stride", "measured_efficiency",
           "onchip_footprint"]

ELEMENT_BYTES = 4
# Largest S x E' of sums in block RAM. versa-ecp5: measured (docs/benchmarks.md, "Largest slots
# x elements": 64 x 256, 32 x 512, 16 x 1024 fit the ECP5-45F's 108 DP16KD, 128 x 256 does not).
# alinx-ax7325b: estimated, not built (no Vivado here): 445 RAMB36 = 16,020 Kbit; the
# accumulator built twice (two read ports) and a quarter left for the rest: 131,072 elements.
ONCHIP_MAX_ELEMENTS = {"versa-ecp5": 16384, "alinx-ax7325b": 131072}
# Per-slot state kept with the slot in DRAM: the reducer's tag (165 bits at J = 2: state, job,
# round, chunk, group, scale, count, bitmap, session, beats) rounded up to 32 bytes (the record
# path's 256-bit record, reducer_layouts.RECORD_BITS).
STATE_BYTES_PER_SLOT = 32
# (line rate in bytes/s, data ports whose payload reaches the reducer): versa-ecp5 ETH0 (network)
# and ETH1 (host contributions); alinx-ax7325b two 10 GbE network cages and one host cage.
BOARD_PORTS = {"versa-ecp5": (125e6, 2), "alinx-ax7325b": (1.25e9, 3)}
# DRAM efficiency (fraction of the DQ bus's peak) of the slot read-modify-write, measured on the
# board's LiteDRAM controller at its configured clock (DRAM_CONFIGS) with its DDR3 model
# (bench/bench_dram.py; docs/benchmarks.md "DRAM bandwidth"), by the bytes of one AXI burst: reads
# and writes alternate burst by burst (LiteDRAM's AXI frontend arbitrates per burst), steady
# state. Versa at 87.5 MHz, 512-B bursts (the board's, DramConfig.burst_bytes: 64 beats at
# W = 64), 8 slots: 0.740, 518 MB/s against 479 (margin 1.08; with litedram_patches(), the
# registered refresh request included, 2026-12-03; 0.742 with the bank-lock fix alone). (128-B bursts, DramSlotStore's
# default 16 beats, were measured at the former 100 MHz only: 0.52, short of the two ports.)
# AX7325B at 125 MHz (DDR3-1000, K7DDRPHY settings, MT41K256M16), 8 slots of 2 KiB: 512-B
# bursts 0.543 (two 10 GbE ports not covered: margin 0.91), 2-KiB bursts (the board's,
# DramConfig.burst_bytes: 32 beats at W = 512) 0.822 (two ports: margin 1.37; all three data
# ports need 7.2 GB/s: margin 0.92, not covered).
DRAM_EFFICIENCY = {"versa-ecp5": {512: 0.740}, "alinx-ax7325b": {512: 0.543, 2048: 0.822}}
# Bytes on the wire per packet besides the payload: preamble 8, IFG 12, Ethernet 14, FCS 4,
# IPv4 20, UDP 8, aggregation header 22 (wanreduce.wire).
WIRE_OVERHEAD_BYTES = 88


def onchip_footprint(elements: int, width: int) -> int:
    """Elements of accumulator memory one slot takes: beats rounded up to a power of two."""
    lanes = width // 32
    beats = -(-elements // lanes)
    return (1 << (beats - 1).bit_length()) * lanes


def dram_slot_stride(elements: int) -> int:
    """Bytes between slots in DRAM: E x 4 rounded up to a power of two (an AXI burst then never
    crosses a 4 KiB boundary up to 4 KiB slots; at E = 499, 2 KiB = one row of the Versa's
    MT41K64M16, so a slot's read-modify-write stays in one open row)."""
    return 1 << (elements * ELEMENT_BYTES - 1).bit_length()


@dataclass(frozen=True)
class SlotCapacity:
    """Slots a board holds for E elements per slot."""

    board: str
    slot_memory: str
    slots: int  # S, a power of two: what the core takes (min of memory_slots and its limit)
    elements: int  # E
    width: int  # W
    used_bytes: int  # memory taken by the S slots (sums, plus state in DRAM)
    total_bytes: int  # what the board has for them
    memory_slots: int  # the largest power-of-two S the board's memory holds

    @property
    def core_limited(self) -> bool:
        """The core's S limit (``params.max_slots``), not the board's memory, sets S."""
        return self.slots < self.memory_slots

    @property
    def memory_bytes(self) -> int:
        """Bytes of sums (S x E x 4): the planner's memory axis, so it computes S back."""
        return self.slots * self.elements * ELEMENT_BYTES

    @property
    def memory_slots_bytes(self) -> int:
        """Bytes of sums the board's memory holds (memory_slots x E x 4), whatever the core takes."""
        return self.memory_slots * self.elements * ELEMENT_BYTES


def _pow2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n >= 1 else 0


def board_capacity(board: str, slot_memory: str, elements: int, width: int = 64) -> SlotCapacity:
    """The largest power-of-two S of ``elements`` each that ``board`` holds in ``slot_memory``."""
    from wanreduce.hdl.boards import BOARDS

    if board not in BOARDS:
        raise ValueError(f"board must be one of {', '.join(BOARDS)}, got {board!r}")
    check_slot_memory(slot_memory, elements=elements, width=width)
    if slot_memory == "onchip":
        total = ONCHIP_MAX_ELEMENTS[board] * ELEMENT_BYTES
        per_slot = onchip_footprint(elements, width) * ELEMENT_BYTES
    else:  # dram, records: the sums and a record of per-slot state in the board's DRAM
        total = DRAM_CONFIGS[board].size_bytes
        per_slot = dram_slot_stride(elements) + STATE_BYTES_PER_SLOT
    held = _pow2_floor(total // per_slot)
    slots = min(held, max_slots(slot_memory))
    if slots < 2:
        raise ValueError(f"elements: {elements} per slot leaves room for fewer than 2 slots in "
                         f"{board}'s {slot_memory} slot memory ({total} B); allowed <= "
                         f"{total // 2 // ELEMENT_BYTES}")
    check_slot_memory(slot_memory, slots=slots, elements=elements, width=width)
    return SlotCapacity(board, slot_memory, slots, elements, width, slots * per_slot, total, held)


@dataclass(frozen=True)
class DramBudget:
    """DRAM traffic of the reduction at line rate against what the controller delivers."""

    board: str
    payload_bytes_per_s: float  # all data ports at line rate, payload only
    needed_bytes_per_s: float  # read + write of every payload beat
    peak_bytes_per_s: float  # DQ bus
    efficiency: float  # fraction of the peak the controller sustains for this traffic

    @property
    def usable_bytes_per_s(self) -> float:
        return self.peak_bytes_per_s * self.efficiency

    @property
    def margin(self) -> float:
        return self.usable_bytes_per_s / self.needed_bytes_per_s


def measured_efficiency(board: str, burst_bytes: int | None = None) -> float:
    """:data:`DRAM_EFFICIENCY` for bursts of ``burst_bytes`` (default: the board's,
    :attr:`DramConfig.burst_bytes`): the figure of the longest measured burst not longer (longer
    bursts only amortise turnarounds better); an error if none is."""
    if burst_bytes is None:
        burst_bytes = DRAM_CONFIGS[board].burst_bytes
    table = DRAM_EFFICIENCY.get(board, {})
    fits = [b for b in table if b <= burst_bytes]
    if not fits:
        raise ValueError(f"{board}: DRAM efficiency not measured for bursts of {burst_bytes} B "
                         f"(measured: {sorted(table) or 'none'}); pass efficiency=")
    return table[max(fits)]


def dram_budget(board: str, elements: int, efficiency: float | None = None, *,
                burst_bytes: int | None = None, ports: int | None = None) -> DramBudget:
    """``ports`` data ports (default: all the board's, :data:`BOARD_PORTS`) at line rate with
    full packets of ``elements``; each payload beat read and written once (an ADD; a first
    contribution is a plain write, so this is the worst case). ``efficiency``: the
    controller's, by default the measured one for ``burst_bytes`` (default: the board's bursts)."""
    if efficiency is None:
        efficiency = measured_efficiency(board, burst_bytes)
    rate, board_ports = BOARD_PORTS[board]
    if ports is None:
        ports = board_ports
    elif not 1 <= ports <= board_ports:
        raise ValueError(f"ports must be 1..{board_ports} ({board}'s data ports), got {ports}")
    payload = elements * ELEMENT_BYTES
    per_port = rate * payload / (payload + WIRE_OVERHEAD_BYTES)
    cfg = DRAM_CONFIGS[board]
    return DramBudget(board, ports * per_port, 2 * ports * per_port, cfg.peak_bytes_per_s,
                      efficiency)
