"""Stage 1's tag checks, out of ``Reducer.elaborate`` (issue 16 item 6; docs/reducer.md, "Parts
built inline"): a beat's checks against its slot's tag (TagChecks: state, same chunk, header
mismatch, duplicate, completes, older), with the tag writes the read missed forwarded.

The tag is read one cycle before the beat reaches stage 0 (p's output), so in stage 0 the read
misses the write of the last cycle (tb) and the one in progress (tw): the comparisons with the
beat's header are made against the three in parallel, the newest is selected and only the
boolean results (and the bitmap) are registered for stage 1. Stage 1 adds the one write still
missing, the tag the decision of the previous cycle requested (tw now), from registers
(``live_checks``: header compares, the two bitmap candidates' checks and the state, each
registered on its own). While stage 1 holds, its merged result is kept.

``stage1_tag_checks`` builds its logic into the caller's module, not a component: a component
boundary would add ports and a hierarchy level to the reducer's RTLIL, which
tests/test_default_rtl.py pins (the netlist being placed); its signals keep the names they had
in the reducer. ``LiveTagCheck`` wraps ``a_checks`` / ``live_checks`` / ``state_flags`` for the
unit tests (the forwarded checks against the direct ones, hdl/decision.py's ``tag_checks``).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .decision import hdr_checks, header_fields, new_tag, tag_checks
from .head_check import all_ones
from .layouts import AggHeaderLayout
from .params import check_core_params
from .reducer_layouts import (
    ACTIVE,
    DONE,
    FREE,
    BitmapChecks,
    HdrChecks,
    TagChecks,
    bits_for,
    pack_flags,
    slot_tag_layout,
)

__all__ = ["LiveTagCheck", "TagCheckNets", "a_checks", "live_checks", "stage1_tag_checks", "state_flags",
           "tag_checks_carry"]


def a_checks(b: Value, bit: Value, pbit: Value, members: Value) -> tuple[Value, Value]:
    """(dup, completes) of the beat with sender bit ``pbit`` of a group of ``members`` against
    the bitmap ``b | bit``: the tag stage 1 decides with ``same`` (its bitmap ``b`` and sender
    bit ``bit`` added)."""
    x = b | bit
    return (x & pbit) != 0, (x | pbit) == members


def live_checks(done: Value, active: Value, nfree: Value, hcw: Value, bmck: Value, sel_a: Value) -> Value:
    """TagChecks against the tag the previous decision requested, from its state (``done``,
    ``active``, not FREE), its header compares (HdrChecks ``hcw``: its header is stage 1's) and
    the checks of both bitmaps it may carry (BitmapChecks ``bmck``; ``sel_a``: decided with
    ``same``). The round is in ``hcw.mismatch`` (``mismatch_round`` 0)."""
    return pack_flags(TagChecks, done=done, active=active,
                      same=nfree & hcw.job_eq & hcw.chunk_eq, mismatch_round=0,
                      mismatch=hcw.mismatch,
                      dup=Mux(sel_a, bmck.dup_a, bmck.dup_bc),
                      cadd=Mux(sel_a, bmck.cadd_a, bmck.cadd_bc),
                      older=hcw.job_eq & ~hcw.chunk_eq & ~hcw.back)


def tag_checks_carry(m: Module, t: Value, h: Value, bit: Value, members: Value, jb: int) -> Value:
    """``tag_checks`` (hdl/decision.py) with its wide compares as carry chains (``all_ones``,
    hdl/head_check.py: the carry out of v + 1), the same values: ``cadd`` ((bitmap | bit) ==
    members), ``mismatch_round`` (32 bits) and ``mismatch`` (group, scale, count, session).
    abc9 mapped their AND / OR trees as LUT4s in series where its unit-delay model saw slack
    (`tag_rd__data` -> 10 LUT4 -> `ck_pre.cadd`, 9.25 ns, P's payload -> 9 LUT4 ->
    `ck_pre.mismatch` / `mismatch_round`, 8.2-8.7 ns at session 44's seeds 2 / 5); a 32-bit
    carry chain placed at ~1.5 ns there. Since session 46 also the chunk equality (``same``,
    ``older``) and ``dup`` ((bitmap & bit) != 0) as carry chains: synthesised alone (four tag
    sources and ``ck_pre``'s select) abc9 had mapped them as 5-6 LUT4 in series (``ck_pre.older``
    from P's payload 8.31 ns at 27983de's seed 5, there through ``back``'s chain after a 3.5 ns
    route: the route is not cut here). The job compare (``jb`` bits), ``back`` (the subtractor's
    sign) and the state stay ``tag_checks``'. Built into ``m`` (one signal)."""
    c = Signal(TagChecks)
    x_rest = Cat(t.group ^ h.group_id, t.scale ^ h.scale_exp, t.count ^ h.element_count, t.session ^ h.session)
    hc = HdrChecks(hdr_checks((t.job, t.chunk, t.round, t.group, t.scale, t.count, t.session), h, jb)[0])
    chunk_eq = all_ones(~(t.chunk ^ h.chunk))
    m.d.comb += [
        c.eq(tag_checks(t, h, bit, members, jb)),
        c.same.eq((t.state != FREE) & hc.job_eq & chunk_eq),
        c.older.eq(hc.job_eq & ~chunk_eq & ~hc.back),
        c.dup.eq(~all_ones(~(t.bitmap & bit))),
        c.cadd.eq(all_ones(~((t.bitmap | bit) ^ members))),
        c.mismatch_round.eq(~all_ones(~(t.round ^ h.round_id))),
        c.mismatch.eq(~all_ones(~x_rest)),
    ]
    return c.as_value()


def state_flags(t: Value) -> tuple[Value, Value, Value]:
    """A slot tag's state as (DONE, ACTIVE, not FREE)."""
    return t.state == DONE, t.state == ACTIVE, t.state != FREE


@dataclass(frozen=True)
class TagCheckNets:
    """What stage 1's tag checks give the decision: ``ck`` (TagChecks, from ``ck_live`` or
    ``ck_pre`` by ``thit_h``), ``bm`` (the slot's bitmap), ``ck_x`` (what ``ck`` stands for, for
    copy_error), ``tw_hit0`` (driven by the caller: the tag write requested now is slot0's) and
    ``tw_vn_l`` (an inverted copy of the write, for copy_error)."""

    ck: Value
    bm: Value
    ck_pre: Value
    ck_live: Value
    ck_x: Value
    thit_h: Value
    tw_hit0: Value
    tw_vn_l: Value


def stage1_tag_checks(m: Module, *, h0: Value, h1: Value, jb: int, p: Value, p_load: Value, ps_v: Value,
                      ps_slot: Value, i_slot: Value, rd_data: Value, tb_data: Value, tw_en: Value,
                      tw_addr: Value, tw_v: Value, tw_a: Value, tw_d: Value, tw_data: Value, slot0: Value,
                      first1: Value, bit: Value, adv: Value, tag_r: Value,
                      rd_load: tuple[Value, Value] | None = None, live_reg: bool = False,
                      gap: bool = False, carry_eq: bool = False, h0_t: Value | None = None) -> TagCheckNets:
    """Build stage 1's tag checks into ``m`` (module docstring). ``h0`` / ``p`` (the decoded
    beat: ``slot``, ``bit``, ``members``) the beat at P's output, ``h1`` / ``first1`` / ``bit``
    stage 1's; the tag read address's sources (``p_load``, the skid's ``ps_v`` / ``ps_slot``,
    I's ``i_slot``) and data ``rd_data``; the tag writes: ``tb_data`` (the last written),
    ``tw_en`` / ``tw_addr`` / ``tw_data`` (requested now), ``tw_v`` / ``tw_a`` / ``tw_d`` (being
    written); ``adv`` (stage 1 moves), ``tag_r`` (the tag held for a message's later beats).
    ``rd_load``: the decision's tag read on two ports (DRAM, ``tag_memory(load_port=True)``), as
    (``sel``, ``data``): ``data`` read at the beat P would load, ``rd_data`` at the beat it holds,
    ``sel`` P's load a cycle ago; both are checked and ``sel`` chooses the checks' results, not
    the tag read (``tag_ld_r`` -> the read-data multiplexer -> the checks -> ``ck_pre.mismatch``
    was the Versa DRAM build's core path, 9.59 ns at session 39's seed 2). ``live_reg`` (DRAM):
    ``ck_live`` is one register, loaded on ``adv`` with ``live_checks`` of what its inputs'
    registers would load (exact: they all load on ``adv``), so the decision's live case starts at
    flip-flops as ``ck_pre``'s does (`hcw1.job_eq` -> ``same`` -> the decision -> `push` was
    10.05 ns at session 40's seed 3); ``hcw1`` / ``bmck1`` / ``sel_a1`` stay for ``ck_x``.
    ``gap`` (DRAM): no first beat enters stage 1 the cycle after a last beat left it, so no tag
    write was requested in between (docs/reducer.md, "No decision in between"): ``ck`` is
    ``ck_pre`` and ``bm`` is ``bm_pre``, no live source (``ck_x`` keeps it: copy_error checks
    the claim at every decision). ``carry_eq`` (DRAM): each tag source's checks by
    ``tag_checks_carry`` (the wide compares as carry chains, the same values). ``h0_t`` (DRAM):
    ``h0`` with its job and chunk from a flip-flop copy of P's (``InputStages(key_copies=...)``,
    equal every cycle), for the tag sources' checks and ``hcw_n``; default ``h0``."""
    if h0_t is None:
        h0_t = h0

    def src_checks(t):  # a whole tag against the beat at p's output (TagChecks)
        if carry_eq:
            return tag_checks_carry(m, t, h0_t, p.bit, p.members, jb)
        return tag_checks(t, h0_t, p.bit, p.members, jb)

    # which source is the newest for slot0, compared a cycle ahead against the read address
    # (that is slot0 now): the write in progress now was requested then (tw_en/tw_addr); the
    # last write (tb) is the one in progress then, if any (an older write is in the memory
    # by the time of that read)
    thit_w0, thit_b0 = Signal(), Signal()
    # (each write address compared with the three read addresses in parallel, the read
    # address's choice, which depends on ``take``, at the last multiplexer)
    def rd_hit(a):
        return Mux(p_load, Mux(ps_v, a == ps_slot, a == i_slot), a == p.slot)

    m.d.sync += [thit_w0.eq(tw_en & rd_hit(tw_addr)), thit_b0.eq(tw_v & rd_hit(tw_a))]
    ck0 = Signal(TagChecks)
    bm0 = Signal(32)
    if rd_load is None:
        ck_rd, bm_rd = src_checks(rd_data), rd_data.bitmap
    else:  # the checks of both ports' data, chosen after them
        sel, rd_l = rd_load
        ck_rd, bm_rd = Mux(sel, src_checks(rd_l), src_checks(rd_data)), Mux(sel, rd_l.bitmap, rd_data.bitmap)
    m.d.comb += [
        ck0.eq(Mux(thit_w0, src_checks(tw_d), Mux(thit_b0, src_checks(tb_data), ck_rd))),
        bm0.eq(Mux(thit_w0, tw_d.bitmap, Mux(thit_b0, tb_data.bitmap, bm_rd))),
    ]
    # header comparisons against the tag stage 1 may write this cycle (its header fields are
    # stage 1's header; a window reset's FREE tags need none: every check is masked by state)
    hcw_n = Signal(HdrChecks)
    m.d.comb += hcw_n.eq(hdr_checks(header_fields(h1, jb), h0_t, jb)[0])
    ck_pre, bm_pre = Signal(TagChecks, name="ck_pre"), Signal(32, name="bm_pre")
    hcw1 = Signal(HdrChecks, name="hcw1")
    # with the gap the registers themselves (no alias wire: the cone tests name ck_pre / bm_pre);
    # else unnamed ck as in the pinned RTLIL (tests/test_default_rtl.py)
    ck, bm = (ck_pre, bm_pre) if gap else (Signal(TagChecks, name="$signal"), Signal(32, name="bm"))
    # bitmap checks against that tag, for both bitmaps it may carry: decided this cycle,
    # it is (bm | bit) if ``same`` else bit; requested by a later beat, tag_r's
    # thit_l == tw_hit0 a cycle ago, as two flip-flops: the write (tw_vn_l, an inverted copy
    # of tw_v: tw_v drives the tag memory's write enables) and the address compare
    # (ahit_l), so the decision's op reaches one flip-flop next to it, not the compare and
    # the 32 bitmap multiplexers that thit_l selects; copy_error checks tw_vn_l
    tw_vn_l = Signal(init=1, name="tw_vn_l")
    ahit_l = Signal()
    m.d.sync += [tw_vn_l.eq(~tw_en), ahit_l.eq(tw_addr == slot0)]
    thit_l = ~tw_vn_l & ahit_l
    # (``a``: both candidates of bm checked, thit_l picking after the compares, so that
    # thit_l's AND and fan-out do not precede the 32-bit reductions)
    (dup_w, cadd_w), (dup_p, cadd_p) = (a_checks(b, bit, p.bit, p.members) for b in (tw_d.bitmap, bm_pre))
    bm_bc = Mux(first1, bit, tag_r.bitmap)
    bmck_n = pack_flags(BitmapChecks, dup_a=Mux(thit_l, dup_w, dup_p), cadd_a=Mux(thit_l, cadd_w, cadd_p),
                        dup_bc=(bm_bc & p.bit) != 0, cadd_bc=(bm_bc | p.bit) == p.members)
    bmck1 = Signal(BitmapChecks)
    sel_a1 = Signal()  # the tag was decided with ``same``
    # the tag the previous decision requested is stage 1's (tw_v and its address == slot1)
    # and its state, as flip-flops of their own next to the decision (tw_v / tw_d drive the
    # tag memory's write port)
    # (while stage 1 holds nothing is written: tw_en is 0, so slot0 is the beat's slot)
    # tw_hit0 == tw_en & (tw_addr == slot0), with the decision's op at the last multiplexer
    tw_hit0 = Signal()

    # The checks' flags are held while stage 1 holds, with their select (thit_h, a copy of
    # thit_l that holds instead of dropping to 0): ck_pre then only loads stage 0's checks
    # (no merge of ck into ck_pre behind the tag read's compares). The bitmap still merges
    # (bm_pre), with thit_l.
    thit_h = Signal()
    if not live_reg:
        l_st = [Signal(name=f"l_{n}") for n in ("done", "active", "nfree")]
        with m.If(adv):
            m.d.sync += [thit_h.eq(tw_hit0),
                         *[r.eq(v) for r, v in zip(l_st, state_flags(tw_data), strict=True)]]
    ck_live = Signal(TagChecks)  # (both sources named: the fx_c / fx_s loop is worked out for each)
    ck_sel = [] if gap else [ck.eq(Mux(thit_h, ck_live, ck_pre)), bm.eq(Mux(thit_l, tw_d.bitmap, bm_pre))]
    if live_reg:  # the live checks registered whole (docstring): the same values, a LUT level earlier
        with m.If(adv):
            m.d.sync += [thit_h.eq(tw_hit0), ck_live.eq(live_checks(*state_flags(tw_data), hcw_n,
                                                                    BitmapChecks(bmck_n), first1 & ck.same))]
        m.d.comb += ck_sel
    else:
        m.d.comb += [ck_live.eq(live_checks(*l_st, hcw1, bmck1, sel_a1)), *ck_sel]
    with m.If(adv):
        m.d.sync += [ck_pre.eq(ck0), bm_pre.eq(bm0), hcw1.eq(hcw_n),
                     bmck1.eq(bmck_n), sel_a1.eq(first1 & ck.same)]
    with m.Else():
        m.d.sync += bm_pre.eq(bm)
    # what ck stands for (checked at every decision by copy_error): the checks merged into
    # ck_pre while stage 1 holds, the live tag's state loaded every cycle
    l_st_x = [Signal(name=f"l_{n}_x") for n in ("done", "active", "nfree")]
    ck_pre_x, ck_x = Signal(TagChecks), Signal(TagChecks)
    m.d.sync += [r.eq(v) for r, v in zip(l_st_x, state_flags(tw_data), strict=True)]
    m.d.comb += ck_x.eq(Mux(thit_l, live_checks(*l_st_x, hcw1, bmck1, sel_a1), ck_pre_x))
    m.d.sync += ck_pre_x.eq(Mux(adv, ck0, ck_x))

    return TagCheckNets(ck=ck, bm=bm, ck_pre=ck_pre, ck_live=ck_live, ck_x=ck_x, thit_h=thit_h,
                        tw_hit0=tw_hit0, tw_vn_l=tw_vn_l)


class LiveTagCheck(wiring.Component):
    """The forwarded checks as a component (the unit tests): the tag stage 1 requests for the
    header ``h1`` (``first``: on its first beat, with ``same``; else the held ``tag_bitmap``),
    the slot's bitmap ``bm``, the sender bit ``bit``, its state (``done``: DONE, else ACTIVE), against the next beat
    ``h0`` with sender bit ``pbit`` of a group of ``members``; out ``checks`` (TagChecks, as the
    reducer's ``ck_live``, unregistered) and ``tag`` (the tag requested, ``new_tag``'s)."""

    def __init__(self, jobs: int) -> None:
        check_core_params(jobs=jobs)
        self.jobs = jobs
        super().__init__({
            "h1": In(AggHeaderLayout), "h0": In(AggHeaderLayout), "first": In(1), "same": In(1),
            "done": In(1), "bm": In(32), "tag_bitmap": In(32), "bit": In(32), "pbit": In(32),
            "members": In(32), "nbm1": In(17), "checks": Out(TagChecks), "tag": Out(slot_tag_layout(jobs)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        jb = bits_for(self.jobs)
        t = new_tag(m, self.h1, jb, self.done, self.same, self.bm, self.bit, self.nbm1, self.jobs)
        hcw = HdrChecks(hdr_checks(header_fields(self.h1, jb), self.h0, jb)[0])
        dup_a, cadd_a = a_checks(self.bm, self.bit, self.pbit, self.members)
        bm_bc = Mux(self.first, self.bit, self.tag_bitmap)
        bmck = BitmapChecks(pack_flags(BitmapChecks, dup_a=dup_a, cadd_a=cadd_a, dup_bc=(bm_bc & self.pbit) != 0,
                                       cadd_bc=(bm_bc | self.pbit) == self.members))
        tag = Signal(slot_tag_layout(self.jobs))
        m.d.comb += [tag.eq(t), tag.bitmap.eq(Mux(self.first, t.bitmap, self.tag_bitmap))]
        m.d.comb += [self.tag.eq(tag), self.checks.eq(live_checks(*state_flags(tag), hcw, bmck, self.first & self.same))]
        return m
