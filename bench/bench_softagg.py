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

``--in-process``: the CPU of ``SoftAggregator.handle_batch`` alone (no sockets: results queued
and their sends skipped; thread CPU time, so the machine's load barely counts), microseconds per
datagram for batches of 1 datagram (the worst case for a per-batch cost such as the counters'
lock: the emulator's forwarded copies arrive one by one) and of 64 (one GRO batch of a sender's
run), with the lock and without it, alternated run by run (ABBA); medians of ``--runs``.
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


def lock_cost(lock, n: int = 200_000) -> float:
    """CPU us of one uncontended acquire + release of ``lock`` (a ``with`` block), less an empty
    loop's: what the counters' lock adds per ``handle_batch`` call, free of the load's noise in
    the whole path's A/B (median of 5)."""
    def timed(use: bool) -> float:
        t0 = time.thread_time()
        if use:
            for _ in range(n):
                with lock:
                    pass
        else:
            for _ in range(n):
                pass
        return time.thread_time() - t0
    return statistics.median((timed(True) - timed(False)) / n * 1e6 for _ in range(5))


def handle_cost(elements: int, per_call: int, n: int = 8192, runs: int = 5) -> dict[str, float]:
    """CPU us per datagram of ``handle_batch`` in ``per_call``-datagram batches (module
    docstring, ``--in-process``), with its counters' lock and without it (``_handle_batch``, the
    same body), alternated run by run (ABBA); thread CPU time, so other processes' load does not count.
    One member's contributions to consecutive chunks."""
    from wanreduce.host.softagg import SoftAggregator

    agg = SoftAggregator(slots=512, elements=elements, groups=1, jobs=1)
    try:
        agg.configure(groups={0: (0,)}, jobs=[0])
        agg.transport.send_segments = lambda *a, **k: None  # CPU only: no sends
        agg._batching = True  # results queued, as in the serve loop
        x = np.random.default_rng(0).uniform(-1, 1, n * elements).astype(np.float32)
        seg = wire.datagram_bytes(elements)
        addr = ("127.0.0.1", 9)
        first = 0
        per: dict[str, list[float]] = {"lock": [], "no_lock": []}
        ab = (("lock", agg.handle_batch), ("no_lock", agg._handle_batch))
        for r in range(runs):
            for name, handle in ab if r % 2 else ab[::-1]:  # ABBA: no order bias
                pk = packetize(x, exp=20, n_contributors=1, elements_per_packet=elements,
                               first_chunk=first)
                first += n
                mv = memoryview(pk.buf.reshape(-1))
                t0 = time.thread_time()
                for i in range(0, n, per_call):
                    handle(per_call * seg, seg, addr, mv[i * seg : (i + per_call) * seg])
                    agg._flush()
                per[name].append((time.thread_time() - t0) / n * 1e6)
        out = {k: statistics.median(v) for k, v in per.items()}
        out["lock_us_per_batch"] = lock_cost(agg._counting)
        out["lock_cost_pct"] = statistics.median(
            100 * (a / b - 1) for a, b in zip(per["lock"], per["no_lock"], strict=True))
        return out
    finally:
        agg.close()


def finish(rows: list[dict], path: str | None) -> None:
    """Print the load at the end; write ``rows`` with the date and load to ``path`` if given."""
    print(f"load average at the end {' / '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if path:
        with open(path, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "load_end": os.getloadavg(), "rows": rows}, f, indent=2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=float, default=64.0, help="contribution payload per run (MiB)")
    ap.add_argument("--elements", type=int, nargs="+", default=[256, 2048])
    ap.add_argument("--slots", type=int, default=512)
    ap.add_argument("--inflight", type=int, default=256, help="unanswered chunks at most")
    ap.add_argument("--json", default=None)
    ap.add_argument("--in-process", action="store_true",
                    help="handle_batch's CPU alone, us per datagram (module docstring)")
    args = ap.parse_args()
    if args.in_process:
        rows = [{"elements": e, "per_call": k, **handle_cost(e, k, runs=args.runs)}
                for e in args.elements for k in (1, 64)]
        for r in rows:
            print(f"payload {4 * r['elements']:5d} B, {r['per_call']:2d} per batch: "
                  f"{r['lock']:.3f} us per datagram with the lock, {r['no_lock']:.3f} without "
                  f"(lock {r['lock_cost_pct']:+.2f} %, median of per-run ratios); the lock alone "
                  f"{r['lock_us_per_batch']:.3f} us per batch = "
                  f"{100 * r['lock_us_per_batch'] / r['per_call'] / r['no_lock']:.2f} %", flush=True)
        finish(rows, args.json)
        return
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
    finish(rows, args.json)


if __name__ == "__main__":
    main()
