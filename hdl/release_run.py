"""The in-order release run, out of ``Reducer.elaborate`` (issue 16 item 6; docs/reducer.md,
"Parts built inline"): the slots released with a chunk that completes at its job's head.

Stage 0 scans the pending bits (``scan_slots``: the shared carry chain of hdl/release_scan.py
over the S bits doubled, so the scan wraps, folded back to slot order) for the first slot of the
job's region, from the start slot on, that is not pending; stage 1 turns that one-hot position
into the run length (``run_of``: chunks released after the completing one), from a per-slot
distance table (S <= ``Reducer.RUN_TABLE_MAX_SLOTS``) or an encoder and a subtractor.

Functions that build their logic into the caller's module, not components: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed). ``ReleaseRun`` and ``ReleaseScans`` wrap them for the unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .params import check_core_params
from .release_scan import onehot_index, release_scan

__all__ = ["REST_AT_PUSH_MAX_SLOTS", "RUN_NZ_OF_RUN_MAX_SLOTS", "SCAN_CHAIN_BITS", "SCAN_FOLD_AT_SCAN_MAX_SLOTS",
           "SCAN_ONE_CHAIN_MAX_SLOTS", "ReleaseRun", "ReleaseScans", "ScanPair", "fold_scan", "release_run_layout",
           "release_scans", "rest_masks", "run_of", "scan_doubled", "scan_slots", "start_onehot"]


# Up to this many slots the scan is one carry chain over the 2S bits (the default core, pinned);
# above it 2S / ``SCAN_CHAIN_BITS`` chains side by side (``release_scan``'s ``parts``, the same
# results): at S 128 the one 256-bit chain took 6.5 of the worst path's 13.9 ns, two 128-bit
# chains 3.0 (docs/benchmarks.md, "The largest on-chip configuration traced (session 36)").
# Read at elaboration.
SCAN_ONE_CHAIN_MAX_SLOTS = 16
SCAN_CHAIN_BITS = 32
# Up to this many slots stage 1's ``run_nz`` (the run is not empty) is ``run_of``'s result != 0
# (pinned); above it a flip-flop per scan registered beside them (``release_scans``' ``run_nz``):
# at S 128 the distance table's OR over S, then the decision, was 12.3 ns (the same place).
RUN_NZ_OF_RUN_MAX_SLOTS = 16
# Up to this many slots the release queue decodes the pushed entry's slot into its rest mask at
# the push (pinned); above it the two candidates are registered at the decision (``rest_masks``)
# and the push picks one: at S 128 slot_of -> a 7 -> 128 decode -> q_rest / head_rest was 13.0 ns.
REST_AT_PUSH_MAX_SLOTS = 16
# Up to this many slots ``release_scans`` registers the scans folded to S bits (pinned); above it
# the 2S-bit results of the chains (each gated by its prefix, ``below`` applied) are registered
# and folded, and the cleared slots masked by the region, in stage 1 from stage 1's ``region1``
# (the region the scan used, loaded on ``adv``): at S 128 the hop from the chains to the fold and
# the fold's region select were ~3 ns of the scan's placed 12.18 ns (docs/benchmarks.md, session 38).
SCAN_FOLD_AT_SCAN_MAX_SLOTS = 16


def scan_doubled(m: Module, x: Value, below: Value, tag: str) -> tuple[Value, Value]:
    """(first zero one-hot, bits before it outside ``below``), 2S bits each, of the release scan
    over ``x`` doubled (S bits: 1 = pending or outside the region), from the slot above ``below``
    (thermometer of the slots below the start slot); one chain or 2S / ``SCAN_CHAIN_BITS``
    (``SCAN_ONE_CHAIN_MAX_SLOTS``). ``fold_scan`` turns them into slots."""
    s = len(x)
    parts = max(2, 2 * s // SCAN_CHAIN_BITS) if s > SCAN_ONE_CHAIN_MAX_SLOTS else 1
    fz2, clr2, _ = release_scan(m, x, x, below, tag, parts=parts)
    return fz2, clr2


def fold_scan(fz2: Value, clr2: Value, region: Value) -> tuple[Value, Value]:
    """``scan_doubled``'s results folded back to the S slots (the scan wraps): (first zero
    one-hot, slots cleared kept inside ``region``)."""
    s = len(region)
    return fz2[:s] | fz2[s : 2 * s], (clr2[:s] | clr2[s:]) & region


def scan_slots(m: Module, x: Value, below: Value, region: Value, tag: str) -> tuple[Value, Value]:
    """(first zero one-hot, slots cleared) of the in-order release scan over ``x`` (S bits: 1 =
    pending or outside the region), from the slot above ``below`` (thermometer of the slots
    below the start slot), the cleared slots kept inside ``region``: ``scan_doubled`` folded."""
    return fold_scan(*scan_doubled(m, x, below, tag), region)


@dataclass(frozen=True)
class ScanPair:
    """``release_scans``' registers: the scan without (``fz_a``, ``clr_a``) and with (``fz_b``,
    ``clr_b``) the pending bit of stage 1's slot."""

    fz_a: Value
    clr_a: Value
    fz_b: Value
    clr_b: Value
    nz_a: Value | None = None
    nz_b: Value | None = None


def release_scans(m: Module, pend: Value, *, adv: Value, oh0: Value, oh1: Value, lm0: Value, lm1: Value,
                  region0: Value, region1: Value, run_nz: bool = False, late_fold: bool = False,
                  region_r: Value | None = None, adv_hi: Value | None = None) -> ScanPair:
    """Register both scans for the beat that will be in stage 1 (P's: ``oh0`` its slot one-hot,
    ``lm0`` the slots below its start, ``region0`` its job's region, if ``adv``; else stage 1's
    own ``oh1`` / ``lm1`` / ``region1``) over the pending bits ``pend`` (S bits, the last
    decision applied): without and with the bit the decision of this cycle may set (stage 1's
    slot ``oh1``, completing behind the head); stage 1 picks one with fx_s. A run this decision
    clears cannot change the next scan: that scan would stop earlier, at the slot this decision
    completes (not pending), which lies between its start and the cleared run. The beat's own
    slot is never pending in its scan (it stops there at the latest). ``run_nz``: also register
    each scan's run != 0 (``nz_a``, ``nz_b``) as the start slot's scan bit: the run is empty
    exactly when the first zero is the start slot (in the region, the only slot at distance 0),
    and the scan reads the start slot first (``below`` stops below it). ``late_fold``: register
    the 2S-bit results (``scan_doubled``) and fold them after the register (``fold_scan``), the
    cleared slots masked with ``region_r``: a register holding the region the scan used a cycle
    later (the reducer's ``region1``, loaded from ``region0`` on ``adv``); None: one of its own.
    ``adv_hi``: a copy of ``adv`` (equal to it every cycle) that selects the upper half of the
    slots' vectors (``adv`` the lower half), so each of the two flip-flops drives half of the
    selects (the DRAM reducer's ``scan_hold`` / ``scan_hold_hi``); the same values."""
    S = len(pend)  # noqa: N806 - the slot count, as in the reducer

    def sel(a: Value, b: Value) -> Value:  # the beat's vector: P's if adv, else stage 1's
        if adv_hi is None:
            return Mux(adv, a, b)
        h = S // 2
        return Cat(Mux(adv, a[:h], b[:h]), Mux(adv_hi, a[h:], b[h:]))

    own_n = sel(oh0, oh1)
    lm_n = sel(lm0, lm1)
    reg_n = sel(region0, region1)
    xa = (pend & ~own_n) | ~reg_n
    xb = ((pend | oh1) & ~own_n) | ~reg_n

    fz_a, fz_b = Signal(S), Signal(S)
    clr_a, clr_b = Signal(S), Signal(S)
    if late_fold:  # the chains' 2S-bit results registered, folded (and the region applied) after
        if region_r is None:
            region_r = Signal(S, name="scan_region_r")
            m.d.sync += region_r.eq(reg_n)
        for tag, x, fz, clr in (("a", xa, fz_a, clr_a), ("b", xb, fz_b, clr_b)):
            fz2_r, clr2_r = Signal(2 * S, name=f"scan_fz2_{tag}_r"), Signal(2 * S, name=f"scan_clr2_{tag}_r")
            fz2, clr2 = scan_doubled(m, x, lm_n, tag)
            m.d.sync += [fz2_r.eq(fz2), clr2_r.eq(clr2)]
            m.d.comb += [Cat(fz, clr).eq(Cat(*fold_scan(fz2_r, clr2_r, region_r)))]
    else:
        fa, ca = scan_slots(m, xa, lm_n, reg_n, "a")
        fb, cb = scan_slots(m, xb, lm_n, reg_n, "b")
        m.d.sync += [fz_a.eq(fa), clr_a.eq(ca), fz_b.eq(fb), clr_b.eq(cb)]
    if not run_nz:
        return ScanPair(fz_a=fz_a, clr_a=clr_a, fz_b=fz_b, clr_b=clr_b)
    start_oh = start_onehot(lm_n)
    nz_a, nz_b = Signal(name="run_nz_a"), Signal(name="run_nz_b")
    m.d.sync += [nz_a.eq((xa & start_oh).any()), nz_b.eq((xb & start_oh).any())]
    return ScanPair(fz_a=fz_a, clr_a=clr_a, fz_b=fz_b, clr_b=clr_b, nz_a=nz_a, nz_b=nz_b)


def start_onehot(lm: Value) -> Value:
    """The start slot one-hot from ``lm`` (the thermometer of the slots below it): its edge."""
    return ~lm & Cat(1, lm[:-1])


def rest_masks(m: Module, *, decide: Value, mask_d: Value, oh1: Value, lm1: Value) -> tuple[Value, Value]:
    """On a decision (``decide``) register its slot mask ``mask_d`` without its own slot (``oh1``;
    the entry queued as is) and without its run's first slot (the start slot, ``lm1``'s edge; the
    entry queued as the run behind an emitted chunk): the release queue's rest masks of the two
    entries it may push, so the push stores a flip-flop. Returns (without own, without start)."""
    own_r = Signal(len(mask_d), name="rest_own_r")
    run_r = Signal(len(mask_d), name="rest_run_r")
    with m.If(decide):
        m.d.sync += [own_r.eq(mask_d & ~oh1), run_r.eq(mask_d & ~start_onehot(lm1))]
    return own_r, run_r


def run_of(m: Module, fz: Value, tag: str, *, start: Value, wmask: Value,
           dist_tab: Sequence[Value] = ()) -> Value:
    """The run length (``len(start)`` bits) for the first-zero one-hot ``fz``: its distance from
    ``start`` in the window (``& wmask``, window - 1). With ``dist_tab`` (slot i's distance,
    registered) an AND-OR over the table; without, an encoder and a subtractor."""
    sb = len(start)
    run_ = Signal(sb, name=f"run_{tag}")
    if dist_tab:
        # run = ((p - start) & (window - 1)) with p one-hot: an AND-OR over the per-slot
        # distances registered in stage 0 (no encoder and subtractor)
        m.d.comb += run_.eq(Cat(*[
            Cat(*[fz[i] & dist_tab[i][b] for i in range(len(fz))]).any() for b in range(sb)
        ]))
    else:
        p_slot = Signal(sb, name=f"p_slot_{tag}")
        m.d.comb += p_slot.eq(onehot_index(fz))
        m.d.comb += run_.eq((p_slot - start)[:sb] & wmask)
    return run_


def release_run_layout(slots: int) -> data.StructLayout:
    """``ReleaseRun``'s result: the first slot not pending (one-hot), the slots the run clears,
    the run length."""
    return data.StructLayout({"first_zero": slots, "clr": slots, "run": (slots - 1).bit_length()})


class ReleaseRun(wiring.Component):
    """``scan_slots`` then ``run_of`` as one combinational component (the unit tests): ``x``
    (pending or outside the region), ``below``, ``region`` (S bits each), ``start`` (the start
    slot), ``wmask`` (window - 1) in; ``out`` (``release_run_layout``). ``table``: the
    distance-table form of ``run_of`` (its table built here from ``start`` and ``wmask``)."""

    def __init__(self, slots: int, *, table: bool) -> None:
        check_core_params(slots=slots)
        self.slots, self.table = slots, table
        sb = (slots - 1).bit_length()
        super().__init__({"x": In(slots), "below": In(slots), "region": In(slots), "start": In(sb),
                          "wmask": In(sb), "out": Out(release_run_layout(slots))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb = len(self.start)
        fz, clr = scan_slots(m, self.x, self.below, self.region, "t")
        tab = [((i - self.start)[:sb] & self.wmask) for i in range(self.slots)] if self.table else ()
        m.d.comb += [self.out.first_zero.eq(fz), self.out.clr.eq(clr),
                     self.out.run.eq(run_of(m, fz, "t", start=self.start, wmask=self.wmask, dist_tab=tab))]
        return m


class ReleaseScans(wiring.Component):
    """``release_scans`` as a component (the unit tests): ``pend``, ``adv``, ``oh0`` / ``oh1``,
    ``lm0`` / ``lm1``, ``region0`` / ``region1`` (S bits each) in; ``a`` and ``b`` (first_zero,
    clr, run_nz: ``release_scans``' with ``run_nz``, folded after the register above
    ``SCAN_FOLD_AT_SCAN_MAX_SLOTS``) a cycle later. ``split``: an ``adv_hi`` in as well,
    ``release_scans``' (the upper half's select, driven equal to ``adv``)."""

    def __init__(self, slots: int, *, split: bool = False) -> None:
        check_core_params(slots=slots)
        self.split = split
        vec = {n: In(slots) for n in ("pend", "oh0", "oh1", "lm0", "lm1", "region0", "region1")}
        out = data.StructLayout({"first_zero": slots, "clr": slots, "run_nz": 1})
        super().__init__({**vec, "adv": In(1), **({"adv_hi": In(1)} if split else {}), "a": Out(out), "b": Out(out)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sp = release_scans(m, self.pend, adv=self.adv, oh0=self.oh0, oh1=self.oh1, lm0=self.lm0, lm1=self.lm1,
                           region0=self.region0, region1=self.region1, run_nz=True,
                           late_fold=len(self.pend) > SCAN_FOLD_AT_SCAN_MAX_SLOTS,
                           adv_hi=self.adv_hi if self.split else None)
        m.d.comb += [self.a.first_zero.eq(sp.fz_a), self.a.clr.eq(sp.clr_a), self.a.run_nz.eq(sp.nz_a),
                     self.b.first_zero.eq(sp.fz_b), self.b.clr.eq(sp.clr_b), self.b.run_nz.eq(sp.nz_b)]
        return m
