"""The chunks of one streaming exchange: quantised on demand into a ring of datagram rows, each
result dequantised straight into the output tensor as it arrives.

Replaces the whole-tensor packet buffer of a tensor pass (docs/host.md, "Memory"): chunk ``i``
lives in row ``i % rows`` from when the send window first sends it until its result arrived
(it may be resent until then). The window sends chunk ``i`` only while ``i < base + w`` (``base``
the lowest chunk without its result), so a ring of ``rows >= w`` rows never overwrites a chunk
that may still be resent.

A result payload is copied into its chunk's row (the contribution there is no longer needed)
and the rows taken in one receive pass are dequantised into ``out`` together by :meth:`flush`
(one NumPy call per run of consecutive chunks, before the window refills any row), so the
per-datagram cost is one copy, not a dequantisation call.

A result with the OVERFLOW flag is not written: the chunk's elements of ``out`` keep what they
held, which with ``out is x`` is still the chunk's input, so the driver's overflow redo
re-quantises it from there at a smaller scale (docs/host.md, "Overflow").
"""

from __future__ import annotations

import numpy as np

from wanreduce import wire
from wanreduce.packetize import Packets, chunk_counts, packetize_into, reassemble

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
        self._payload = self.buf[:, _HDR:].view(wire.ELEMENT_DTYPE)
        self._taken: list[int] = []  # chunks whose result is in their row, not yet in out

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

    def take(self, i: int, payload: np.ndarray, flags: int) -> None:
        """Chunk ``i``'s result payload (int32, its element count) arrived: into its row."""
        if flags & _OVERFLOW:  # left for the redo (the caller has the flags)
            return
        self._payload[i % len(self.buf), : len(payload)] = payload
        self._taken.append(i)

    def flush(self) -> None:
        """Dequantise the results taken since the last flush into ``out``, one call per run of
        consecutive chunks in consecutive rows (must run before their rows are refilled)."""
        taken = self._taken
        if not taken:
            return
        taken.sort()
        R, counts, pay, out, dt = len(self.buf), self.counts, self._payload, self.out, self.out.dtype
        j = 0
        while j < len(taken):
            s = taken[j]
            k = 1
            if self.target is None:  # a redo's chunks go to scattered places: one at a time
                while j + k < len(taken) and taken[j + k] == s + k and (s + k) % R:
                    k += 1
            t = s if self.target is None else int(self.target[s])
            r = s % R
            reassemble(pay[r : r + k], counts[s : s + k], self.exp, dt, out=out, first=t)
            j += k
        taken.clear()


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

    def take(self, i: int, payload: np.ndarray, flags: int) -> None:
        self._payload[i, : len(payload)] = payload

    def flush(self) -> None:
        """Nothing to do: the results stay in ``pk.buf``."""
