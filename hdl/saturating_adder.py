"""Lane-wise int32 saturating adder: one reduction step of the core (``fixedpoint.saturating_add``).

Purely combinational. ``a`` and ``b`` carry ``W/32`` little-endian int32 lanes (lane k in bits
``32k+31..32k``); ``sum`` is the lane-wise sum clamped to ``[INT32_MIN, INT32_MAX]`` and
``overflow`` has one bit per lane, set when that lane's exact sum fell outside the int32 range
(the reducer masks lanes beyond ``element_count`` before folding it into the sticky flag).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce.wire import INT32_MAX, INT32_MIN

from .layouts import lanes
from .params import check_data_width

__all__ = ["SaturatingAdder"]


class SaturatingAdder(wiring.Component):
    """``sum = sat32(a + b)`` per 32-bit lane, ``overflow[k]`` when lane k saturated."""

    def __init__(self, data_width: int) -> None:
        check_data_width(data_width)
        self.data_width = data_width
        self.lanes = lanes(data_width)
        super().__init__({
            "a": In(data_width),
            "b": In(data_width),
            "sum": Out(data_width),
            "overflow": Out(self.lanes),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        outs, overs = [], []
        for k in range(self.lanes):
            a = self.a[32 * k : 32 * k + 32].as_signed()
            b = self.b[32 * k : 32 * k + 32].as_signed()
            s = Signal(signed(33), name=f"s{k}")
            m.d.comb += s.eq(a + b)
            # 33-bit exact sum: it overflowed iff bits 32 and 31 differ.
            under, over = s[32] & ~s[31], ~s[32] & s[31]
            outs.append(Mux(under, Const(INT32_MIN & 0xFFFFFFFF, 32), Mux(over, Const(INT32_MAX, 32), s[:32])))
            overs.append(under | over)
        m.d.comb += [self.sum.eq(Cat(*outs)), self.overflow.eq(Cat(*overs))]
        return m
