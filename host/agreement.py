"""The agreement every member all-reduces before a tensor: scale bound and tensor description.

Before each tensor the members all-reduce one small int vector through the aggregator (at scale
exponent 0). Its sum tells every member the same things, so every member takes the same
decision — the same scale exponent, or the same error — with no other coordination:

* **exponent bins** (``EXP_BINS`` lanes, one-hot per member): bin 0 for an all-zero (or
  non-finite) tensor, bins 1.. for the binary exponent k of the member's max|x| (max|x| < 2**k,
  k clamped to KMIN..KMAX; below KMIN the scale exponent saturates anyway). The highest non-zero
  bin of the sum is the agreed bound M = 2**k (< 1 bit above the exact max).
* **member lanes** (``MEMBER_LANES`` per sender id, written only by that sender, so the sum
  holds every member's values unmixed): element count (two 24-bit lanes), a code lane (dtype,
  NaN/Inf seen, optimistic headroom) and the member's fixed scale exponent (a configured
  ``max_abs``; 0 = agree through the bins).

Every value is below 2**24, so the float32 vector quantises exactly at exponent 0 and the sum of
N <= 32 one-hot bins cannot saturate. Pure functions: :func:`vector` builds a member's lanes,
:func:`decode` reads the sum, :func:`disagreement` and :func:`nonfinite_members` say what every
member must refuse (docs/host.md, "Scale exponent agreement").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from wanreduce import wire

KMIN = -100
KMAX = 128
EXP_BINS = 1 + (KMAX - KMIN + 1)  # bin 0 (zero) + one per k
MEMBER_LANES = 4  # count bits 0..23, count bits 24..47, code, fixed scale exponent
LANES = EXP_BINS + wire.MAX_SENDERS * MEMBER_LANES
MAX_COUNT = (1 << 48) - 1

DTYPE_CODES = {"float32": 1, "float16": 2, "bfloat16": 3}
DTYPE_NAMES = {v: k for k, v in DTYPE_CODES.items()}
CODE_DTYPE = 0x3  # code lane: bits 0-1 dtype (never 0: a zero code lane = not a member)
CODE_NONFINITE = 0x4  # NaN or Inf in the member's tensor
CODE_OPTIMISTIC = 0x8  # headroom="optimistic"
_SCALE_OFFSET = 1 - wire.SCALE_EXP_MIN  # fixed exponent e is stored as e + _SCALE_OFFSET >= 1
_BLOCK = 1 << 18  # elements per max|x| block (temporaries stay in cache)


def max_abs(x: np.ndarray) -> float:
    """max|x| over the tensor (NaN if any element is NaN, inf if any is infinite; 0 if empty),
    in blocks so no tensor-sized temporary is made."""
    flat = x.reshape(-1)
    m = 0.0
    for s in range(0, flat.size, _BLOCK):
        b = float(np.max(np.abs(flat[s : s + _BLOCK])))
        if not b <= m:  # larger, or NaN (which then stays)
            m = b
            if math.isnan(m):
                break
    return m


def exponent_bin(m: float) -> int:
    """The exponent bin of a member whose max|x| is ``m`` (0 for zero or non-finite)."""
    if m == 0.0 or not math.isfinite(m):
        return 0
    k = math.frexp(m)[1]
    return 1 + min(max(k, KMIN), KMAX) - KMIN


def bound_from_bins(bins: np.ndarray) -> float:
    """The agreed bound M = 2**k of the highest non-zero bin of the summed one-hot bins (0.0 if
    every member's tensor is all zero)."""
    nz = np.flatnonzero(np.asarray(bins)[1:EXP_BINS])
    if nz.size == 0:
        return 0.0
    return 2.0 ** (int(nz[-1]) + KMIN)


def vector(
    sender: int,
    count: int,
    dtype: np.dtype,
    m: float,
    *,
    fixed_exp: int | None = None,
    optimistic: bool = False,
) -> np.ndarray:
    """The agreement lanes of member ``sender`` (float32, exact integers) for a tensor of
    ``count`` elements of ``dtype`` with max|x| = ``m``; ``fixed_exp``: the scale exponent of a
    configured bound (None: agree through the bins)."""
    if not 0 <= sender < wire.MAX_SENDERS:
        raise ValueError(f"sender must be 0..{wire.MAX_SENDERS - 1}, got {sender}")
    if not 1 <= count <= MAX_COUNT:
        raise ValueError(f"element count must be 1..{MAX_COUNT}, got {count}")
    name = np.dtype(dtype).name
    if name not in DTYPE_CODES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_CODES)}, got {name}")
    if fixed_exp is not None and not wire.SCALE_EXP_MIN <= fixed_exp <= wire.SCALE_EXP_MAX:
        raise ValueError(f"fixed_exp must be {wire.SCALE_EXP_MIN}..{wire.SCALE_EXP_MAX}")
    v = np.zeros(LANES, np.float32)
    v[exponent_bin(m)] = 1.0
    code = DTYPE_CODES[name]
    code |= 0 if math.isfinite(m) else CODE_NONFINITE
    code |= CODE_OPTIMISTIC if optimistic else 0
    o = EXP_BINS + MEMBER_LANES * sender
    v[o : o + MEMBER_LANES] = (
        count & 0xFFFFFF,
        count >> 24,
        code,
        0 if fixed_exp is None else fixed_exp + _SCALE_OFFSET,
    )
    return v


@dataclass(frozen=True)
class Member:
    """What one member said in the agreement."""

    sender: int
    count: int
    dtype: str  # "float32", "float16", "bfloat16" (or "code N" if the lane is garbled)
    nonfinite: bool
    optimistic: bool
    fixed_exp: int | None  # None: agrees through the bins

    @property
    def scale(self) -> str:
        """The member's scale setting in words (for error messages)."""
        head = "optimistic" if self.optimistic else "safe"
        if self.fixed_exp is None:
            return f"agreed scale ({head} headroom)"
        return f"configured max_abs (scale exponent {self.fixed_exp}, {head} headroom)"


@dataclass(frozen=True)
class Agreement:
    """The decoded sum: the agreed bound and every member's description (by sender id)."""

    bound: float
    members: tuple[Member, ...]
    bin_total: int  # sum of the exponent bins: the number of contributions


def decode(lanes: np.ndarray) -> Agreement:
    """Read the summed agreement vector (``LANES`` int lanes, the aggregator's result)."""
    lanes = np.asarray(lanes, np.int64).reshape(-1)
    if lanes.size != LANES:
        raise ValueError(f"agreement vector must have {LANES} lanes, got {lanes.size}")
    members = []
    for s in range(wire.MAX_SENDERS):
        o = EXP_BINS + MEMBER_LANES * s
        lo, hi, code, scale = (int(v) for v in lanes[o : o + MEMBER_LANES])
        if code == 0:
            continue
        members.append(Member(
            sender=s,
            count=lo | hi << 24,
            dtype=DTYPE_NAMES.get(code & CODE_DTYPE, f"code {code & CODE_DTYPE}"),
            nonfinite=bool(code & CODE_NONFINITE),
            optimistic=bool(code & CODE_OPTIMISTIC),
            fixed_exp=None if scale == 0 else scale - _SCALE_OFFSET,
        ))
    return Agreement(bound_from_bins(lanes[:EXP_BINS]), tuple(members), int(lanes[:EXP_BINS].sum()))


def _who(senders: list[int]) -> str:
    return ("member " if len(senders) == 1 else "members ") + ", ".join(map(str, senders))


def _differ(members: tuple[Member, ...], key, unit: str = "") -> str | None:
    """'A vs B unit (member 0: A; members 1, 2: B)' when members differ in ``key``, else None."""
    groups: dict[object, list[int]] = {}
    for m in members:
        groups.setdefault(key(m), []).append(m.sender)
    if len(groups) < 2:
        return None
    vs = " vs ".join(map(str, groups))
    return f"{vs}{unit} ({'; '.join(f'{_who(s)}: {v}' for v, s in groups.items())})"


def disagreement(a: Agreement, n: int) -> str | None:
    """Why the ``n`` members must not go on with this tensor (the same text at every member),
    or None: a member count other than ``n``, or members that differ in element count, dtype
    or scale setting."""
    if len(a.members) != n or a.bin_total != n:
        return (
            f"the agreement holds {len(a.members)} member description(s) and {a.bin_total} "
            f"contribution(s), expected {n}: members with equal sender ids, or the group changed"
        )
    for what, key, unit in (
        ("the tensor", lambda m: m.count, " elements"),
        ("the dtype", lambda m: m.dtype, ""),
        ("the scale setting", lambda m: m.scale, ""),
    ):
        d = _differ(a.members, key, unit)
        if d is not None:
            return f"members disagree on {what}: {d}"
    return None


def nonfinite_members(a: Agreement) -> list[int]:
    """Sender ids of the members whose tensor holds NaN or Inf."""
    return [m.sender for m in a.members if m.nonfinite]
