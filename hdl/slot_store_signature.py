"""The slot-store interface (issue 16): where the reducer's partial sums live, behind one
signature served by two backends (on-chip block RAM, external DRAM over AXI4).

A slot store holds ``rows = S << row_bits`` rows of W bits (W/32 little-endian int32 lanes).

- ``cmd`` (in): ``op`` (:class:`Op`), ``row``, ``data`` (W), ``lanes`` (W/32: the lanes whose
  overflow counts), ``tag`` (:data:`TAG_BITS`, carried to the response untouched), ``more`` (a
  hint: the next command continues this message on the next row; a DRAM backend keeps its
  burst open for it, an on-chip backend ignores it).
  WRITE stores ``data``; ADD stores the per-lane saturating sum of the stored row and ``data``
  (``hdl/saturating_adder.py``); READ returns the stored row.
- ``rsp`` (out): exactly one per command, **in command order**: ``data`` is the row's new value
  (WRITE/ADD) or the stored row (READ); ``overflow`` = any masked lane saturated in this ADD;
  ``tag`` as given.

A read-modify-write engine with a side input (``side_shape``, ``hdl/dram_rmw_engine.py``) adds
a last field ``side`` to both: the command's operand for its modify, echoed on its response.

Commands take effect in order and each sees every earlier command's effect, whatever the
backend's latency. Both streams are full valid/ready handshakes; a backend sustains one command
per cycle whenever its memory delivers the bandwidth.
"""

from __future__ import annotations

import enum

from amaranth.hdl import ShapeLike
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import lanes
from .params import check_core_params, check_large_slots

__all__ = ["EMIT_TAG", "TAG_BITS", "Op", "cmd_layout", "row_address_bits", "rsp_layout", "slot_store_signature"]

TAG_BITS = 16  # reducer's use: slot number (<= 12 bits) + emit/first/last flags
EMIT_TAG = 1 << (TAG_BITS - 1)  # the record path's: a completing contribution's command, its response a result row


class Op(enum.IntEnum):
    """``cmd.op`` values (2 bits)."""

    WRITE = 0
    ADD = 1
    READ = 2


def row_address_bits(slots: int, row_bits: int) -> int:
    """Bits of a row address: ``log2(S << row_bits)`` (S a power of two, checked)."""
    check_large_slots(slots)
    check_core_params(row_bits=row_bits)
    return (slots << row_bits).bit_length() - 1


def cmd_layout(data_width: int, address_bits: int, tag_bits: int = TAG_BITS,
               side_shape: ShapeLike | None = None) -> data.StructLayout:
    """Payload of ``cmd``; with ``side_shape`` (a read-modify-write engine's side input,
    ``hdl/dram_rmw_engine.py``) a last field ``side`` of that shape."""
    fields = {"op": 2, "row": address_bits, "data": data_width, "lanes": lanes(data_width),
              "tag": tag_bits, "more": 1}
    return data.StructLayout(fields if side_shape is None else {**fields, "side": side_shape})


def rsp_layout(data_width: int, tag_bits: int = TAG_BITS,
               side_shape: ShapeLike | None = None) -> data.StructLayout:
    """Payload of ``rsp``; with ``side_shape`` a last field ``side``: the command's, echoed."""
    fields = {"data": data_width, "overflow": 1, "tag": tag_bits}
    return data.StructLayout(fields if side_shape is None else {**fields, "side": side_shape})


def slot_store_signature(data_width: int, address_bits: int, tag_bits: int = TAG_BITS,
                         side_shape: ShapeLike | None = None) -> dict[str, wiring.Member]:
    """The members ``cmd`` and ``rsp`` every slot store has (a backend adds its memory port);
    ``side_shape``: both carry a ``side`` field (a read-modify-write engine's side input)."""
    return {"cmd": In(stream.Signature(cmd_layout(data_width, address_bits, tag_bits, side_shape))),
            "rsp": Out(stream.Signature(rsp_layout(data_width, tag_bits, side_shape)))}
