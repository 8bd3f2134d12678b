"""The in-order release scan (docs/reducer.md, "In-order release"; docs/large_slots.md): one
carry chain that finds the first slot that is not pending, shared by the reducer (over its S
pending bits, doubled so the scan wraps) and ``PendingWords`` (over two 64-bit words).

The input is two halves ``lo`` and ``hi`` of the same width N, scanned from bit 0 of ``lo`` to
the top of ``hi``: a 1 is a slot that is pending or does not take part (outside the job's
region: transparent), a 0 stops the scan. ``below`` (N bits) forces ``lo``'s bits below the
start slot to 1 and keeps them out of the cleared bits. ``y + 1`` turns the trailing ones of
``y = lo | below : hi`` into zeros and the first zero into a one, so ``y1 & ~y`` is the first
zero (one-hot) and ``(y ^ y1) >> 1`` the bits before it. "No zero at all" (the carry out of the
top bit) is taken from an AND tree of ``y`` instead: a few LUT levels beside the 2N-bit carry
chain rather than at its end, so what hangs on it (``PendingWords``' ``op.ready`` and its next
step) does not wait for the whole chain (docs/benchmarks.md, the record path's Fmax).

``stages=2`` (two-chain form only) puts a register between the two N-bit chains and their
combination: each half's first zero, bits before it and "all ones" (and ``below``) are
registered, and the 2N-bit results, combined from those, are the one-stage results of the
cycle before (docs/large_slots.md, "The record path's next cut": ``PendingWords``' scan over
two cycles). ``index``: the first zero's index rather than its one-hot, each half's index
tree before that register (by the placed record path's delays the index, not the chains, is
the long part). ``encoder`` (with ``index``): each half's index from ``first_zero_index``, a
radix-4 priority encoder of the half itself beside its carry chain, instead of the OR trees of
the chain's one-hot behind it (``PendingWords``' five stages, issue 16 round 8: the chain and
the trees were S1's longest path).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value

__all__ = ["first_zero_index", "onehot_index", "release_scan"]


def release_scan(m: Module, lo: Value, hi: Value, below: Value, tag: str,
                 halves: bool = False, stages: int = 1, index: bool = False,
                 parts: int = 1, below_in_lo: bool = False, encoder: bool = False) -> tuple[Value, Value, Value]:
    """(first zero one-hot over the 2N bits ``lo : hi``, the bits before it outside ``below``
    (2N), no zero found) of the scan described in the module docstring. ``halves``: the same
    results from two N-bit carry chains side by side, ``hi``'s counted only where ``lo`` (with
    ``below``) is all ones: half the chain's length for a multiplexer level after it
    (``PendingWords``, whose scan is the record path's longest).
    ``index`` (needs ``halves``, N a power of 2): the first zero's index (``onehot_index`` of the
    one-hot, 0 if none) instead of the one-hot, from each half's index: with ``stages=2`` the
    index trees are in the first stage. ``stages=2`` (needs ``halves``): the halves' results
    and ``below`` registered (``m.d.sync``, reset to 0: the first cycle's outputs are 0, never
    X), the results one cycle after their inputs, combined as in one stage. ``parts`` (one stage,
    no index; ``halves`` is ``parts=2``): the same results from ``parts`` carry chains of 2N /
    ``parts`` bits side by side, chain j counted only where chains 0..j-1 are all ones (a prefix
    AND of their AND trees, beside the chains: the reducer's scan above S 16). ``below_in_lo``:
    ``lo`` has ``below`` ORed in already (``PendingWords``' five stages: its register), so the
    chains start at ``lo``; ``below`` still keeps its bits out of the cleared bits. ``encoder``
    (needs ``index``): each half's index and "all ones" from ``first_zero_index`` of the half,
    not from its chain (the same values: no carry chain in front of the index)."""
    n = len(lo)
    if not len(hi) == len(below) == n:
        raise ValueError(f"release_scan: lo, hi and below must be as wide, got {n}, {len(hi)}, {len(below)}")
    if halves and parts not in (1, 2):
        raise ValueError(f"release_scan: halves is parts=2, got parts={parts}")
    parts = 2 if halves else parts
    if parts < 1 or (2 * n) % parts:
        raise ValueError(f"release_scan: parts must divide 2N = {2 * n}, got {parts}")
    halves = parts == 2
    if stages not in (1, 2):
        raise ValueError(f"release_scan: stages must be 1 or 2, got {stages}")
    if (stages == 2 or index) and not halves:
        raise ValueError("release_scan: stages=2 and index need halves=True (they work on the two chains)")
    if encoder and not index:
        raise ValueError("release_scan: encoder needs index=True (it gives the index)")
    if index and n & (n - 1):
        raise ValueError(f"release_scan: index needs a power-of-2 width of lo and hi, got {n}")
    y = Signal(2 * n, name=f"scan_y_{tag}")
    m.d.comb += y.eq(Cat(lo if below_in_lo else lo | below, hi))
    if parts >= 2 and stages == 1 and not index:  # chain j counted where chains 0..j-1 are all ones
        w = 2 * n // parts
        fzs, runs, prefix = [], [], Const(1, 1)
        for k in range(parts):
            part = y[k * w:(k + 1) * w]
            p1 = Signal(w + 1, name=f"scan_y1_{tag}_{k}")
            m.d.comb += p1.eq(part + 1)
            fzs.append(Mux(prefix, (p1 & ~part)[:w], 0) if k else (p1 & ~part)[:w])
            runs.append(Mux(prefix, (part ^ p1)[1:], 0) if k else (part ^ p1)[1:])
            prefix = (prefix & part.all()) if k else part.all()
        return Cat(*fzs), Cat(*runs) & ~Cat(below, Const(0, n)), prefix
    if halves:
        ends = []
        for k, part in enumerate((y[:n], y[n:])):
            p1 = Signal(n + 1, name=f"scan_y1_{tag}_{k}")
            m.d.comb += p1.eq(part + 1)
            fz = (p1 & ~part)[:n]
            if encoder:  # the index and "all ones" beside the chain, not behind it
                ix, all_ones = first_zero_index(part)
                ends.append((ix, (part ^ p1)[1:], all_ones))
            else:
                ends.append((onehot_index(fz) if index else fz, (part ^ p1)[1:], part.all()))
        parts = [*ends[0], *ends[1], below]  # each half's (first zero, bits before, all ones), below
        if stages == 2:  # the halves registered, combined a cycle later
            first = "ix" if index else "fz"
            names = (f"{first}_lo", "run_lo", "all_lo", f"{first}_hi", "run_hi", "all_hi", "below")
            regs = [Signal(len(v), name=f"scan_{k}_{tag}_r") for k, v in zip(names, parts, strict=True)]
            m.d.sync += [r.eq(v) for r, v in zip(regs, parts, strict=True)]
            parts = regs
        fz_lo, run_lo, all_lo, fz_hi, run_hi, all_hi, below_ = parts
        before = Cat(run_lo, Mux(all_lo, run_hi, 0)) & ~Cat(below_, Const(0, n))
        if index:  # in ``hi`` (index N + its own) only where ``lo`` is all ones and ``hi`` is not
            return Cat(Mux(all_lo, fz_hi, fz_lo), all_lo & ~all_hi), before, all_lo & all_hi
        return Cat(fz_lo, Mux(all_lo, fz_hi, 0)), before, all_lo & all_hi
    y1 = Signal(2 * n + 1, name=f"scan_y1_{tag}")
    m.d.comb += y1.eq(y + 1)
    before = (y ^ y1)[1:] & ~Cat(below, Const(0, n))
    return (y1 & ~y)[: 2 * n], before, y.all()


def onehot_index(v: Value) -> Value:
    """The index of the set bit of the one-hot ``v`` (an OR tree per index bit; 0 if none)."""
    n = len(v)
    return Cat(*[Cat(*[v[i] for i in range(n) if (i >> b) & 1]).any() for b in range((n - 1).bit_length())])


def first_zero_index(v: Value) -> tuple[Value, Value]:
    """(the index of ``v``'s lowest 0 bit, 0 if none; ``v`` is all ones) for ``v`` a power of 2
    wide, from a radix-4 tree (radix 2 where 4 does not divide): each group's index is its
    lowest part not all ones, that part's own index beside the part's number. log4 N levels of
    choices from ``v`` itself: the same index as ``onehot_index`` of ``release_scan``'s one-hot,
    without its carry chain and OR trees in series (``release_scan(..., encoder=True)``)."""
    n = len(v)
    if n & (n - 1):
        raise ValueError(f"first_zero_index: needs a power-of-2 width, got {n}")
    if n == 1:
        return Const(0, 0), v[0]
    r = 4 if n % 4 == 0 else 2
    w = n // r
    subs = [first_zero_index(v[k * w:(k + 1) * w]) for k in range(r)]
    ix: Value = Const(0, (n - 1).bit_length())
    for k in reversed(range(r)):  # the lowest part with a zero wins; none: 0
        ix = Mux(~subs[k][1], Cat(subs[k][0], Const(k, (r - 1).bit_length())), ix)
    return ix, Cat(*[a for _, a in subs]).all()
