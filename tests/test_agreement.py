"""host/agreement.py: the agreement vector, built per member, summed like the aggregator sums it,
and decoded into the same decision at every member."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wanreduce import fixedpoint, wire
from wanreduce.fixedpoint import BFLOAT16
from wanreduce.host import agreement as ag
from wanreduce.packetize import packetize


def _summed(vectors, n=None, elements=256):
    """What every member receives: the vectors quantised at exponent 0 exactly as the driver
    sends them (packetize), summed with the aggregator's saturating int32 arithmetic."""
    n = n or len(vectors)
    qs = [packetize(v, exp=0, n_contributors=n, elements_per_packet=elements).payload.reshape(-1)
          [: ag.LANES] for v in vectors]
    total, over = fixedpoint.saturating_sum(qs)
    assert not over
    return total


def test_layout_fits_and_values_are_exact_in_float32():
    assert ag.LANES == ag.EXP_BINS + wire.MAX_SENDERS * ag.MEMBER_LANES
    v = ag.vector(31, ag.MAX_COUNT, BFLOAT16, math.inf, fixed_exp=wire.SCALE_EXP_MAX,
                  optimistic=True)
    assert v.dtype == np.float32 and v.max() < 2**24 and np.all(v == np.rint(v))


def test_exponent_bins_and_bound():
    assert ag.exponent_bin(0.0) == 0 and ag.exponent_bin(math.nan) == 0
    assert ag.exponent_bin(math.inf) == 0
    for v in (1e-30, 0.3, 1.0, 7.9, 3e38):
        bins = np.zeros(ag.EXP_BINS, np.int64)
        bins[ag.exponent_bin(float(np.float32(v)))] = 1
        m = ag.bound_from_bins(bins)
        assert float(np.float32(v)) < m <= 2.0 * float(np.float32(v))
    assert ag.bound_from_bins(np.eye(1, ag.EXP_BINS, 0, dtype=np.int64)[0]) == 0.0
    assert ag.exponent_bin(1e-40) == 1  # clamped: the scale exponent saturates there anyway


def test_max_abs_in_blocks_matches_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(3 * (1 << 18) + 5).astype(np.float32)
    assert ag.max_abs(x) == float(np.max(np.abs(x)))
    x[-1] = np.nan  # in the last block, after a larger value
    assert math.isnan(ag.max_abs(x))
    x[-1] = -np.inf
    assert ag.max_abs(x) == math.inf
    assert ag.max_abs(np.zeros((2, 3), np.float16)) == 0.0


def test_members_decode_exactly_from_the_sum():
    specs = [  # sender, count, dtype, max|x|, fixed exponent, optimistic
        (0, 2048, np.float32, 3.0, None, False),
        (7, 2**40 + 12345, np.float16, 0.0, None, False),
        (31, 1, BFLOAT16, math.nan, 20, True),
    ]
    total = _summed([ag.vector(s, c, d, m, fixed_exp=f, optimistic=o) for s, c, d, m, f, o in specs])
    a = ag.decode(total)
    assert a.bin_total == 3 and a.bound == 4.0  # 3.0 < 2**2; zero and NaN use bin 0
    got = [(m.sender, m.count, m.dtype, m.nonfinite, m.fixed_exp, m.optimistic) for m in a.members]
    assert got == [
        (0, 2048, "float32", False, None, False),
        (7, 2**40 + 12345, "float16", False, None, False),
        (31, 1, "bfloat16", True, 20, True),
    ]
    assert ag.nonfinite_members(a) == [31]


def test_agreeing_members_have_no_disagreement():
    vs = [ag.vector(s, 1000, np.float32, 0.5 * (s + 1)) for s in (0, 1, 2)]
    a = ag.decode(_summed(vs))
    assert ag.disagreement(a, 3) is None and ag.nonfinite_members(a) == []
    assert a.bound == 2.0  # max 1.5 < 2**1


@pytest.mark.parametrize(
    "variants,text",
    [
        ([{}, {"count": 1024}, {"count": 1024}],
         "members disagree on the tensor: 2048 vs 1024 elements (member 0: 2048; members 1, 2: 1024)"),
        ([{}, {"dtype": np.float16}], "members disagree on the dtype: float32 vs float16"),
        ([{}, {"fixed_exp": 20}], "members disagree on the scale setting: agreed scale (safe "
                                  "headroom) vs configured max_abs (scale exponent 20"),
        ([{"fixed_exp": 20}, {"fixed_exp": 21}], "scale exponent 20, safe headroom) vs "
                                                 "configured max_abs (scale exponent 21"),
        ([{}, {"optimistic": True}], "agreed scale (safe headroom) vs agreed scale (optimistic"),
    ],
)
def test_disagreement_is_named(variants, text):
    vs = []
    for s, v in enumerate(variants):
        kw = {"count": 2048, "dtype": np.float32, **v}
        vs.append(ag.vector(s, kw.pop("count"), kw.pop("dtype"), 1.0, **kw))
    msg = ag.disagreement(ag.decode(_summed(vs)), len(vs))
    assert msg is not None and text in msg


def test_missing_or_extra_member_descriptions_are_a_disagreement():
    vs = [ag.vector(s, 10, np.float32, 1.0) for s in (0, 1)]
    assert "expected 3" in ag.disagreement(ag.decode(_summed(vs, n=3)), 3)
    twice = [ag.vector(1, 10, np.float32, 1.0)] * 2  # two members with the same sender id
    assert ag.disagreement(ag.decode(_summed(twice)), 2) is not None


@pytest.mark.parametrize(
    "args,kw,match",
    [
        ((32, 1, np.float32, 1.0), {}, "sender"),
        ((0, 0, np.float32, 1.0), {}, "element count"),
        ((0, 1, np.float64, 1.0), {}, "dtype"),
        ((0, 1, np.float32, 1.0), {"fixed_exp": 127}, "fixed_exp"),
    ],
)
def test_bad_vector_arguments(args, kw, match):
    with pytest.raises(ValueError, match=match):
        ag.vector(*args, **kw)
    with pytest.raises(ValueError, match="lanes"):
        ag.decode(np.zeros(ag.LANES - 1))
