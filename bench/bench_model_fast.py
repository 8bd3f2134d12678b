"""CPU time of the software aggregator's fast path per contribution (``model_fast.contribute_run``).

No sockets: one process, the model alone, as ``serve`` calls it for a run of one sender's
contributions to consecutive chunks (a GRO batch, or several received back to back). For each
(elements, run length) it feeds ``--runs`` runs into an ``AggregatorModel`` (S = 512 slots,
in-order release) and reports the process CPU time per contribution, min / median of
``--reps`` repetitions: with a one-member group (every contribution starts its chunk, completes
and is released: the benchmark driver's case) and with three members (the third completes and
releases). Run: ``.venv/bin/python bench/bench_model_fast.py [--runs 2000] [--reps 5]``; to
compare with another checkout, run the same command with ``PYTHONPATH`` at its export.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from wanreduce import model_fast
from wanreduce.model import AggregatorModel

# (elements, run length): one GRO batch at 1 KiB (62) / 8 KiB (7), four of them back to back
CASES = ((256, 62), (256, 248), (2048, 7), (2048, 28))


def per_contribution(elements: int, k: int, members: int, runs: int) -> float:
    """CPU seconds per contribution of ``runs`` runs of ``k`` chunks by ``members`` senders."""
    m = AggregatorModel(slots=512, elements=elements)
    m.set_group(0, (1 << members) - 1)
    m.set_job(0, enabled=True)
    p = np.ones((k, elements), np.int32)
    chunk = 0
    t = time.process_time()
    for _ in range(runs):
        for sender in range(members):
            if model_fast.contribute_run(m, 0, 0, 0, chunk, sender, 0, elements, 0, p) is None:
                raise RuntimeError("the fast path declined a run it must take")
        chunk += k
    return (time.process_time() - t) / (runs * k * members)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    for members in (1, 3):
        for elements, k in CASES:
            t = [per_contribution(elements, k, members, args.runs) for _ in range(args.reps)]
            print(f"{members} member(s), {4 * elements:5d} B payloads, runs of {k:3d}: "
                  f"{min(t) * 1e6:.2f} / {statistics.median(t) * 1e6:.2f} us per contribution "
                  f"(min / median of {args.reps})", flush=True)


if __name__ == "__main__":
    main()
