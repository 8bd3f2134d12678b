"""The slot store's responses split by what asked for them, with the sticky overflow flags (issue
16, large S step 4; docs/large_slots.md, "The record store"): the contributions' WRITE / ADD
responses go on as before, the emitter's READ responses go to the emitter with the slot's
sticky OVERFLOW flag.

The store's ``rsp`` carries neither the op nor the row, so each command the store takes is
queued (``cmd_fire`` with ``cmd_op`` / ``cmd_row``: op and slot, a FIFO of ``depth``), the
oldest moved into a head register (the entry the next response answers) and popped with its
response (the store answers in command order). ``room``: the queue can take one more (the owner
gates the store's ``cmd`` handshake with it, so the queue never overflows whatever the store
holds); a flip-flop, the next cycle's ``level != depth`` with this cycle's push and pop only
choosing among the compares (the same value as the queue's ``w_rdy`` in every cycle: ``error``
checks it; docs/large_slots.md, "(session 36, round 5)"). The flags, one per slot
(``sticky_flags``, shared with ``ResultAssembler``: flip-flops up to
``FLAGS_IN_FLIP_FLOPS_MAX_SLOTS`` slots, above a block RAM read as an entry is loaded into the
head register): a WRITE (a chunk's first contribution) clears the slot's, an ADD whose
``overflow`` is set sets it, and a READ's response goes out on ``reads`` with the flag as it
stands then — after every contribution before the READ, before any after it. A response whose
tag has ``EMIT_TAG`` (a completing contribution's WRITE / ADD, or the READs of one drained: the
payload gate's) also goes out on ``own`` (a READ only there, not on ``reads``) with the slot's
flag after this response's update (``sticky_flags``' ``new``): the result's rows taken from the
completer's own responses (docs/large_slots.md, "Results from the completing contribution's own
ADD responses"). ``own`` is pushed as the response is taken and never waited for (its owner
reserves room for every row that may come). ``error`` (sticky): a response with nothing queued,
or a row pushed on ``own`` while it was not ready (lost), or ``room`` not the queue's ``w_rdy``
(never, if right).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .slot_store_signature import EMIT_TAG, TAG_BITS, Op, rsp_layout
from .stage_room import room_next
from .sticky_flags import FLAGS_IN_FLIP_FLOPS_MAX_SLOTS, sticky_flags

__all__ = ["StoreReadSplit", "read_rsp_layout"]


def read_rsp_layout(data_width: int) -> data.StructLayout:
    """A READ's response for the emitter: the row's ``data`` and the slot's sticky ``overflow``."""
    return data.StructLayout({"data": data_width, "overflow": 1})


class StoreReadSplit(wiring.Component):
    """Store responses -> ``out`` (WRITE / ADD) or ``reads`` (READ, with the sticky flag); see the
    module docstring. Parameters: ``data_width`` W, ``slots`` S, ``row_bits``, ``depth`` (the
    queue: at least the commands the store may hold unanswered, ``unanswered_max`` of its
    ``outstanding``, else ``room`` throttles it: at 64 in front of a 256-entry store, a store whose
    reads take 100 cycles took ~0.6 command per cycle; docs/benchmarks.md, "Aggregator core with
    DRAM slots", the record path's breakdown).
    ``FLAGS_IN_FLIP_FLOPS_MAX_SLOTS``: read at elaboration, tests lower it."""

    FLAGS_IN_FLIP_FLOPS_MAX_SLOTS = FLAGS_IN_FLIP_FLOPS_MAX_SLOTS

    def __init__(self, data_width: int, *, slots: int, row_bits: int, depth: int = 64) -> None:
        if not 2 <= depth <= 2048:
            raise ValueError(f"depth must be 2..2048, got {depth}")
        self.slots, self.row_bits, self.depth = slots, row_bits, depth
        self.slot_bits = (slots - 1).bit_length()
        layout = rsp_layout(data_width, TAG_BITS)
        super().__init__({
            "cmd_fire": In(1), "cmd_op": In(2), "cmd_row": In(self.slot_bits + row_bits), "room": Out(1),
            "rsp": In(stream.Signature(layout)), "out": Out(stream.Signature(layout)),
            "reads": Out(stream.Signature(read_rsp_layout(data_width))),
            "own": Out(stream.Signature(read_rsp_layout(data_width))), "error": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        entry = data.StructLayout({"op": 2, "slot": self.slot_bits})
        m.submodules.queue = q = fifo.SyncFIFO(width=entry.size, depth=self.depth)
        w, nxt, head, head_v = Signal(entry), Signal(entry), Signal(entry), Signal()
        rsp, out, reads = self.rsp, self.out, self.reads
        pop = rsp.valid & rsp.ready  # the head answered
        load = q.r_rdy & (~head_v | pop)  # the oldest queued entry into the head register
        m.d.comb += [w.op.eq(self.cmd_op), w.slot.eq(self.cmd_row[self.row_bits:]), q.w_data.eq(w),
                     q.w_en.eq(self.cmd_fire), nxt.eq(q.r_data), q.r_en.eq(load)]
        # ``room`` from a flip-flop: the queue's level (a flip-flop) compared with constants, the
        # push and the pop of this cycle only choose (push alone: one fewer; pop alone: room)
        room = Signal(init=1, name="room_r")
        m.d.sync += room.eq(room_next(q.level, self.depth, push=q.w_en & q.w_rdy, pop=q.r_en & q.r_rdy))
        m.d.comb += self.room.eq(room)
        with m.If(load):
            m.d.sync += [head.eq(nxt), head_v.eq(1)]
        with m.Elif(pop):
            m.d.sync += head_v.eq(0)
        is_read = head.op == Op.READ
        flag, new = sticky_flags(m, self.slots, in_memory=self.slots > self.FLAGS_IN_FLIP_FLOPS_MAX_SLOTS, load=load,
                                 next_slot=nxt.slot, slot=head.slot, update=pop & ~is_read,
                                 clear=head.op == Op.WRITE, set_=(head.op == Op.ADD) & rsp.payload.overflow)
        own, emit = self.own, (rsp.payload.tag & EMIT_TAG).any()
        m.d.comb += [out.payload.eq(rsp.payload), reads.payload.data.eq(rsp.payload.data), reads.payload.overflow.eq(flag),
                     own.payload.data.eq(rsp.payload.data), own.payload.overflow.eq(new),
                     out.valid.eq(rsp.valid & head_v & ~is_read), reads.valid.eq(rsp.valid & head_v & is_read & ~emit),
                     rsp.ready.eq(head_v & Mux(is_read, emit | reads.ready, out.ready)),
                     own.valid.eq(pop & emit)]  # pushed, never waited for: its owner reserved the room
        with m.If((rsp.valid & ~head_v & ~q.r_rdy) | (own.valid & ~own.ready) | (room != q.w_rdy)):
            m.d.sync += self.error.eq(1)
        return m
