"""Cost of the agreement exchange that now precedes every tensor, also with ``max_abs``.

Before issue 13 a configured bound (``max_abs``) skipped the agreement; now every call exchanges
the agreement vector (host/agreement.py: element count, dtype, NaN/Inf, scale setting) so that
members that disagree all raise the same error. This measures, per tensor size, alternating in
one process against ``wanreduce serve --backend model`` (own process, 1-member group, loopback):

* ``call``: wall time of ``allreduce(x, max_abs=1.0)`` (agreement + data exchange);
* ``agree``: wall time of the agreement alone (the client's ``_agree``: max|x| pass, vector,
  one exchange of ceil(LANES / E) chunks, decode);
* ``maxabs``: the max|x| pass alone (``agreement.max_abs``).

``call - agree`` is what the call cost before (data exchange only). Prints medians and the
overhead ``agree / (call - agree)``. On a WAN the exchange costs one round trip between the
members (the result needs every member's contribution), so there the overhead is ~1 RTT/call.
Run: ``.venv/bin/python bench/bench_agreement.py [--runs 15]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_driver import start_server  # noqa: E402 - the same server set-up as bench_driver

from wanreduce.host import agreement  # noqa: E402
from wanreduce.host.driver import AggregatorClient  # noqa: E402

SIZES = (256, 1 << 16, 1 << 22)  # elements: 1 KiB, 256 KiB, 16 MiB of float32


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--elements", type=int, default=2048, help="elements per packet E")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}, E={args.elements}, runs={args.runs}")
    srv, addr = start_server(args.elements, 512)
    try:
        with AggregatorClient(addr, sender_id=0, elements_per_packet=args.elements, rtt=0.001,
                              timeout=10) as c:
            rng = np.random.default_rng(0)
            print(f"{'elements':>9} {'call ms':>9} {'agree ms':>9} {'maxabs ms':>9} "
                  f"{'call-agree':>10} {'overhead':>8}")
            for size in SIZES:
                x = rng.uniform(-1, 1, size).astype(np.float32)
                call, agree, mx = [], [], []
                c.allreduce(x, job=0, group=0, round=0, max_abs=1.0)  # warm-up
                for r in range(args.runs):
                    t = time.perf_counter()
                    c.allreduce(x, job=0, group=0, round=r, max_abs=1.0)
                    call.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    c._agree(x, x.dtype, job=0, group=0, round_id=r, n=1, w=c.effective_window(0),
                             fixed_exp=20)
                    agree.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    agreement.max_abs(x)
                    mx.append(time.perf_counter() - t)
                mc, ma, mm = (statistics.median(v) * 1e3 for v in (call, agree, mx))
                print(f"{size:>9} {mc:>9.3f} {ma:>9.3f} {mm:>9.3f} {mc - ma:>10.3f} "
                      f"{ma / max(mc - ma, 1e-9):>8.2f}")
    finally:
        srv.terminate()
        srv.wait(10)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
