"""The chunks of one streaming exchange: quantised on demand into a ring of datagram rows, each
result dequantised straight into the output tensor as it arrives.

Replaces the whole-tensor packet buffer of a tensor pass (docs/host.md, "Memory"): chunk ``i``
lives in row ``i % rows`` from when the send window first sends it until its result arrived
(it may be resent until then). The window sends chunk ``i`` only while ``i < base + w`` (``base``
the lowest chunk without its result), so a ring of ``rows >= w`` rows never overwrites a chunk
that may still be resent.

The results of one receive batch (a ``UDP_GRO`` batch of up to 64 KiB, filtered at once by
:class:`~wanreduce.host.result_filter.ResultFilter`) are dequantised by :meth:`take_many`
straight from the receive buffer into ``out``: one fused NumPy pass (int32 -> float, times
``2**-exp``) per run of consecutive chunks, no copy into the ring and no Python per datagram.

A result with the OVERFLOW flag is not written: the chunk's elements of ``out`` keep what they
held, which with ``out is x`` is still the chunk's input, so the driver's overflow redo
re-quantises it from there at a smaller scale (docs/host.md, "Overflow").
"""

from __future__ import annotations

import numpy as np

from wanreduce import wire
from wanreduce.fixedpoint import dequantize
from wanreduce.packetize import Packets, chunk_counts, packetize_into

_HDR = wire.AGG_HEADER_BYTES
_OVERFLOW = int(wire.Flags.OVERFLOW)


class ChunkRing:
    """Chunks of ``src`` (flat) toward ``out`` (flat): result of chunk ``i`` goes to tensor
    chunk ``target[i]`` of ``out`` (default ``i``), dequantised at ``exp``."""

    def __init__(self, src: np.ndarray, out: np.ndarray, *, rows: int, elements: int, exp: int,
                 n_contributors: int, first: int, group: int, target: np.ndarray | None = None,
                 **header: int) -> None:
        self.counts = chunk_counts(src.size, elements)
        n = len(self.counts)
        self.buf = np.empty((max(1, min(rows, n)), wire.datagram_bytes(elements)), np.uint8)
        self.src, self.out, self.elements, self.exp = src, out, elements, exp
        self.nq, self.first, self.group, self.header = n_contributors, first, group, header
        self.target = target
        self.clipped = 0

    def __len__(self) -> int:
        return len(self.counts)

    def fill(self, lo: int, hi: int) -> None:
        """Quantise chunks ``lo .. hi - 1`` into their rows (split where the ring wraps)."""
        R = len(self.buf)
        while lo < hi:
            r = lo % R
            k = min(hi - lo, R - r)
            self.clipped += packetize_into(
                self.buf[r : r + k], self.src, range(lo, lo + k), exp=self.exp,
                n_contributors=self.nq, first_chunk=self.first, group_id=self.group,
                **self.header)
            lo += k

    def datagram(self, i: int) -> memoryview:
        """Chunk ``i``'s datagram as sent (it must still be in the ring)."""
        return memoryview(self.buf[i % len(self.buf), : _HDR + 4 * int(self.counts[i])])

    def take_many(self, index: np.ndarray, flags: np.ndarray, payload: np.ndarray,
                  run: int = -1) -> None:
        """The results of chunks ``index`` arrived (flags, payloads: (k, count) int32, one count
        for all; ``run``: the first chunk when they are consecutive, in order, none overflowed):
        dequantised into their elements of ``out``; OVERFLOW results are left for the redo (the
        caller has the flags)."""
        k, c = payload.shape
        if run >= 0 and self.target is None:  # the usual batch: one fused pass into a slice
            s = run * self.elements
            dequantize(payload, self.exp, self.out.dtype, out=self.out[s : s + k * c].reshape(k, c))
            return
        keep = (flags & _OVERFLOW) == 0
        if not keep.all():
            index, payload = index[keep], payload[keep]
        if len(index) == 0:
            return
        t = index if self.target is None else self.target[index]
        E, oflat, dt = self.elements, self.out, self.out.dtype
        # runs of consecutive tensor chunks: one dequantise each
        cuts = np.flatnonzero(np.diff(t) != 1) + 1 if len(t) > 1 else ()
        lo = 0
        for hi in (*cuts, len(t)):
            s = int(t[lo]) * E
            k = int(hi) - lo  # several chunks in a run are full ones (only the last is short)
            dequantize(payload[lo:hi], self.exp, dt, out=oflat[s : s + k * c].reshape(k, c))
            lo = int(hi)


class WholeBuffer:
    """A fully packetized :class:`Packets` as an exchange (the agreement): results overwrite
    the contributions in ``pk.buf``, read back by the caller."""

    def __init__(self, pk: Packets) -> None:
        self.pk, self.buf, self.counts = pk, pk.buf, pk.counts
        self.first = int(pk.headers["chunk"][0])
        self.group = int(pk.headers["group_id"][0])
        self.clipped = pk.clipped  # counted once, by the driver after the exchange
        self._payload = pk.payload

    def __len__(self) -> int:
        return len(self.counts)

    def fill(self, lo: int, hi: int) -> None:
        """Nothing to do: every row was filled by ``packetize``."""

    def datagram(self, i: int) -> memoryview:
        return self.pk.datagram(i)

    def take_many(self, index: np.ndarray, flags: np.ndarray, payload: np.ndarray,
                  run: int = -1) -> None:
        """The results of chunks ``index`` overwrite their contributions' payloads."""
        self._payload[index, : payload.shape[1]] = payload
