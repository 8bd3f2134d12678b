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
from wanreduce.fixedpoint import check_dtype, dequantize, quantize


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
    n_contributors: int | None = None,
    elements_per_packet: int = wire.DEFAULT_ELEMENTS,
    **header: int,
) -> Packets:
    """Quantise ``x`` (any shape, float32/float16/bfloat16, ``n_contributors`` required; int32:
    fixed-point values already at ``exp``, copied as they are, ``n_contributors`` refused) and
    lay it out as datagrams in a new buffer holding every
    chunk. ``header``: the header keywords of :func:`packetize_into`
    (``job_id``, ``round_id``, ``first_chunk``, ``sender_id``, ``group_id``, ``msg_type``,
    ``session``: the run's tag, docs/protocol.md "Sessions"), which fills caller-given rows with
    a range of chunks."""
    flat = np.asarray(x).reshape(-1)
    if flat.size == 0:
        raise ValueError("cannot all-reduce an empty tensor")
    counts = chunk_counts(flat.size, elements_per_packet)
    buf = np.empty((len(counts), wire.datagram_bytes(elements_per_packet)), dtype=np.uint8)
    clipped = packetize_into(buf, flat, exp=exp, n_contributors=n_contributors, **header)
    return Packets(buf, counts, elements_per_packet, clipped)


def packetize_into(
    buf: np.ndarray,
    flat: np.ndarray,
    chunks: range | None = None,
    *,
    exp: int,
    n_contributors: int | None = None,
    job_id: int = 0,
    round_id: int = 0,
    first_chunk: int = 0,
    sender_id: int = 0,
    group_id: int = 0,
    msg_type: int = wire.MsgType.CONTRIBUTION,
    session: int = 0,
) -> int:
    """Quantise chunks ``chunks`` (indices into the tensor, step 1; default all) of the flat
    tensor ``flat`` into the rows of ``buf``, one datagram per row; returns the clipped count.
    An int32 ``flat`` holds fixed-point values already at ``exp`` (the partial sums a sharded
    all-reduce carries from phase to phase, ``host/sharded_allreduce.py``): they are copied as
    they are (nothing clipped); everything else is the same. ``n_contributors`` (the N of the
    quantisation bound) is required for float input and refused for int32 input, where it
    could have no effect (a caller passing it believes its values are being scaled for N).

    ``buf`` is a caller-owned (k, 22 + 4E) uint8 array (E = elements per packet, from its
    width; k >= len(chunks); rows may be a slice of a reused ring): row ``i`` receives tensor
    chunk ``chunks[i]``, numbered ``first_chunk + chunks[i]`` on the wire, its payload quantised
    straight into the row (:func:`wanreduce.fixedpoint.quantize`, nothing else allocated) and
    zero-padded past a short last chunk. Rows beyond ``len(chunks)`` are left alone.
    """
    if buf.dtype != np.uint8 or buf.ndim != 2 or buf.shape[1] < wire.datagram_bytes(1):
        raise ValueError("buf must be a (rows, 22 + 4 * elements_per_packet) uint8 array")
    elements = (buf.shape[1] - wire.AGG_HEADER_BYTES) // 4
    if buf.shape[1] != wire.datagram_bytes(elements):
        raise ValueError(f"buf rows of {buf.shape[1]} bytes are not 22 + 4 * elements_per_packet")
    n_all = -(-flat.size // elements)
    if chunks is None:
        chunks = range(n_all)
    if chunks.step != 1 or not 0 <= chunks.start <= chunks.stop <= n_all:
        raise ValueError(f"chunks must be a range of step 1 within 0..{n_all}, got {chunks}")
    k = len(chunks)
    if k > len(buf):
        raise ValueError(f"{k} chunks do not fit in {len(buf)} rows of buf")
    rows = buf[:k]
    payload = rows[:, wire.AGG_HEADER_BYTES :].view(wire.ELEMENT_DTYPE)
    lo = chunks.start * elements
    hi = min(flat.size, chunks.stop * elements)
    full = min(k, (hi - lo) // elements)  # rows filled completely
    fixed = flat.dtype == np.int32
    if fixed and n_contributors is not None:
        raise ValueError(f"n_contributors: must be omitted for int32 input (fixed-point values "
                         f"already at exp, copied as they are), got {n_contributors}")
    if not fixed and n_contributors is None:
        raise ValueError(f"n_contributors: required to quantise {flat.dtype} input "
                         f"(1..{wire.MAX_SENDERS} members)")

    def put(src: np.ndarray, dst: np.ndarray) -> int:
        """``src`` into the payload words ``dst``: copied if fixed point, else quantised."""
        if fixed:
            dst[...] = src
            return 0
        return quantize(src, exp, n_contributors, out=dst)[1]

    clipped = put(flat[lo : lo + full * elements].reshape(full, elements), payload[:full])
    if full < k:  # the tensor's short last chunk
        tail = payload[full]
        c = hi - lo - full * elements
        clipped += put(flat[hi - c : hi], tail[:c])
        tail[c:] = 0
    h = rows[:, : wire.AGG_HEADER_BYTES].view(wire.AGG_HEADER_DTYPE)[:, 0]
    h[:] = header_record(msg_type, group_id, job_id, round_id, sender_id, exp, elements, session)
    h["chunk"] = (first_chunk + np.arange(chunks.start, chunks.stop, dtype=np.int64)) & 0xFFFFFFFF
    if full < k:
        h["element_count"][full] = hi - lo - full * elements
    return clipped


def header_record(
    msg_type: int, group_id: int, job_id: int, round_id: int, sender_id: int, exp: int,
    count: int, session: int,
) -> np.ndarray:
    """One aggregation header (chunk 0, flags 0) as a ``wire.AGG_HEADER_DTYPE`` record, to be
    copied into every row of a run of datagrams at once."""
    r = np.zeros((), wire.AGG_HEADER_DTYPE)
    r["magic"], r["version"], r["msg_type"], r["flags"] = wire.MAGIC, wire.VERSION, msg_type, 0
    r["group_id"], r["job_id"], r["round_id"], r["sender_id"] = group_id, job_id, round_id, sender_id
    r["scale_exp"], r["element_count"], r["session"] = exp, count, session
    return r


def reassemble(
    payloads: np.ndarray,
    counts: np.ndarray,
    exp: int,
    dtype: np.dtype | type = np.float32,
    out: np.ndarray | None = None,
    *,
    first: int = 0,
) -> np.ndarray:
    """Result payloads ((n, E) int32, chunk order) back to a flat float tensor, one pass.

    Without ``out``: a new flat array of ``counts.sum()`` elements. With ``out`` (any shape,
    C-contiguous, ``dtype``): payload row ``i`` is dequantised straight into the elements of
    tensor chunk ``first + i`` (``out.reshape(-1)[(first + i) * E :][:counts[i]]``), so a
    caller can write any range of chunks into the whole tensor; returns ``out``.
    """
    payloads = np.asarray(payloads)
    counts = np.asarray(counts)
    n, e = payloads.shape
    if len(counts) != n or n == 0:
        raise ValueError(f"counts must give the element count of each of the {n} rows")
    if np.any(counts[:-1] != e) or not 0 < counts[-1] <= e:
        raise ValueError("only the last chunk may be shorter than elements_per_packet")
    length = int(counts.sum())
    if out is None:
        oflat = np.empty(length, check_dtype(dtype))
        if first:
            raise ValueError("first needs out (the whole tensor)")
    else:
        if not out.flags.c_contiguous:
            raise ValueError("out must be C-contiguous (a reshaped copy would be lost)")
        oflat = out.reshape(-1)[first * e :]
        if len(oflat) < length or first < 0:
            raise ValueError(
                f"chunks {first}..{first + n - 1} of {e} elements do not fit in out "
                f"({out.size} elements)"
            )
    full = n - 1 if counts[-1] < e else n
    dequantize(payloads[:full], exp, dtype, out=oflat[: full * e].reshape(full, e))
    if full < n:
        c = int(counts[-1])
        dequantize(payloads[full, :c], exp, dtype, out=oflat[full * e : full * e + c])
    return out if out is not None else oflat
