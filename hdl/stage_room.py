"""Room for stages 1 and 2, out of ``Reducer.elaborate`` (issue 16 item 6; docs/reducer.md,
"Parts built inline"): stage 1 takes a beat only if every entry it and stage 2 may still
push has a place, in the release queue (one entry per message, with its last beat) and in the
slot-store command FIFO and the assembler's header FIFO (one per beat). Each is registered,
worked out a cycle ahead without an adder: the level compared with constants, one per number of
entries that may be added, and the additions (push, the beat leaving stage 1, the pop; the beats
in stages 1 and 2, ``take``) chosen at the last multiplexers (the latest inputs last).

Functions that build their logic into the caller's module, not components: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed). ``stage_room`` registers both (the reducer's ``room``); ``StageRoom``
wraps it for the unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from amaranth.hdl import Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StageRoom", "fifo_room_next", "nonzero_next", "queue_room_next", "room_next", "stage_room",
           "stage_room_layout"]


def room_next(level: Value, depth: int, *, push: Value, pop: Value) -> Value:
    """A FIFO's ``level + push - pop != depth`` next cycle (register it: its ``w_rdy`` / ``s.ready``
    a flip-flop, the same in every cycle): ``level`` (at most ``depth``, a flip-flop or its
    pointers' difference) compared with constants, this cycle's ``push`` and ``pop`` (one entry
    each at most) only choosing among the compares."""
    return Mux(push & ~pop, level != depth - 1, Mux(pop & ~push, 1, level != depth))


def nonzero_next(count: Value, *, inc: Value, dec: Value) -> Value:
    """A counter's ``count + inc - dec != 0`` next cycle (register it: a flip-flop equal to
    ``count != 0`` in every cycle), as ``room_next``: ``count`` (never wrapping) compared with
    constants, this cycle's ``inc`` / ``dec`` (one each at most) only choosing among them."""
    return Mux(inc & ~dec, 1, Mux(dec & ~inc, count != 1, count != 0))


def queue_room_next(count: Value, depth: int, *, push: Value, leave: Value, pop: Value) -> Value:
    """The release queue's room next cycle (register it): ``count`` + ``push`` - ``pop`` entries
    then, plus one for the message leaving stage 1 now (``leave``, its last beat) and one for
    the message behind it, fit in ``depth``."""
    def room(n: int) -> Value:  # count + n < depth
        return count < depth - n if n < depth else Const(0)

    def room_pop(p: int) -> Value:  # with the pop: one place more
        k = 1 - p
        return Mux(push, Mux(leave, room(k + 2), room(k + 1)), Mux(leave, room(k + 1), room(k)))

    return Mux(pop, room_pop(1), room_pop(0))


def fifo_room_next(levels: Sequence[tuple[Value, int]], *, v1: Value, v2: Value, take: Value) -> Value:
    """Room next cycle (register it) in every FIFO of ``levels`` ((level, depth) pairs) for a
    beat in stage 1 (``v1``), in stage 2 (``v2``), the beat taken now (``take``) and one more:
    each pushes one entry at most into each FIFO, so a dropped ``ready`` downstream holds the
    input before one overflows."""
    def room(n: int) -> Value:  # level + n < depth, for every FIFO
        return reduce(lambda a, b: a & b, [level < depth - n for level, depth in levels])

    def room_take(k: int) -> Value:
        return Mux(v1, Mux(v2, room(k + 2), room(k + 1)), Mux(v2, room(k + 1), room(k)))

    return Mux(take, room_take(1), room_take(0))


def stage_room(m: Module, *, count: Value, depth: int, push: Value, leave: Value, pop: Value,
               levels: Sequence[tuple[Value, int]], v1: Value, v2: Value, take: Value,
               copy: bool = False, copy_gate: tuple[Value, Value] | None = None,
               ) -> tuple[Value, Value, Value, Value | None]:
    """Register ``queue_room_next`` (``room_q``) and ``fifo_room_next`` (``room_c``); returns
    ``room`` (both), ``room_q``, ``room_c`` and, with ``copy``, ``room_t``: ``room`` again from
    inverted copies of both (``room_qn`` / ``room_cn``; yosys merges identical flip-flops), for
    a consumer that should not share ``room``'s nets (else None). ``copy_gate`` (with ``copy``):
    ``(g1, g0)``, a gate's next value when ``take`` is 1 / 0 (the DRAM reducer's ``nlast1``):
    ``room_cn`` loads ``~(c_next & gate_next)``, so ``room_t`` is ``room`` & the gate, from two
    flip-flops (the gate's own flip-flop no longer in front of ``room_t``'s consumer; ``take``
    still chooses last). Named as in the reducer's
    pinned netlist (tests/test_default_rtl.py): ``room`` and ``room_q`` unnamed (``$signal``),
    ``room_c``."""
    room, room_q, room_c = Signal(name="$signal"), Signal(name="$signal"), Signal(name="room_c")
    q_next = queue_room_next(count, depth, push=push, leave=leave, pop=pop)
    c_next = fifo_room_next(levels, v1=v1, v2=v2, take=take)
    m.d.sync += room_q.eq(q_next)
    m.d.sync += room_c.eq(c_next)
    m.d.comb += room.eq(room_q & room_c)
    room_t = None
    if copy:
        room_qn, room_cn = Signal(name="room_qn", init=1), Signal(name="room_cn", init=1)  # room_q / room_c reset to 0
        room_t = Signal(name="room_t")
        if copy_gate is None:
            m.d.sync += [room_qn.eq(~q_next), room_cn.eq(~c_next)]
        else:
            g1, g0 = copy_gate
            c1, c0 = fifo_room_next(levels, v1=v1, v2=v2, take=Const(1)), fifo_room_next(levels, v1=v1, v2=v2,
                                                                                         take=Const(0))
            m.d.sync += [room_qn.eq(~q_next), room_cn.eq(~Mux(take, c1 & g1, c0 & g0))]
        m.d.comb += room_t.eq(~room_qn & ~room_cn)
    return room, room_q, room_c, room_t


def stage_room_layout() -> data.StructLayout:
    """``StageRoom``'s registered result: room in the release queue, room in the FIFOs, both."""
    return data.StructLayout({"queue": 1, "fifos": 1, "room": 1})


class StageRoom(wiring.Component):
    """``stage_room``: ``queue_room_next`` and ``fifo_room_next`` registered (the unit tests): the queue's
    ``count``, ``push``, ``leave``, ``pop``; the two FIFOs' ``level_a`` / ``level_b`` (depths
    ``depth_a`` / ``depth_b``), ``v1``, ``v2``, ``take`` in; ``room`` (``stage_room_layout``)
    out, a cycle later."""

    def __init__(self, *, queue_depth: int, depth_a: int, depth_b: int) -> None:
        for name, v in (("queue_depth", queue_depth), ("depth_a", depth_a), ("depth_b", depth_b)):
            if not 1 <= v <= 1024:
                raise ValueError(f"{name} must be 1..1024, got {v}")
        self.queue_depth, self.depth_a, self.depth_b = queue_depth, depth_a, depth_b
        super().__init__({
            "count": In(range(queue_depth + 1)), "push": In(1), "leave": In(1), "pop": In(1),
            "level_a": In(range(depth_a + 1)), "level_b": In(range(depth_b + 1)),
            "v1": In(1), "v2": In(1), "take": In(1), "room": Out(stage_room_layout()),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        room, room_q, room_c, _ = stage_room(m, count=self.count, depth=self.queue_depth, push=self.push,
                                          leave=self.leave, pop=self.pop,
                                          levels=[(self.level_a, self.depth_a), (self.level_b, self.depth_b)],
                                          v1=self.v1, v2=self.v2, take=self.take)
        m.d.comb += [self.room.queue.eq(room_q), self.room.fifos.eq(room_c), self.room.room.eq(room)]
        return m
