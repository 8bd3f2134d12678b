"""Stage 2's control, out of ``Reducer.elaborate`` (issue 16 item 6; docs/reducer.md, "Parts built
inline"): the stage-2 registers a beat leaving stage 1 loads (its data op, row, data, lanes, slot;
whether it pushes a command, the command FIFO's write enable as one flip-flop), the tag its last
beat writes, whether its release entry goes to the emitter (``queued``) and what that stands for
(``queued_x``, checked by the reducer's ``copy_error``, which stays inline: its terms reach
into stage 0).

Functions that build their logic into the caller's module, not components: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed); the reducer calls each where its statements were. ``StageTwoControl``
wraps them for the unit tests.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .params import check_core_params
from .reducer_layouts import OP_NONE, slot_tag_layout
from .stage2_issue import row_lanes

__all__ = ["StageTwoControl", "release_push", "stage2_layout", "stage2_registers"]


def stage2_registers(m: Module, *, v1: Value, adv: Value, first1: Value, last1: Value, op: Value, op_r: Value,
                     op_c_nz: Value, push_c_n: Value, count: Value, idx: Value, row1: Value, d1: Value,
                     slot1: Value, v2: Value, last2: Value, width: int, n_lanes: int,
                     slot_bits: int, move: Value | None = None) -> SimpleNamespace:
    """Load stage 2 from stage 1 when a beat leaves it (``v1 & adv``): ``v2``, ``last2``,
    ``has_cmd`` (its data op, the decision's ``op`` on a first beat, else the message's held
    ``op_r``, is not OP_NONE: ``op_c_nz``), ``push_c`` (the decision table's ``push_c_n``: a
    command or a marker is pushed), and the beat's ``op2``, ``row2``, ``d2``, ``lanes2`` (the
    lanes of row ``idx`` holding one of ``count`` elements), ``slot2``. Returns them and ``op_c``.
    ``move``: a flip-flop equal to ``v1 & adv`` every cycle (the DRAM reducer's ``move_c``,
    hdl/pin_registers.py), the enable in its place: stage 2's ~80 registers no longer load
    through a LUT of ``adv``'s net (hundreds of loads)."""

    def mv() -> Value:  # (a new ``v1 & adv`` at each use without ``move``: the on-chip RTL as it was)
        return v1 & adv if move is None else move

    op_c = Mux(first1, op, op_r)
    lane_ok = row_lanes(m, count, idx, n_lanes)  # hdl/stage2_issue.py
    has_cmd = Signal()  # copy of v2 & (op2 != OP_NONE): stage 2 pushes a command
    # copy of has_cmd | queued (stage 2 pushes a command or a marker): the command FIFO's
    # write enable straight from one flip-flop (it fans out to every LUT RAM cell)
    push_c = Signal()
    m.d.sync += [v2.eq(mv()), last2.eq(mv() & last1), has_cmd.eq(mv() & op_c_nz),
                 push_c.eq(push_c_n)]
    op2, row2, d2, lanes2, slot2 = Signal(2), Signal(len(row1)), Signal(width), Signal(n_lanes), Signal(slot_bits)
    with m.If(mv()):
        m.d.sync += [op2.eq(op_c), row2.eq(row1), d2.eq(d1), lanes2.eq(lane_ok), slot2.eq(slot1)]
    return SimpleNamespace(op_c=op_c, has_cmd=has_cmd, push_c=push_c, op2=op2, row2=row2, d2=d2, lanes2=lanes2,
                           slot2=slot2)


def release_push(m: Module, *, last2: Value, push_r: Value, push_now: Value, first1: Value, tag_d: Value,
                 tag_r: Value, queued_r: Value, emit_r: Value, more_nz_r: Value, decide_r: Value,
                 fx_c: Value) -> SimpleNamespace:
    """What a message's last beat in stage 2 pushes: ``push_now`` (its decision's entry,
    ``push_r``), ``queued`` (to the emitter, ``queued_r`` from the decision), ``tag_c`` (the tag
    written: the decision's ``tag_d`` on a first beat, else the held ``tag_r``); ``runs_now``
    (the decision released its run at the head: ``fx_c`` the cycle after it, ``decide_r``, held)
    and ``queued_x``, what ``queued`` stands for (pushed, and a resend or an emission with a
    run), for ``copy_error``."""
    m.d.comb += push_now.eq(last2 & push_r)  # (last2 implies v2)
    tag_c = Signal(tag_d.shape())
    m.d.comb += tag_c.eq(Mux(first1, tag_d, tag_r))
    emit2 = emit_r  # released by this message: its responses are the result
    queued = last2 & queued_r  # an entry for the emitter (a resend, or a run)
    # what queued_r stands for: the entry carries its run when the decision released it at
    # the head (fx_c, the cycle after the decision; held in runs_r for the later beats)
    runs_r = Signal()
    with m.If(decide_r):
        m.d.sync += runs_r.eq(fx_c)
    runs_now = Mux(decide_r, fx_c, runs_r)
    queued_x = push_now & ~(emit2 & ~(runs_now & more_nz_r))
    return SimpleNamespace(tag_c=tag_c, emit2=emit2, queued=queued, runs_now=runs_now, queued_x=queued_x)


def stage2_layout(width: int, n_lanes: int, slot_bits: int, row_bits: int) -> data.StructLayout:
    """Stage 2's registers (``stage2_registers``), by name."""
    return data.StructLayout({"v2": 1, "last2": 1, "has_cmd": 1, "push_c": 1, "op2": 2, "row2": slot_bits + row_bits,
                              "d2": width, "lanes2": n_lanes, "slot2": slot_bits})


class StageTwoControl(wiring.Component):
    """The two as one component (the unit tests): stage 1's beat (``v1``, ``adv``, ``first1``,
    ``last1``, ``op`` / ``op_r``, ``push_c_n``, ``count``, ``idx``, ``slot1``, ``d1``) and the
    decision's registers (``push_r``, ``tag_d`` / ``tag_r``, ``queued_r``, ``emit_r``,
    ``more_nz_r``, ``decide_r``, ``fx_c``) in; ``stage2`` (``stage2_layout``), ``push_now``,
    ``tag_c``, ``queued``, ``runs_now``, ``queued_x`` out. ``op_c_nz`` is worked out here from
    what it stands for (the reducer has it from the decision table)."""

    def __init__(self, data_width: int, *, slots: int, jobs: int, row_bits: int) -> None:
        check_core_params(width=data_width, slots=slots, jobs=jobs, row_bits=row_bits)
        self.width, self.n_lanes, self.row_bits = data_width, data_width // 32, row_bits
        self.slot_bits = max(1, (slots - 1).bit_length())
        tag = slot_tag_layout(jobs)
        super().__init__({
            "v1": In(1), "adv": In(1), "first1": In(1), "last1": In(1), "op": In(2), "op_r": In(2),
            "push_c_n": In(1), "count": In(16), "idx": In(max(1, row_bits)), "slot1": In(self.slot_bits),
            "d1": In(data_width), "push_r": In(1), "tag_d": In(tag), "tag_r": In(tag), "queued_r": In(1),
            "emit_r": In(1), "more_nz_r": In(1), "decide_r": In(1), "fx_c": In(1),
            "stage2": Out(stage2_layout(data_width, self.n_lanes, self.slot_bits, row_bits)), "push_now": Out(1),
            "tag_c": Out(tag), "queued": Out(1), "runs_now": Out(1), "queued_x": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        s2 = self.stage2
        row1 = Signal(self.slot_bits + self.row_bits)
        m.d.comb += row1.eq((self.slot1 << self.row_bits) | self.idx[:self.row_bits] if self.row_bits else self.slot1)
        op_c_nz = Mux(self.first1, self.op, self.op_r) != OP_NONE
        v2, last2 = Signal(), Signal()
        r = stage2_registers(m, v1=self.v1, adv=self.adv, first1=self.first1, last1=self.last1, op=self.op,
                             op_r=self.op_r, op_c_nz=op_c_nz, push_c_n=self.push_c_n, count=self.count, idx=self.idx,
                             row1=row1, d1=self.d1, slot1=self.slot1, v2=v2, last2=last2, width=self.width,
                             n_lanes=self.n_lanes, slot_bits=self.slot_bits)
        m.d.comb += [s2.v2.eq(v2), s2.last2.eq(last2), s2.has_cmd.eq(r.has_cmd), s2.push_c.eq(r.push_c), s2.op2.eq(r.op2), s2.row2.eq(r.row2),
                     s2.d2.eq(r.d2), s2.lanes2.eq(r.lanes2), s2.slot2.eq(r.slot2)]
        p = release_push(m, last2=last2, push_r=self.push_r, push_now=self.push_now, first1=self.first1,
                         tag_d=self.tag_d, tag_r=self.tag_r, queued_r=self.queued_r, emit_r=self.emit_r,
                         more_nz_r=self.more_nz_r, decide_r=self.decide_r, fx_c=self.fx_c)
        m.d.comb += [self.tag_c.eq(p.tag_c), self.queued.eq(p.queued), self.runs_now.eq(p.runs_now),
                     self.queued_x.eq(p.queued_x)]
        return m
