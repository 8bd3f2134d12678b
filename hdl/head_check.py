"""A beat's head checks against its job's head, with the previous decision's new head forwarded
(out of ``hdl/reducer.py``; issue 16 item 6, docs/reducer.md "The decision as a component").

Stage 1 computes them a cycle ahead, for the beat that will be in stage 1, against the heads as
they will be then: the head registers, or, if the previous decision completed a chunk at the
head of this beat's job, the head it forwards (chunk + 1 + run, the model's release run:
``model.AggregatorModel._maybe_complete``). The forwarded compares avoid a 32-bit add before
them: ``minus_hn`` is one carry chain (carry-save), ``eq_hn`` none.

``head_checks`` is the logic; the reducer calls it inline (so its RTLIL, pinned by
tests/test_default_rtl.py, keeps its hierarchy), ``HeadCheck`` wraps it as a component (the unit
tests; a record engine's modify function).
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .decision import head_terms
from .params import check_core_params
from .reducer_layouts import HeadChecks, bits_for, forwarded_head_layout, pack_flags

__all__ = ["HeadCheck", "all_ones", "eq_hn", "eq_hn_reg", "eq_hn_split", "head_checks", "minus_hn"]


def all_ones(v: Value) -> Value:
    """``v`` is all ones, as the carry out of ``v + 1``: a carry chain (one CCU2C per two bits on
    the ECP5) rather than an AND tree of LUTs, which abc9 maps as a LUT chain when it sees slack
    (the DRAM build's `hc_r.at_head`: 5-9 LUT4 in series behind the 32-bit compares, 9.1-9.2 ns
    placed at session 44's seeds 2 and 5, where `hc_r.late`, a carry chain from the same
    registers, is 7.4-7.7)."""
    return (v + 1)[len(v)]


def minus_hn(m: Module, x: Value, cp1: Value, run: Value) -> Value:
    """x - (cp1 + run) mod 2**32 with one carry chain: x + ~cp1 + ~run + 2 as carry-save (sum
    sv, carries cv with the first +1 in its free bit 0), then sv - ~cv = sv + cv + 1."""
    a, b, c = x, ~cp1, ~Cat(run, Const(0, 32 - len(run)))
    sv, cv = Signal(32), Signal(32)
    m.d.comb += [sv.eq(a ^ b ^ c), cv.eq(Cat(Const(1, 1), ((a & b) | (a & c) | (b & c))[:31]))]
    return (sv - ~cv)[:32]


def eq_hn(x: Value, cp1: Value, run: Value, *, carry: bool = False) -> Value:
    """x == cp1 + run (mod 2**32) without an adder: x + ~(a + b) == -1, i.e. with the
    carry-save sum s and carries g of a, b and ~x, s ^ (g << 1) is all ones
    (a ^ b ^ x ^ (g << 1) == 0); each bit needs only its own and the next lower inputs.
    ``carry``: the 32 bits' zero test as ``all_ones`` of their complement (the same value)."""
    a, b = cp1, Cat(run, Const(0, 32 - len(run)))
    g = (a & b) | ((a | b) & ~x)
    t = a ^ b ^ x ^ Cat(Const(0, 1), g[:31])
    return all_ones(~t) if carry else t == 0


def eq_hn_split(m: Module, x: Value, cp1: Value, run: Value, hi1: Value) -> Value:
    """x == cp1 + run (mod 2**32) with the run (``L`` = len(run) bits) only in the low bits:
    ``hi1`` is cp1[L:] + 1 (mod 2**(32 - L)), a register loaded with ``fx_cp1`` (the caller's
    claim). The low sum s = cp1[:L] + run (L + 1 bits) carries at most 1 into bit L, so
    x == cp1 + run exactly when x[:L] == s[:L] and x[L:] is cp1[L:] + s[L]: the two upper
    compares (against cp1[L:] and hi1) are carry chains (``all_ones``) off flip-flops only,
    the carry s[L] choosing after them (``eq_hn(carry=True)`` put the run's bits in front of
    one 32-bit chain: `fx_run` -> `hc_r.at_head`, 8.0-9.0 ns at main 27983de's seeds 1-5)."""
    lb = len(run)
    assert 0 < lb < 32 and len(hi1) == 32 - lb
    s = Signal(lb + 1, name="hn_lo")
    m.d.comb += s.eq(cp1[:lb] + run)
    eq0, eq1 = all_ones(~(x[lb:] ^ cp1[lb:])), all_ones(~(x[lb:] ^ hi1))
    return (x[:lb] == s[:lb]) & Mux(s[lb], eq1, eq0)


def eq_hn_reg(x: Value, cp1: Value, hi1: Value, hn_lo: Value) -> Value:
    """x == cp1 + run (mod 2**32), ``eq_hn_split``'s value with its low sum from a register:
    ``hn_lo`` (``L`` + 1 bits) is cp1[:L] + run, loaded with ``fx_cp1`` / ``fx_run`` (the
    caller's claim, as ``hi1``'s), so cp1 + run is Cat(hn_lo[:L], hn_lo[L] ? hi1 : cp1[L:]) and
    the equality one carry chain (``all_ones``) of 32 bits, each bit's XNOR with the flip-flop
    ``hn_lo[L]`` choosing its operand one LUT4 (x, hn_lo[L], hi1, cp1): no sum of the run, no
    second chain, no multiplexer or AND after the chain (``eq_hn_split``: two 28-bit chains, the
    carry choosing between them and the low bits' compare ANDed after)."""
    lb = len(hn_lo) - 1
    assert 0 < lb < 32 and len(hi1) == 32 - lb
    return all_ones(~(x ^ Cat(hn_lo[:lb], Mux(hn_lo[lb], hi1, cp1[lb:]))))


def head_checks(m: Module, job: Value, chunk: Value, cw: Value, heads: Sequence[Value], fwd: Value,
                fwd_job: Value, cp1: Value, run: Value, *, per_job: bool = False, carry_eq: bool = False,
                hi1: Value | None = None, hn_lo: Value | None = None) -> Value:
    """HeadChecks of ``chunk`` (``cw`` = chunk - window) of job ``job`` against ``heads[job]``, or
    against the forwarded head ``cp1 + run`` if ``fwd`` and ``fwd_job`` is ``job``. ``per_job``:
    the compares made against every job's head and ``job`` choosing their results, not the head
    (no job select between the head registers and the carry chains; a job past ``heads``
    compares against 0 either way). ``carry_eq`` (with ``per_job``; DRAM): the equalities
    (``at_head``: chunk == head, chunk == cp1 + run) as carry chains (``all_ones``), the same
    values. ``hi1`` (with ``carry_eq``; DRAM): cp1[len(run):] + 1 from a register, the forwarded
    equality by ``eq_hn_split`` (the same value). ``hn_lo`` (with ``hi1``; DRAM, session 48):
    cp1[:len(run)] + run from a register, the forwarded equality by ``eq_hn_reg`` (one chain);
    and with two heads (one job bit) the own head's equality one chain against the head ``job``
    selects (``job`` and both heads' bits in each bit's XNOR LUT4, so the select adds no level
    in front of the chain), not one per job chosen after: ``at_head`` then has two chains per
    beat behind it, not four, and fewer levels after them (the same values)."""
    assert per_job or not carry_eq
    assert hi1 is None or carry_eq
    assert hn_lo is None or hi1 is not None
    if not per_job:
        hj = Signal(32)
        with m.Switch(job):
            for j, h in enumerate(heads):
                with m.Case(j):
                    m.d.comb += hj.eq(h)
    sel = fwd & (fwd_job == job)
    d_f, dw_f = minus_hn(m, chunk, cp1, run), minus_hn(m, cw, cp1, run)
    fold = hn_lo is not None and len(heads) == 2 and len(job) == 1  # (no job past the heads)
    if per_job:
        hf = {k: Signal(name=f"hc_{k}") for k in ("late", "below_end", *(() if fold else ("at_head",)))}
        with m.Switch(job):
            for j, h in enumerate([*heads, None]):
                with m.Case(j) if h is not None else m.Default():
                    hv = Const(0, 32) if h is None else h
                    terms = head_terms(chunk, cw, hv)
                    if carry_eq:
                        terms["at_head"] = all_ones(~(chunk ^ hv))
                    m.d.comb += [hf[k].eq(terms[k]) for k in hf]
    else:
        hf = head_terms(chunk, cw, hj)
    at_own = all_ones(~(chunk ^ Mux(job, heads[1], heads[0]))) if fold else hf["at_head"]
    if hi1 is None:
        at_fwd = eq_hn(chunk, cp1, run, carry=carry_eq)
    else:
        at_fwd = eq_hn_split(m, chunk, cp1, run, hi1) if hn_lo is None else eq_hn_reg(chunk, cp1, hi1, hn_lo)
    return pack_flags(HeadChecks, late=Mux(sel, d_f[31], hf["late"]), below_end=Mux(sel, dw_f[31], hf["below_end"]),
                      at_head=Mux(sel, at_fwd, at_own))


class HeadCheck(wiring.Component):
    """``head_checks`` as a component: ``job``, ``chunk``, ``cw`` (chunk - window), ``heads``
    (one per job), ``fwd`` (the previous decision's forwarded head: ``forwarded_head_layout``) in,
    ``checks`` (HeadChecks) out. Combinational; ``run_bits`` is the slot index's width. Both
    sizes are checked by ``hdl/params.py`` (``jobs`` the core's range, ``run_bits`` 1..32).
    ``per_job``, ``carry_eq``: ``head_checks``'; ``split_eq`` (with ``carry_eq``): its ``hi1``,
    here worked out from ``fwd.cp1`` (the claim the reducer's register keeps); ``reg_lo`` (with
    ``split_eq``): its ``hn_lo``, here fwd.cp1's low bits + fwd.run (the reducer's ``fx_lo``)."""

    def __init__(self, jobs: int, run_bits: int, *, per_job: bool = False, carry_eq: bool = False,
                 split_eq: bool = False, reg_lo: bool = False) -> None:
        check_core_params(jobs=jobs, run_bits=run_bits)
        assert split_eq or not reg_lo
        self.jobs, self.per_job, self.carry_eq, self.split_eq = jobs, per_job, carry_eq, split_eq
        self.reg_lo = reg_lo
        jb = bits_for(jobs)
        super().__init__({
            "job": In(jb), "chunk": In(32), "cw": In(32), "heads": In(data.ArrayLayout(32, jobs)),
            "fwd": In(forwarded_head_layout(jb, run_bits)), "checks": Out(HeadChecks),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        f = self.fwd
        hi1 = (f.cp1[len(f.run):] + 1)[:32 - len(f.run)] if self.split_eq else None
        hn_lo = f.cp1[:len(f.run)] + f.run if self.reg_lo else None
        m.d.comb += self.checks.eq(head_checks(m, self.job, self.chunk, self.cw,
                                               [self.heads[j] for j in range(self.jobs)],
                                               f.valid, f.job, f.cp1, f.run, per_job=self.per_job,
                                               carry_eq=self.carry_eq, hi1=hi1, hn_lo=hn_lo))
        return m
