"""A record modify for testing the read-modify-write engine with something other than the adder
(``hdl/dram_rmw_engine.py``; docs/large_slots.md, "The record store"). Test scaffolding of the
record store's shape, **not** the decision.

The row is a record of W/32 little-endian 32-bit fields; the command's data has the same
fields. WRITE gives the data, READ the record (``a | b``: the engine passes ``a`` = 0 for WRITE,
``b`` = 0 for READ). ADD (an "update" of the record by the command) gives, field by field:

- field 0, *count*: the record's count + 1 (mod 2**32), the data's field 0 ignored;
- field 1, *bitmap*: the record's bitmap OR the data's, flagged (``overflow`` bit 1) when the
  two share a bit (a contributor seen twice);
- field 2, *latest*: the data's field 2 (the newest command's value);
- field 3, *high*: the larger of the record's and the data's (unsigned);
- fields 4 and up: the record's XOR the data's.

``overflow``'s other bits are 0. ``sim/record_model.py`` is its Python twin.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .layouts import lanes
from .params import check_data_width
from .slot_store_signature import Op

__all__ = ["ScaffoldRecordModify"]


class ScaffoldRecordModify(wiring.Component):
    """``sum`` = the record after the command (see the module docstring), combinational."""

    def __init__(self, data_width: int) -> None:
        check_data_width(data_width)
        self.data_width = data_width
        super().__init__({"op": In(2), "a": In(data_width), "b": In(data_width),
                          "sum": Out(data_width), "overflow": Out(lanes(data_width))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        a, b = self.a.word_select, self.b.word_select
        fields, flags = [], [0] * lanes(self.data_width)
        for k in range(lanes(self.data_width)):
            if k == 0:
                fields.append((a(0, 32) + 1)[:32])
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
        return m
