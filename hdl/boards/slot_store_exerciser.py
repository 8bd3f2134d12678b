"""Slot-store exerciser: drives a slot store (``hdl/slot_store_signature.py``) the way the
reducer does, pass after pass over every row, and checks every response.

The board's stand-in for the core in the DRAM bring-up design (``wanreduce build --board
versa-ecp5 --dram-store-test``): it keeps the slot store, the width converter and the DRAM
controller busy with the reducer's read-modify-write traffic (runs of consecutive rows, one
command per cycle when the store takes it) and, on a board, shows whether the sums come back right.

Pass 0 WRITEs 0 to every row (a chunk's first contribution), pass ``p`` >= 1 ADDs 1 to every lane
of every row, so every response of pass ``p`` must hold ``p`` in every lane, with no overflow.
Responses come in command order, so the checker counts rows and passes on its own. ``error``
(sticky) is set by the first response that differs; ``passes`` counts completed passes.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from wanreduce.hdl.layouts import lanes
from wanreduce.hdl.slot_store_signature import TAG_BITS, Op, cmd_layout, rsp_layout

__all__ = ["SlotStoreExerciser"]


class SlotStoreExerciser(wiring.Component):
    """Manager of a slot store's ``cmd`` / ``rsp`` (``data_width`` W, ``address_bits`` row bits);
    outputs ``error`` (sticky) and ``passes``."""

    def __init__(self, data_width: int, address_bits: int, *, tag_bits: int = TAG_BITS) -> None:
        if data_width % 32 or data_width < 32:
            raise ValueError(f"data_width must be a multiple of 32, got {data_width}")
        if not 1 <= address_bits <= 32:
            raise ValueError(f"address_bits must be 1..32, got {address_bits}")
        self.data_width, self.address_bits = data_width, address_bits
        super().__init__({
            "cmd": Out(stream.Signature(cmd_layout(data_width, address_bits, tag_bits))),
            "rsp": In(stream.Signature(rsp_layout(data_width, tag_bits))),
            "error": Out(1),
            "passes": Out(16),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = lanes(self.data_width)
        # commands: every row, pass after pass
        row, cmd_pass = Signal(self.address_bits), Signal(32)
        c = self.cmd.payload
        m.d.comb += [
            self.cmd.valid.eq(1),
            c.op.eq(Op.ADD), c.row.eq(row), c.lanes.eq((1 << n) - 1), c.tag.eq(row),
            c.data.eq(Cat(*[Const(1, 32)] * n)),
        ]
        with m.If(cmd_pass == 0):
            m.d.comb += [c.op.eq(Op.WRITE), c.data.eq(0)]
        with m.If(self.cmd.ready):
            m.d.sync += row.eq(row + 1)
            with m.If(row == (1 << self.address_bits) - 1):
                m.d.sync += cmd_pass.eq(cmd_pass + 1)
        # responses: every lane of pass p holds p; compared a cycle later, from registers
        m.d.comb += self.rsp.ready.eq(1)
        rsp_row, rsp_pass = Signal(self.address_bits), Signal(32)
        got, overflow, check = Signal(self.data_width), Signal(), Signal()
        want = Signal(32)
        m.d.sync += check.eq(self.rsp.valid)
        with m.If(self.rsp.valid):
            m.d.sync += [got.eq(self.rsp.payload.data), overflow.eq(self.rsp.payload.overflow),
                         want.eq(rsp_pass), rsp_row.eq(rsp_row + 1)]
            with m.If(rsp_row == (1 << self.address_bits) - 1):
                m.d.sync += [rsp_pass.eq(rsp_pass + 1), self.passes.eq(self.passes + 1)]
        bad = overflow | Cat(*[got[32 * i:32 * (i + 1)] != want for i in range(n)]).any()
        with m.If(check & bad):
            m.d.sync += self.error.eq(1)
        return m
