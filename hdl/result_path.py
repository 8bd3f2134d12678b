"""The reducer's result path wired, out of ``Reducer.elaborate`` (issue 16 item 6; docs/reducer.md,
"Parts built inline"): the release queue's head into the ``ResultEmitter``, its READs onto the
slot store's command port, its headers into the ``ResultAssembler``, its tag reads (on a port of
their own or shared with the ``TagProbe``), the probe's tag port and pending bits, and the
assembled results out (through a ``ResultGate`` with the DRAM store).

Functions that build their logic into the caller's module, not components: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed); the reducer calls each where its statements were. ``EmitterLink``
wraps the two with logic of their own (the READ command and the hazard check; the tag port
shared by the emitter and the probe) for the unit tests.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .axi4 import axi4_forward
from .dram_slot_store import AXI_PREFIX
from .params import check_core_params
from .reducer_layouts import slot_tag_layout, store_tag_layout
from .result_gate import ResultGate
from .slot_store_signature import Op, cmd_layout

__all__ = ["EmitterLink", "connect_emitter", "connect_probe", "emitter_state_layout", "result_output",
           "share_tag_port"]


def result_output(m: Module, top: wiring.Component, asm: wiring.Component, store: wiring.Component, *,
                  width: int, dram: bool) -> Value:
    """The assembled results (``asm.m_msg``) out through ``top``'s ``m_msg``, ``result_out`` one
    strobe per result; ``dram``: the store's AXI4 port is ``top``'s, and after a memory error no
    result leaves (``ResultGate``: ``mem_error``, ``result_withheld``). With ``dram`` the two
    strobes come a cycle after the result's first beat (flip-flops: the gate's drop decision ->
    the egress merger's ready -> the take ran on into the control block's 32-bit counters, the
    Versa DRAM build's core path, 9.91 ns at session 36's seed 2); the counters count the same.
    With ``dram`` the gate's valid is a flip-flop (``valid_reg``, from ``asm.m_valid_next``).
    Returns the gate's ``copy_error`` (0 without ``dram``)."""
    if dram:
        axi4_forward(m, store, top, AXI_PREFIX)
        m.submodules.gate = gate = ResultGate(width, late_error=True, valid_reg=True)
        wiring.connect(m, asm.m_msg, gate.s)
        m.d.comb += gate.s_valid_next.eq(asm.m_valid_next)
        wiring.connect(m, gate.m, wiring.flipped(top.m_msg))
        sent_r, withheld_r = Signal(name="sent_r"), Signal(name="withheld_r")
        m.d.sync += [sent_r.eq(gate.sent), withheld_r.eq(gate.withheld)]
        m.d.comb += [gate.error.eq(store.mem_error), top.mem_error.eq(store.mem_error),
                     top.result_out.eq(sent_r), top.result_withheld.eq(withheld_r)]
        return gate.copy_error
    wiring.connect(m, asm.m_msg, wiring.flipped(top.m_msg))
    m.d.comb += top.result_out.eq(asm.result_out)
    return Const(0)


def connect_emitter(m: Module, emit: object, *, queue: object, arb: object, asm: object, tag_rd: object,
                    tag_wr: object, tw_v: Value, tw_a: Value, tw_d: Value, own_port: bool, slots: int,
                    rw_hazard: Value) -> None:
    """Wire the emitter: the queue's head in and its pop out; the tag read port ``tag_rd`` (its
    address and enable too if ``own_port``); the tag being written (``tw_v`` / ``tw_a`` /
    ``tw_d``: whether it leaves more than one / two beats, for its multi bits); the store port
    (``arb``): one READ per row, tagged with the slot and its last row; the assembler's header
    FIFO. ``rw_hazard``: a used tag read meets the write of its address (never), or a result's
    header is missing."""
    etag = Signal(store_tag_layout(slots))
    m.d.comb += [etag.slot.eq(emit.slot), etag.read.eq(1), etag.last.eq(emit.last)]
    m.d.comb += [
        emit.q_head.eq(queue.head), emit.q_head_mask.eq(queue.head_mask), emit.q_count.eq(queue.count),
        emit.q_head_next.eq(queue.head_next), emit.q_head_rest.eq(queue.head_rest),
        queue.pop.eq(emit.q_pop),
        *([tag_rd.addr.eq(emit.tag_addr), tag_rd.en.eq(emit.tag_en)] if own_port else []),
        emit.tag_data.eq(tag_rd.data),
        emit.tag_we.eq(tw_v), emit.tag_wslot.eq(tw_a), emit.tag_wmulti.eq(tw_d.nbm1 != 0),
        emit.tag_wmulti2.eq(tw_d.nbm1[1:] != 0),
        emit.go.eq(arb.e_go), emit.allow_pop.eq(arb.e_allow_pop), emit.hdr_room.eq(asm.hdr_e_room),
        emit.hdr_room_next.eq(asm.hdr_e_room_next), emit.q_push.eq(queue.push),
        arb.e_valid.eq(emit.issue), arb.e_cmd.op.eq(Op.READ), arb.e_cmd.row.eq(emit.row_addr),
        arb.e_cmd.tag.eq(etag), arb.e_popped.eq(emit.q_pop), arb.e_idle.eq(emit.idle),
        arb.e_final.eq(emit.final),
        asm.hdr_e.valid.eq(emit.hdr_valid), asm.hdr_e.payload.eq(emit.hdr),
        rw_hazard.eq((emit.tag_read & tag_wr.en & (tag_rd.addr == tag_wr.addr)) | asm.hdr_missing),
    ]
    if getattr(emit, "held_next_slots", False):  # the queue holds them (DRAM, on chip above S 16)
        m.d.comb += [emit.q_head_nslot.eq(queue.head_nslot), emit.q_head_nslot2.eq(queue.head_nslot2)]


def share_tag_port(m: Module, emit: object, probe: object, tag_rd: object, q_count: Value) -> None:
    """The emitter's tag read port shared with the probe: the probe reads only while the emitter
    can neither start (nothing queued, no rest) nor needs its tag held (busy), all flip-flops;
    else the read is the emitter's and the probe's is lost (``rd_lost``: it asks again)."""
    emit_may = Signal()
    m.d.comb += [
        emit_may.eq(emit.busy | emit.rest_nz | (q_count != 0)),
        tag_rd.addr.eq(Mux(emit_may, emit.tag_addr, probe.rd_addr)),
        tag_rd.en.eq(~emit_may | emit.tag_en), probe.rd_lost.eq(emit_may),
    ]


def connect_probe(m: Module, top: wiring.Component, probe: object, *, tag_rd: object, tag_wr: object,
                  own_port: bool, pending: Value) -> None:
    """Wire the probe (JOBj_PROBE_BITMAP): ``top``'s request and answer, its tag reads (on
    ``tag_rd``, its own port if ``own_port``, else the emitter's data), the tag writes it must
    not miss, the ``pending`` bits (or the probed slot's)."""
    m.d.comb += [
        probe.probe_job.eq(top.probe_job), probe.probe_chunk.eq(top.probe_chunk),
        *([tag_rd.addr.eq(probe.rd_addr), tag_rd.en.eq(1), probe.rd_data.eq(tag_rd.data)]
          if own_port else [probe.rd_data.eq(tag_rd.data)]),
        probe.wr_en.eq(tag_wr.en), probe.wr_addr.eq(tag_wr.addr), probe.pending.eq(pending),
        top.probe_bitmap.eq(probe.probe_bitmap), top.probe_ok.eq(probe.probe_ok),
    ]


def emitter_state_layout(slot_bits: int) -> data.StructLayout:
    """What the emitter and the queue tell the tag port and the store port (``EmitterLink``)."""
    return data.StructLayout({"busy": 1, "rest_nz": 1, "q_count": 4, "tag_addr": slot_bits, "tag_en": 1,
                              "tag_read": 1, "slot": slot_bits, "last": 1, "row_addr": slot_bits + 4,
                              "issue": 1})


class EmitterLink(wiring.Component):
    """``connect_emitter`` and ``share_tag_port`` (if ``shared``) for the unit tests: ``state``
    (``emitter_state_layout``), the probe's ``probe_addr``, the tag write (``tw_v``, ``tw_a``,
    ``tw_d``) and the memory's write port (``wr_en``, ``wr_addr``), ``hdr_missing`` in; the tag
    port (``rd_addr``, ``rd_en``, ``rd_lost``), the READ (``e_valid``, ``e_cmd``), the multi
    bits (``wmulti``, ``wmulti2``) and ``rw_hazard`` out."""

    def __init__(self, *, slots: int, jobs: int, shared: bool) -> None:
        check_core_params(slots=slots, jobs=jobs)
        self.slots, self.shared = slots, shared
        sb = max(1, (slots - 1).bit_length())
        super().__init__({
            "state": In(emitter_state_layout(sb)), "probe_addr": In(sb), "tw_v": In(1), "tw_a": In(sb),
            "tw_d": In(slot_tag_layout(jobs)), "wr_en": In(1), "wr_addr": In(sb), "hdr_missing": In(1),
            "rd_addr": Out(sb), "rd_en": Out(1), "rd_lost": Out(1), "e_valid": Out(1),
            "e_cmd": Out(cmd_layout(64, sb + 4)), "wmulti": Out(1), "wmulti2": Out(1), "rw_hazard": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        st, sb = self.state, max(1, (self.slots - 1).bit_length())
        emit = SimpleNamespace(**{n: st[n] for n in ("busy", "rest_nz", "tag_addr", "tag_en", "tag_read", "slot",
                                                     "last", "row_addr", "issue")})
        for n in ("q_pop", "hdr_valid", "idle", "final"):
            setattr(emit, n, Signal(name=n))
        emit.hdr = Signal(1)
        emit.tag_wmulti, emit.tag_wmulti2 = self.wmulti, self.wmulti2
        for n in ("q_head", "q_head_mask", "q_count", "q_head_next", "q_head_rest", "tag_data", "tag_we",
                  "tag_wslot", "go", "allow_pop", "hdr_room", "hdr_room_next", "q_push"):
            setattr(emit, n, Signal(64, name=n))
        queue = SimpleNamespace(head=0, head_mask=0, count=st.q_count, head_next=0, head_rest=0,
                                pop=Signal(name="pop"), push=0)
        arb = SimpleNamespace(e_go=0, e_allow_pop=0, e_valid=self.e_valid, e_cmd=self.e_cmd,
                              e_popped=Signal(name="e_popped"), e_idle=Signal(name="e_idle"),
                              e_final=Signal(name="e_final"))
        asm = SimpleNamespace(hdr_e_room=0, hdr_e_room_next=0, hdr_missing=self.hdr_missing,
                              hdr_e=SimpleNamespace(valid=Signal(name="hv"), payload=Signal(1, name="hp")))
        tag_rd = SimpleNamespace(addr=self.rd_addr, en=self.rd_en, data=Signal(sb, name="rd_data"))
        tag_wr = SimpleNamespace(en=self.wr_en, addr=self.wr_addr)
        connect_emitter(m, emit, queue=queue, arb=arb, asm=asm, tag_rd=tag_rd, tag_wr=tag_wr, tw_v=self.tw_v,
                        tw_a=self.tw_a, tw_d=self.tw_d, own_port=not self.shared, slots=self.slots,
                        rw_hazard=self.rw_hazard)
        if self.shared:
            probe = SimpleNamespace(rd_addr=self.probe_addr, rd_lost=self.rd_lost)
            share_tag_port(m, emit, probe, tag_rd, st.q_count)
        return m
