"""Stage 1's registers and their loads, out of ``Reducer.elaborate`` (issue 16 item 6;
docs/reducer.md, "Parts built inline"): the beat stage 1 holds (valid, first / last, header,
data, row index, slot) and what stage P decoded for it (start slot, window mask, slot one-hot /
thermometer / region, distance table, sender bit, checks), with the head-forwarding deltas
against the chunk decided in the cycle it enters (``delta1`` = chunk - (that chunk + 1)).

Functions that build their logic into the caller's module, not a component: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed); the reducer calls them where its declarations and its load were, with
its signal names. ``StageOneRegisters`` wraps them for the unit tests.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Const, Module, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import AggHeaderLayout, payload_beats
from .params import check_core_params
from .reducer_input import decoded_beat_layout

__all__ = ["StageOneRegisters", "load_stage1", "stage1_layout", "stage1_registers"]


def stage1_registers(p: Value, *, width: int, slots: int, beat_bits: int, vectors: bool,
                     run_table: bool) -> SimpleNamespace:
    """Stage 1's registers, named as the reducer's (``v1``, ``first1``, ``last1``, ``h1``, ``d1``,
    ``idx1``, ``slot1``, ``start1``, ``bit1``, ``unconf1``, ``nonmem1``, ``cwrite1``, ``wmask``,
    ``chunk_p1``, ``cw1``, ``delta1``, ``deltaw1``, ``d_hz1``, ``dw_hz1``, ``nbm1_1``; with
    ``vectors`` ``oh1``, ``lm1``, ``region1``; ``dist_tab1``, S entries with ``run_table``, else
    empty), and ``delta_n`` / ``deltaw_n``: ``delta1`` / ``deltaw1`` for stage P's beat ``p``."""
    sb = (slots - 1).bit_length()
    r = SimpleNamespace(
        v1=Signal(name="v1"), first1=Signal(name="first1"), last1=Signal(name="last1"),
        h1=Signal(AggHeaderLayout, name="h1"), d1=Signal(width, name="d1"), idx1=Signal(beat_bits, name="idx1"),
        slot1=Signal(sb, name="slot1"), start1=Signal(sb, name="start1"),
        dist_tab1=[Signal(sb, name=f"dist_tab{i}") for i in range(slots)] if run_table else [],
        bit1=Signal(32, name="bit1"), unconf1=Signal(name="unconf1"), nonmem1=Signal(name="nonmem1"),
        cwrite1=Signal(name="cwrite1"),  # a first contribution completes the chunk (single member)
        wmask=Signal(sb, name="wmask"),  # window - 1 (the log2 window clamped to the slot memory)
        chunk_p1=Signal(32, name="chunk_p1"),  # h1.chunk + 1
        cw1=Signal(32, name="cw1"),  # h1.chunk - 2**lw
        # relative to the chunk decided in the cycle this beat entered stage 1 (head forwarding):
        delta1=Signal(32, name="delta1"),  # h1.chunk - (that chunk + 1)
        deltaw1=Signal(32, name="deltaw1"),  # cw1 - (that chunk + 1)
        d_hz1=Signal(name="d_hz1"),  # delta1[sb:31] == 0 (a borrow from the low bits reaches the sign)
        dw_hz1=Signal(name="dw_hz1"),  # deltaw1[sb:31] == 0
        nbm1_1=Signal(17, name="nbm1_1"),
    )
    if vectors:
        r.oh1 = Signal(slots, name="oh1")  # slot1, one-hot
        r.lm1 = Signal(slots, name="lm1")  # slots below start1 (thermometer)
        r.region1 = Signal(slots, name="region1")
    r.delta_n = (p.beat.hdr.chunk - r.chunk_p1)[:32]  # delta1 / deltaw1 for p's beat
    r.deltaw_n = (p.cw - r.chunk_p1)[:32]
    return r


def load_stage1(m: Module, r: SimpleNamespace, p: Value, *, take: Value, adv: Value) -> None:
    """While stage 1 moves (``adv``) load it from stage P's output ``p`` (``take``: valid)."""
    f, sb = p.beat, len(r.slot1)
    vectors = hasattr(r, "oh1")
    with m.If(adv):
        m.d.sync += [
            r.v1.eq(take),
            r.first1.eq(f.first),
            r.last1.eq(f.last),
            r.h1.eq(f.hdr),
            r.d1.eq(f.data),
            r.idx1.eq(p.idx),
            r.slot1.eq(p.slot),
            r.start1.eq(p.start),
            *([r.oh1.eq(p.oh), r.lm1.eq(p.lm)] if vectors else []),
            *[r.dist_tab1[i].eq((Const(i, sb) - p.start)[:sb] & p.wmask) for i in range(len(r.dist_tab1))],
            r.bit1.eq(p.bit),
            r.unconf1.eq(p.unconf),
            r.nonmem1.eq(p.nonmem),
            r.cwrite1.eq(p.cwrite),
            r.wmask.eq(p.wmask),
            r.chunk_p1.eq(p.chunk_p1),
            r.cw1.eq(p.cw),
            r.delta1.eq(r.delta_n),
            r.deltaw1.eq(r.deltaw_n),
            r.d_hz1.eq(r.delta_n[sb:31] == 0),
            r.dw_hz1.eq(r.deltaw_n[sb:31] == 0),
            r.nbm1_1.eq(p.nbm1),
            *([r.region1.eq(p.region)] if vectors else []),
        ]


_NAMES = ("v1", "first1", "last1", "h1", "d1", "idx1", "slot1", "start1", "bit1", "unconf1", "nonmem1", "cwrite1",
          "wmask", "chunk_p1", "cw1", "delta1", "deltaw1", "d_hz1", "dw_hz1", "nbm1_1")


def stage1_layout(width: int, slots: int, beat_bits: int, vectors: bool, run_table: bool) -> data.StructLayout:
    """Stage 1's registers (``stage1_registers``), by name (``dist_tab``: the S-entry table)."""
    sb = (slots - 1).bit_length()
    fields = {"v1": 1, "first1": 1, "last1": 1, "h1": AggHeaderLayout, "d1": width, "idx1": beat_bits, "slot1": sb,
              "start1": sb, "bit1": 32, "unconf1": 1, "nonmem1": 1, "cwrite1": 1, "wmask": sb, "chunk_p1": 32,
              "cw1": 32, "delta1": 32, "deltaw1": 32, "d_hz1": 1, "dw_hz1": 1, "nbm1_1": 17}
    if vectors:
        fields |= {"oh1": slots, "lm1": slots, "region1": slots}
    if run_table:
        fields["dist_tab"] = data.ArrayLayout(sb, slots)
    return data.StructLayout(fields)


class StageOneRegisters(wiring.Component):
    """The two as one component (the unit tests): stage P's beat ``p`` (``decoded_beat_layout``),
    ``take``, ``adv`` in; ``stage1`` (``stage1_layout``) out."""

    def __init__(self, data_width: int, *, slots: int, elements: int, vectors: bool, run_table: bool) -> None:
        check_core_params(width=data_width, slots=slots, elements=elements)
        self.width, self.slots, self.vectors, self.run_table = data_width, slots, vectors, run_table
        self.beat_bits = max(1, (payload_beats(elements, data_width) - 1).bit_length())
        super().__init__({
            "p": In(decoded_beat_layout(data_width, slots, elements, vectors)), "take": In(1), "adv": In(1),
            "stage1": Out(stage1_layout(data_width, slots, self.beat_bits, vectors, run_table)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        r = stage1_registers(self.p, width=self.width, slots=self.slots, beat_bits=self.beat_bits,
                             vectors=self.vectors, run_table=self.run_table)
        load_stage1(m, r, self.p, take=self.take, adv=self.adv)
        o = self.stage1
        m.d.comb += [getattr(o, n).eq(getattr(r, n)) for n in _NAMES]
        if self.vectors:
            m.d.comb += [o.oh1.eq(r.oh1), o.lm1.eq(r.lm1), o.region1.eq(r.region1)]
        m.d.comb += [o.dist_tab[i].eq(r.dist_tab1[i]) for i in range(len(r.dist_tab1))]
        return m
