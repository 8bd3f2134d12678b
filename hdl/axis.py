"""The project's AXI4-Stream interface: one ``wiring.Signature`` every hdl component uses.

``AXIStreamSignature(data_width, user_width)`` describes a stream *source* (manager): tdata,
tkeep, tlast, tuser and tvalid flow out, tready flows in. A component that consumes a stream
declares ``s_axis: In(AXIStreamSignature(...))``; one that produces declares
``m_axis: Out(AXIStreamSignature(...))``.

tkeep has one bit per tdata byte (AXI4-Stream byte qualifier). tuser is one field per beat
(not per byte): its meaning is up to the component that uses it. tid/tdest/tstrb are not
used anywhere in wanreduce and are left out.

Port names in the generated Verilog, and attaching cocotbext-axi
------------------------------------------------------------------
Amaranth flattens interface members by joining the path with ``__``: the member
``s_axis.tdata`` becomes the top-level port ``s_axis__tdata``. cocotbext-axi finds the signals
with either of::

    AxiStreamBus.from_prefix(dut, "s_axis", bus_separator="__")
    AxiStreamBus.from_prefix(dut, "s_axis_")   # the default separator "_" after "s_axis_"

(both checked against Verilator 5.48 and Icarus 11 in ``sim/tb_skid_buffer.py``).
"""

from __future__ import annotations

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXIStreamSignature"]

MIN_DATA_WIDTH = 8
MAX_DATA_WIDTH = 1024
MAX_USER_WIDTH = 1024


class AXIStreamSignature(wiring.Signature):
    """AXI4-Stream source signature: tdata, tkeep, tlast, tuser, tvalid out; tready in.

    ``data_width`` is in bits, a multiple of 8 between 8 and 1024 (wanreduce datapaths use
    64..512); ``tkeep`` is ``data_width // 8`` bits. ``user_width`` is between 1 and 1024.
    Two signatures are equal when their widths are equal, so ``wiring.connect`` accepts any
    pair of components built with the same widths.
    """

    def __init__(self, data_width: int, user_width: int = 1) -> None:
        if (
            not isinstance(data_width, int)
            or isinstance(data_width, bool)
            or data_width % 8 != 0
            or not MIN_DATA_WIDTH <= data_width <= MAX_DATA_WIDTH
        ):
            raise ValueError(
                f"data_width must be a multiple of 8 between {MIN_DATA_WIDTH} and "
                f"{MAX_DATA_WIDTH}, got {data_width!r}"
            )
        if (
            not isinstance(user_width, int)
            or isinstance(user_width, bool)
            or not 1 <= user_width <= MAX_USER_WIDTH
        ):
            raise ValueError(
                f"user_width must be an integer between 1 and {MAX_USER_WIDTH}, got {user_width!r}"
            )
        self._data_width = data_width
        self._user_width = user_width
        super().__init__(
            {
                "tdata": Out(data_width),
                "tkeep": Out(data_width // 8),
                "tlast": Out(1),
                "tuser": Out(user_width),
                "tvalid": Out(1),
                "tready": In(1),
            }
        )

    @property
    def data_width(self) -> int:
        """Width of tdata in bits."""
        return self._data_width

    @property
    def user_width(self) -> int:
        """Width of tuser in bits."""
        return self._user_width

    @property
    def keep_width(self) -> int:
        """Width of tkeep: one bit per tdata byte."""
        return self._data_width // 8

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is AXIStreamSignature
            and other.data_width == self.data_width
            and other.user_width == self.user_width
        )

    def __hash__(self) -> int:
        return hash((AXIStreamSignature, self._data_width, self._user_width))

    def __repr__(self) -> str:
        return f"AXIStreamSignature({self._data_width}, user_width={self._user_width})"
