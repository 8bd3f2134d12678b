"""AXI4 memory self-test: write a pattern in bursts over a region, read it back, compare, repeat.

The DRAM bring-up design's traffic (``wanreduce build --board versa-ecp5 --dram-selftest``):
it exercises the LiteDRAM controller's AXI port end to end, keeps the whole controller in the
netlist for place-and-route, and on a board shows on LEDs whether the DRAM works. One
transaction at a time (no outstanding bursts: a functional test, not a bandwidth test).

Beat ``a`` (its index from the region's start) holds, in every 32-bit lane ``i``,
``a ^ (i * 0x01010101) ^ (pass * 0x5A5A5A5A)`` — every beat differs, and the pattern flips
between passes, so stale data from the previous pass is caught. ``error`` is sticky.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Elaboratable, Module, Mux, Signal

__all__ = ["AXIMemTest", "axi_manager_signals"]

AXI_FIELDS = (  # (name, width or None for data/address/id/strobe, direction from the manager)
    ("awvalid", 1, "o"), ("awready", 1, "i"), ("awaddr", "a", "o"), ("awburst", 2, "o"),
    ("awlen", 8, "o"), ("awsize", 4, "o"), ("awid", "id", "o"),
    ("wvalid", 1, "o"), ("wready", 1, "i"), ("wlast", 1, "o"), ("wstrb", "s", "o"),
    ("wdata", "d", "o"),
    ("bvalid", 1, "i"), ("bready", 1, "o"), ("bresp", 2, "i"), ("bid", "id", "i"),
    ("arvalid", 1, "o"), ("arready", 1, "i"), ("araddr", "a", "o"), ("arburst", 2, "o"),
    ("arlen", 8, "o"), ("arsize", 4, "o"), ("arid", "id", "o"),
    ("rvalid", 1, "i"), ("rready", 1, "o"), ("rlast", 1, "i"), ("rresp", 2, "i"),
    ("rdata", "d", "i"), ("rid", "id", "i"),
)


def axi_manager_signals(data_width: int, addr_width: int, id_width: int,
                        prefix: str = "") -> dict[str, Signal]:
    """One Signal per AXI4 channel field (LiteDRAM's AXI user-port fields: sizes 4 bits wide,
    no lock/cache/prot/qos), named ``<prefix><field>``."""
    widths = {"a": addr_width, "d": data_width, "s": data_width // 8, "id": id_width}
    return {name: Signal(widths.get(w, w) if isinstance(w, str) else w, name=prefix + name)
            for name, w, _ in AXI_FIELDS}


class AXIMemTest(Elaboratable):
    """Manager on ``axi`` (a dict from :func:`axi_manager_signals`): ``bursts`` bursts of
    ``burst_len`` beats from address 0, written then read back, forever."""

    def __init__(self, data_width: int, addr_width: int, id_width: int, *, bursts: int = 256,
                 burst_len: int = 16) -> None:
        if data_width % 32 or not 32 <= data_width <= 1024:
            raise ValueError(f"AXI data width must be a multiple of 32 from 32 to 1024, got {data_width}")
        if not 1 <= burst_len <= 256 or burst_len & (burst_len - 1):
            raise ValueError(f"burst_len must be a power of two from 1 to 256, got {burst_len}")
        if bursts < 1 or bursts * burst_len * data_width // 8 > 1 << addr_width:
            raise ValueError(f"bursts must be 1..{(1 << addr_width) // (burst_len * data_width // 8)}"
                             f" (the region fits the {addr_width}-bit address space), got {bursts}")
        self.dw, self.aw, self.iw = data_width, addr_width, id_width
        self.bursts, self.burst_len = bursts, burst_len
        self.axi = axi_manager_signals(data_width, addr_width, id_width)
        self.error = Signal()  # sticky: a read beat differed from what was written, or a bad resp
        self.passes = Signal(16)  # completed write+read passes

    def elaborate(self, platform: object) -> Module:
        m = Module()
        a = self.axi
        lanes = self.dw // 32
        beat_bytes = self.dw // 8
        beat = Signal(32)  # beat index from the region's start
        burst = Signal(range(self.bursts + 1))
        inburst = Signal(range(self.burst_len + 1))
        flip = Signal(32)
        m.d.comb += flip.eq(Cat(*[self.passes[0]] * 32) & 0x5A5A5A5A)
        pattern = Cat(*[(beat ^ (i * 0x01010101) ^ flip)[:32] for i in range(lanes)])
        addr = (burst * (self.burst_len * beat_bytes))[:self.aw]
        size = (beat_bytes - 1).bit_length()
        m.d.comb += [
            a["awburst"].eq(1), a["arburst"].eq(1),  # INCR
            a["awlen"].eq(self.burst_len - 1), a["arlen"].eq(self.burst_len - 1),
            a["awsize"].eq(size), a["arsize"].eq(size),
            a["awid"].eq(0), a["arid"].eq(0),
            a["awaddr"].eq(addr), a["araddr"].eq(addr),
            a["wstrb"].eq((1 << beat_bytes) - 1), a["wdata"].eq(pattern),
            a["wlast"].eq(inburst == self.burst_len - 1),
        ]
        last_beat = inburst == self.burst_len - 1
        last_burst = burst == self.bursts - 1

        def address(valid: str, ready: str, data_state: str) -> None:
            m.d.comb += a[valid].eq(1)
            with m.If(a[ready]):
                m.next = data_state

        def next_burst(again: str, then: str, *at_end) -> None:
            with m.If(last_burst):
                m.d.sync += [burst.eq(0), beat.eq(0), *at_end]
                m.next = then
            with m.Else():
                m.d.sync += burst.eq(burst + 1)
                m.next = again

        got, want = Signal(self.dw), Signal(self.dw)
        check, bad_tail = Signal(), Signal()

        def data_beat(ours: str, theirs: str):
            """Drive our side of a data channel; a beat taken advances the beat counters."""
            m.d.comb += a[ours].eq(1)
            with m.If(a[theirs]):
                m.d.sync += [beat.eq(beat + 1), inburst.eq(Mux(last_beat, 0, inburst + 1))]
            return a[theirs]

        with m.FSM():
            with m.State("AW"):
                address("awvalid", "awready", "W")
            with m.State("W"):
                with m.If(data_beat("wvalid", "wready") & last_beat):
                    m.next = "B"
            with m.State("B"):
                m.d.comb += a["bready"].eq(1)
                with m.If(a["bvalid"]):
                    with m.If(a["bresp"] != 0):
                        m.d.sync += self.error.eq(1)
                    next_burst("AW", "AR")
            with m.State("AR"):
                address("arvalid", "arready", "R")
            with m.State("R"):
                taken = data_beat("rready", "rvalid")
                m.d.sync += check.eq(taken)
                with m.If(taken):
                    m.d.sync += [got.eq(a["rdata"]), want.eq(pattern),
                                 bad_tail.eq((a["rresp"] != 0) | (a["rlast"] != last_beat))]
                with m.If(taken & last_beat):
                    next_burst("AR", "AW", self.passes.eq(self.passes + 1))
        # the comparison a cycle later, from registers (a 128-bit compare behind the read
        # channel's valid was the self-test's 125 MHz critical path)
        with m.If(check & ((got != want) | bad_tail)):
            m.d.sync += self.error.eq(1)
        return m
