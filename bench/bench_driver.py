"""Driver goodput against the software aggregator vs raw UDP blasters, on loopback, side by side.

For each payload size (1 KiB = 256 elements, 8 KiB = 2048 elements) ``wanreduce serve --backend
model`` runs in its own process (1-member group, S slots) and each of ``--runs`` rounds times,
one after the other (alternating, so load changes hit all three alike):

* **driver**: the host driver in this process all-reduces a float32 tensor in place with a
  configured bound (plus the agreement exchange every call makes, bench_agreement.py);
  goodput = tensor bytes / wall time of ``allreduce``;
* **blaster**: a minimal Python loop, one ``sendto`` per datagram, to a receiver process taking
  one datagram per ``recv_into``;
* **GSO->GRO blaster**: the same datagrams as segmented ``sendmsg`` (UDP GSO, up to 64 per call,
  ``UdpTransport.send_segments``) to a receiver with ``UDP_GRO`` (``UdpTransport.recv_batch``):
  a raw UDP path with no per-datagram Python on either side, what a batch-oriented driver could
  reach.

**Window.** The driver's window is given (``window=``, not derived from ``rtt=``): the largest
that caps nothing here, ``min(S / 2, rmem_max / datagram bytes)`` chunks (``--window`` to
override). S / 2 because lost-result recovery needs ``w <= W/2`` (docs/protocol.md; ``serve
--slots 2048`` gives W = S = 2048, so 1024 chunks); ``rmem_max`` (``net.core.rmem_max``, 4 MiB
on the machines measured) because the kernel caps every socket's receive buffer there, and a
window of more bytes than the receiving socket (serve's, then the driver's) can hold turns
each scheduling pause of the receiver into loss (1024 chunks of 8 KiB lost 1254-2835
datagrams per three 128 MiB calls). So 510 chunks (4.2 MB) at 8 KiB and 1024 at 1 KiB. The
earlier ``rtt=0.001`` with S = 512 capped the window at 153 chunks (rate x RTT) at 8 KiB and at
256 (S / 2) at 1 KiB, below what the loopback's round trip under load needs.

Blaster goodput = payload bytes received / time from first to last datagram received (same
datagram size and count as the driver's tensor). Medians of the runs and the ratios
driver/blaster are printed, with the CPU seconds per GB of tensor that the driver process and
the ``serve`` process spent during the calls (medians; on a loaded machine these vary less than
wall-clock goodput: the busier of the two bounds the goodput). Then, per size, the peak memory of one ``allreduce(x, out=x)`` and
one ``y = allreduce(x)`` in a fresh subprocess: the process's RSS high-water mark (VmHWM, reset
through /proc/self/clear_refs once ``x`` exists) and tracemalloc's peak of traced allocations
(NumPy buffers included), each over the tensor's size.
``--json FILE`` writes every number. Run: ``.venv/bin/python bench/bench_driver.py
[--runs 5] [--mib 256]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc

import numpy as np

from wanreduce import wire
from wanreduce.host.driver import AggregatorClient
from wanreduce.host.transport import UdpTransport, gso_batch


def _receiver(port_q, done_q, expected: int, gro: bool) -> None:
    """Count datagrams until ``expected`` arrived or 1 s of silence; report (count, seconds
    from the first to the last, CPU seconds of this process from the first on)."""
    t = UdpTransport(bind=("127.0.0.1", 0))
    if gro and not t.enable_gro():
        gro = False
    port_q.put(t.address[1])
    bufs = [bytearray(1 << 16)]
    got = 0
    t0 = t1 = None
    while got < expected:
        r = t.recv_batch(bufs) if gro else t.recv_into(bufs[0])
        if r is None:
            if not t.wait_readable(1.0):
                break
            continue
        t1 = time.perf_counter()
        if t0 is None:
            t0, c0 = t1, time.process_time()
        got += -(-r[0] // r[1]) if gro else 1
    done_q.put((got, (t1 - t0) if got > 1 else float("nan"), time.process_time() - c0 if got else 0.0))


def blast(n_datagrams: int, elements: int, gso: bool = False) -> tuple[float, float, float]:
    """Baseline goodput (payload bytes/s received) of a Python UDP blaster: one ``sendto`` per
    datagram to a per-datagram receiver, or (``gso``) segmented sends to a ``UDP_GRO`` receiver;
    with the CPU seconds per GB of payload of the sender and of the receiver (what the system
    calls alone cost: the floor under the driver's and serve's CPU per GB, each of which sends
    and receives the same bytes once)."""
    size = wire.datagram_bytes(elements)
    port_q, done_q = mp.Queue(), mp.Queue()
    p = mp.Process(target=_receiver, args=(port_q, done_q, n_datagrams, gso))
    p.start()
    dest = ("127.0.0.1", port_q.get(timeout=30))
    time.sleep(0.05)
    c0 = time.process_time()
    with UdpTransport(bind=("127.0.0.1", 0)) as t:
        if gso:
            k = gso_batch(size)
            batch = memoryview(bytes(size * k))
            left = n_datagrams
            while left:
                m = min(k, left)
                t.send_segments(batch[: m * size], size, dest)
                left -= m
        else:
            s, data = t.sock, bytes(size)
            s.setblocking(True)
            for _ in range(n_datagrams):
                s.sendto(data, dest)
        send_cpu = time.process_time() - c0
        got, dt, recv_cpu = done_q.get(timeout=120)
    p.join()
    gb = n_datagrams * 4 * elements / 1e9
    return (got - 1) * 4 * elements / dt, send_cpu / gb, recv_cpu / gb  # first to last datagram


def start_server(elements: int, slots: int) -> tuple[subprocess.Popen, tuple[str, int]]:
    p = subprocess.Popen(
        [sys.executable, "-c", "from wanreduce.cli import main; main()", "serve", "--port", "0",
         "--slots", str(slots), "--elements", str(elements), "--group", "0:0", "--job", "0",
         "--quiet"],
        stdout=subprocess.PIPE, text=True,
    )
    host, port = p.stdout.readline().strip().split(":")
    return p, (host, int(port))


def rmem_max() -> int:
    """The kernel's cap on a socket's receive buffer (bytes; 4 MiB if it cannot be read)."""
    try:
        with open("/proc/sys/net/core/rmem_max") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 4 << 20


def bench_window(elements: int, slots: int) -> int:
    """The benchmark's window: min(S / 2, rmem_max / datagram bytes) chunks (module docstring)."""
    return max(1, min(slots // 2, rmem_max() // wire.datagram_bytes(elements)))


def _client(addr, elements: int, window: int) -> AggregatorClient:
    return AggregatorClient(addr, sender_id=0, elements_per_packet=elements, window=window,
                            max_abs=1.0, timeout=30)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (from /proc; Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def probe_memory(addr, elements: int, mib: float, inplace: bool, window: int) -> dict:
    """One all-reduce of a ``mib`` MiB tensor (after a small warm-up call): peak RSS and peak
    traced allocation above what was held before the call, over the tensor's size."""
    with _client(addr, elements, window) as c:
        c.allreduce(np.zeros(4 * elements, np.float32), job=0, group=0, round=0)
        x = np.random.default_rng(0).uniform(-1, 1, int(mib * (1 << 20) // 4)).astype(np.float32)
        out = {}
        for rnd, traced in ((1, False), (2, True)):
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
            before = _status_kib("VmRSS")
            if traced:
                tracemalloc.start()
            y = c.allreduce(x, job=0, group=0, round=rnd, out=x if inplace else None)
            if traced:
                out["traced_peak_over_tensor"] = tracemalloc.get_traced_memory()[1] / x.nbytes
                tracemalloc.stop()
            else:
                out["rss_peak_over_tensor"] = (_status_kib("VmHWM") - before) * 1024 / x.nbytes
            del y
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=float, default=16.0, help="tensor size per run (MiB of float32)")
    ap.add_argument("--slots", type=int, default=2048, help="serve's slots S (job window W = S)")
    ap.add_argument("--window", type=int, default=None,
                    help="driver window in chunks (default min(S / 2, rmem_max / datagram bytes))")
    ap.add_argument("--elements", type=int, nargs="+", default=[256, 2048])
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory probes")
    ap.add_argument("--json", default=None)
    ap.add_argument("--probe-memory", choices=["inplace", "new"], help=argparse.SUPPRESS)
    ap.add_argument("--addr", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe_memory:  # the subprocess of a memory probe
        host, port = args.addr.split(":")
        r = probe_memory((host, int(port)), args.elements[0], args.mib,
                         args.probe_memory == "inplace", args.window)
        print(json.dumps(r))
        return
    print(f"{args.mib} MiB float32, {args.runs} runs, load average "
          f"{' / '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    rows = []
    for elements in args.elements:
        n_el = int(args.mib * (1 << 20) // 4)
        n_dgrams = -(-n_el // elements)
        w = args.window or bench_window(elements, args.slots)
        srv, addr = start_server(elements, args.slots)
        drv, base, base_gro, cpu_drv, cpu_srv, cpu_blast = [], [], [], [], [], []
        mem = {}
        try:
            with _client(addr, elements, w) as c:
                rng = np.random.default_rng(0)
                x = rng.uniform(-1, 1, n_el).astype(np.float32)
                for r in range(args.runs):
                    x[:] = rng.uniform(-1, 1, n_el)
                    t, cd, cs = time.perf_counter(), time.process_time(), cpu_seconds(srv.pid)
                    c.allreduce(x, job=0, group=0, round=r, out=x)
                    drv.append(x.nbytes / (time.perf_counter() - t))
                    cpu_drv.append((time.process_time() - cd) / (x.nbytes / 1e9))
                    cpu_srv.append((cpu_seconds(srv.pid) - cs) / (x.nbytes / 1e9))
                    base.append(blast(n_dgrams, elements)[0])
                    g, cs, cr = blast(n_dgrams, elements, gso=True)
                    base_gro.append(g)
                    cpu_blast.append((cs, cr))
                st = c.stats
                window = c.effective_window(0)
            if not args.no_memory:
                for mode in ("inplace", "new"):
                    p = subprocess.run(
                        [sys.executable, __file__, "--probe-memory", mode, "--addr",
                         f"{addr[0]}:{addr[1]}", "--mib", str(args.mib), "--elements",
                         str(elements), "--window", str(w)], capture_output=True, text=True, timeout=600, check=True,
                    )
                    mem[mode] = json.loads(p.stdout.strip().splitlines()[-1])
        finally:
            srv.terminate()
            srv.wait(10)
        med = {k: statistics.median(v) / 1e6 for k, v in
               (("driver", drv), ("blaster", base), ("gso_gro_blaster", base_gro))}
        row = {
            "payload_bytes": 4 * elements,
            "datagram_bytes": wire.datagram_bytes(elements),
            "tensor_mib": args.mib,
            "window_chunks": window,
            "MBps_median": med,
            "runs_MBps": {k: [round(v / 1e6, 1) for v in vs] for k, vs in
                          (("driver", drv), ("blaster", base), ("gso_gro_blaster", base_gro))},
            "ratio_blaster": med["driver"] / med["blaster"],
            "ratio_gso_gro": med["driver"] / med["gso_gro_blaster"],
            "cpu_s_per_GB_median": {"driver": statistics.median(cpu_drv),
                                     "serve": statistics.median(cpu_srv),
                                     "gso_gro_sender": statistics.median(c[0] for c in cpu_blast),
                                     "gro_receiver": statistics.median(c[1] for c in cpu_blast)},
            "retransmissions": st.retransmissions,
            "memory": mem,
        }
        rows.append(row)
        print(
            f"payload {row['payload_bytes']:5d} B: driver {med['driver']:7.1f} MB/s; blaster "
            f"{med['blaster']:7.1f} MB/s, ratio {row['ratio_blaster']:.2f}; GSO->GRO blaster "
            f"{med['gso_gro_blaster']:7.1f} MB/s, ratio {row['ratio_gso_gro']:.2f} "
            f"(window {window}, retransmissions {st.retransmissions}); CPU per GB: driver "
            f"{row['cpu_s_per_GB_median']['driver']:.2f} s, serve "
            f"{row['cpu_s_per_GB_median']['serve']:.2f} s (GSO->GRO blaster: sender "
            f"{row['cpu_s_per_GB_median']['gso_gro_sender']:.2f} s, receiver "
            f"{row['cpu_s_per_GB_median']['gro_receiver']:.2f} s)",
            flush=True,
        )
        for mode, m in mem.items():
            form = "allreduce(x, out=x)" if mode == "inplace" else "y = allreduce(x)"
            print(f"  peak memory of {form:20s}: RSS +{m['rss_peak_over_tensor']:.2f} x tensor, "
                  f"traced +{m['traced_peak_over_tensor']:.2f} x tensor (x itself not counted)",
                  flush=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "python": platform.python_version(), "cpus": os.cpu_count(), "runs": args.runs,
            "load_end": os.getloadavg()}
    print(f"load average at the end {' / '.join(f'{v:.2f}' for v in os.getloadavg())}")
    write_json(args.json, meta, rows)


def write_json(path: str | None, meta: dict, rows: list) -> None:
    """The run's figures as JSON (``--json``) for docs/benchmarks.md (also bench_loss.py)."""
    if path:
        with open(path, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
