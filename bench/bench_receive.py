"""The driver's receive path alone: CPU time per result datagram, batch vs one datagram at a time.

No sockets and no server: one exchange of ``--chunks`` chunks whose results arrive as GRO
batches (up to 64 KiB of equal-size datagrams, as ``recv_batch`` returns them) already in
memory, so the figure is the driver's own work: CPU time of this process
(``time.process_time``, so time the process spends descheduled on a loaded machine does not
count), the minimum over ``--reps`` repetitions with the median. Per payload size:

* **receive path**, batch (what ``host/exchange.py`` does): ``ResultFilter.accept`` per block,
  ``ChunkRing.take_many`` (dequantise into ``out``), ``SendWindow.complete_many``;
  with a package that has no batch path (``ChunkRing.take``: main before it), the same
  exchange goes through that package's per-datagram loop instead (``time_per_datagram``), so
  the script measures before and after alike;
* **dequantise only**: one ``np.multiply`` of every payload into ``out`` (the floor: the
  conversion any receive path must do).

Run: ``.venv/bin/python bench/bench_receive.py [--chunks 8192] [--reps 15]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from wanreduce import wire
from wanreduce.host.chunk_ring import ChunkRing
from wanreduce.host.result_filter import ResultFilter

try:
    from wanreduce.host.result_filter import blocks
except ImportError:  # a package without the batch path (time_per_datagram)
    blocks = None
from wanreduce.host.rtt import RttEstimator
from wanreduce.host.send_window import SendWindow
from wanreduce.host.transport import gso_batch
from wanreduce.packetize import packetize

EXP = 20


class _NoSend:
    gso = True

    def send_segments(self, *a) -> None:
        pass

    def send_to(self, *a) -> bool:
        return True


def _setup(elements: int, n: int):
    x = np.random.default_rng(0).uniform(-1, 1, elements * n).astype(np.float32)
    res = packetize(x, exp=EXP, n_contributors=1, elements_per_packet=elements,
                    msg_type=wire.MsgType.RESULT)
    ring = ChunkRing(x, x.copy(), rows=n, elements=elements, exp=EXP, n_contributors=1,
                     first=0, group=0)
    win = SendWindow(ring, n, _NoSend(), ("127.0.0.1", 9), RttEstimator(0.1, min_rto=0.01,
                     max_rto=1.0), rto_cap=1.0, max_retries=3, now=0.0)
    win.send_new(0.0)  # every chunk sent (quantised into the ring)
    filt = ResultFilter(job=0, group=0, round_id=0, exp=EXP, first=0, counts=ring.counts,
                        done=win.done, source=("127.0.0.1", 9))
    return res, ring, win, filt


def _batches(res, elements: int):
    """The results as receive buffers of up to gso_batch datagrams each (bytes, count)."""
    d = wire.datagram_bytes(elements)
    k = gso_batch(d)
    flat = res.buf.reshape(-1)
    return [(bytearray(flat[o * d : min(len(res), o + k) * d].tobytes()), min(k, len(res) - o))
            for o in range(0, len(res), k)]


def time_batch(elements: int, n: int) -> float:
    res, ring, win, filt = _setup(elements, n)
    bufs = _batches(res, elements)
    d = wire.datagram_bytes(elements)
    t = time.process_time()
    for buf, k in bufs:
        for off, count, size in blocks(k * d, d):
            a = filt.accept(buf, off, count, size, sent=win.nxt)
            ring.take_many(a.index, a.flags, a.payload, a.run)
            win.complete_many(a.index, 1.0, a.run)
    dt = time.process_time() - t
    assert win.remaining == 0
    return dt / n


def time_per_datagram(elements: int, n: int) -> float:
    """The receive loop of the driver before the batch path (main at fc4a014, run with
    ``PYTHONPATH`` at an export of it): per datagram ``ResultFilter.check``, ``ChunkRing.take``
    (payload into its row), ``SendWindow.complete``; ``ChunkRing.flush`` per batch."""
    res, ring, win, filt = _setup(elements, n)
    bufs = _batches(res, elements)
    d = wire.datagram_bytes(elements)
    hdr, edt = wire.AGG_HEADER_BYTES, wire.ELEMENT_DTYPE
    t = time.process_time()
    for buf, k in bufs:
        for off in range(0, k * d, d):
            i, fl = filt.check(buf, off, d)
            if i < 0 or i >= win.nxt:
                continue
            ring.take(i, np.frombuffer(buf, edt, int(filt.counts[i]), off + hdr), fl)
            win.complete(i, 1.0)
        ring.flush()
    dt = time.process_time() - t
    assert win.remaining == 0
    return dt / n


def time_dequantise(elements: int, n: int) -> float:
    res, ring, _, _ = _setup(elements, n)
    bufs = _batches(res, elements)
    d = wire.datagram_bytes(elements)
    out = ring.out.reshape(n, elements)
    scale = np.float32(2.0**-EXP)
    t = time.process_time()
    o = 0
    for buf, k in bufs:
        pay = np.ndarray((k, elements), wire.ELEMENT_DTYPE, buf, wire.AGG_HEADER_BYTES, (d, 4))
        np.multiply(pay, scale, out=out[o : o + k])
        o += k
    return (time.process_time() - t) / n


BATCH = hasattr(ChunkRing, "take_many")
PATH = "batch" if BATCH else "per-datagram"
time_receive = time_batch if BATCH else time_per_datagram


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--elements", type=int, nargs="+", default=[256, 2048])
    args = ap.parse_args()
    print(f"{args.chunks} chunks, {args.reps} reps (interleaved), load average "
          f"{' / '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    for e in args.elements:
        runs: dict[str, list[float]] = {"receive": [], "dequantise": []}
        for _ in range(args.reps):
            runs["receive"].append(time_receive(e, args.chunks))
            runs["dequantise"].append(time_dequantise(e, args.chunks))
        lo = {k: min(v) * 1e6 for k, v in runs.items()}
        med = {k: statistics.median(v) * 1e6 for k, v in runs.items()}
        print(f"payload {4 * e:5d} B ({gso_batch(wire.datagram_bytes(e))} per batch), CPU us per "
              f"result datagram, min / median: {PATH} receive path {lo['receive']:.2f} / "
              f"{med['receive']:.2f}; dequantise only {lo['dequantise']:.2f} / "
              f"{med['dequantise']:.2f}; receive / dequantise {lo['receive'] / lo['dequantise']:.2f}"
              f" (min)", flush=True)
    print(f"load average at the end {' / '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
