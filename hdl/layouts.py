"""Amaranth data layouts of the core's internal streams, derived from ``wanreduce.wire``.

Between the ingress parsers and the egress framer the core moves *message beats*: one beat of
payload (``data``, W bits, element k of the beat in lanes ``data[32k+31:32k]``) plus the parsed
aggregation header (``hdr``, held constant on every beat of a message) and ``first``/``last``
markers. Ethernet/IPv4/UDP headers exist only at the edges (parser in, framer out).

The header layout is built from ``wire.AGG_FIELDS``: no field width or offset is written here.
``frame_field(hdr_bits, name)`` slices a field out of the 64-byte raw header (byte 0 in bits 7..0,
as on the AXI4-Stream bus) with the big-endian byte order of the wire format.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Shape, Value, signed, unsigned
from amaranth.lib import data, stream

from wanreduce import wire

from .params import check_data_width

# Aggregation-header fields a message carries through the core (constant ones are dropped).
_CARRIED = ("msg_type", "flags", "group_id", "job_id", "round_id", "chunk", "sender_id",
            "scale_exp", "element_count", "session")


def _shape(f: wire.Field) -> Shape:
    return signed(f.bits) if f.signed else unsigned(f.bits)


AggHeaderLayout = data.StructLayout({name: _shape(wire.FIELD[name]) for name in _CARRIED})

HEADER_BITS = 8 * wire.HEADER_BYTES  # 512: the raw Ethernet/IPv4/UDP/aggregation header


def lanes(width: int) -> int:
    """int32 elements per beat."""
    return check_data_width(width) // 32


def header_beats(width: int) -> int:
    """Beats the 64-byte frame header occupies (the payload starts on the next beat)."""
    return HEADER_BITS // check_data_width(width)


def payload_beats(element_count: int | Value, width: int) -> int | Value:
    """Beats of payload for ``element_count`` int32 elements (an int, or a Value: a shift)."""
    n = lanes(width)
    return (element_count + n - 1) >> (n.bit_length() - 1)


def beat_lanes(elements: int | Value, beat: int | Value, width: int) -> int | Value:
    """Lanes of beat ``beat`` of a message of ``elements`` int32 elements that hold one (bit k:
    element ``beat * W/32 + k`` exists): all ones but on a short last beat. The store's ``lanes``
    (whose overflow counts) and the reducer's ``lane_ok``; Python ints give an int (the twins)."""
    n = lanes(width)
    rem = elements - beat * n
    if isinstance(rem, int):
        return sum(1 << k for k in range(n) if rem > k)
    return Cat(*[rem > k for k in range(n)])


def lane_bits(lane_mask: int | Value, width: int) -> int | Value:
    """The W-bit mask of the lanes in ``lane_mask`` (bit k: bits 32k+31..32k all ones), so
    ``data & lane_bits(beat_lanes(...), W)`` zeroes a short last beat's missing elements (the
    payload gate's commands; docs/slot_store.md, "The short last beat"). Python ints give an int
    (the twins)."""
    n = lanes(width)
    if isinstance(lane_mask, int):
        return sum(0xFFFFFFFF << (32 * k) for k in range(n) if lane_mask >> k & 1)
    return Cat(*[lane_mask[k].replicate(32) for k in range(n)])


def message_beat_layout(width: int) -> data.StructLayout:
    """One beat of a message inside the core."""
    check_data_width(width)
    return data.StructLayout(
        {"data": width, "hdr": AggHeaderLayout, "first": 1, "last": 1}
    )


def message_stream(width: int) -> stream.Signature:
    """``amaranth.lib.stream`` signature of a message stream of the given width."""
    return stream.Signature(message_beat_layout(width))


def frame_field(raw: Value, name: str) -> Value:
    """Field ``name`` of a raw 512-bit frame header (bus byte order) as a big-endian value."""
    f = wire.FIELD[name]
    byte_slices = [raw[8 * (f.offset + i) : 8 * (f.offset + i + 1)] for i in range(f.size)]
    value = Cat(*reversed(byte_slices))  # most significant byte first on the wire
    return value.as_signed() if f.signed else value


def frame_field_slices(name: str) -> list[tuple[int, int]]:
    """(bit offset in the raw header, byte index within the field from its MSB) pairs."""
    f = wire.FIELD[name]
    return [(8 * (f.offset + i), i) for i in range(f.size)]


# Job table entry as the reducer sees it (packed the same way as the JOBn_CFG register).
JobCfgLayout = data.StructLayout({"enable": 1, "_pad0": 7, "log2_window": 5, "_pad1": 3, "base": 16})


def ResetLayout(jobs: int) -> data.StructLayout:  # noqa: N802 - a layout factory
    """Payload of the window-reset stream (control block -> reducer): the job and its new head."""
    return data.StructLayout({"job": range(jobs), "head": 32})
