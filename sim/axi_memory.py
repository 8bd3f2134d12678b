"""cocotbext-axi ``AxiRam`` on a DUT's ``m_axi_mem_*`` port, as the DRAM benches use it: random
pauses on every channel (ready on AW/W/AR, valid on B/R), a latency (the DUT's ``latency``
input, ``hdl/axi_latency.py``) re-drawn at random, and read/write failures on demand (the RAM
then answers SLVERR, as cocotbext-axi does when its memory access raises)."""

from __future__ import annotations

import itertools
import logging
import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiBus, AxiRam

from wanreduce.hdl.layouts import payload_beats
from wanreduce.hdl.record_reducer import record_memory

__all__ = ["MemoryFaults", "attach_core_ram", "attach_ram", "pauses", "random_axi_pauses", "steady_rate",
           "sums_row_address", "throttle_data", "vary_latency"]


def pauses(rng: random.Random, busy: float):
    """Endless random pause pattern: True (pause) with probability ``busy``, in bursts of 1..8."""
    while True:
        yield from itertools.repeat(rng.random() < busy, rng.randint(1, 8))


def attach_ram(dut, size: int) -> AxiRam:
    """An ``AxiRam`` of ``size`` bytes on ``dut.m_axi_mem_*`` (clock ``clk``, reset ``rst``), quiet."""
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_mem"), dut.clk, dut.rst, size=size)
    for iface in (ram.write_if, ram.read_if):
        iface.log.setLevel(logging.WARNING)
    return ram


def sums_row_address(p: dict, slot: int, row: int = 0) -> int:
    """Byte address of a DRAM core's sums row ``row`` of ``slot`` (``p``: its width and
    elements; a slot's rows are ``2**row_bits`` beats of ``width`` from address 0)."""
    w = p["width"]
    row_bits = (payload_beats(p["elements"], w) - 1).bit_length()
    return ((slot << row_bits) + row) * (w // 8)


def attach_core_ram(dut, p: dict, rng: random.Random) -> AxiRam:
    """An ``AxiRam`` holding every row of a DRAM core (``p``: its width, slots, elements; with
    ``slot_memory`` ``records`` the records too, ``record_memory``), filled with random bytes: a
    chunk's first contribution must overwrite whatever its rows held (and the record path free
    its records first)."""
    size = sums_row_address(p, p["slots"])
    if p.get("slot_memory") == "records":
        size = record_memory(p["width"], slots=p["slots"], elements=p["elements"])[1]
    ram = attach_ram(dut, size)
    ram.write(0, rng.randbytes(size))
    return ram


def throttle_data(ram: AxiRam, rng: random.Random, bandwidth: float) -> None:
    """R and W move on a random ``bandwidth`` share of the cycles (pauses in runs of 1..8): the
    memory's read and write bandwidth, each that share of one beat per cycle."""
    if not 0 < bandwidth <= 1:
        raise ValueError(f"bandwidth must be in (0, 1], got {bandwidth}")
    if bandwidth < 1.0:
        ram.write_if.w_channel.set_pause_generator(pauses(random.Random(rng.random()), 1 - bandwidth))
        ram.read_if.r_channel.set_pause_generator(pauses(random.Random(rng.random()), 1 - bandwidth))


def steady_rate(stamps: list[int]) -> float:
    """Events per cycle in the steady state: over the middle half of the events' cycle stamps."""
    q = len(stamps) // 4
    return (len(stamps) - 2 * q - 1) / (stamps[-q - 1] - stamps[q])


def random_axi_pauses(ram: AxiRam, rng: random.Random, busy: float) -> None:
    """Pauses with probability ``busy`` on all five channels, each from its own generator."""
    w, r = ram.write_if, ram.read_if
    for ch in (w.aw_channel, w.w_channel, w.b_channel, r.ar_channel, r.r_channel):
        ch.set_pause_generator(pauses(random.Random(rng.random()), busy))


def vary_latency(dut, rng: random.Random, lo: int, hi: int, period: int = 300) -> None:
    """``dut.latency`` drawn from ``lo..hi`` now and every ``period`` cycles (a background task)."""
    dut.latency.value = rng.randint(lo, hi)

    async def redraw() -> None:
        while True:
            await ClockCycles(dut.clk, period)
            dut.latency.value = rng.randint(lo, hi)

    cocotb.start_soon(redraw())


class MemoryFaults:
    """Make ``ram``'s reads (``reads``) or writes (``writes``) fail while set: each beat then
    answers SLVERR (RRESP / BRESP); ``failed`` counts the beats that did, ``read_beats`` /
    ``write_beats`` the beats served. ``read_range`` ((lo, hi) bytes, None: every address):
    only reads from lo up to hi fail (e.g. a record core's sums, or its records)."""

    def __init__(self, ram: AxiRam) -> None:
        self.reads = self.writes = False
        self.read_range: tuple[int, int] | None = None
        self.failed = self.read_beats = self.write_beats = 0
        rd, wr = ram.read_if._read, ram.write_if._write

        async def read(address: int, length: int) -> bytes:
            if self.reads and (self.read_range is None or self.read_range[0] <= address < self.read_range[1]):
                self.failed += 1
                raise OSError("injected read failure")
            self.read_beats += 1
            return await rd(address, length)

        async def write(address: int, data: bytes) -> None:
            if self.writes:
                self.failed += 1
                raise OSError("injected write failure")
            self.write_beats += 1
            await wr(address, data)

        ram.read_if._read, ram.write_if._write = read, write
