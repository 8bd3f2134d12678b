"""The in-order release scan (hdl/release_scan.py): its two-chain form (``halves``, used by
``PendingWords``) gives the one-chain form's results bit for bit, and both the scan's meaning
(first zero, bits before it outside ``below``, no zero) on random and edge-case inputs; its
two-stage form (``stages=2``) gives the one-stage results exactly one cycle later, and its
``index`` form the first zero's index."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.sim import Simulator

from wanreduce.hdl.release_scan import first_zero_index, release_scan


def _expected(lo: int, hi: int, below: int, n: int, index: bool = False) -> tuple[int, int, int]:
    """(first zero, one-hot or with ``index`` its index (0 if none); bits before it outside
    ``below``; no zero)."""
    y = (lo | below) | (hi << n)
    k = next((i for i in range(2 * n) if not (y >> i) & 1), None)
    if k is None:
        return 0, ((1 << 2 * n) - 1) & ~below, 1
    return k if index else 1 << k, ((1 << k) - 1) & ~below, 0


def _cases(n: int) -> list[tuple[int, int, int]]:
    """(lo, hi, below): all ones, a zero in the top bit only, edge cases, then random words
    (mostly ones, so the first zero lands anywhere, often in ``hi``)."""
    rng = random.Random(n)
    full = (1 << n) - 1

    def ones_but(k: int) -> int:
        return full & ~sum(1 << rng.randrange(n) for _ in range(k))

    cases = [(full, full, 0), (full, full >> 1, 0), (0, 0, 0), (full, 0, 0), (full >> 1, full, full >> 2)]
    return cases + [(ones_but(rng.randint(0, 2)), ones_but(rng.randint(0, 2)), rng.getrandbits(n) & (full >> 1))
                    for _ in range(300)]


def _compare(n: int, first: dict, second: dict, delay: int) -> None:
    """``_cases`` with new inputs every cycle: the scan built with ``first`` (``release_scan``'s
    keywords, the one-hot) gives the model's results in the same cycle, the one built with
    ``second`` (one-hot or ``index``) those of ``delay`` cycles before (0 before its first results: registers reset, never X); and the
    first zero lands in ``lo``, in ``hi`` and nowhere."""
    m = Module()
    m.domains.sync = ClockDomain()  # the clock the tests step (a one-stage scan has no register)
    lo, hi, below = Signal(n), Signal(n), Signal(n)
    scans = [*release_scan(m, lo, hi, below, "a", **first), *release_scan(m, lo, hi, below, "b", **second)]
    outs = [Signal(len(v)) for v in scans]
    m.d.comb += [o.eq(v) for o, v in zip(outs, scans, strict=True)]
    sim = Simulator(m)
    sim.add_clock(1e-6)

    async def tb(ctx):
        kinds, past = set(), [(0, 0, 0)] * delay
        for a, b, c in _cases(n):
            ctx.set(lo, a)
            ctx.set(hi, b)
            ctx.set(below, c)
            want = _expected(a, b, c, n)
            past.append(_expected(a, b, c, n, second.get("index", False)))
            got = [ctx.get(o) for o in outs]
            assert got[:3] == list(want), f"{first}: lo {a:#x} hi {b:#x} below {c:#x}: {got[:3]}, want {want}"
            assert got[3:] == list(past[0]), f"{second} (inputs now lo {a:#x} hi {b:#x} below {c:#x}): {got[3:]}, want {past[0]}"
            past.pop(0)
            kinds.add("none" if want[2] else "hi" if want[0] >> n else "lo")
            await ctx.tick()
        assert kinds == {"none", "hi", "lo"}

    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("index", [False, True])
@pytest.mark.parametrize("n", [4, 64])
def test_halves_is_the_one_chain_scan(n: int, index: bool) -> None:
    """The two-chain scan (its first zero one-hot, or its index) and the one-chain scan both as
    the model, in the same cycle."""
    _compare(n, {}, {"halves": True, "index": index}, 0)


@pytest.mark.parametrize(("n", "parts"), [(4, 4), (4, 8), (64, 4), (128, 8)])
def test_parts_is_the_one_chain_scan(n: int, parts: int) -> None:
    """``parts`` carry chains (chain j counted only where the chains below it are all ones; the
    reducer's scan above S 16 in chains of 32 bits) and the one-chain scan both as the model, in
    the same cycle: a chain gated by its neighbour alone, not the whole prefix, fails."""
    _compare(n, {}, {"parts": parts}, 0)


@pytest.mark.parametrize("index", [False, True, "encoder"])
@pytest.mark.parametrize("n", [4, 8, 64])
def test_two_stages_is_one_stage_a_cycle_later(n: int, index: bool | str) -> None:
    """The two-stage scan gives 0 in the first cycle, then in every cycle the one-stage scan's
    (the model's) results of the cycle before: a stage 2 that reads a half-1 value unregistered
    (this cycle's), the other half's register, or this cycle's ``below`` fails; with ``index``,
    so does a wrong combination of the halves' indices, and with ``encoder`` (the index from
    ``first_zero_index``, ``PendingWords``' five stages) a wrong index or "all ones"."""
    enc = {"encoder": True} if index == "encoder" else {}
    _compare(n, {"halves": True}, {"halves": True, "stages": 2, "index": bool(index), **enc}, 1)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64])
def test_first_zero_index_is_the_lowest_zero(n: int) -> None:
    """``first_zero_index``: the lowest 0 bit's index (0 if none) and "all ones", for every input
    up to 8 bits and, wider, all ones, each single zero, each pair of zeros and random words."""
    v = Signal(n)
    ix, all_ones = first_zero_index(v)
    m = Module()
    ix_o, all_o = Signal(max(len(ix), 1)), Signal()
    m.d.comb += [ix_o.eq(ix), all_o.eq(all_ones)]
    full, rng = (1 << n) - 1, random.Random(n)
    if n <= 8:
        cases = list(range(1 << n))
    else:
        cases = [full, *(full & ~(1 << i) for i in range(n)),
                 *(full & ~(1 << i) & ~(1 << j) for i in range(n) for j in range(i + 1, n, 7)),
                 *(rng.getrandbits(n) | rng.getrandbits(n) for _ in range(300))]
    sim = Simulator(m)

    async def tb(ctx):
        for x in cases:
            ctx.set(v, x)
            k = next((i for i in range(n) if not (x >> i) & 1), None)
            assert (ctx.get(ix_o), ctx.get(all_o)) == (k or 0, int(k is None)), f"{x:#x}"

    sim.add_testbench(tb)
    sim.run()


def test_rejects_bad_stages() -> None:
    """``stages`` other than 1 or 2, two stages or the index without the two chains, ``parts``
    that do not divide 2N or contradict ``halves``, the index of halves that are not a power
    of 2 wide, and ``encoder`` without ``index`` (or ``first_zero_index`` of a width that is not
    a power of 2), are refused."""
    m = Module()
    lo, hi, below = Signal(4), Signal(4), Signal(4)
    with pytest.raises(ValueError, match="stages must be 1 or 2, got 3"):
        release_scan(m, lo, hi, below, "a", halves=True, stages=3)
    with pytest.raises(ValueError, match="stages=2 and index need halves=True"):
        release_scan(m, lo, hi, below, "b", stages=2)
    with pytest.raises(ValueError, match="stages=2 and index need halves=True"):
        release_scan(m, lo, hi, below, "c", index=True)
    with pytest.raises(ValueError, match="parts must divide 2N = 8, got 3"):
        release_scan(m, lo, hi, below, "e", parts=3)
    with pytest.raises(ValueError, match="halves is parts=2, got parts=4"):
        release_scan(m, lo, hi, below, "f", halves=True, parts=4)
    with pytest.raises(ValueError, match="stages=2 and index need halves=True"):
        release_scan(m, lo, hi, below, "g", parts=4, stages=2)
    with pytest.raises(ValueError, match="encoder needs index=True"):
        release_scan(m, lo, hi, below, "h", halves=True, encoder=True)
    with pytest.raises(ValueError, match="needs a power-of-2 width, got 3"):
        first_zero_index(lo[:3])
    with pytest.raises(ValueError, match="power-of-2 width of lo and hi, got 3"):
        release_scan(m, lo[:3], hi[:3], below[:3], "d", halves=True, index=True)
