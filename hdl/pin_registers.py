"""Pinning's registers and stage 1's advance, out of ``Reducer.elaborate`` (issue 16 item 6;
docs/reducer.md, "Parts built inline"): ``pin_r`` (the slot of the beat stage 1 holds next is
held by a queued / emitting result, or by the entry stage 1 may push this cycle), worked out a
cycle ahead, and ``adv`` (stage 1 moves: ``~(v1 & first1 & pin_r)``), a flip-flop worked out a
cycle ahead from the next values of v1, first1 and pin_r, with its inverted copy ``hold_t``.
The held slots are per-slot masks up to ``Reducer.RUN_TABLE_MAX_SLOTS`` (``pinvec_r``), else
chunk distances (``pin_terms``, hdl/pin_terms.py).

Functions that build their logic into the caller's module, not a component: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed); the reducer calls them where their statements were, with its signal
names. ``PinAdvance`` wraps them for the unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import AggHeaderLayout
from .params import check_core_params
from .pin_terms import PairChecks, emitter_pin_layout, next_pair_checks, pin_terms
from .reducer_layouts import bits_for, release_entry_layout

__all__ = ["PUSH_IN_PINS_MAX_SLOTS", "PinAdvance", "adv_copies", "advance_next", "load_adv_copy", "pin_masks_layout",
           "pin_sources"]

# Up to this many slots (with masks) stage 2's pushed mask joins the held slots before the S:1
# selects by stage 0's / stage 1's slot (pinned); above it each select reads the registers alone
# and ``push_now`` enters after them (``pinvec_r[slot] | push_now & mask_r[slot]``, the same
# bit): at S 128 ``push_r`` -> an S-wide OR -> the select by stage P's slot -> ``adv`` was
# 11.87 ns placed (docs/benchmarks.md, session 38).
PUSH_IN_PINS_MAX_SLOTS = 16


def pin_sources(m: Module, *, masks: bool, entries: Sequence[data.View], occupied: Value, held_mask: Value,
                push_now: Value, entry_r: data.View, mask_r: Value, emit: object, slot0: Value, slot1: Value,
                h0: data.View, h1: data.View, wmask0: Value, wmask: Value, jb: int) -> SimpleNamespace:
    """``pin_r`` (loaded by ``advance_next``) and what it loads: ``pin_load`` (stage 0's beat,
    ``slot0``) / ``pin_hold`` (stage 1's, ``slot1``) is held by a queue entry, stage 2's entry
    (``push_now``), the emitter's result or the rest of its run (``emit``). With ``masks``: the
    union of their slot masks registered a cycle ago (``pinvec_r``: every slot held now was held
    then or is in stage 2's entry, so at worst a cycle too long) plus stage 2's ``mask_r``; else
    the chunk-distance terms of ``pin_terms``. Above ``PUSH_IN_PINS_MAX_SLOTS`` stage 2's mask is
    selected on its own and ANDed with ``push_now`` after the select."""
    pin_of = {"entries": entries, "occupied": occupied, "push_now": push_now, "entry": entry_r,
              "emit": emit}  # hdl/pin_terms.py
    pin_r = Signal(name="pin_r")
    if masks:
        pinvec_r = Signal(len(mask_r), name="pinvec_r")
        m.d.sync += pinvec_r.eq(held_mask | Mux(push_now, mask_r, 0) | Mux(emit.busy, emit.cur_mask, 0)
                                | Mux(emit.rest_nz, emit.rest_mask, 0))
        if len(mask_r) > PUSH_IN_PINS_MAX_SLOTS:  # push_now after the selects
            pin_hold = pinvec_r.bit_select(slot1, 1) | (push_now & mask_r.bit_select(slot1, 1))
            pin_load = pinvec_r.bit_select(slot0, 1) | (push_now & mask_r.bit_select(slot0, 1))
        else:
            pins_now = pinvec_r | Mux(push_now, mask_r, 0)
            pin_hold = pins_now.bit_select(slot1, 1)
            pin_load = pins_now.bit_select(slot0, 1)
    else:
        pin_hold = Cat(*pin_terms(h1.job_id[:jb], h1.chunk, wmask, **pin_of)).any()
        pin_load = Cat(*pin_terms(h0.job_id[:jb], h0.chunk, wmask0, **pin_of)).any()
    return SimpleNamespace(pin_r=pin_r, pin_hold=pin_hold, pin_load=pin_load)


def advance_next(m: Module, pin: SimpleNamespace, *, p_load: Value, skid_valid: Value, skid_hdr: data.View,
                 in_hdr: data.View, h0: data.View, h1: data.View, adv: Value, wmask0: Value, wmask: Value, jb: int,
                 slot0: Value, slot1: Value, entry_more: Value, v1: Value, first1: Value, last1: Value,
                 push_r: Value, p_v: Value, room: Value, first: Value, adv_reg: Value, hold_t: Value,
                 clr: Value | None = None, oh0: Value | None = None, run: Value | None = None,
                 gap: tuple[Value, Value, Value, Value] | None = None,
                 scan_hold: tuple[Value, Value | None] | None = None,
                 copies: SimpleNamespace | None = None) -> PairChecks | None:
    """Load ``pin_r`` and ``adv_reg`` / ``hold_t`` (== ~adv_reg) for the next cycle. Besides
    ``pin_load`` / ``pin_hold``, the entry stage 1 may push into stage 2 with its last beat pins
    the beat taken now (``live_n``): on a first beat, without waiting for the decision, a
    different chunk on the same slot or a slot its release run would free (``clr & oh0``; with
    pending words: p's chunk 1..``run`` ahead in the same job); on a later beat, the held entry's
    run (``entry_more``). The pair checks (hdl/pin_terms.py, ``next_pair_checks``) are flip-flops
    compared a cycle ahead. Returns them.

    ``gap`` (the DRAM reducer: no first beat enters stage 1 the cycle after a last beat left it,
    ``room`` then 0): three flip-flops (``decide_c``, ``move_c``, ``hold_s``) to load with stage
    1's ``v1 & first1 & adv`` / ``v1 & adv`` / ``~adv`` next cycle, the decision's and stage 2's
    enables and the release scans' select from registers of their own rather than from ``adv``'s
    net (hundreds of loads). A fourth flip-flop (``gap``'s last, the reducer's ``scan_hold_hi``)
    is another copy of ``~adv``: the release scans' upper half of slots selects by it, the lower
    by ``hold_s``, so neither drives all of the scans' selects (`scan_hold`, 49 loads, -> `clr`
    8.76 ns at main db90a43's seed 5, its net 2.7 ns of it). ``copies`` (``adv_copies``, the gap
    only): flip-flops equal to ``adv`` every cycle, so that no next value here reads ``adv``'s
    own net (`adv` -> its 4.9 ns first route -> `room_c`'s LUT -> ... -> `adv`, 9.57 ns at main
    193bd2d's seed 3; `decide_c` 9.51, `scan_hold` 9.32 the same way): ``loop`` selects ``adv``,
    ``hold_t`` and ``pin_r``'s next values, ``dec`` ``decide_c`` / ``move_c``'s; the others are
    the reducer's (``room``: the room registers' and ``nlast1``'s ``take``; ``thit``: the tag
    checks' read-address choice). Every copy and ``hold_s`` / ``hold_hi`` selects its own next
    value by itself (``load_adv_copy``): a register of a few loads in its own loop, and a
    function of its own, which yosys does not merge with another (``loop`` holds with
    ``v1 & pin_hold`` rather than ``pin_hold``: ``adv`` low implies ``v1``, and ``adv``'s next
    value, selected by ``loop``, would otherwise be the same function). ``live_n`` is then 0
    and the pair checks are not built: ``live_n`` needs ``v1 & last1`` with ``adv``, and then
    ``room`` is 0, so nothing is taken, stage 1 is empty next cycle and ``pin_r`` (read only as
    ``v1 & first1 & pin_r``) and ``adv`` (``room`` gates the term) do not depend on it. Returns
    None.

    ``scan_hold`` (without the gap: the on-chip reducer above S 16): ``gap``'s ``hold_s`` and
    ``hold_hi``. ``hold_s``: a flip-flop loaded with ``~adv`` of next cycle (with ``live_n``), as
    ``v1 & first1 & pin_hold`` where ``hold_t`` has ``pin_hold`` (stage 1 held: both set): equal
    to ``hold_t`` in every reachable state, a different function, not merged with it. ``hold_hi``
    (session 47): the same next value selected by itself (``load_adv_copy``), so no net of
    ``hold_s`` or ``adv`` is on its path and yosys does not merge it with either."""
    if gap is not None:
        decide_c, move_c, hold_s, hold_hi = gap
        if copies is None:
            raise ValueError("advance_next: the gap needs adv's copies (adv_copies())")
        # moving, next cycle's v1 & first1 & pin_r (adv's complement): v1 <- p_v & room,
        # first1 <- first, pin_r <- pin_load; held: v1, first1 stay (both set), pin_r <- pin_hold
        go = p_v & room & first & pin.pin_load
        loop, dec = copies.loop, copies.dec
        for c in vars(copies).values():  # each selected by itself (v1: adv_loop's own function)
            load_adv_copy(m, c, go=go, held=v1 & pin.pin_hold if c is loop else pin.pin_hold)
        load_adv_copy(m, adv_reg, go=go, held=pin.pin_hold, sel=loop)
        load_adv_copy(m, hold_t, go=go, held=pin.pin_hold, sel=loop, inverted=True)
        load_adv_copy(m, hold_s, go=go, held=pin.pin_hold, inverted=True)
        load_adv_copy(m, hold_hi, go=go, held=pin.pin_hold, inverted=True)
        m.d.sync += [
            pin.pin_r.eq(Mux(loop, pin.pin_load, pin.pin_hold)),
            decide_c.eq(Mux(dec, p_v & room & first & ~pin.pin_load, v1 & first1 & ~pin.pin_hold)),
            move_c.eq(Mux(dec, p_v & room & ~(first & pin.pin_load), v1 & ~pin.pin_hold)),
        ]
        return None
    pair = next_pair_checks(m, p_load=p_load, skid_valid=skid_valid, skid_hdr=skid_hdr, in_hdr=in_hdr, h0=h0, h1=h1,
                            adv=adv, wm0=wmask0, wm1=wmask, jb=jb)  # hdl/pin_terms.py
    pjob_r, pdc_r, same_key = pair.pjob_r, pair.pdc_r, pair.same_key
    # held entry: same job, and p's chunk - stage 1's (low bits, in stage 1's window) is
    # inside the run the entry releases
    held_hit = pjob_r & (pdc_r <= entry_more)
    other_chunk = (slot0 == slot1) & ~same_key
    if clr is not None:
        run_hit = (clr & oh0).any()
    else:  # p's chunk is one of the run's (same job, 1..run ahead of stage 1's)
        run_hit = pjob_r & (pdc_r != 0) & (pdc_r <= run)
    live_n = v1 & last1 & Mux(first1, other_chunk | run_hit, push_r & held_hit)
    m.d.sync += pin.pin_r.eq(Mux(adv, pin.pin_load | live_n, pin.pin_hold))
    # ~(v1 & first1 & pin_r) next cycle: stalled, v1 and first1 stay set and pin_r becomes
    # pin_hold; moving, v1 becomes take (= p_v & room), first1 p's first, pin_r the load
    adv_n = Mux(adv, ~(p_v & room & first & (pin.pin_load | live_n)), ~pin.pin_hold)
    m.d.sync += [adv_reg.eq(adv_n), hold_t.eq(~adv_n)]
    if scan_hold is not None:
        hold_s, hold_hi = scan_hold
        go = p_v & room & first & (pin.pin_load | live_n)
        m.d.sync += hold_s.eq(Mux(adv, go, v1 & first1 & pin.pin_hold))
        if hold_hi is not None:
            load_adv_copy(m, hold_hi, go=go, held=pin.pin_hold, inverted=True)
    return pair


def adv_copies() -> SimpleNamespace:
    """The DRAM reducer's flip-flop copies of ``adv`` (``advance_next``'s ``copies``), each for
    one group of consumers: ``loop`` (``adv``'s own next value, ``hold_t``'s, ``pin_r``'s),
    ``dec`` (``decide_c``'s, ``move_c``'s), ``room`` (the room registers' and ``nlast1``'s
    ``take``), ``thit`` (the tag checks' read-address choice, ``thit_w0`` / ``thit_b0``). Reset
    to 1 as ``adv``."""
    return SimpleNamespace(**{k: Signal(init=1, name=f"adv_{k}") for k in ("loop", "dec", "room", "thit")})


def load_adv_copy(m: Module, reg: Signal, *, go: Value, held: Value, sel: Value | None = None,
                  inverted: bool = False) -> None:
    """Load ``reg`` with ``adv``'s next value (``~adv``'s with ``inverted``): ``~go`` if stage 1
    moves now (``go``: next cycle's ``v1 & first1 & pin_r``), ``~held`` if it holds (``held``:
    ``pin_hold``, or any term equal to it while stage 1 holds); the choice by ``sel``, a
    flip-flop equal to ``adv``, or by ``reg`` itself (``~reg`` with ``inverted``). Equal to
    ``adv`` (``~adv``) every cycle by induction, all reset so."""
    s = sel if sel is not None else ~reg if inverted else reg
    nxt = Mux(s, ~go, ~held)
    m.d.sync += reg.eq(~nxt if inverted else nxt)


def pin_masks_layout(slots: int) -> data.StructLayout:
    """The held slots as masks (``pin_sources`` with ``masks``): the queue's, stage 2's entry's,
    the emitter's result's and its rest's."""
    return data.StructLayout({"held_mask": slots, "mask_r": slots, "push_now": 1, "busy": 1, "cur_mask": slots,
                              "rest_nz": 1, "rest_mask": slots})


class PinAdvance(wiring.Component):
    """The two as one component (the unit tests), stage 1's ``adv`` being the register (as with
    the pending vector): the held slots (``pins``: ``pin_masks_layout``; without ``masks`` stage
    2's ``entry_r`` pushed with ``push_now`` and ``emit`` are the holders, the queue empty),
    ``slot0`` / ``slot1``, ``h0`` / ``h1``, both windows - 1, P's next beat (``p_load``,
    ``skid_valid``, ``skid_hdr``, ``in_hdr``), stage 1's ``v1`` / ``first1`` / ``last1``,
    ``push_r``, ``entry_r``, ``p_v``, ``room``, p's ``first``, ``clr`` / ``oh0`` in; ``pin_r``,
    ``adv``, ``hold_t`` out. ``gap``: ``advance_next``'s (the DRAM reducer's), with its copies
    ``decide_c`` / ``move_c`` / ``hold_s`` / ``hold_hi`` and ``adv_copies``' four (``copies``:
    loop, dec, room, thit) out."""

    def __init__(self, *, slots: int, jobs: int, masks: bool, gap: bool = False) -> None:
        check_core_params(slots=slots, jobs=jobs)
        self.slots, self.jobs, self.masks, self.gap = slots, jobs, masks, gap
        sb = (slots - 1).bit_length()
        super().__init__({
            **({"decide_c": Out(1), "move_c": Out(1), "hold_s": Out(1), "hold_hi": Out(1), "copies": Out(4)}
               if gap else {}),
            "pins": In(pin_masks_layout(slots)), "entry_r": In(release_entry_layout(jobs, slots)),
            "emit": In(emitter_pin_layout(jobs, slots)), "slot0": In(sb), "slot1": In(sb), "h0": In(AggHeaderLayout),
            "h1": In(AggHeaderLayout), "wmask0": In(sb), "wmask": In(sb), "p_load": In(1), "skid_valid": In(1),
            "skid_hdr": In(AggHeaderLayout), "in_hdr": In(AggHeaderLayout), "v1": In(1), "first1": In(1),
            "last1": In(1), "push_r": In(1), "p_v": In(1), "room": In(1), "first": In(1), "clr": In(slots),
            "oh0": In(slots), "pin_r": Out(1), "adv": Out(1), "hold_t": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        ps, e = self.pins, self.emit
        emit = SimpleNamespace(busy=e.busy, job=e.job, chunk=e.chunk, rest_job=e.rest_job, rest_chunk=e.rest_chunk,
                               rest_left=e.rest_left, cur_mask=ps.cur_mask, rest_nz=ps.rest_nz, rest_mask=ps.rest_mask)
        if self.masks:
            emit.busy = ps.busy
        jb = bits_for(self.jobs)
        pin = pin_sources(m, masks=self.masks, entries=[], occupied=0, held_mask=ps.held_mask, push_now=ps.push_now,
                          entry_r=self.entry_r, mask_r=ps.mask_r, emit=emit, slot0=self.slot0, slot1=self.slot1,
                          h0=self.h0, h1=self.h1, wmask0=self.wmask0, wmask=self.wmask, jb=jb)
        adv_reg, hold_t = Signal(init=1), Signal()
        copies = adv_copies() if self.gap else None
        advance_next(m, pin, p_load=self.p_load, skid_valid=self.skid_valid, skid_hdr=self.skid_hdr,
                     in_hdr=self.in_hdr, h0=self.h0, h1=self.h1, adv=adv_reg, wmask0=self.wmask0, wmask=self.wmask,
                     jb=jb, slot0=self.slot0, slot1=self.slot1, entry_more=self.entry_r.more, v1=self.v1,
                     first1=self.first1, last1=self.last1, push_r=self.push_r, p_v=self.p_v, room=self.room,
                     first=self.first, adv_reg=adv_reg, hold_t=hold_t, clr=self.clr, oh0=self.oh0,
                     gap=(self.decide_c, self.move_c, self.hold_s, self.hold_hi) if self.gap else None,
                     copies=copies)
        m.d.comb += [self.pin_r.eq(pin.pin_r), self.adv.eq(adv_reg), self.hold_t.eq(hold_t)]
        if self.gap:
            m.d.comb += self.copies.eq(Cat(*vars(copies).values()))
        return m
