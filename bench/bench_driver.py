"""Driver goodput against the software aggregator vs a plain UDP blaster, on loopback.

For each payload size (1 KiB = 256 elements, 8 KiB = 2048 elements, jumbo datagrams) and each of
``--runs`` runs:

* driver: ``wanreduce serve --backend model`` in its own process (1-member group, S slots), the
  host driver in this process all-reduces a float32 tensor with a configured bound (and the
  agreement exchange every call makes, bench_agreement.py); goodput = tensor bytes / wall time of ``allreduce``;
* baseline: a minimal Python blaster sends the same number of datagrams of the same size from
  this process to a receiver process on the same loopback; goodput = payload bytes received /
  time from first to last datagram received. Two blasters: one ``sendto`` per datagram (the
  baseline of the target), and one segmented ``sendmsg`` (UDP GSO) per run of up to 64
  datagrams, as the driver sends (for reference: the receiver then limits).

Prints medians and the ratio driver/baseline (target >= 0.5). ``--json FILE`` writes the numbers.
Run: ``.venv/bin/python bench/bench_driver.py [--runs 5] [--mib 16]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

from wanreduce import wire
from wanreduce.host.driver import AggregatorClient
from wanreduce.host.softagg import GSO_MAX_BYTES, GSO_MAX_SEGMENTS, SOL_UDP, UDP_SEGMENT


def _receiver(port_q, done_q, expected: int, payload_bytes: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("127.0.0.1", 0))
    s.settimeout(1.0)
    port_q.put(s.getsockname()[1])
    buf = bytearray(65536)
    got = 0
    t0 = t1 = None
    try:
        while got < expected:
            s.recv_into(buf)
            t1 = time.perf_counter()
            if t0 is None:
                t0 = t1
            got += 1
    except TimeoutError:
        pass
    done_q.put((got, (t1 - t0) if got > 1 else float("nan")))


def blast(n_datagrams: int, elements: int, gso: bool = False) -> float:
    """Baseline goodput (payload bytes/s received) of a Python UDP blaster: one ``sendto`` per
    datagram, or (``gso``) runs of up to 64 datagrams per segmented ``sendmsg`` as the driver
    sends them; the receiver takes one datagram per ``recv_into`` either way."""
    size = wire.datagram_bytes(elements)
    port_q, done_q = mp.Queue(), mp.Queue()
    p = mp.Process(target=_receiver, args=(port_q, done_q, n_datagrams, 4 * elements))
    p.start()
    port = port_q.get(timeout=10)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    data = bytes(size)
    dest = ("127.0.0.1", port)
    time.sleep(0.05)
    if gso:
        k = min(GSO_MAX_SEGMENTS, GSO_MAX_BYTES // size)
        batch = bytes(size * k)
        anc = [(SOL_UDP, UDP_SEGMENT, size.to_bytes(2, sys.byteorder))]
        left = n_datagrams
        while left:
            m = min(k, left)
            s.sendmsg([memoryview(batch)[: m * size]], anc, 0, dest)
            left -= m
    else:
        for _ in range(n_datagrams):
            s.sendto(data, dest)
    got, dt = done_q.get(timeout=60)
    p.join()
    s.close()
    return (got - 1) * 4 * elements / dt  # intervals between first and last datagram


def start_server(elements: int, slots: int) -> tuple[subprocess.Popen, tuple[str, int]]:
    p = subprocess.Popen(
        [sys.executable, "-c", "from wanreduce.cli import main; main()", "serve", "--port", "0",
         "--slots", str(slots), "--elements", str(elements), "--group", "0:0", "--job", "0",
         "--quiet"],
        stdout=subprocess.PIPE, text=True,
    )
    host, port = p.stdout.readline().strip().split(":")
    return p, (host, int(port))


def driver_goodput(addr, x: np.ndarray, elements: int, round_id: int, client: AggregatorClient) -> float:
    t = time.perf_counter()
    client.allreduce(x, job=0, group=0, round=round_id, out=x)
    return x.nbytes / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=float, default=16.0, help="tensor size per run (MiB of float32)")
    ap.add_argument("--slots", type=int, default=512)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for elements in (256, 2048):
        n_el = int(args.mib * (1 << 20) // 4)
        n_dgrams = -(-n_el // elements)
        srv, addr = start_server(elements, args.slots)
        try:
            with AggregatorClient(addr, sender_id=0, elements_per_packet=elements, rtt=0.001,
                                  max_abs=1.0, timeout=10) as c:
                rng = np.random.default_rng(0)
                drv = []
                for r in range(args.runs):
                    x = rng.uniform(-1, 1, n_el).astype(np.float32)
                    drv.append(driver_goodput(addr, x, elements, r, c))
                st = c.stats
                window = c.effective_window(0)
        finally:
            srv.terminate()
            srv.wait(10)
        base = [blast(n_dgrams, elements) for _ in range(args.runs)]
        base_gso = [blast(n_dgrams, elements, gso=True) for _ in range(args.runs)]
        row = {
            "payload_bytes": 4 * elements,
            "datagram_bytes": wire.datagram_bytes(elements),
            "tensor_mib": args.mib,
            "window_chunks": window,
            "driver_MBps_median": statistics.median(drv) / 1e6,
            "baseline_MBps_median": statistics.median(base) / 1e6,
            "driver_runs_MBps": [round(v / 1e6, 1) for v in drv],
            "baseline_runs_MBps": [round(v / 1e6, 1) for v in base],
            "baseline_gso_MBps_median": statistics.median(base_gso) / 1e6,
            "baseline_gso_runs_MBps": [round(v / 1e6, 1) for v in base_gso],
            "retransmissions": st.retransmissions,
        }
        row["ratio"] = row["driver_MBps_median"] / row["baseline_MBps_median"]
        row["ratio_gso"] = row["driver_MBps_median"] / row["baseline_gso_MBps_median"]
        rows.append(row)
        print(
            f"payload {row['payload_bytes']:5d} B: driver {row['driver_MBps_median']:7.1f} MB/s, "
            f"blaster {row['baseline_MBps_median']:7.1f} MB/s, ratio {row['ratio']:.2f}; "
            f"GSO blaster {row['baseline_gso_MBps_median']:7.1f} MB/s, ratio "
            f"{row['ratio_gso']:.2f} "
            f"(window {window}, retransmissions {st.retransmissions})",
            flush=True,
        )
    meta = {"date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
            "cpus": os.cpu_count(), "runs": args.runs}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
