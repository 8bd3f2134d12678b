"""A record modify for testing the read-modify-write engine with something other than the adder
(``hdl/dram_rmw_engine.py``; docs/large_slots.md, "The record store"). Test scaffolding of the
record store's shape, **not** the decision.

The row is a record of W/32 little-endian 32-bit fields; the command's data has the same
fields. WRITE gives the data, READ the record (``a | b``: the engine passes ``a`` = 0 for WRITE,
``b`` = 0 for READ). ADD (an "update" of the record by the command) gives, field by field:

- field 0, *count*: the record's count + 1 + the XOR of the side's 32-bit words (mod 2**32;
  ``side`` is the command's side input of ``side_width`` bits, 0 without one), the data's field
  0 ignored;
- field 1, *bitmap*: the record's bitmap OR the data's, flagged (``overflow`` bit 1) when the
  two share a bit (a contributor seen twice);
- field 2, *latest*: the data's field 2 (the newest command's value);
- field 3, *high*: the larger of the record's and the data's (unsigned);
- fields 4 and up: the record's XOR the data's.

``overflow``'s other bits are 0. ``sim/record_model.py`` is its Python twin. With ``side_width``
the component has the optional ``side`` member (the engine's ``side_shape`` = ``side_width``:
``functools.partial(ScaffoldRecordModify, side_width=16)`` as the engine's factory).

With ``late_slots`` (S of a ``DecisionState``, ``hdl/decision_state.py``) it also has the late
operand ``late`` (the job's head and the slot's pending bit at C2) and the output ``effect``, of
that state's layouts; for ADD:

- the count also adds the XOR of ``late``'s 32-bit words (the head, pending bit and run it saw);
- with the side's top bit set (the *release flag*; with a side only) the job's head chunk
  completes: the ``run`` of pending slots behind the head is released and the head advances by
  1 + run (chunk and slot, the slot mod S); nothing else;
- else the head advances when the data's field 0 has bit 0 set: chunk + 1 + pending, slot + 1
  (mod S), and the pending bit toggles unless the data's field 0 has bit 1 set (then it is not
  written).

WRITE and READ have no effect. A dependency chain through the state from command to command,
so a late operand read too early or an effect not bypassed changes a later response.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .decision_state import effect_layout, late_layout
from .layouts import lanes
from .params import check_data_width
from .slot_store_signature import Op

__all__ = ["MAX_SIDE_WIDTH", "ScaffoldRecordModify"]

MAX_SIDE_WIDTH = 1024  # the side's bits (folded into the count 32 at a time)


class ScaffoldRecordModify(wiring.Component):
    """``sum`` = the record after the command (see the module docstring), combinational."""

    def __init__(self, data_width: int, side_width: int | None = None, late_slots: int | None = None) -> None:
        check_data_width(data_width)
        if side_width is not None and not 1 <= side_width <= MAX_SIDE_WIDTH:
            raise ValueError(f"side_width must be 1..{MAX_SIDE_WIDTH}, got {side_width}")
        self.data_width, self.side_width, self.late_slots = data_width, side_width, late_slots
        side = {} if side_width is None else {"side": In(side_width)}
        late = {} if late_slots is None else {"late": In(late_layout(late_slots)),
                                              "effect": Out(effect_layout(late_slots))}
        super().__init__({"op": In(2), "a": In(data_width), "b": In(data_width),
                          "sum": Out(data_width), "overflow": Out(lanes(data_width)), **side, **late})

    @staticmethod
    def _folded(value: Value) -> Value:
        """The XOR of ``value``'s 32-bit words."""
        words = [value[k:k + 32] for k in range(0, len(value), 32)]
        folded = words[0]
        for word in words[1:]:
            folded = folded ^ word
        return folded

    def elaborate(self, platform: object) -> Module:
        m = Module()
        a, b = self.a.word_select, self.b.word_select
        fields, flags = [], [0] * lanes(self.data_width)
        for k in range(lanes(self.data_width)):
            if k == 0:
                count = a(0, 32) + 1
                if self.side_width is not None:
                    count = count + self._folded(self.side)
                if self.late_slots is not None:
                    late = self.late  # (its head, pending bit and run: not ``heads``, ``head``'s sources)
                    count = count + self._folded(Cat(late.head.as_value(), late.pending, late.run))
                fields.append(count[:32])
            elif k == 1:
                fields.append(a(1, 32) | b(1, 32))
                flags[1] = (a(1, 32) & b(1, 32)).any()
            elif k == 2:
                fields.append(b(2, 32))
            elif k == 3:
                fields.append(Mux(a(3, 32) > b(3, 32), a(3, 32), b(3, 32)))
            else:
                fields.append(a(k, 32) ^ b(k, 32))
        add = self.op == Op.ADD
        m.d.comb += [self.sum.eq(Mux(add, Cat(*fields), self.a | self.b)),
                     self.overflow.eq(Mux(add, Cat(*flags), 0))]
        if self.late_slots is not None:
            late, fx = self.late, self.effect
            rel = add & (self.side[-1] if self.side_width is not None else 0)
            step = Mux(rel, late.run, late.pending)  # slots the head skips beyond its own
            m.d.comb += [fx.release.eq(rel), fx.run.eq(late.run),
                         fx.head_we.eq(rel | (add & b(0, 32)[0])),
                         fx.head.chunk.eq(late.head.chunk + 1 + step),
                         fx.head.slot.eq(late.head.slot + 1 + Mux(rel, late.run, 0)),
                         fx.pending_we.eq(add & ~rel & ~b(0, 32)[1]), fx.pending.eq(~late.pending)]
        return m
