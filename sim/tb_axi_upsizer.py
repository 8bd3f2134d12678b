"""cocotb bench of the AXI4 upconverter (hdl/axi_upsizer.py), run by tests/test_axi_upsizer.py.

cocotbext-axi's ``AxiMaster`` on the narrow ``s_axi`` side, an ``AxiRam`` on the wide ``m_axi``
side, pause generators on all five channels of both (ready on AW/W/AR and valid on B/R
downstream; valid on AW/W/AR and ready on B/R upstream). Several tasks at once write and read
random byte ranges (random start byte, so bursts start and end mid-beat and mid-wide-beat, and
some cross 4 KiB: the master splits them) in disjoint areas, each against its own expectation;
at the end the RAM's bytes must equal the reference everywhere (nothing written outside a
range). Every wide burst is recorded and checked: INCR, full width, aligned, within 4 KiB.
``error`` must stay 0.

``throughput`` (no pauses): one 2 KiB write then read; each takes about one narrow beat per
cycle (cycles in simulation). Parameters (tb_params): narrow_width, wide_width, seed, ops.
"""

from __future__ import annotations

import itertools
import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiBus, AxiMaster, AxiRam

from wanreduce.sim.simulator import tb_params

CLOCK_NS = 4
PAGE = 4096
RAM_BYTES = 1 << 16
TASKS = 4


def _pauses(rng: random.Random, busy: float):
    """Endless random pause pattern: True with probability ``busy``, in runs of 1..8."""
    while True:
        yield from itertools.repeat(rng.random() < busy, rng.randint(1, 8))


async def _setup(dut, p: dict, rng: random.Random, busy: float):
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    master = AxiMaster(AxiBus.from_prefix(dut, "s_axi"), dut.clk, dut.rst)
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=RAM_BYTES)
    for bfm in (master.write_if, master.read_if, ram.write_if, ram.read_if):
        bfm.log.setLevel(logging.WARNING)
    if busy:
        for ch in ("aw", "w", "ar", "b", "r"):
            getattr(master.write_if if ch in ("aw", "w", "b") else master.read_if,
                    f"{ch}_channel").set_pause_generator(_pauses(rng, busy))
            getattr(ram.write_if if ch in ("aw", "w", "b") else ram.read_if,
                    f"{ch}_channel").set_pause_generator(_pauses(rng, busy))
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    return master, ram


async def _record_bursts(dut, p: dict, bursts: list) -> None:
    """Every wide AW/AR handshake: (channel, address, beats); checked at the end."""
    wide_size = (p["wide_width"] // 8).bit_length() - 1
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        for ch in ("aw", "ar"):
            if getattr(dut, f"m_axi_{ch}valid").value and getattr(dut, f"m_axi_{ch}ready").value:
                assert int(getattr(dut, f"m_axi_{ch}burst").value) == 1, f"{ch}: not INCR"
                assert int(getattr(dut, f"m_axi_{ch}size").value) == wide_size, f"{ch}: size"
                bursts.append((ch, int(getattr(dut, f"m_axi_{ch}addr").value),
                               int(getattr(dut, f"m_axi_{ch}len").value) + 1))


def _check_bursts(bursts: list, wide_bytes: int) -> None:
    for ch, addr, beats in bursts:
        assert addr % wide_bytes == 0, f"{ch} {addr:#x}: not aligned to the wide beat"
        assert addr // PAGE == (addr + beats * wide_bytes - 1) // PAGE, \
            f"{ch} {addr:#x} x {beats}: crosses a 4 KiB page"


@cocotb.test()
async def random_transfers(dut):
    p = tb_params()
    rng = random.Random(p["seed"])
    master, ram = await _setup(dut, p, rng, busy=0.3)
    ref = bytearray(RAM_BYTES)
    ram.write(0, bytes(ref))
    bursts: list = []
    cocotb.start_soon(_record_bursts(dut, p, bursts))
    area = RAM_BYTES // TASKS

    async def worker(k: int) -> None:
        r = random.Random(p["seed"] * 100 + k)
        lo = k * area
        for _ in range(p["ops"]):
            n = r.choice([1, 7, 8, 9, 16, 24, 40, r.randint(1, 600), r.randint(1, 2100)])
            addr = lo + r.randrange(area - n)
            if r.random() < 0.5:
                data = r.randbytes(n)
                await master.write(addr, data)
                ref[addr:addr + n] = data
            else:
                got = (await master.read(addr, n)).data
                assert bytes(got) == bytes(ref[addr:addr + n]), \
                    f"read {addr:#x}+{n}: differs from what was written"

    tasks = [cocotb.start_soon(worker(k)) for k in range(TASKS)]
    for t in tasks:
        await t
    assert ram.read(0, RAM_BYTES) == bytes(ref), "RAM differs from the reference"
    assert bursts, "no wide burst seen"
    _check_bursts(bursts, p["wide_width"] // 8)
    assert int(dut.error.value) == 0, "error set by INCR full-width bursts"


@cocotb.test()
async def throughput(dut):
    p = tb_params()
    rng = random.Random(p["seed"])
    master, _ram = await _setup(dut, p, rng, busy=0.0)
    nbytes = 2048
    narrow_beats = nbytes // (p["narrow_width"] // 8)
    data = rng.randbytes(nbytes)
    for op in ("write", "read"):
        start = get_sim_time("ns")
        if op == "write":
            await master.write(0x1000, data)
        else:
            assert bytes((await master.read(0x1000, nbytes)).data) == data
        cycles = int(get_sim_time("ns") - start) // CLOCK_NS
        # one narrow beat per cycle, plus the pipeline and the BFMs' turnaround
        assert cycles <= narrow_beats + 40, f"{op}: {cycles} cycles for {narrow_beats} beats"
        dut._log.info("%s: %d narrow beats in %d cycles", op, narrow_beats, cycles)

