"""Property tests of the fixed-point scheme (the arithmetic the core and the host share)."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from wanreduce import fixedpoint as fp
from wanreduce.wire import INT32_MAX, INT32_MIN

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]

finite32 = st.floats(-1e3, 1e3,  # sums of 32 stay finite in float16
                      allow_nan=False, allow_infinity=False, width=32)


@st.composite
def contributions(draw, dtype=np.float32):
    n = draw(st.integers(1, 32))
    length = draw(st.integers(1, 64))
    xs = [draw(arrays(np.float32, length, elements=finite32)).astype(dtype) for _ in range(n)]
    return xs


def reduce_via_fixed_point(xs, out_dtype):
    n = len(xs)
    bound = max(float(np.max(np.abs(x.astype(np.float32)))) for x in xs)
    e = fp.choose_exponent(bound, n)
    qs = []
    for x in xs:
        q, clipped = fp.quantize(x, e, n)
        assert clipped == 0
        qs.append(q)
    total, overflow = fp.saturating_sum(qs)
    return fp.dequantize(total, e, out_dtype), e, overflow, qs


@settings(max_examples=200, deadline=None)
@given(contributions(), st.sampled_from(DTYPES))
def test_dequantized_sum_within_documented_bound(xs, dtype):
    xs = [x.astype(dtype) for x in xs]
    y, e, overflow, _ = reduce_via_fixed_point(xs, dtype)
    assert not overflow, "overflow must be impossible when the bound is respected"
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
    bound = fp.error_bound(y, e, len(xs), dtype)
    err = np.abs(y.astype(np.float64) - exact)
    assert np.all(err <= bound), (err.max(), bound.min())


@settings(max_examples=100, deadline=None)
@given(contributions(), st.randoms(use_true_random=False))
def test_result_independent_of_arrival_order(xs, rnd):
    _, _, _, qs = reduce_via_fixed_point(xs, np.float32)
    a, oa = fp.saturating_sum(qs)
    order = list(range(len(qs)))
    rnd.shuffle(order)
    b, ob = fp.saturating_sum([qs[i] for i in order])
    assert not oa and not ob
    assert np.array_equal(a, b)


def test_bound_is_tight_enough_to_be_useful():
    # The bound must not be vacuous: the quantisation term for N=2, M=1 is ~2**-30.
    e = fp.choose_exponent(1.0, 2)
    assert 2.0 ** -(e + 1) <= 2.0**-30
    assert round(1.0 * 2.0**e) <= fp.qmax(2) < round(1.0 * 2.0 ** (e + 1))


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-30, 1e30), st.integers(1, 32))
def test_choose_exponent_is_largest_safe(m, n):
    e = fp.choose_exponent(m, n)
    assert round(m * 2.0**e) <= fp.qmax(n)
    if e < fp.SCALE_EXP_MAX:
        assert round(m * 2.0 ** (e + 1)) > fp.qmax(n)


@settings(max_examples=200, deadline=None)
@given(
    arrays(np.int64, st.integers(1, 40), elements=st.integers(INT32_MIN, INT32_MAX)),
    arrays(np.int64, 40, elements=st.integers(INT32_MIN, INT32_MAX)),
)
def test_saturation_flagged_never_wrapped(a, b):
    a32 = a.astype(np.int32)
    b32 = b[: len(a)].astype(np.int32)
    s, over = fp.saturating_add(a32, b32)
    exact = a[: len(a)] + b[: len(a)]
    assert np.array_equal(s, np.clip(exact, INT32_MIN, INT32_MAX))
    assert over == bool(np.any((exact > INT32_MAX) | (exact < INT32_MIN)))
    # Never wrapped: the sign of a saturated result is the sign of the exact sum.
    assert np.all(np.sign(s.astype(np.int64)) == np.sign(exact))


def test_overflow_is_sticky_over_a_fold():
    qs = [np.array([INT32_MAX], np.int32), np.array([1], np.int32), np.array([-5], np.int32)]
    total, over = fp.saturating_sum(qs)
    assert over and total[0] == INT32_MAX - 5


def test_clipping_is_counted_when_the_bound_is_broken():
    x = np.array([0.5, 4.0, -4.0, 1.0], np.float32)
    e = fp.choose_exponent(1.0, 4)
    q, clipped = fp.quantize(x, e, 4)
    assert clipped == 2
    assert 0 < fp.qmax(4) - q[1] <= 64 and q[2] == -q[1]  # the largest float32 below qmax


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(TypeError, match="unsupported dtype"):
        fp.quantize(np.zeros(3, np.float64), 0, 1)
    with pytest.raises(ValueError, match="NaN"):
        fp.quantize(np.array([np.nan], np.float32), 0, 1)
    with pytest.raises(ValueError, match="n_contributors"):
        fp.qmax(33)
    with pytest.raises(ValueError, match="scale exponent"):
        fp.quantize(np.zeros(3, np.float32), 200, 1)
    with pytest.raises(ValueError):
        fp.choose_exponent(float("inf"), 2)


def test_quantize_into_strided_view():
    buf = np.zeros((4, 10), np.int32)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    q, _ = fp.quantize(x, 2, 1, out=buf[:, 2:])
    assert q.base is not None and np.array_equal(buf[:, 2:], x * 4)
    assert np.all(buf[:, :2] == 0)
