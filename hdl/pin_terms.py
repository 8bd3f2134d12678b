"""Pinning, out of ``Reducer.elaborate`` (issue 16 item 6; docs/reducer.md, "Parts built
inline"): a queued or emitting result holds its slots' data, so a contribution that would start
a new chunk in one of them waits. ``pin_terms`` is the chunk-distance form (every S with ``pending="words"``,
S > ``Reducer.RUN_TABLE_MAX_SLOTS`` otherwise; the per-slot masks take its place below that);
``chunk_key`` is the (job, chunk) pair that tells two beats of the same chunk from two chunks on
one slot; ``next_pair_checks`` compares, a cycle ahead, the beat that will be at P's output with
the one that will be in stage 1 (the pinning by the entry stage 1 pushes).

Functions that build their logic into the caller's module, not components: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed). ``PinCheck`` and ``PairCheck`` wrap them for the unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import AggHeaderLayout
from .params import check_core_params
from .reducer_layouts import bits_for, release_entry_layout

__all__ = ["PairCheck", "PairChecks", "chunk_key", "emitter_pin_layout", "next_pair_checks",
           "pin_terms", "pair_checks_layout", "PinCheck"]


def emitter_pin_layout(jobs: int, slots: int) -> data.StructLayout:
    """What the emitter holds (``ResultEmitter``'s ports of these names): the result it is
    emitting (``busy``, ``job``, ``chunk``) and the rest of its entry's run (``rest_left``
    chunks from ``rest_chunk`` of ``rest_job``)."""
    return data.StructLayout({"busy": 1, "job": bits_for(jobs), "chunk": 32, "rest_job": bits_for(jobs),
                              "rest_chunk": 32, "rest_left": (slots - 1).bit_length() + 1})


def pin_terms(job: Value, chunk: Value, wm: Value, *, entries: Sequence[data.View], occupied: Value,
              push_now: Value, entry: data.View, emit: object) -> list[Value]:
    """One term per holder of chunk ``chunk``'s slot in job ``job`` (``wm``: window - 1, its
    width the slot index's): each occupied queue entry (``release_entry_layout``: its chunk and
    the ``more`` chunks of its run), the entry stage 2 pushes now (``push_now``, ``entry``), the
    emitter's result and the rest of its run (``emit``: ``emitter_pin_layout``'s fields)."""
    sb = len(wm)
    terms = []
    for i, e in enumerate(entries):
        terms.append(occupied[i] & (e.job == job)
                     & (((chunk[:sb] - e.chunk[:sb]) & wm) <= e.more))
    terms.append(push_now & (entry.job == job)
                 & (((chunk[:sb] - entry.chunk[:sb]) & wm) <= entry.more))
    terms.append(emit.busy & (emit.job == job) & (((chunk[:sb] - emit.chunk[:sb]) & wm) == 0))
    terms.append((emit.rest_job == job) & (((chunk[:sb] - emit.rest_chunk[:sb]) & wm) < emit.rest_left))
    return terms


def chunk_key(hdr: data.View, job_bits: int) -> Value:
    """A beat's (job, chunk) of its header (``AggHeaderLayout``), one value to compare."""
    return Cat(hdr.job_id[:job_bits], hdr.chunk)


@dataclass(frozen=True)
class PairChecks:
    """``next_pair_checks``' registers: ``pjob_r`` (same job), ``pdc_r`` (P's chunk - stage 1's,
    low bits, in stage 1's window), ``same_key`` (same job and chunk)."""

    pjob_r: Value
    pdc_r: Value
    same_key: Value


def next_pair_checks(m: Module, *, p_load: Value, skid_valid: Value, skid_hdr: data.View, in_hdr: data.View,
                     h0: data.View, h1: data.View, adv: Value, wm0: Value, wm1: Value, jb: int) -> PairChecks:
    """Register the checks of P's next beat (``skid_hdr`` if ``skid_valid`` else ``in_hdr`` when
    P loads, else ``h0``) against stage 1's next (``h0`` if ``adv`` else ``h1``, window - 1
    ``wm0`` / ``wm1``): the comparisons made for every candidate pair in parallel, the choices
    (``skid_valid``, ``adv``, ``p_load``) at the last multiplexers, so no comparator or subtractor
    sits between the stage-P registers and stage 1's advance."""
    sb = len(wm1)
    pjob_r, pdc_r = Signal(), Signal(sb)
    job_pn = Mux(skid_valid, skid_hdr.job_id[:jb], in_hdr.job_id[:jb])
    cl_pn = Mux(skid_valid, skid_hdr.chunk[:sb], in_hdr.chunk[:sb])
    job_1n, cl_1n = Mux(adv, h0.job_id[:jb], h1.job_id[:jb]), Mux(adv, h0.chunk[:sb], h1.chunk[:sb])
    wm_1n = Mux(adv, wm0, wm1)
    m.d.sync += [
        pjob_r.eq(Mux(p_load, job_pn == job_1n, h0.job_id[:jb] == job_1n)),
        pdc_r.eq(Mux(p_load, (cl_pn - cl_1n)[:sb] & wm_1n, (h0.chunk[:sb] - cl_1n)[:sb] & wm_1n)),
    ]
    # "same job and chunk": no 32-bit comparator in front of adv
    same_key = Signal()
    # p's next key (skid or I's output, if it loads) against stage 1's next (h0 or h1): the
    # four comparisons in parallel, the choices (ps_v, adv, p_load) at the last multiplexers
    k_s, k_i, k_0, k_1 = (chunk_key(h, jb) for h in (skid_hdr, in_hdr, h0, h1))
    m.d.sync += same_key.eq(Mux(p_load,
                                Mux(skid_valid, Mux(adv, k_s == k_0, k_s == k_1), Mux(adv, k_i == k_0, k_i == k_1)),
                                Mux(adv, Const(1), k_0 == k_1)))
    return PairChecks(pjob_r=pjob_r, pdc_r=pdc_r, same_key=same_key)


def pair_checks_layout(slots: int) -> data.StructLayout:
    """``PairCheck``'s output: ``PairChecks``' three registers."""
    return data.StructLayout({"pjob_r": 1, "pdc_r": (slots - 1).bit_length(), "same_key": 1})


class PairCheck(wiring.Component):
    """``next_pair_checks`` as a component (the unit tests): ``p_load``, ``skid_valid``, the
    headers ``skid_hdr``, ``in_hdr``, ``h0``, ``h1`` (``AggHeaderLayout``), ``adv``, ``wm0``,
    ``wm1`` in; ``out`` (``pair_checks_layout``) a cycle later."""

    def __init__(self, *, slots: int, jobs: int) -> None:
        check_core_params(slots=slots, jobs=jobs)
        self.jobs = jobs
        sb = (slots - 1).bit_length()
        hdr = {n: In(AggHeaderLayout) for n in ("skid_hdr", "in_hdr", "h0", "h1")}
        super().__init__({"p_load": In(1), "skid_valid": In(1), **hdr, "adv": In(1), "wm0": In(sb),
                          "wm1": In(sb), "out": Out(pair_checks_layout(slots))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        pc = next_pair_checks(m, p_load=self.p_load, skid_valid=self.skid_valid, skid_hdr=self.skid_hdr,
                              in_hdr=self.in_hdr, h0=self.h0, h1=self.h1, adv=self.adv, wm0=self.wm0,
                              wm1=self.wm1, jb=bits_for(self.jobs))
        m.d.comb += [self.out.pjob_r.eq(pc.pjob_r), self.out.pdc_r.eq(pc.pdc_r), self.out.same_key.eq(pc.same_key)]
        return m


class PinCheck(wiring.Component):
    """``pin_terms`` as a component (the unit tests): ``job``, ``chunk``, ``wmask``, the queue's
    ``entries`` and ``occupied`` bits, stage 2's ``push_now`` and ``entry``, the ``emit`` state
    in; ``pinned`` (any term) out. Combinational."""

    def __init__(self, *, slots: int, jobs: int, depth: int) -> None:
        check_core_params(slots=slots, jobs=jobs)
        el = release_entry_layout(jobs, slots)
        super().__init__({
            "job": In(bits_for(jobs)), "chunk": In(32), "wmask": In((slots - 1).bit_length()),
            "entries": In(data.ArrayLayout(el, depth)), "occupied": In(depth), "push_now": In(1),
            "entry": In(el), "emit": In(emitter_pin_layout(jobs, slots)), "pinned": Out(1),
        })
        self.depth = depth

    def elaborate(self, platform: object) -> Module:
        m = Module()
        terms = pin_terms(self.job, self.chunk, self.wmask, entries=[self.entries[i] for i in range(self.depth)],
                          occupied=self.occupied, push_now=self.push_now, entry=self.entry, emit=self.emit)
        m.d.comb += self.pinned.eq(Cat(*terms).any())
        return m
