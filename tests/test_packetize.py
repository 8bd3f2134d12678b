"""Chunking a tensor into datagrams and reassembling it."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wanreduce import wire
from wanreduce.fixedpoint import choose_exponent, error_bound, saturating_sum
from wanreduce.packetize import chunk_counts, packetize, reassemble


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 600), st.sampled_from([np.float32, np.float16, ml_dtypes.bfloat16]))
def test_roundtrip_single_contributor(length, per_packet, dtype):
    x = np.random.default_rng(length).standard_normal(length).astype(dtype)
    e = choose_exponent(float(np.abs(x.astype(np.float32)).max()), 1)
    pk = packetize(x, exp=e, n_contributors=1, elements_per_packet=per_packet, job_id=3, first_chunk=10)
    assert len(pk) == -(-length // per_packet)
    assert int(pk.counts.sum()) == length
    h = pk.headers
    assert list(h["chunk"]) == list(range(10, 10 + len(pk)))
    assert np.all(h["magic"] == wire.MAGIC) and np.all(h["job_id"] == 3) and np.all(h["scale_exp"] == e)
    assert len(pk.datagram(len(pk) - 1)) == wire.datagram_bytes(int(pk.counts[-1]))
    y = reassemble(pk.payload, pk.counts, e, dtype)
    err = np.abs(y.astype(np.float64) - x.astype(np.float64))
    assert np.all(err <= error_bound(y, e, 1, dtype))


def test_sum_of_three_sites_matches_float_sum():
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(1000).astype(np.float32) for _ in range(3)]
    e = choose_exponent(max(float(np.abs(x).max()) for x in xs), 3)
    pks = [packetize(x, exp=e, n_contributors=3, sender_id=i) for i, x in enumerate(xs)]
    total, over = saturating_sum([p.payload for p in pks])
    assert not over
    y = reassemble(total, pks[0].counts, e)
    exact = np.sum(np.array(xs, np.float64), axis=0)
    assert np.all(np.abs(y - exact) <= error_bound(y, e, 3, np.float32))


def test_wire_bytes_of_a_datagram_are_header_then_little_endian_payload():
    x = np.array([1.0, -2.0, 3.5], np.float32)
    pk = packetize(x, exp=1, n_contributors=1, elements_per_packet=2, sender_id=5, group_id=2, round_id=9)
    d0 = bytes(pk.datagram(0))
    hdr = wire.AggHeader.unpack(d0)
    assert (hdr.sender_id, hdr.group_id, hdr.round_id, hdr.element_count) == (5, 2, 9, 2)
    assert np.array_equal(np.frombuffer(d0[22:], "<i4"), [2, -4])
    d1 = bytes(pk.datagram(1))
    assert len(d1) == 22 + 4 and np.frombuffer(d1[22:], "<i4")[0] == 7


def test_bad_arguments():
    with pytest.raises(ValueError, match="empty"):
        packetize(np.zeros(0, np.float32), exp=0, n_contributors=1)
    with pytest.raises(ValueError, match="jumbo"):
        chunk_counts(10, 5000)
    with pytest.raises(ValueError):
        chunk_counts(10, 0)


@pytest.mark.parametrize("length, per_packet", [(10, 4), (12, 4), (1, 7), (1000, 499)])
def test_int32_input_is_copied_into_the_same_datagrams_as_its_floats(length, per_packet):
    """One packetiser for the driver and the sharded all-reduce (which carries int32 partial
    sums at the agreed scale from phase to phase): int32 values already at ``exp`` give byte for
    byte the datagrams their floats would, padding included, nothing clipped."""
    from wanreduce.fixedpoint import quantize

    x = np.random.default_rng(length).standard_normal(length).astype(np.float32)
    kw = dict(exp=20, n_contributors=9, elements_per_packet=per_packet, job_id=2, round_id=7,
              first_chunk=0xFFFFFFFE, sender_id=4, group_id=11, session=3)
    q, _ = quantize(x, 20, 9)
    a, b = packetize(x, **kw), packetize(q, **{**kw, "n_contributors": None})
    assert np.array_equal(a.buf, b.buf) and np.array_equal(a.counts, b.counts)
    assert b.clipped == 0 and np.array_equal(b.payload.reshape(-1)[:length], q)
    assert list(b.headers["chunk"][:2]) == [0xFFFFFFFE, 0xFFFFFFFF][: len(b)]


def test_n_contributors_is_refused_where_it_has_no_effect_and_required_where_it_has():
    """int32 input is copied as it is: an ``n_contributors`` passed with it was silently ignored
    (a caller believing its values were scaled for N got them unscaled); now a one-line error
    names the field. Float input without it cannot be quantised: the same kind of error."""
    from wanreduce.packetize import packetize_into

    q = np.arange(8, dtype=np.int32)
    buf = np.zeros((2, wire.datagram_bytes(4)), np.uint8)
    for call in (lambda: packetize(q, exp=3, n_contributors=4, elements_per_packet=4),
                 lambda: packetize_into(buf, q, exp=3, n_contributors=4)):
        with pytest.raises(ValueError, match=r"^n_contributors: must be omitted for int32") as e:
            call()
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"^n_contributors: required to quantise float32"):
        packetize(q.astype(np.float32), exp=3, elements_per_packet=4)
    assert packetize_into(buf, q, exp=3) == 0  # int32 without it: copied
    assert list(buf[:, wire.AGG_HEADER_BYTES:].view(wire.ELEMENT_DTYPE).reshape(-1)) == list(q)
