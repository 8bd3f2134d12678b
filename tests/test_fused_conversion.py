"""The one-pass quantise/dequantise and the chunk-range packet forms equal the arithmetic they
replaced (issue 13 section 3): bit for bit on random data, every dtype, edge values,
saturation, NaN; ``packetize_into`` / ``reassemble(first=)`` on chunk ranges equal slices of
the whole-tensor forms."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wanreduce import fixedpoint as fp
from wanreduce import wire
from wanreduce.packetize import packetize, packetize_into, reassemble

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
# inputs beyond float32 or the clip limit overflow to inf on purpose (as they would in use)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
BITS = {2: np.uint16, 4: np.uint32}


def reference_quantize(x, exp, n):
    """The previous implementation, unblocked: float32 scale, rint, clip-and-count, int32."""
    t = np.rint(np.multiply(np.asarray(x), np.float32(2.0**exp), dtype=np.float32))
    lim = fp._float32_at_most(fp.qmax(n))
    if np.isnan(t).any():
        raise ValueError("cannot quantise NaN")
    clipped = int(np.count_nonzero(np.abs(t) > lim))
    return np.clip(t, -lim, lim).astype(np.int32), clipped


def reference_dequantize(q, exp, dt):
    """The previous implementation: int32 -> float64, times 2**-exp, rounded once to dt."""
    return (q.astype(np.float64) * (2.0**-exp)).astype(dt)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(BITS[a.itemsize]), b.view(BITS[b.itemsize])
    )


def edge_values(dt, exp, n):
    """Values at and around the clip limit, zeros, tiny, huge, infinities."""
    lim = float(fp._float32_at_most(fp.qmax(n))) * 2.0**-exp
    vals = [0.0, -0.0, 0.5 * 2.0**-exp, 1.5 * 2.0**-exp, 2.5 * 2.0**-exp, lim, -lim,
            np.nextafter(np.float32(lim), np.float32(np.inf)), 2 * lim, -3 * lim,
            1e-40, -1e-45, np.inf, -np.inf, 6.5e4, 3e38]
    with np.errstate(over="ignore"):
        return np.array(vals, np.float32).astype(dt)


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(DTYPES), st.integers(1, 70000), st.integers(1, 32),
    st.integers(wire.SCALE_EXP_MIN, wire.SCALE_EXP_MAX), st.integers(0, 2**32 - 1),
    st.sampled_from([(), (3,), (1, 5)]),
)
def test_quantize_equals_previous_arithmetic(dt, length, n, exp, seed, extra):
    rng = np.random.default_rng(seed)
    scale = 2.0 ** rng.uniform(-60, 60)
    x = (rng.standard_normal(length) * scale).astype(np.float32)
    x[: min(length, 16)] = edge_values(np.float32, exp, n)[: min(length, 16)]
    x = x.astype(dt)
    if extra:
        x = np.resize(x, (length, *extra))
    want, want_clipped = reference_quantize(x, exp, n)
    got, clipped = fp.quantize(x, exp, n)
    assert np.array_equal(got, want) and clipped == want_clipped
    # into a strided, misaligned view (the payload rows of a packet buffer)
    buf = np.zeros(x.size * 4 + 2, np.uint8)
    out = buf[2:].view(np.int32).reshape(x.shape)
    _, c2 = fp.quantize(x, exp, n, out=out)
    assert np.array_equal(out, want) and c2 == want_clipped


@pytest.mark.parametrize("dt", DTYPES)
def test_quantize_scalar_saturation_and_nan(dt):
    q, c = fp.quantize(np.array(1e30, np.float32).astype(dt), 0, 2)
    assert q.shape == () and int(q) == int(fp._float32_at_most(fp.qmax(2))) and c == 1
    x = np.zeros(200000, dt)
    x[150001] = np.nan  # in a later block than the first
    with pytest.raises(ValueError, match="NaN"):
        fp.quantize(x, 0, 1)
    with pytest.raises(ValueError, match="NaN"):
        reference_quantize(x, 0, 1)


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(DTYPES), st.integers(1, 70000),
    st.integers(wire.SCALE_EXP_MIN, wire.SCALE_EXP_MAX), st.integers(0, 2**32 - 1),
)
def test_dequantize_equals_previous_arithmetic(dt, length, exp, seed):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 32)
    q = rng.integers(-(2**bits), 2**bits, length, dtype=np.int64).astype(np.int32)
    edges = np.array([0, 1, -1, 2**24 + 1, -(2**24) - 3, 2**31 - 1, -(2**31), 2**30 + 77], np.int32)
    q[: min(length, len(edges))] = edges[: min(length, len(edges))]
    with np.errstate(over="ignore"):
        want = reference_dequantize(q, exp, dt)
        assert same_bits(fp.dequantize(q, exp, dt), want)
        out = np.full(length, np.nan, dt)
        assert fp.dequantize(q, exp, dt, out=out) is out and same_bits(out, want)
        q2 = q[: length // 2 * 2].reshape(-1, 2)  # a 2-D input
        assert same_bits(fp.dequantize(q2, exp, dt), reference_dequantize(q2, exp, dt))


def test_dequantize_every_magnitude_of_the_int32_range_float32():
    """float32 is computed as float32(q) * 2**-e: equal to one rounding of the exact product
    for every exponent (checked on all powers of two +-1 and random values of each size)."""
    rng = np.random.default_rng(5)
    q = np.concatenate([
        np.array([(1 << k) + d for k in range(31) for d in (-1, 0, 1)], np.int64),
        rng.integers(-(2**31), 2**31, 5000),
    ])
    q = np.clip(np.concatenate([q, -q]), -(2**31), 2**31 - 1).astype(np.int32)
    with np.errstate(over="ignore"):
        for exp in range(wire.SCALE_EXP_MIN, wire.SCALE_EXP_MAX + 1):
            assert same_bits(fp.dequantize(q, exp), reference_dequantize(q, exp, np.float32)), exp


def test_dequantize_rejects_a_wrong_out():
    with pytest.raises(ValueError, match="out must be a float32 array of shape"):
        fp.dequantize(np.zeros(4, np.int32), 0, np.float32, out=np.zeros(4, np.float16))
    with pytest.raises(ValueError, match="shape"):
        fp.dequantize(np.zeros(4, np.int32), 0, np.float32, out=np.zeros(5, np.float32))


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(DTYPES), st.integers(1, 5000), st.integers(1, 600), st.data(),
)
def test_packetize_into_chunk_ranges_equals_packetize(dt, length, per_packet, data):
    x = np.random.default_rng(length).standard_normal(length).astype(dt)
    kw = dict(exp=20, n_contributors=3, job_id=7, round_id=9, first_chunk=2**32 - 3,
              sender_id=4, group_id=2, session=0x1234)
    whole = packetize(x, elements_per_packet=per_packet, **kw)
    n = len(whole)
    a = data.draw(st.integers(0, n - 1))
    b = data.draw(st.integers(a + 1, n))
    ring = np.full((b - a + 2, whole.buf.shape[1]), 0xAB, np.uint8)  # spare rows stay
    clipped = packetize_into(ring[1:], x.reshape(-1), range(a, b), **kw)
    assert clipped == 0
    assert np.array_equal(ring[1 : 1 + b - a], whole.buf[a:b])
    assert np.all(ring[0] == 0xAB) and np.all(ring[-1] == 0xAB)


def test_packetize_into_counts_clipping_and_checks_its_arguments():
    x = np.array([1.0, 1e9, -1e9, 2.0, 3.0], np.float32)
    buf = np.zeros((3, wire.datagram_bytes(2)), np.uint8)
    assert packetize_into(buf, x, range(0, 3), exp=20, n_contributors=2) == 2
    assert packetize_into(buf, x, range(2, 3), exp=20, n_contributors=2) == 0
    with pytest.raises(ValueError, match="range of step 1 within 0..3"):
        packetize_into(buf, x, range(1, 4), exp=0, n_contributors=1)
    with pytest.raises(ValueError, match="do not fit"):
        packetize_into(buf[:1], x, range(0, 2), exp=0, n_contributors=1)
    with pytest.raises(ValueError, match="uint8"):
        packetize_into(buf.view(np.int8), x, exp=0, n_contributors=1)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DTYPES), st.integers(1, 5000), st.integers(1, 600), st.data())
def test_reassemble_chunk_ranges_into_out(dt, length, per_packet, data):
    rng = np.random.default_rng(length)
    x = rng.standard_normal(length).astype(dt)
    pk = packetize(x, exp=12, n_contributors=1, elements_per_packet=per_packet)
    want = reference_dequantize(pk.payload.reshape(-1)[:length], 12, dt)
    assert same_bits(reassemble(pk.payload, pk.counts, 12, dt), want)
    out = np.full(length, np.nan, dt)
    cut = data.draw(st.integers(0, len(pk)))  # two ranges, written in either order
    for lo, hi in ((cut, len(pk)), (0, cut)):
        if hi > lo:
            assert reassemble(pk.payload[lo:hi], pk.counts[lo:hi], 12, dt, out=out, first=lo) is out
    assert same_bits(out, want)


def test_reassemble_rejects_what_would_be_lost_or_overrun():
    pk = packetize(np.ones(10, np.float32), exp=0, n_contributors=1, elements_per_packet=4)
    with pytest.raises(ValueError, match="C-contiguous"):
        reassemble(pk.payload, pk.counts, 0, out=np.zeros((10, 2), np.float32)[:, 0])
    with pytest.raises(ValueError, match="do not fit"):
        reassemble(pk.payload, pk.counts, 0, out=np.zeros(10, np.float32), first=1)
    with pytest.raises(ValueError, match="only the last chunk"):
        reassemble(pk.payload, np.array([4, 2, 4]), 0)
