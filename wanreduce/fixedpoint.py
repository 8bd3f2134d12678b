"""Fixed-point arithmetic of wanreduce — the specification the RTL and the host both follow.

Scheme (after SwitchML's per-chunk exponent): a chunk of floats ``x`` is sent as int32
``q = clip(rint(x * 2**e), -Q, Q)`` with one power-of-two exponent ``e`` shared by all N
contributors of the chunk and carried in the header (``scale_exp``). ``e`` is chosen from a
bound ``M`` on ``|x|`` over all contributors so that ``Q = floor((2**31 - 1) / N)`` is never
exceeded: the sum of N contributions then cannot overflow int32 by construction. The core adds
contributions with int32 saturation and a sticky overflow flag (which can only fire when a
contributor broke the bound, i.e. used the wrong ``M`` or ``N``). The result is
``y = (sum q) * 2**-e``.

Error bound (documented in docs/protocol.md and checked by property tests): with no clipping,

    |y - sum(x)| <= N * 2**-(e+1)  +  |y| * u

where the first term is round-to-nearest in each of the N quantisations and ``u`` is the unit
roundoff of the output dtype (2**-24 float32, 2**-11 float16, 2**-8 bfloat16). With ``e`` chosen
by :func:`choose_exponent` from the true bound ``M``, ``2**-e < 2 * N * M / 2**31``, so the
absolute error is below ``N**2 * M / 2**31`` — about 31 - 2 log2 N bits of the range.

float16 and bfloat16 inputs are widened exactly to float32 first. Everything here is vectorised.
"""

from __future__ import annotations

import math

import numpy as np

from wanreduce.wire import INT32_MAX, INT32_MIN, SCALE_EXP_MAX, SCALE_EXP_MIN

# bfloat16 comes from ml_dtypes, whose import takes 0.5-0.8 s: it is imported when bfloat16 is
# first used (BFLOAT16, SUPPORTED_DTYPES, UNIT_ROUNDOFF below), not with this module, which the
# CLI, the RTL and the planner all import.
_NATIVE_ROUNDOFF = {np.dtype(np.float32): 2.0**-24, np.dtype(np.float16): 2.0**-11}
_BFLOAT16_ROUNDOFF = 2.0**-8


def __getattr__(name: str):
    """``BFLOAT16``, ``SUPPORTED_DTYPES`` and ``UNIT_ROUNDOFF`` (these import ml_dtypes)."""
    if name == "BFLOAT16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    if name == "SUPPORTED_DTYPES":
        return (*_NATIVE_ROUNDOFF, __getattr__("BFLOAT16"))
    if name == "UNIT_ROUNDOFF":
        return {**_NATIVE_ROUNDOFF, __getattr__("BFLOAT16"): _BFLOAT16_ROUNDOFF}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Block size for streaming conversions: small enough to stay in L2, large enough to amortise.
_BLOCK = 1 << 16


def check_dtype(dtype: np.dtype | type) -> np.dtype:
    """Return ``dtype`` as a NumPy dtype if supported, else raise a clear TypeError."""
    dt = np.dtype(dtype)
    # Only a dtype named bfloat16 is compared with ml_dtypes' (which is then imported already).
    if dt in _NATIVE_ROUNDOFF or (dt.name == "bfloat16" and dt == __getattr__("BFLOAT16")):
        return dt
    raise TypeError(f"unsupported dtype {dt}; wanreduce aggregates float32, float16, bfloat16")


def qmax(n_contributors: int) -> int:
    """Largest magnitude one contribution may have so that N of them cannot overflow int32."""
    if not 1 <= n_contributors <= 32:
        raise ValueError(f"n_contributors must be 1..32, got {n_contributors}")
    return INT32_MAX // n_contributors


def choose_exponent(max_abs: float, n_contributors: int) -> int:
    """Largest exponent e with ``rint(max_abs * 2**e) <= qmax(N)``: no overflow, most precision.

    ``max_abs`` is a bound on |x| over every contributor of the chunk (the host agrees it across
    sites, see docs/protocol.md). Zero or non-finite bounds raise; tiny bounds give the largest
    exponent the header allows.
    """
    q = qmax(n_contributors)
    if not math.isfinite(max_abs) or max_abs < 0:
        raise ValueError(f"max_abs must be a finite non-negative number, got {max_abs}")
    if max_abs == 0:
        return SCALE_EXP_MAX
    # Start from the float estimate and correct by at most a step either way (exact check).
    e = math.floor(math.log2(q / max_abs))
    e = max(SCALE_EXP_MIN, min(SCALE_EXP_MAX, e))
    while e < SCALE_EXP_MAX and round(max_abs * 2.0 ** (e + 1)) <= q:
        e += 1
    while e > SCALE_EXP_MIN and round(max_abs * 2.0**e) > q:
        e -= 1
    if round(max_abs * 2.0**e) > q:
        raise ValueError(f"max_abs {max_abs} too large to represent with N={n_contributors}")
    return e


def _scale(e: int) -> np.float32:
    if not SCALE_EXP_MIN <= e <= SCALE_EXP_MAX:
        raise ValueError(f"scale exponent must be in [{SCALE_EXP_MIN}, {SCALE_EXP_MAX}], got {e}")
    return np.float32(2.0**e)  # exact: a normal float32 power of two


def _leading_blocks(shape: tuple[int, ...]) -> tuple[int, int]:
    """(number of leading-axis slices, slices per block) so that a block holds about
    ``_BLOCK`` elements: conversions work block by block on data that stays in L2."""
    row = max(1, math.prod(shape[1:]))  # (not np.prod: 10x the cost on a small tuple)
    return shape[0], max(1, _BLOCK // row)


def quantize(
    x: np.ndarray, exp: int, n_contributors: int, out: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Quantise floats to int32 at exponent ``exp``; returns ``(q, n_clipped)``.

    ``q = clip(rint(float32(x) * 2**exp), -lim, lim)`` computed in float32, ``lim`` the largest
    float32 not above ``qmax(n_contributors)``. Values beyond it are clipped and counted (a
    clipped value means the agreed bound was wrong); NaN raises ValueError. ``out`` (int32, the
    shape of ``x``, may be a strided view, e.g. the payload rows of a packet buffer) receives
    the result with no intermediate copy of the tensor: one float32 scratch block is reused.
    """
    x = np.asarray(x)
    check_dtype(x.dtype)
    if out is None:
        out = np.empty(x.shape, dtype=np.int32)
    elif out.dtype != np.int32 or out.shape != x.shape:
        raise ValueError(f"out must be an int32 array of shape {x.shape}")
    scale = _scale(exp)
    lim = _float32_at_most(qmax(n_contributors))
    xs, os = (x.reshape(1), out.reshape(1)) if x.ndim == 0 else (x, out)
    rows, step = _leading_blocks(xs.shape)
    scratch = np.empty((min(step, rows), *xs.shape[1:]), np.float32)
    clipped = 0
    for start in range(0, rows, step):
        xb = xs[start : start + step]
        clipped += _quantize_block(xb, scale, lim, os[start : start + step], scratch[: len(xb)])
    return out, clipped


def _float32_at_most(q: int) -> np.float32:
    """The largest float32 not above ``q`` (float32(q) may round up past an int32 limit)."""
    v = np.float32(q)
    return np.nextafter(v, np.float32(0)) if int(v) > q else v


def _quantize_block(
    xb: np.ndarray, scale: np.float32, lim: np.float32, ob: np.ndarray, t: np.ndarray
) -> int:
    """One block: scale into the scratch ``t`` (float32), round, check, store into ``ob``."""
    np.multiply(xb, scale, out=t, dtype=np.float32)
    np.rint(t, out=t)
    clipped = 0
    # Clip-and-count only when the block can exceed the limit (a cheap min/max test first).
    hi, lo = t.max(), t.min()
    if not (-lim <= lo and hi <= lim):  # also true for NaN
        if np.isnan(t).any():
            raise ValueError("cannot quantise NaN")
        clipped = int(np.count_nonzero(np.abs(t) > lim))
        np.clip(t, -lim, lim, out=t)
    np.copyto(ob, t, casting="unsafe")  # exact: integers of magnitude <= 2**31 / N
    return clipped


def dequantize(
    q: np.ndarray, exp: int, dtype: np.dtype | type = np.float32, out: np.ndarray | None = None
) -> np.ndarray:
    """int32 sums back to floats: ``q * 2**-exp`` rounded once to ``dtype``.

    One pass per block, no temporaries: ``out`` (``dtype``, the shape of ``q``, may be strided)
    receives it. float32: ``float32(q) * 2**-exp`` in float32, which is the same single rounding
    (scaling by a power of two is exact: every nonzero result is at least 2**-126, a normal
    float32, and overflow to inf is the same either way). float16/bfloat16: the product is
    formed in float64 (exact) and rounded once on the store.
    """
    dt = check_dtype(dtype)
    q = np.asarray(q)
    if q.dtype != np.int32:
        raise TypeError(f"dequantize expects int32, got {q.dtype}")
    _scale(exp)
    if out is None:
        out = np.empty(q.shape, dt)
    elif out.dtype != dt or out.shape != q.shape:
        raise ValueError(f"out must be a {dt} array of shape {q.shape}")
    if dt != np.float32:
        np.multiply(q, 2.0**-exp, out=out, dtype=np.float64, casting="unsafe")
        return out
    scale = np.float32(2.0**-exp)
    qs, os = (q.reshape(1), out.reshape(1)) if q.ndim == 0 else (q, out)
    rows, step = _leading_blocks(qs.shape)
    for start in range(0, rows, step):
        ob = os[start : start + step]
        np.copyto(ob, qs[start : start + step], casting="unsafe")  # rounds |q| > 2**24 once
        np.multiply(ob, scale, out=ob)
    return out


def error_bound(y: np.ndarray, exp: int, n_contributors: int, dtype: np.dtype | type) -> np.ndarray:
    """The documented bound on |dequantize(sum q) - sum x| for each element of a result ``y``."""
    dt = check_dtype(dtype)
    return n_contributors * 2.0 ** -(exp + 1) + np.abs(np.asarray(y, np.float64)) \
        * _NATIVE_ROUNDOFF.get(dt, _BFLOAT16_ROUNDOFF)


def saturating_add(acc: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, bool]:
    """Element-wise int32 ``acc + q`` with saturation; returns ``(sum, overflowed)``.

    This is exactly what one reduction step of the core does: the core saturates at every
    step (so with overflow the result depends on arrival order — which is why the overflow flag
    is sticky and the host redoes such a chunk).
    """
    acc = np.asarray(acc, np.int32)
    q = np.asarray(q, np.int32)
    s = acc.astype(np.int64) + q
    over = bool(np.any((s > INT32_MAX) | (s < INT32_MIN)))
    return np.clip(s, INT32_MIN, INT32_MAX).astype(np.int32), over


def saturating_sum(contributions: list[np.ndarray] | np.ndarray) -> tuple[np.ndarray, bool]:
    """Fold :func:`saturating_add` over contributions in the given (arrival) order."""
    it = iter(contributions)
    acc = np.array(next(it), np.int32)
    overflow = False
    for q in it:
        acc, o = saturating_add(acc, q)
        overflow |= o
    return acc, overflow
