"""Benchmark: quantise + packetise a float32 tensor, side by side with numpy.copy of it.

Run: .venv/bin/python bench/bench_quantize.py [--mib 256] [--repeats 7]
Both operations write a freshly allocated output of the same tensor each repeat, interleaved
(copy, packetize, copy, packetize, ...) so machine noise hits both alike; medians are reported.
Target (issue 2): packetize <= 3x copy.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from wanreduce import wire
from wanreduce.fixedpoint import choose_exponent
from wanreduce.packetize import packetize


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="tensor size in MiB (float32)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--elements", type=int, default=wire.DEFAULT_ELEMENTS, help="elements per packet")
    ap.add_argument("--contributors", type=int, default=3)
    args = ap.parse_args()

    n = args.mib * (1 << 20) // 4
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    e = choose_exponent(float(np.abs(x).max()), args.contributors)
    copy_t, pack_t = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        c = np.copy(x)
        copy_t.append(time.perf_counter() - t0)
        del c
        t0 = time.perf_counter()
        pk = packetize(x, exp=e, n_contributors=args.contributors, elements_per_packet=args.elements)
        pack_t.append(time.perf_counter() - t0)
        del pk
    mc, mp = statistics.median(copy_t), statistics.median(pack_t)
    print(f"tensor {args.mib} MiB float32, {args.elements} elements/packet, N={args.contributors}, {args.repeats} repeats")
    print(f"numpy.copy           median {mc * 1e3:8.1f} ms  ({args.mib / 1024 / mc:.2f} GiB/s)")
    print(f"quantize+packetize   median {mp * 1e3:8.1f} ms  ({args.mib / 1024 / mp:.2f} GiB/s)")
    print(f"ratio packetize/copy {mp / mc:.2f}  (target <= 3)")


if __name__ == "__main__":
    main()
