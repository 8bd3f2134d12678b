"""The reducer's partial sums (docs/reducer.md, "Stage 2" and "Hazards and forwarding", data):
the slot data memory, its read for the read-modify-write, the add stage (stage 2) and the
sticky overflow flag per slot.

* The read is issued for the beat that will be in stage 1 next cycle (``row0`` if stage 1
  moves on, ``adv``, else its own ``row1``), re-read every cycle, so it is always one cycle old
  and a last-write register covers exactly what it missed (hit computed a cycle ahead).
* Stage 2 (``load``: stage 1's beat moves on, with ``op``/``first``/``data``/``lanes``/
  ``slot_oh``): the per-lane saturating add (``hdl/saturating_adder.py``) of the stored row and
  the beat, or a plain write for a chunk's first contribution, forwarding the write made in the
  cycle the beat left stage 1. ``valid2``: stage 2 holds a beat (the reducer's register).
* Sticky overflow per slot (flip-flops): cleared by a chunk's first write, set by any
  saturating lane below ``element_count`` (``lanes``) of an add, one cycle late from registers
  (the adder's carry chain ends in a flip-flop); ``overflow`` is the flag with that pending set
  OR-ed in, which is what the emitter reads (it may start a result the cycle after its last add).
* A second read port for the emitter (``e_row`` -> ``e_data`` next cycle, always enabled);
  ``e_collision``: that read meets this cycle's write (the memory is built with
  ``no_rw_check``; the reducer asserts this never happens for a read whose data is used).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import lanes
from .reducer_layouts import OP_ADD, OP_NONE, OP_WRITE
from .saturating_adder import SaturatingAdder

__all__ = ["RowAccumulator"]


class RowAccumulator(wiring.Component):
    """Slot data memory, read-modify-write stage 2, sticky overflow (see the module docstring)."""

    def __init__(self, data_width: int, *, slots: int, row_bits: int) -> None:
        self.data_width, self.slots, self.row_bits = data_width, slots, row_bits
        self.n_lanes = lanes(data_width)
        ab = (slots - 1).bit_length() + row_bits
        super().__init__({
            "adv": In(1),
            "row0": In(ab),
            "row1": In(ab),
            "load": In(1),
            "op": In(2),
            "first": In(1),
            "data": In(data_width),
            "lanes": In(self.n_lanes),
            "slot_oh": In(slots),
            "valid2": In(1),
            "overflow": Out(slots),
            "e_row": In(ab),
            "e_data": Out(data_width),
            "e_collision": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        W, S, L = self.data_width, self.slots, self.n_lanes
        # no_rw_check: see the memories in hdl/reducer.py (no read result used on a collision)
        m.submodules.data_mem = data_mem = Memory(shape=unsigned(W), depth=S << self.row_bits, init=[],
                                                  attrs={"no_rw_check": 1})
        data_rd = data_mem.read_port(transparent_for=())  # read-modify-write
        data_rd_e = data_mem.read_port(transparent_for=())  # emitter
        data_wr = data_mem.write_port()
        adv, row0, row1 = self.adv, self.row0, self.row1

        # ---- last-write bypass (the only read-after-write distance is one cycle) ----
        db_v, db_addr, db_data = Signal(), Signal(len(data_wr.addr)), Signal(W)
        with m.If(data_wr.en):
            m.d.sync += [db_v.eq(1), db_addr.eq(data_wr.addr), db_data.eq(data_wr.data)]
        # hit = the row read in stage 0 is written this cycle (the read misses it) or was the
        # last one written: computed at stage 0, registered, so stage 1 only selects
        dhit0, dhit1 = Signal(), Signal()
        row_rd = Signal(len(data_wr.addr))
        m.d.comb += [row_rd.eq(Mux(adv, row0, row1)), data_rd.addr.eq(row_rd), data_rd.en.eq(1)]
        m.d.sync += dhit1.eq(dhit0)
        m.d.comb += [
            # (per row in parallel, adv's choice of the row at the last multiplexer)
            dhit0.eq(Mux(adv, *[Mux(data_wr.en, data_wr.addr == r, db_v & (db_addr == r)) for r in (row0, row1)])),
        ]
        old1 = Signal(W)
        m.d.comb += old1.eq(Mux(dhit1, db_data, data_rd.data))

        # ---- stage 2: add or write ----
        op2 = Signal(2)
        first2 = Signal()
        row2 = Signal(len(data_wr.addr))
        oh2 = Signal(S)  # slot2, one-hot
        d2 = Signal(W, reset_less=True)
        old2 = Signal(W, reset_less=True)
        fwd2 = Signal()
        lane_ok2 = Signal(L)
        with m.If(self.load):
            m.d.sync += [
                op2.eq(self.op), first2.eq(self.first), row2.eq(row1), oh2.eq(self.slot_oh), d2.eq(self.data),
                old2.eq(old1), fwd2.eq(data_wr.en & (data_wr.addr == row1)), lane_ok2.eq(self.lanes),
            ]
        m.submodules.adder = adder = SaturatingAdder(W)
        m.d.comb += [adder.a.eq(Mux(fwd2, db_data, old2)), adder.b.eq(d2)]
        beat_ovf = (op2 == OP_ADD) & (adder.overflow & lane_ok2).any()
        m.d.comb += [
            data_wr.en.eq(self.valid2 & (op2 != OP_NONE)),
            data_wr.addr.eq(row2),
            data_wr.data.eq(Mux(op2 == OP_ADD, adder.sum, d2)),
        ]
        # ---- sticky overflow per slot ----
        ovf = Signal(S)
        ovf_set = Signal()
        ovf_oh = Signal(S)
        ovf_now = self.overflow
        m.d.comb += ovf_now.eq(ovf | Mux(ovf_set, ovf_oh, 0))
        m.d.sync += [ovf_set.eq(self.valid2 & beat_ovf), ovf_oh.eq(oh2),
                     ovf.eq(ovf_now & ~Mux(data_wr.en & first2 & (op2 == OP_WRITE), oh2, 0))]

        # ---- the emitter's read ----
        m.d.comb += [data_rd_e.addr.eq(self.e_row), data_rd_e.en.eq(1), self.e_data.eq(data_rd_e.data),
                     self.e_collision.eq(data_wr.en & (data_rd_e.addr == data_wr.addr))]
        return m

