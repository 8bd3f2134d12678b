"""What an all-reduce through wanreduce must return: the golden expectation of the host driver.

Given every site's tensor, this computes exactly what each site's ``AggregatorClient.allreduce``
must produce: the agreed scale (the exponent bins of the driver's agreement step, or a configured bound),
per-chunk quantisation, the core's saturating int32 sum, the overflow-redo rule, and
dequantisation — all with ``wanreduce.fixedpoint`` (the same code the driver and the RTL model
use). Loopback harnesses and tests compare results against it bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from wanreduce import fixedpoint
from wanreduce.host import agreement
from wanreduce.host.driver import exponent_for, redo_exponent


def agreed_exponent(xs: Sequence[np.ndarray], *, headroom: str = "safe", max_abs: float | None = None) -> int:
    """The scale exponent all sites use for this tensor (agreement step unless ``max_abs``)."""
    n = len(xs)
    if max_abs is None:
        bins = np.zeros(agreement.EXP_BINS, np.int64)
        for x in xs:
            bins[agreement.exponent_bin(agreement.max_abs(np.asarray(x)))] += 1
        max_abs = agreement.bound_from_bins(bins)
    return exponent_for(max_abs, n, headroom)


def expected_allreduce(
    xs: Sequence[np.ndarray],
    *,
    elements: int,
    dtype=None,
    headroom: str = "safe",
    exp: int | None = None,
    max_abs: float | None = None,
) -> np.ndarray:
    """Expected all-reduce of the site tensors ``xs`` (chunk by chunk, with the redo rule)."""
    n = len(xs)
    dtype = np.dtype(dtype or np.asarray(xs[0]).dtype)
    e = agreed_exponent(xs, headroom=headroom, max_abs=max_abs) if exp is None else exp
    flat = [np.asarray(x).reshape(-1) for x in xs]
    out = np.empty(flat[0].size, dtype)
    nq = 1 if headroom == "optimistic" else n
    for s in range(0, flat[0].size, elements):
        sl = slice(s, s + elements)
        cur, q_n = e, nq
        while True:
            qs = [fixedpoint.quantize(f[sl], cur, q_n)[0] for f in flat]
            acc, over = fixedpoint.saturating_sum(qs)
            if not over:
                break
            cur, q_n = redo_exponent(cur, n), n
        out[sl] = fixedpoint.dequantize(acc, cur, dtype)
    return out.reshape(np.shape(xs[0]))
