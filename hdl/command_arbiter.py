"""The reducer's slot-store command port (docs/reducer.md, "Slot store"): contributions' WRITE/ADD
commands and the emitter's READs merged into one stream in the order of the decisions that
caused them, so results leave in the golden model's order.

The decision side pushes into a command FIFO (through a register: a cycle of latency), one
entry per cycle at most: a command (a row of
a contribution), optionally flagged ``then_emit``, or a bare marker. A flag or marker goes with
every release-queue entry the decision pushes (on its message's last row, or alone for a
resend, which has no rows): when the FIFO's head reaches it, the port passes to the emitter,
which pops exactly that entry and issues its READs; when the emitter is idle again, the port
returns to the FIFO. The store's ``cmd.ready`` may drop at any time: nothing is dropped or
reordered, the FIFO fills and the owner holds its input (``level``, a credit for the decision
side's room check: the FIFO is an ``UnguardedFIFO``, so ``push`` must never meet a full FIFO,
and its write enable is ``push`` alone; its head and ``r_rdy`` come from flip-flops, so the
FIFO's read enable is one LUT of flip-flops: port owner, ``r_rdy``, the head's marker, the
store's ``cmd.ready``). The emitter's phase (the port is its own, or a marker passes it now) is
a flip-flop worked out a cycle ahead from the FIFO head's next value, so ``e_go`` is
``e_phase & cmd.ready``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .slot_store_signature import cmd_layout
from .stage_room import room_next
from .unguarded_fifo import UnguardedFIFO

__all__ = ["CMD_DEPTH", "CommandArbiter"]

CMD_DEPTH = 32  # contribution commands buffered toward the slot store


class CommandArbiter(wiring.Component):
    """Contribution commands (FIFO) and emitter READs -> ``cmd`` (see the module docstring).

    ``push`` (never into a full FIFO: ``level < depth``) with ``push_cmd``, ``push_marker`` (no command), ``push_then_emit``; ``level``: FIFO
    entries, with the one in the input register. Emitter: ``e_valid``/``e_cmd`` in (a READ, only while ``e_go``), ``e_go`` and
    ``e_allow_pop`` out, ``e_popped``/``e_idle``/``e_final`` (its entry's last READ) in. ``idle``: FIFO empty, port with the FIFO.
    ``copy_error``: the FIFO's flip-flop copies disagree (``UnguardedFIFO``; never, if right).
    ``registered_one``: the FIFO's "one entry" flag from a flip-flop too (``UnguardedFIFO``; the
    DRAM configuration's, whose head register missed 8 ns behind the pointers' compare).
    ``registered_room``: an output ``room`` (``level < depth``) from a flip-flop, the next cycle's
    compare with this cycle's push and pop only choosing (``copy_error`` checks it; the record
    path's, docs/large_slots.md "(session 36, round 5)").
    """

    def __init__(self, data_width: int, address_bits: int, depth: int = CMD_DEPTH, *,
                 registered_one: bool = False, registered_room: bool = False) -> None:
        self.depth, self.registered_one, self.registered_room = depth, registered_one, registered_room
        self.cmd_layout = cmd_layout(data_width, address_bits)
        super().__init__({
            "push": In(1),
            "push_cmd": In(self.cmd_layout),
            "push_marker": In(1),
            "push_then_emit": In(1),
            "level": Out(range(depth + 1)),
            "e_valid": In(1),
            "e_cmd": In(self.cmd_layout),
            "e_go": Out(1),
            "e_allow_pop": Out(1),
            "e_popped": In(1),
            "e_idle": In(1),
            "e_final": In(1),
            "idle": Out(1),
            "cmd": Out(stream.Signature(self.cmd_layout)),
            "copy_error": Out(1),
            **({"room": Out(1)} if registered_room else {}),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        entry = data.StructLayout({"cmd": self.cmd_layout, "marker": 1, "then_emit": 1})
        m.submodules.fifo = fifo = UnguardedFIFO(entry.size, self.depth, registered_head=True,
                                                 registered_one=self.registered_one)
        # the push is registered on its way in (w_v, w_q): the decision side's late write enable
        # reaches two flip-flops, not the LUT RAM's write enables and the head's multiplexers;
        # ``level`` counts the registered entry
        w, w_q, head = Signal(entry), Signal(entry), Signal(entry)
        w_v = Signal()
        m.d.sync += [w_v.eq(self.push), w_q.eq(w)]
        # ``level`` is a flip-flop copy of fifo.level + w_v (copy_error checks it), counted from
        # the push and the FIFO's read: the decision side's room check compares it with
        # constants, with no subtractor (the FIFO's pointers) and adder (w_v) in front
        level = Signal(range(self.depth + 1))
        m.d.sync += level.eq(level + self.push - fifo.r_en)
        m.d.comb += [
            w.cmd.eq(self.push_cmd), w.marker.eq(self.push_marker), w.then_emit.eq(self.push_then_emit),
            fifo.w_en.eq(w_v), fifo.w_data.eq(w_q), head.eq(fifo.r_data), self.level.eq(level),
        ]
        to_emitter = Signal()  # the port is the emitter's (since a flagged command passed)
        to_emitter_next = Signal()
        popped = Signal()  # ... and it has popped its entry
        cmd = self.cmd
        marker = ~to_emitter & fifo.r_rdy & head.marker  # the port passes now (the marker goes)
        # the emitter's phase (to_emitter | marker) is a flip-flop worked out a cycle ahead from
        # to_emitter's and the FIFO head's next values, so the emitter's go (and its start,
        # go & s_ok) is one LUT of flip-flops and the command multiplexer's select a flip-flop;
        # copy_error checks it against to_emitter | marker every cycle
        e_phase = Signal()
        next_head = Signal(entry)
        m.d.comb += [next_head.eq(fifo.r_data_next), to_emitter_next.eq(to_emitter)]
        m.d.sync += [e_phase.eq(to_emitter_next | (fifo.r_rdy_next & next_head.marker)),
                     to_emitter.eq(to_emitter_next)]
        popped_now = to_emitter & popped
        copy_error = fifo.copy_error | (level != fifo.level + w_v) | (e_phase != (to_emitter | marker))
        if self.registered_room:  # level < depth next cycle: a push alone needs two free, a read alone frees one
            room = Signal(init=1, name="room_r")
            m.d.sync += room.eq(room_next(level, self.depth, push=self.push, pop=fifo.r_en))
            m.d.comb += self.room.eq(room)
            copy_error |= room != (level != self.depth)
        m.d.comb += [self.idle.eq(~to_emitter & ~fifo.r_rdy & ~w_v), self.e_go.eq(e_phase & cmd.ready),
                     self.copy_error.eq(copy_error)]
        with m.If(e_phase):
            m.d.comb += [self.e_allow_pop.eq(~popped_now),
                         cmd.valid.eq(self.e_valid), cmd.payload.eq(self.e_cmd), fifo.r_en.eq(marker)]
            # back to the FIFO after the entry's last READ (or once idle after its pop)
            finish = self.e_final | (popped_now & self.e_idle)
            m.d.comb += to_emitter_next.eq(~finish)
            m.d.sync += popped.eq(popped_now | self.e_popped)
        with m.Elif(fifo.r_rdy):
            m.d.comb += [cmd.valid.eq(1), cmd.payload.eq(head.cmd), fifo.r_en.eq(cmd.ready)]
            with m.If(cmd.ready & head.then_emit):
                m.d.comb += to_emitter_next.eq(1)
                m.d.sync += popped.eq(0)
        return m
