"""Chunking a tensor into wanreduce datagrams and reassembling results — vectorised.

A tensor of L elements becomes ceil(L / E) chunks of E elements (the last one shorter). All
datagrams of a tensor live in one (n, 22 + 4E) uint8 buffer: the aggregation headers are filled
through a structured-dtype view and the payloads are written by :func:`quantize` straight into
an int32 view, so no per-element or per-packet Python loop runs. The host sends row *i* truncated
to ``datagram_bytes(count[i])``; the RTL test benches wrap rows into Ethernet frames with
:func:`wanreduce.wire.wrap_frames`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from wanreduce import wire
from wanreduce.fixedpoint import dequantize, quantize


def _struct_code(f: wire.Field) -> str:
    codes = {1: "b", 2: "h", 4: "i"}
    if f.size not in codes:
        raise ValueError(f"field {f.name} of {f.size} bytes has no struct code")
    c = codes[f.size]
    return c if f.signed else c.upper()


# The aggregation header as a ``struct.Struct``, derived from ``wire.AGG_FIELDS`` (fields are
# contiguous and in offset order): one C call packs or unpacks a whole header, which is what a
# per-datagram host loop wants (a NumPy record view costs more for a single header).
AGG_HEADER_STRUCT = struct.Struct(">" + "".join(_struct_code(f) for f in wire.AGG_FIELDS))
AGG_HEADER_INDEX = {f.name: i for i, f in enumerate(wire.AGG_FIELDS)}
assert AGG_HEADER_STRUCT.size == wire.AGG_HEADER_BYTES
assert [f.agg_offset for f in wire.AGG_FIELDS] == sorted(f.agg_offset for f in wire.AGG_FIELDS)


@dataclass
class Packets:
    """Datagrams of one tensor: ``buf`` rows are aggregation header + padded payload."""

    buf: np.ndarray  # (n, 22 + 4E) uint8
    counts: np.ndarray  # (n,) element count of each datagram
    elements_per_packet: int
    clipped: int = 0  # values clipped during quantisation (bound broken)

    @property
    def headers(self) -> np.ndarray:
        return self.buf[:, : wire.AGG_HEADER_BYTES].view(wire.AGG_HEADER_DTYPE)[:, 0]

    @property
    def payload(self) -> np.ndarray:
        """(n, E) int32 view of the payloads (little-endian)."""
        return self.buf[:, wire.AGG_HEADER_BYTES :].view(wire.ELEMENT_DTYPE)

    def __len__(self) -> int:
        return len(self.counts)

    def datagram(self, i: int) -> memoryview:
        """Row ``i`` truncated to its real length: what goes on the wire."""
        return memoryview(self.buf[i, : wire.datagram_bytes(int(self.counts[i]))])


def chunk_counts(length: int, elements_per_packet: int) -> np.ndarray:
    """Element count of every chunk of a tensor of ``length`` elements."""
    if elements_per_packet < 1:
        raise ValueError(f"elements_per_packet must be >= 1, got {elements_per_packet}")
    if elements_per_packet > wire.MAX_ELEMENTS_JUMBO:
        raise ValueError(
            f"elements_per_packet {elements_per_packet} exceeds the jumbo-frame limit "
            f"{wire.MAX_ELEMENTS_JUMBO}"
        )
    n = max(1, -(-length // elements_per_packet))
    counts = np.full(n, elements_per_packet, dtype=np.int64)
    counts[-1] = length - (n - 1) * elements_per_packet
    return counts


def packetize(
    x: np.ndarray,
    *,
    exp: int,
    n_contributors: int,
    elements_per_packet: int = wire.DEFAULT_ELEMENTS,
    job_id: int = 0,
    round_id: int = 0,
    first_chunk: int = 0,
    sender_id: int = 0,
    group_id: int = 0,
    msg_type: int = wire.MsgType.CONTRIBUTION,
    session: int = 0,
) -> Packets:
    """Quantise ``x`` (any shape, float32/float16/bfloat16) and lay it out as datagrams
    (``session``: the run's tag, docs/protocol.md "Sessions")."""
    flat = np.asarray(x).reshape(-1)
    if flat.size == 0:
        raise ValueError("cannot all-reduce an empty tensor")
    counts = chunk_counts(flat.size, elements_per_packet)
    n = len(counts)
    buf = np.empty((n, wire.datagram_bytes(elements_per_packet)), dtype=np.uint8)
    pk = Packets(buf, counts, elements_per_packet)
    payload = pk.payload
    full = (n - 1) * elements_per_packet
    body = flat[:full].reshape(n - 1, elements_per_packet)
    _, clipped = quantize(body, exp, n_contributors, out=payload[: n - 1])
    tail = payload[n - 1]
    _, c2 = quantize(flat[full:], exp, n_contributors, out=tail[: counts[-1]])
    tail[counts[-1] :] = 0
    pk.clipped = clipped + c2
    h = pk.headers
    h["magic"] = wire.MAGIC
    h["version"] = wire.VERSION
    h["msg_type"] = msg_type
    h["flags"] = 0
    h["group_id"] = group_id
    h["job_id"] = job_id
    h["round_id"] = round_id
    h["chunk"] = first_chunk + np.arange(n, dtype=np.uint32)
    h["sender_id"] = sender_id
    h["scale_exp"] = exp
    h["element_count"] = counts
    h["session"] = session
    return pk


def reassemble(
    payloads: np.ndarray,
    counts: np.ndarray,
    exp: int,
    dtype: np.dtype | type = np.float32,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Result payloads ((n, E) int32, chunk order) back to a flat float tensor."""
    payloads = np.asarray(payloads)
    counts = np.asarray(counts)
    length = int(counts.sum())
    e = payloads.shape[1]
    if np.any(counts[:-1] != e):
        raise ValueError("only the last chunk may be shorter than elements_per_packet")
    flat_q = payloads.reshape(-1)[:length]
    y = dequantize(np.ascontiguousarray(flat_q), exp, dtype)
    if out is not None:
        out.reshape(-1)[...] = y
        return out
    return y
