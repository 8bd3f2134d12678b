"""Software aggregator throughput alone: a raw UDP client blasts one member's contributions at
``wanreduce serve --backend model`` and counts the results that come back.

Run: .venv/bin/python bench/bench_softagg.py [--runs 5] [--mib 64] [--elements 256 2048]
Config: loopback; the server in its own process (S = 512 slots, group 0 = {0}, job 0 with the
full window, in-order release), so every contribution completes its chunk and is answered by
one result. The client (this process) holds pre-built datagrams (``packetize``, consecutive
chunk numbers continuing across runs), sends them in segmented batches (UDP GSO, up to 64 per
``sendmsg``) keeping at most ``--inflight`` chunks unanswered, and receives the results with
``UDP_GRO``; there is no quantisation, no reassembly and no per-datagram Python on the client,
so the figure is what the server sustains. Goodput = contribution payload bytes / time from the
first send to the last result. Medians of the runs; ``--json FILE`` writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
from bench_driver import start_server  # the same server set-up as bench_driver

from wanreduce import wire
from wanreduce.host.transport import UdpTransport, gso_batch
from wanreduce.packetize import packetize


def blast_run(t: UdpTransport, dest, buf: np.ndarray, inflight: int, silence: float = 5.0) -> float:
    """Send every row of ``buf`` (full datagrams of one size), at most ``inflight`` unanswered;
    return seconds from the first send to the last result. A silence of ``silence`` s (a lost
    datagram: the blaster does not resend) raises."""
    n, seg = buf.shape
    mv = memoryview(buf.reshape(-1))
    k = gso_batch(seg)
    rbufs = [bytearray(1 << 16)]
    sent = got = 0
    t0 = time.perf_counter()
    while got < n:
        while sent < n and sent - got < inflight:
            m = min(k, n - sent, inflight - (sent - got))
            t.send_segments(mv[sent * seg : (sent + m) * seg], seg, dest)
            sent += m
        r = t.recv_batch(rbufs)
        if r is None:
            if not t.wait_readable(silence):
                raise RuntimeError(f"no result for {silence} s after {got} of {n}: datagrams lost")
            continue
        got += -(-r[0] // r[1])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=float, default=64.0, help="contribution payload per run (MiB)")
    ap.add_argument("--elements", type=int, nargs="+", default=[256, 2048])
    ap.add_argument("--slots", type=int, default=512)
    ap.add_argument("--inflight", type=int, default=256, help="unanswered chunks at most")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(f"{args.mib} MiB per run, {args.runs} runs, load average "
          f"{' / '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    rows = []
    for elements in args.elements:
        n = int(args.mib * (1 << 20) // (4 * elements))
        x = np.random.default_rng(0).uniform(-1, 1, n * elements).astype(np.float32)
        srv, addr = start_server(elements, args.slots)
        rates = []
        try:
            with UdpTransport(bind=("127.0.0.1", 0)) as t:
                t.enable_gro()
                first = 0
                for _ in range(args.runs):
                    pk = packetize(x, exp=20, n_contributors=1, elements_per_packet=elements,
                                   first_chunk=first)
                    first += n
                    rates.append(4 * n * elements / blast_run(t, addr, pk.buf, args.inflight))
        finally:
            srv.terminate()
            srv.wait(10)
        med = statistics.median(rates)
        us = 4 * elements / med * 1e6
        rows.append({"elements": elements, "datagram_bytes": wire.datagram_bytes(elements),
                     "MBps_median": med / 1e6, "runs_MBps": [round(r / 1e6, 1) for r in rates],
                     "us_per_datagram": us})
        print(f"payload {4 * elements:5d} B: serve {med / 1e6:7.1f} MB/s "
              f"({us:.2f} us per contribution + result; runs "
              f"{', '.join(f'{r / 1e6:.0f}' for r in rates)})", flush=True)
    print(f"load average at the end {' / '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "load_end": os.getloadavg(), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
