"""The in-order release scan (hdl/release_scan.py): its two-chain form (``halves``, used by
``PendingWords``) gives the one-chain form's results bit for bit, and both the scan's meaning
(first zero, bits before it outside ``below``, no zero) on random and edge-case inputs."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from wanreduce.hdl.release_scan import release_scan


def _expected(lo: int, hi: int, below: int, n: int) -> tuple[int, int, int]:
    y = (lo | below) | (hi << n)
    k = next((i for i in range(2 * n) if not (y >> i) & 1), None)
    if k is None:
        return 0, ((1 << 2 * n) - 1) & ~below, 1
    return 1 << k, ((1 << k) - 1) & ~below, 0


@pytest.mark.parametrize("n", [4, 64])
def test_halves_is_the_one_chain_scan(n: int) -> None:
    """Random words (mostly ones, so the first zero lands anywhere, often in ``hi``), all ones,
    zero in the top bit only: the two-chain scan and the one-chain scan both as the model."""
    m = Module()
    lo, hi, below = Signal(n), Signal(n), Signal(n)
    one, two = release_scan(m, lo, hi, below, "a"), release_scan(m, lo, hi, below, "b", halves=True)
    outs = [Signal(2 * n), Signal(2 * n), Signal(), Signal(2 * n), Signal(2 * n), Signal()]
    m.d.comb += [o.eq(v) for o, v in zip(outs, [*one, *two], strict=True)]
    rng = random.Random(n)
    full = (1 << n) - 1

    def ones_but(k: int) -> int:
        return full & ~sum(1 << rng.randrange(n) for _ in range(k))

    cases = [(full, full, 0), (full, full >> 1, 0), (0, 0, 0), (full, 0, 0), (full >> 1, full, full >> 2)]
    cases += [(ones_but(rng.randint(0, 2)), ones_but(rng.randint(0, 2)), rng.getrandbits(n) & (full >> 1))
              for _ in range(300)]
    sim = Simulator(m)

    async def tb(ctx):
        kinds = set()
        for a, b, c in cases:
            ctx.set(lo, a)
            ctx.set(hi, b)
            ctx.set(below, c)
            want = _expected(a, b, c, n)
            got = [ctx.get(o) for o in outs]
            assert got[:3] == list(want), f"one chain: lo {a:#x} hi {b:#x} below {c:#x}: {got[:3]}, want {want}"
            assert got[3:] == list(want), f"halves: lo {a:#x} hi {b:#x} below {c:#x}: {got[3:]}, want {want}"
            kinds.add("none" if want[2] else "hi" if want[0] >> n else "lo")
        assert kinds == {"none", "hi", "lo"}

    sim.add_testbench(tb)
    sim.run()
