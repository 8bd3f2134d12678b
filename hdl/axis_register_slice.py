"""AXI4-Stream register slice: :class:`~wanreduce.hdl.skid_buffer.SkidBuffer` on AXI4-Stream ports.

Breaks every combinational path between two AXI4-Stream ports (the board wrappers put one on each
core port in use). ``tdata``/``tkeep``/``tlast``/``tuser`` travel as one payload of the skid
buffer; its properties (registered outputs and ``s_axis.tready`` with the default ``SKID``
type, one beat per cycle, no beat lost, duplicated or reordered) are those of ``SkidBuffer``,
checked by ``tests/test_skid_buffer.py`` on both.

``ready_copy=True`` (``SKID`` only; the Versa DRAM build's input slices behind the MACs,
docs/benchmarks.md session 46): the skid buffer built with ``SkidBuffer(ready_copy=True)``, so
``s_axis.tready`` (a flip-flop read by the MAC's receive FIFO) drives none of the skid
register's enables; ``copy_error`` (an output with the option) is the skid buffer's. Off by
default: the RTL unchanged.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .axis import AXIStreamSignature
from .skid_buffer import RegisterType, SkidBuffer

__all__ = ["AXIStreamRegisterSlice"]


class AXIStreamRegisterSlice(wiring.Component):
    """AXI4-Stream register slice, by default a full-throughput skid buffer (one cycle of latency).

    Ports: ``s_axis`` (stream in), ``m_axis`` (stream out), both
    ``AXIStreamSignature(data_width, user_width)``; clock and reset are the ``sync`` domain.
    """

    def __init__(self, data_width: int, user_width: int = 1,
                 register_type: RegisterType | str = RegisterType.SKID, *, ready_copy: bool = False) -> None:
        # AXIStreamSignature validates the widths with a clear ValueError.
        sig = AXIStreamSignature(data_width, user_width)
        if isinstance(register_type, str):  # by name (JSON-able: generate_verilog's params)
            if register_type not in RegisterType.__members__:
                raise ValueError(f"register_type must be one of {', '.join(RegisterType.__members__)}, "
                                 f"got {register_type!r}")
            register_type = RegisterType[register_type]
        self.data_width, self.user_width, self.register_type = data_width, user_width, register_type
        self.ready_copy = bool(ready_copy)
        if self.ready_copy and register_type is not RegisterType.SKID:
            raise ValueError(f"ready_copy needs register_type SKID, got {register_type.name}")
        self.layout = data.StructLayout(
            {"tdata": data_width, "tkeep": data_width // 8, "tlast": 1, "tuser": user_width})
        super().__init__({"s_axis": In(sig), "m_axis": Out(sig),
                          **({"copy_error": Out(1)} if self.ready_copy else {})})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.skid = skid = SkidBuffer(self.layout, self.register_type, ready_copy=self.ready_copy)
        if self.ready_copy:
            m.d.comb += self.copy_error.eq(skid.copy_error)
        s, o = self.s_axis, self.m_axis
        fields = ("tdata", "tkeep", "tlast", "tuser")
        m.d.comb += [skid.s.valid.eq(s.tvalid), s.tready.eq(skid.s.ready),
                     *[skid.s.payload[f].eq(getattr(s, f)) for f in fields]]
        m.d.comb += [o.tvalid.eq(skid.m.valid), skid.m.ready.eq(o.tready),
                     *[getattr(o, f).eq(skid.m.payload[f]) for f in fields]]
        return m
