"""On-chip slot store (issue 16): the slot-store interface (``hdl/slot_store_signature.py``)
served from **one** block-RAM copy of the rows — one read port and one write port — so every
block RAM it uses holds sums (the reducer's data memory today has a second read port for the
emitter, and Yosys builds it twice).

Pipeline, one command per cycle, never stalling inside:

* accept (cycle t): the row is read (non-transparent);
* stage B (t+1): the read data, with the write made in cycle t forwarded (the read missed it),
  registered;
* stage C (t+2): the write made in cycle t+1 forwarded; WRITE stores ``data``, ADD the per-lane
  saturating sum (``hdl/saturating_adder.py``) of the row and ``data`` with ``overflow`` = any
  lane in ``lanes`` saturated (two adders, one per possible row, the forward picking after
  them: off the carry chains' inputs), READ stores nothing; the response (the row's new value, or the
  stored row for READ) goes into an output FIFO.

Writes before t are in the memory when the read is issued, so the two forwards give every
command every earlier command's effect. ``cmd.ready`` is a credit check (a flip-flop) on a registered count
of commands accepted and not yet taken on ``rsp`` (at most ``RSP_DEPTH`` - 1), so the FIFO never
overflows, no stage ever waits, and neither ready depends combinationally on the other stream.
With ``rsp.ready`` high, 1 command per cycle, latency 3 cycles (command to response).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory

from .params import check_core_params
from .saturating_adder import SaturatingAdder
from .slot_store_signature import TAG_BITS, Op, rsp_layout, slot_store_signature

__all__ = ["RSP_DEPTH", "OnChipSlotStore"]

RSP_DEPTH = 5  # commands in flight + responses buffered: 3 in flight at 1/cycle, two spare (cmd.ready keeps one unused)


class OnChipSlotStore(wiring.Component):
    """``rows = slots << row_bits`` rows of ``data_width`` bits in one block-RAM copy
    (``cmd``/``rsp`` as in ``hdl/slot_store_signature.py``; see the module docstring)."""

    def __init__(self, data_width: int, *, slots: int, row_bits: int, tag_bits: int = TAG_BITS) -> None:
        check_core_params(width=data_width, slots=slots)
        if not 0 <= row_bits <= 12:
            raise ValueError(f"row_bits must be 0..12, got {row_bits}")
        self.data_width, self.slots, self.row_bits, self.tag_bits = data_width, slots, row_bits, tag_bits
        self.rows = slots << row_bits
        self.address_bits = (self.rows - 1).bit_length()
        super().__init__(slot_store_signature(data_width, self.address_bits, tag_bits))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        W = self.data_width
        cmd, rsp = self.cmd, self.rsp
        # no_rw_check: a read of the row written in the same cycle is never used as read (the
        # forwards below replace it), so Yosys needs no collision logic around the block RAM
        m.submodules.mem = mem = Memory(shape=unsigned(W), depth=self.rows, init=[],
                                        attrs={"no_rw_check": 1})
        rd = mem.read_port(transparent_for=())
        wr = mem.write_port()
        rsp_l = rsp_layout(W, self.tag_bits)
        m.submodules.fifo = fifo = SyncFIFO(width=rsp_l.size, depth=RSP_DEPTH)

        # credit: commands accepted and not yet taken on rsp (a register); cmd.ready is a
        # flip-flop worked out a cycle ahead as if this cycle accepted a command (occ - taken <
        # RSP_DEPTH - 1), so neither the command's valid nor its payload reaches it, and at most
        # RSP_DEPTH - 1 commands are in flight
        occ = Signal(range(RSP_DEPTH + 1))
        ready = Signal(init=1)
        accept = cmd.valid & ready
        taken = rsp.valid & rsp.ready
        m.d.comb += cmd.ready.eq(ready)
        m.d.sync += [occ.eq(occ + accept - taken), ready.eq(occ - taken < RSP_DEPTH - 1)]

        # the last write (data and row), for the forwards; lw_v: a write was made last cycle
        lw_data, lw_row, lw_v = Signal(W), Signal(self.address_bits), Signal()
        m.d.sync += lw_v.eq(wr.en)
        with m.If(wr.en):
            m.d.sync += [lw_data.eq(wr.data), lw_row.eq(wr.addr)]

        # accept: read the row
        m.d.comb += [rd.addr.eq(cmd.payload.row), rd.en.eq(1)]
        b_v, b_cmd, b_hit = Signal(), Signal.like(cmd.payload), Signal()
        m.d.sync += [b_v.eq(accept), b_cmd.eq(cmd.payload)]

        # stage B: was the row written in the read's cycle (the read missed that)? Compared here,
        # from flip-flops, while the block RAM's output (~4 ns) is on its way: the command's row
        # (the emitter's start decision and the port's multiplexer) reaches only the address
        m.d.comb += b_hit.eq(lw_v & (lw_row == b_cmd.row))
        # the stored row (forwarding the write of the read's cycle); is the row written
        # in this cycle (stage C's command), which the value registered now misses?
        c_v, c_cmd, c_old, c_hit = Signal(), Signal.like(cmd.payload), Signal(W), Signal()
        m.d.sync += [c_v.eq(b_v), c_cmd.eq(b_cmd), c_old.eq(Mux(b_hit, lw_data, rd.data)),
                     c_hit.eq(wr.en & (wr.addr == b_cmd.row))]

        # stage C: add / write, response. The sum is worked out for both possible rows (the one
        # registered, the one written last cycle) and c_hit picks after the adders: c_hit fans
        # out to every bit, and its routing then overlaps the carry chains instead of preceding
        m.submodules.adder = adder = SaturatingAdder(W)  # the registered row
        m.submodules.adder_fwd = adder_fwd = SaturatingAdder(W)  # the row written last cycle
        old = Mux(c_hit, lw_data, c_old)
        m.d.comb += [adder.a.eq(c_old), adder.b.eq(c_cmd.data), adder_fwd.a.eq(lw_data), adder_fwd.b.eq(c_cmd.data)]
        total = Mux(c_hit, adder_fwd.sum, adder.sum)
        saturated = Mux(c_hit, adder_fwd.overflow, adder.overflow)
        is_add, is_write = c_cmd.op == Op.ADD, c_cmd.op == Op.WRITE
        new = Signal(W)
        m.d.comb += new.eq(Mux(is_add, total, Mux(is_write, c_cmd.data, old)))
        m.d.comb += [wr.en.eq(c_v & (is_add | is_write)), wr.addr.eq(c_cmd.row), wr.data.eq(new)]
        out = Signal(rsp_l)
        m.d.comb += [out.data.eq(new), out.overflow.eq(is_add & (saturated & c_cmd.lanes).any()),
                     out.tag.eq(c_cmd.tag),
                     fifo.w_en.eq(c_v), fifo.w_data.eq(out),
                     rsp.valid.eq(fifo.r_rdy), rsp.payload.eq(fifo.r_data), fifo.r_en.eq(rsp.ready)]
        return m
