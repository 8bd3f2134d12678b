"""DRAM initialisation without a CPU: replays LiteDRAM's init program over its Wishbone bus.

The standalone LiteDRAM controller (:mod:`wanreduce.hdl.boards.litedram_controller`) has no CPU:
its DDR3 mode-register sequence, PHY settings and ``init_done`` are registers on ``wb_ctrl``.
:class:`DramInit` writes them from a ROM after reset — the generator's ``<name>_init.json``,
entries (word address, data, cycles to wait after the write) — one single-beat Wishbone write
at a time (``cyc``/``stb`` until ``ack``), then raises ``done``. It runs in the controller's
clock domain (``domain``). Calibration scans (the BIOS's read levelling) are not done: the
program sets fixed values (docs/boards.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Elaboratable, Module, Signal

__all__ = ["DramInit"]


class DramInit(Elaboratable):
    """Wishbone master replaying ``program``: (word address, data, wait cycles) per write."""

    def __init__(self, program: Sequence[tuple[int, int, int]], *, addr_width: int = 30,
                 domain: str = "sync") -> None:
        if not program:
            raise ValueError("DRAM init program is empty")
        for k, (adr, dat, wait) in enumerate(program):
            if not (0 <= adr < 1 << addr_width and 0 <= dat < 1 << 32 and 0 <= wait < 1 << 24):
                raise ValueError(f"DRAM init program entry {k}: address 0..2**{addr_width}-1, "
                                 f"data 0..2**32-1, wait 0..2**24-1, got {(adr, dat, wait)}")
        self.program = [tuple(int(x) for x in e) for e in program]
        self.domain = domain
        self.adr = Signal(addr_width)
        self.dat_w = Signal(32)
        self.sel = Signal(4)
        self.cyc = Signal()
        self.stb = Signal()
        self.we = Signal()
        self.ack = Signal()
        self.done = Signal()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        d = m.d[self.domain]
        n = len(self.program)
        idx = Signal(range(n + 1))
        wait = Signal(24)
        entry_adr, entry_dat, entry_wait = Signal.like(self.adr), Signal(32), Signal(24)
        with m.Switch(idx):  # the ROM: a case per entry (tens of entries; LUTs, no block RAM)
            for k, (adr, dat, w) in enumerate(self.program):
                with m.Case(k):
                    m.d.comb += [entry_adr.eq(adr), entry_dat.eq(dat), entry_wait.eq(w)]
        m.d.comb += [self.adr.eq(entry_adr), self.dat_w.eq(entry_dat), self.sel.eq(0xF),
                     self.we.eq(1)]
        with m.FSM(domain=self.domain):
            with m.State("WRITE"):
                m.d.comb += [self.cyc.eq(1), self.stb.eq(1)]
                with m.If(self.ack):
                    d += wait.eq(entry_wait)
                    m.next = "WAIT"
            with m.State("WAIT"):
                with m.If(wait != 0):
                    d += wait.eq(wait - 1)
                with m.Elif(idx == n - 1):
                    m.next = "DONE"
                with m.Else():
                    d += idx.eq(idx + 1)
                    m.next = "WRITE"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
        return m
