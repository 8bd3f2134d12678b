"""Stage 2's slot-store command issue, out of ``Reducer.elaborate`` (issue 16 item 6;
docs/reducer.md, "Parts built inline"): each beat with a data operation becomes a WRITE
(a chunk's first contribution) or an ADD command of its row's lanes that hold elements, tagged
with its slot and whether its responses are a result's rows (``emit``); a message that releases
its chunk sends its result header, built from its decision's tag, to the assembler; its release
entry goes to the queue, as the run behind its own chunk when it emits that chunk itself.

Functions that build their logic into the caller's module, not components: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed); the reducer calls each where its statements were, so their order is
unchanged. ``StageTwoIssue`` wraps them for the unit tests.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce import wire

from .layouts import AggHeaderLayout, JobCfgLayout, lanes
from .params import check_core_params
from .reducer_config import slot_of
from .reducer_layouts import OP_WRITE, release_entry_layout, slot_tag_layout, store_tag_layout
from .slot_store_signature import Op, cmd_layout

__all__ = ["StageTwoIssue", "result_header", "row_lanes", "run_behind", "store_command"]


def row_lanes(m: Module, count: Value, idx: Value, n_lanes: int) -> Value:
    """The lanes of row ``idx`` (``n_lanes`` int32 lanes a row) that hold one of ``count``
    elements: lane k if count - idx * n_lanes > k (the last row's rest are left as they are)."""
    rem = Signal(17, name="rem")
    m.d.comb += rem.eq(count - (idx << (n_lanes.bit_length() - 1)))
    return Cat(*[rem > k for k in range(n_lanes)])


def store_command(m: Module, port: object, *, push: Value, marker: Value, then_emit: Value, op: Value,
                  row: Value, data_: Value, lanes_: Value, slot: Value, emit: Value, last: Value,
                  slots: int) -> None:
    """Drive the command port's push side (``port``: ``CommandArbiter``'s ``push``,
    ``push_marker``, ``push_then_emit``, ``push_cmd`` of ``cmd_layout``): ``push`` a command, or
    a marker (``marker``: no command, only the release entry's place in order), ``then_emit``
    (the entry goes to the emitter after it); the command for a beat with data op ``op``
    (OP_WRITE: WRITE, else ADD) of ``row``, tagged (``store_tag_layout``) with its ``slot``,
    ``write``, ``emit`` (the rows are a result's) and ``last`` (the message's last row)."""
    stag = Signal(store_tag_layout(slots), name="stag")
    m.d.comb += [stag.slot.eq(slot), stag.write.eq(op == OP_WRITE), stag.emit.eq(emit),
                 stag.last.eq(last)]
    cmd = port.push_cmd
    m.d.comb += [
        port.push.eq(push), port.push_marker.eq(marker), port.push_then_emit.eq(then_emit),
        cmd.op.eq(Mux(op == OP_WRITE, Op.WRITE, Op.ADD)), cmd.row.eq(row),
        cmd.data.eq(data_), cmd.lanes.eq(lanes_), cmd.tag.eq(stag),
    ]


def result_header(m: Module, hc: Value, tag: Value) -> None:
    """Drive the RESULT header ``hc`` (``AggHeaderLayout``) of the chunk the slot tag ``tag``
    describes (the model's result: its job, round, chunk, group, scale, count, session)."""
    m.d.comb += [
        hc.msg_type.eq(wire.MsgType.RESULT), hc.flags.eq(0), hc.group_id.eq(tag.group),
        hc.job_id.eq(tag.job), hc.round_id.eq(tag.round), hc.chunk.eq(tag.chunk),
        hc.sender_id.eq(0), hc.scale_exp.eq(tag.scale), hc.element_count.eq(tag.count),
        hc.session.eq(tag.session),
    ]


def run_behind(m: Module, q_in: Value, entry: Value, emit: Value, cfg: Value, slot_bits: int,
               slot: Value | None = None) -> None:
    """Override ``q_in`` (the release entry pushed, else ``entry``): a message that emits its
    own chunk (``emit``) queues the run behind it (from chunk + 1, its slot under its job's
    ``cfg``, or ``slot`` if given, ``more`` - 1 after it); a resend queues no run."""
    with m.If(emit):
        m.d.comb += [q_in.chunk.eq(entry.chunk + 1),
                     q_in.slot.eq(slot_of(cfg, entry.chunk + 1, slot_bits) if slot is None else slot),
                     q_in.more.eq(entry.more - 1)]
    with m.Else():
        m.d.comb += q_in.more.eq(0)  # a resend: no run (copy_error)


class StageTwoIssue(wiring.Component):
    """The four as one combinational component (the unit tests): a beat (``op``, ``row``,
    ``data``, ``count`` elements, row index ``idx``, ``slot``, ``emit``, ``last``; ``push``,
    ``marker``, ``then_emit``), the message's ``tag`` and release ``entry``, its job's ``cfg``
    in; the command port's push side (``push_cmd``, ``push_marker``, ``push_then_emit``,
    ``push_out``), ``hdr`` (the result header) and ``q_in`` (the entry queued) out."""

    def __init__(self, data_width: int, *, slots: int, jobs: int, row_bits: int) -> None:
        check_core_params(width=data_width, slots=slots, jobs=jobs, row_bits=row_bits)
        self.lanes, self.slots = lanes(data_width), slots
        sb = (slots - 1).bit_length()
        super().__init__({
            "op": In(2), "row": In(sb + row_bits), "data": In(data_width), "count": In(16),
            "idx": In(max(1, row_bits)), "slot": In(sb), "emit": In(1), "last": In(1),
            "tag": In(slot_tag_layout(jobs)), "entry": In(release_entry_layout(jobs, slots)),
            "cfg": In(JobCfgLayout), "push": In(1), "marker": In(1), "then_emit": In(1),
            "push_cmd": Out(cmd_layout(data_width, sb + row_bits)), "push_out": Out(1),
            "push_marker": Out(1), "push_then_emit": Out(1), "hdr": Out(AggHeaderLayout),
            "q_in": Out(release_entry_layout(jobs, slots)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        lane_ok = row_lanes(m, self.count, self.idx, self.lanes)
        port = SimpleNamespace(push=self.push_out, push_marker=self.push_marker,
                               push_then_emit=self.push_then_emit, push_cmd=self.push_cmd)
        store_command(m, port, push=self.push, marker=self.marker, then_emit=self.then_emit, op=self.op,
                      row=self.row, data_=self.data, lanes_=lane_ok, slot=self.slot, emit=self.emit,
                      last=self.last, slots=self.slots)
        result_header(m, self.hdr, self.tag)
        m.d.comb += self.q_in.eq(self.entry)
        run_behind(m, self.q_in, self.entry, self.emit, self.cfg, (self.slots - 1).bit_length())
        return m
