"""DRAM bandwidth for the reducer's traffic: LiteDRAM's controller on its DDR3 model.

The board's controller as generated (LiteDRAM 2024.12, its PHY's settings at the configured
clock — ECP5DDRPHY and MT41K64M16 on the Versa, K7DDRPHY and MT41K256M16 on the AX7325B —
refresh on, the generator's controller settings) on LiteDRAM's ``SDRAMPHYModel``, simulated in
Migen cycle by cycle. A native port (the AXI frontend's, minus the AXI) runs the slot
read-modify-write pattern: read a slot's beats and write the previous slot's beats (2 KiB
slots, consecutive: consecutive banks under LiteDRAM's ROW_BANK_COL mapping), alternating
``--group`` beats of reads and ``--group`` beats of writes — the AXI bursts the slot store
issues, which LiteDRAM's AXI frontend arbitrates burst by burst (``DramSlotStore``'s default 16
beats of 64 bits = 8 beats of 128; ``--group 128``: a whole slot each way) — with command,
write data and read data always ready. Efficiency = bytes moved / (cycles x the DQ bus's peak
bytes per cycle), overall and in the steady state (from the end of slot 0's reads, alone, to
the start of the last slot's writes, alone): the ``efficiency`` of
``hdl.boards.capacity.dram_budget``.

    .venv/bin/python bench/bench_dram.py [--slots 16] [--group 8] [--board versa-ecp5]
    .venv/bin/python bench/bench_dram.py --board alinx-ax7325b --slots 8 --group 32 --ports 2
    .venv/bin/python bench/bench_dram.py --slots 8 --group 32 --records dense   # + tag records

``--records dense|stride`` adds, per slot, one 32-B tag record read and one record write, each a
burst of its own (docs/large_slots.md, "The record store"): in a dense region from half the
address space, or in the last 32 B of the slot's own stride (its DRAM row); the efficiency then
counts the slots' bytes only (what ``dram_budget`` takes), the bus's own is printed too.

The bank memories of the DDR3 model are shrunk (``litedram_model.small_bank_memories``) so the
simulation starts in seconds; the controller is built with the patches the board's generator
applies (``litedram_controller.litedram_patches``: the bank-lock fix, the registered refresh
request); progress goes to stderr every 2,000 cycles.

Figures: docs/benchmarks.md, "DRAM controller on the boards (LiteDRAM)" (slot traffic) and its
"Tag records next to the slots" (``--records``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time

from wanreduce.hdl.boards.capacity import (
    BOARD_PORTS,
    STATE_BYTES_PER_SLOT,
    dram_budget,
    dram_slot_stride,
)
from wanreduce.hdl.boards.litedram_controller import (
    DRAM_CONFIGS,
    controller_settings,
    litedram_patches,
)
from wanreduce.hdl.boards.litedram_model import phy_settings, small_bank_memories

BANK_WORDS = 4096  # storage per simulated bank (litedram_model.small_bank_memories: rows alias,
# which changes the data read back, not when the model answers; this benchmark never looks at it)


RECORDS = ("none", "dense", "stride", "append")  # --records: where the per-slot tag record lives


def slot_traffic(slots: int, beats: int, group: int, records: str = "none", rec_beats: int = 1,
                 rec_base: int = 0) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """The native-port commands ``(we, beat address)`` of the slot read-modify-write, in the
    order LiteDRAM's AXI frontend would issue them, and the steady-state window (command counts
    at its two ends).

    Slot ``k``'s reads and slot ``k - 1``'s writes as bursts of ``group`` beats; the frontend's
    round-robin arbiter takes one read burst, then one write burst, in turn (``RoundRobin(2,
    SP_CE)``, switching at a burst's last beat). ``records`` (docs/large_slots.md, "The record
    store"): per slot, one record read (its own burst of ``rec_beats``, ahead of the slot's data
    reads) and one record write (after the slot's data writes) -- ``"dense"``: records of
    ``rec_beats`` each from ``rec_base`` on (the design's dense region); ``"stride"``: the
    record in the last ``rec_beats`` of the slot's own stride (its DRAM row); ``"append"``: as
    ``"stride"``, but the record write appended to the slot's last data write burst (the
    design's cheaper variant: one short burst per slot, the read). The window runs
    from the end of slot 0's reads (alone) to the start of the last slot's writes (alone)."""
    if records not in RECORDS:
        raise ValueError(f"records must be one of {', '.join(RECORDS)}, got {records!r}")

    def record(k: int) -> list[int]:
        first = rec_base + k * rec_beats if records == "dense" else (k + 1) * beats - rec_beats
        return list(range(first, first + rec_beats))

    order: list[tuple[int, int]] = []
    window = []
    for k in range(slots + 1):
        rd = [[k * beats + i for i in range(g, g + group)] for g in range(0, beats, group)]
        wr = [[(k - 1) * beats + i for i in range(g, g + group)] for g in range(0, beats, group)]
        rd, wr = (rd if k < slots else []), (wr if k else [])
        if records != "none":
            rd = ([record(k)] if k < slots else []) + rd
            if records == "append" and wr:
                wr[-1] = wr[-1] + record(k - 1)
            elif wr:
                wr = wr + [record(k - 1)]
        if k == slots:
            window.append(len(order))
        for i in range(max(len(rd), len(wr))):
            order += [(0, a) for a in (rd[i] if i < len(rd) else [])]
            order += [(1, a) for a in (wr[i] if i < len(wr) else [])]
        if k == 0:
            window.insert(0, len(order))
    return order, (window[0], window[-1])


def measure(board: str, slots: int, group: int, elements: int = 499,
            max_cycles: int = 200_000, controller_hz: float | None = None,
            ports: int | None = None, records: str = "none") -> dict:
    from litedram import modules
    from litedram.core import LiteDRAMCore
    from litedram.phy.model import SDRAMPHYModel
    from migen import Module, run_simulation
    from migen.sim import passive

    cfg = DRAM_CONFIGS[board]
    if controller_hz is not None:  # another controller clock than the board's (a baseline)
        cfg = dataclasses.replace(cfg, sys_clk_hz=controller_hz)
    module = getattr(modules, cfg.part)(cfg.sys_clk_hz, cfg.rate)
    settings = phy_settings(cfg)

    class Top(Module):
        def __init__(self) -> None:
            self.submodules.phy = SDRAMPHYModel(module, settings, clk_freq=cfg.sys_clk_hz)
            self.submodules.core = LiteDRAMCore(
                self.phy, module.geom_settings, module.timing_settings, cfg.sys_clk_hz,
                controller_settings=controller_settings(cfg))
            self.port = self.core.crossbar.get_port()

    with small_bank_memories(BANK_WORDS), litedram_patches():
        top = Top()
    port = top.port
    beat_bytes = port.data_width // 8
    beats = dram_slot_stride(elements) // beat_bytes
    if beats % group:
        raise SystemExit(f"--group: must divide the {beats} beats of a slot, got {group}")
    rec_beats = max(1, STATE_BYTES_PER_SLOT // beat_bytes)
    order, window = slot_traffic(slots, beats, group, records, rec_beats,
                                 1 << (port.address_width - 1))
    reads = sum(1 for we, _ in order if not we)
    t = {"start": None, "end_cmd": None, "end_read": None, "cycle": 0, "cmds": 0, "w": 0, "r": 0}

    @passive
    def clock():  # counts cycles for as long as the others run
        while True:
            yield
            t["cycle"] += 1
            if t["cycle"] % 2000 == 0:
                print(f"  cycle {t['cycle']}: {t['cmds']} of {len(order)} commands",
                      file=sys.stderr, flush=True)
            if t["cycle"] > max_cycles:
                raise RuntimeError(f"no end after {max_cycles} cycles: {t}")

    def cmds():
        yield port.cmd.valid.eq(1)
        for we, addr in order:
            yield port.cmd.we.eq(we)
            yield port.cmd.addr.eq(addr)
            yield
            while not (yield port.cmd.ready):
                yield
            t["cmds"] += 1
            if t["start"] is None:
                t["start"] = t["cycle"]
            if t["cmds"] in window:  # the interleaved middle: steady state
                t.setdefault("steady", []).append(t["cycle"])
        t["end_cmd"] = t["cycle"]
        yield port.cmd.valid.eq(0)

    def wdata():
        yield port.wdata.valid.eq(1)
        yield port.wdata.we.eq(2 ** (port.data_width // 8) - 1)
        n = 0
        while n < len(order) - reads:
            yield port.wdata.data.eq(n)
            yield
            if (yield port.wdata.ready):
                n += 1
                t["w"] = n
        yield port.wdata.valid.eq(0)

    def rdata():
        yield port.rdata.ready.eq(1)
        n = 0
        while n < reads:
            yield
            if (yield port.rdata.valid):
                n += 1
                t["r"] = n
        t["end_read"] = t["cycle"]

    t0 = time.perf_counter()
    run_simulation(top, [clock(), cmds(), wdata(), rdata()])
    wall = time.perf_counter() - t0
    cycles = max(t["end_cmd"], t["end_read"]) - t["start"]
    moved = len(order) * beat_bytes
    peak_per_cycle = cfg.peak_bytes_per_s / cfg.sys_clk_hz
    whole = moved / (cycles * peak_per_cycle)
    # Steady state: commands from the end of slot 0's reads (alone) to the start of the last
    # slot's writes (alone); the edges, with no read/write turnarounds, are faster. At least
    # three slots, or there is no middle to speak of.
    if slots >= 3:
        steady_cycles = t["steady"][1] - t["steady"][0]
        mid = (window[1] - window[0]) * beat_bytes  # records included: the bus's own efficiency
        sums = 2 * (slots - 1) * beats * beat_bytes  # the slots' bytes alone in the window
        bus = mid / (steady_cycles * peak_per_cycle)
        eff = sums / (steady_cycles * peak_per_cycle)
    else:
        eff = bus = whole
        steady_cycles = cycles
    budget = dram_budget(board, elements, eff, ports=ports)
    needed = budget.needed_bytes_per_s
    usable = eff * cfg.peak_bytes_per_s  # at the clock simulated
    return {"board": board, "slots": slots, "group": group, "beats_per_slot": beats, "beat_bytes": beat_bytes,
            "records": records, "record_beats": rec_beats if records != "none" else 0,
            "cycles": cycles, "steady_cycles": steady_cycles, "bytes": moved,
            "efficiency": eff, "efficiency_bus": bus, "efficiency_whole": whole,
            "usable_MBps": usable / 1e6, "needed_MBps": needed / 1e6, "margin": usable / needed,
            "ports": ports or BOARD_PORTS[board][1],
            "controller_hz": cfg.sys_clk_hz, "peak_bytes_per_s": cfg.peak_bytes_per_s,
            "sim_s": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="versa-ecp5", choices=sorted(DRAM_CONFIGS))
    ap.add_argument("--slots", type=int, default=16, help="slots read-modify-written (default 16)")
    ap.add_argument("--group", type=int, default=8,
                    help="beats of reads, then of writes, in turn (default 8: the slot store's "
                         "16-beat bursts of 64 bits)")
    ap.add_argument("--controller-mhz", type=float, default=None,
                    help="simulate the controller at this clock instead of the board's (e.g. the "
                         "former 100 MHz as a baseline)")
    ap.add_argument("--ports", type=int, default=None,
                    help="data ports at line rate the budget is for (default: all the board's)")
    ap.add_argument("--records", default="none", choices=RECORDS,
                    help="per slot, also one 32-B tag record read and one written, each its own "
                         "burst (docs/large_slots.md): dense = in a record region of their own "
                         "(from half the address space), stride = in the slot's own stride (its "
                         "DRAM row), append = stride with the write appended to the slot's last "
                         "data write burst; default none")
    ap.add_argument("--max-cycles", type=int, default=200_000,
                    help="stop with what was done if the traffic has not ended by then")
    args = ap.parse_args(argv)
    if args.slots < 1:
        ap.error("--slots: must be >= 1")
    if args.group < 1:
        ap.error("--group: must be >= 1")
    if args.controller_mhz is not None and not 25 <= args.controller_mhz <= 200:
        ap.error(f"--controller-mhz: must be 25..200, got {args.controller_mhz:g}")
    hz = None if args.controller_mhz is None else args.controller_mhz * 1e6
    r = measure(args.board, args.slots, args.group, max_cycles=args.max_cycles, controller_hz=hz,
                ports=args.ports, records=args.records)
    cfg = DRAM_CONFIGS[args.board]
    print(f"{args.board}: {cfg.part}, {cfg.dq_bits}-bit DDR3 at {r['controller_hz'] * cfg.nphases / 1e6:g} MHz, "
          f"controller {r['controller_hz'] / 1e6:g} MHz, peak {r['peak_bytes_per_s'] / 1e6:.0f} MB/s")
    print(f"slot read-modify-write, {r['slots']} slots x {r['beats_per_slot']} beats of "
          f"{r['beat_bytes']} B, reads and writes in turns of {r['group']} beats: {r['cycles']} "
          f"cycles for {r['bytes']} B (efficiency {r['efficiency_whole']:.3f} overall); steady "
          f"state (reads and writes interleaved) efficiency {r['efficiency']:.3f}: usable "
          f"{r['usable_MBps']:.0f} MB/s vs needed {r['needed_MBps']:.0f} MB/s ({r['ports']} data "
          f"ports at {BOARD_PORTS[args.board][0] * 8 / 1e9:g} Gb/s, read + write): margin {r['margin']:.2f}x")
    print(f"steady state: {r['steady_cycles']} cycles")
    if r["records"] != "none":
        how = ("the read its own burst, the write in the slot's last data write burst"
               if r["records"] == "append" else "each its own burst")
        print(f"with {r['records']} tag records: one read and one write of {r['record_beats']} "
              f"beat(s) per slot, {how}; steady-state efficiency counting the "
              f"records' beats too {r['efficiency_bus']:.3f} (the margin above counts the slots' "
              f"bytes only)")
    print(f"(simulated in {r['sim_s']:.1f} s; load average {os.getloadavg()[0]:.1f}; "
          f"{platform.machine()}, Python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
