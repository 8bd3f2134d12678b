"""Benchmark: quantise into datagrams and dequantise results, side by side with numpy.copy.

Run: .venv/bin/python bench/bench_quantize.py [--mib 256] [--repeats 7] [--elements 256 2048]
For each packet size, the operations below run interleaved (one of each per repeat, so machine
noise hits all alike) on the same float32 tensor; medians are reported with GB/s of tensor
bytes (1 GB = 1e9 B) and the ratio to the baseline of the same kind:

* baselines: ``numpy.copy`` (fresh output: pays its page faults, like every fresh-buffer form)
  and ``numpy.copyto`` into a reused array (the floor for the reused-buffer forms);
* quantise: ``packetize`` (fresh packet buffer) and ``packetize_into`` (one reused buffer);
* dequantise: ``reassemble`` (fresh output) and ``reassemble(..., out=)`` (reused output).

Forms missing from the installed ``wanreduce`` (an older checkout on PYTHONPATH) print "n/a".
Target (issue 13): one-pass conversion, close to a copy. ``--json FILE`` writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from wanreduce import packetize as pz
from wanreduce import wire
from wanreduce.fixedpoint import choose_exponent


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(x: np.ndarray, elements: int, contributors: int, repeats: int) -> dict[str, float]:
    """Median seconds of each operation (interleaved repeats) on tensor ``x``."""
    e = choose_exponent(float(np.abs(x).max()), contributors)
    kw = dict(exp=e, n_contributors=contributors)
    pk = pz.packetize(x, elements_per_packet=elements, **kw)
    ring = np.empty_like(pk.buf)
    out = np.empty_like(x)
    ops = {
        "copy (fresh)": lambda: np.copy(x),
        "copyto (reused)": lambda: np.copyto(out, x),
        "packetize (fresh)": lambda: pz.packetize(x, elements_per_packet=elements, **kw),
        "reassemble (fresh)": lambda: pz.reassemble(pk.payload, pk.counts, e),
        "reassemble out= (reused)": lambda: pz.reassemble(pk.payload, pk.counts, e, out=out),
    }
    if hasattr(pz, "packetize_into"):
        ops["packetize_into (reused)"] = lambda: pz.packetize_into(ring, x, **kw)
    times: dict[str, list[float]] = {k: [] for k in ops}
    for _ in range(repeats):
        for k, fn in ops.items():
            times[k].append(_timed(fn))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="tensor size in MiB (float32)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--elements", type=int, nargs="+", default=[256, 2048],
                    help="elements per packet (256 = 1 KiB, 2048 = 8 KiB payloads)")
    ap.add_argument("--contributors", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    n = args.mib * (1 << 20) // 4
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    print(f"tensor {args.mib} MiB float32, N={args.contributors}, {args.repeats} repeats, "
          f"wanreduce from {os.path.dirname(pz.__file__)}, load {os.getloadavg()[0]:.2f}")
    rows = []
    for elements in args.elements:
        med = run(x, elements, args.contributors, args.repeats)
        print(f"-- {elements} elements/packet ({wire.datagram_bytes(elements)} B datagrams)")
        for k in ("copy (fresh)", "copyto (reused)", "packetize (fresh)",
                  "packetize_into (reused)", "reassemble (fresh)", "reassemble out= (reused)"):
            if k not in med:
                print(f"{k:26s} n/a")
                continue
            base = med["copy (fresh)" if "fresh" in k else "copyto (reused)"]
            print(f"{k:26s} median {med[k] * 1e3:8.1f} ms  {x.nbytes / med[k] / 1e9:6.2f} GB/s  "
                  f"{med[k] / base:5.2f}x its copy")
        rows.append({"elements": elements, "median_s": med})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mib": args.mib, "repeats": args.repeats, "load": os.getloadavg(),
                       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows},
                      f, indent=2)


if __name__ == "__main__":
    main()
