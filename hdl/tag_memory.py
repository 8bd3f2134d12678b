"""The slot tag memory and its write path, out of ``Reducer.elaborate`` (issue 16 item 6;
docs/reducer.md, "Parts built inline"): the memory (S tags, ``slot_tag_layout``) with its read
ports (the decision's, the emitter's, the probe's up to ``Reducer.PROBE_TAG_PORT_MAX_SLOTS``);
the write register (``tw``: the decision ends in flip-flops, the memory is written a cycle later)
and the last write kept for the bypass (``tb_data``); and the write select: a window reset writes
FREE at the slot it clears, else a message's last beat leaving stage 1 with a data op writes its
tag at its slot.

Functions that build their logic into the caller's module, not a component: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed); the reducer calls each where its statements were, with its signal
names. ``TagWrite`` wraps them for the unit tests.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .params import check_core_params
from .reducer_layouts import FREE, slot_tag_layout

__all__ = ["TagWrite", "tag_memory", "tag_write_register", "tag_write_select", "tag_writer_layout"]


def tag_memory(m: Module, *, slots: int, jobs: int, probe_port: bool, load_port: bool = False,
               decision_lut: bool = False) -> SimpleNamespace:
    """The tag memory as ``m``'s submodule ``tag_mem``, with its ports (not transparent):
    ``rd`` (the decision's, stage 0 -> 1), ``rd_e`` (the emitter's), ``wr``, and with
    ``probe_port`` ``rd_p`` (JOBj_PROBE_BITMAP; else the probe shares ``rd_e``); with
    ``load_port`` ``rd_l``, a second port of the decision's (the beat stage P would load, while
    ``rd`` reads the beat it holds; else None).

    ``decision_lut`` (on chip above ``Reducer.ONCHIP_CUTS_MAX_SLOTS``, session 46): ``rd`` reads
    a copy of its own, ``tag_mem_d``, built as LUT RAM (``ram_style`` "distributed") and written
    by ``wr``'s signals in the same cycle (the same contents, the same synchronous read: the same
    data). yosys maps a synchronous read of LUT RAM as the asynchronous read followed by
    flip-flops, so the decision's checks start at flip-flops, not at the block RAM's ~4 ns
    clock-to-output (`tag_mem` -> the chunk compare -> `ck_pre.same` was 11.13 ns in the
    on-chip S 64 core's placement, the block RAM's output at 4.26 ns)."""
    # Left to the tools (block RAM on the ECP5). Forcing LUT RAM up to 256 slots (for the
    # block RAM's ~4 ns clock-to-output) gained nothing measurable (55.0 vs 53.7 MHz at
    # S=64, within placement noise) and left nextpnr's router congested on the Versa build.
    # ``no_rw_check``: no read port's result is used when it reads the address written in
    # the same cycle (the decision's ports bypass the write in progress: thit_w0, dhit0; the
    # emitter reads a queued result's slot, which is pinned: not written while queued, and
    # its last write is the cycle before the emitter can start it; a window reset waits
    # for the emitter to drain). Without it yosys adds read/write address comparators and
    # an output multiplexer to every block RAM port to emulate read-old-data on collision.
    no_rw = {"no_rw_check": 1}
    m.submodules.tag_mem = tag_mem = Memory(shape=slot_tag_layout(jobs), depth=slots, init=[], attrs=no_rw)
    if decision_lut:  # (docstring) the copy: 64 x 150 bits at S 64, 152 DPR16X4
        lut = {**no_rw, "ram_style": "distributed"}
        m.submodules.tag_mem_d = tag_mem_d = Memory(shape=slot_tag_layout(jobs), depth=slots, init=[], attrs=lut)
        tag_rd = tag_mem_d.read_port(transparent_for=())  # decision (stage 0 -> 1)
    else:
        tag_rd = tag_mem.read_port(transparent_for=())  # decision (stage 0 -> 1)
    tag_rd_e = tag_mem.read_port(transparent_for=())  # emitter
    tag_wr = tag_mem.write_port()
    tag_rd_p = tag_rd_l = None
    if probe_port:
        tag_rd_p = tag_mem.read_port(transparent_for=())  # JOBj_PROBE_BITMAP
    if load_port:
        tag_rd_l = tag_mem.read_port(transparent_for=())  # decision: the beat P would load
    if decision_lut:  # the copy written with the block RAM
        wr_d = tag_mem_d.write_port()
        m.d.comb += [wr_d.en.eq(tag_wr.en), wr_d.addr.eq(tag_wr.addr), wr_d.data.eq(tag_wr.data)]
    return SimpleNamespace(rd=tag_rd, rd_e=tag_rd_e, wr=tag_wr, rd_p=tag_rd_p, rd_l=tag_rd_l)


def tag_write_register(m: Module, tag_wr: object, *, tag_layout: data.Layout, slot_bits: int) -> SimpleNamespace:
    """The write register: ``tw_en`` / ``tw_addr`` / ``tw_data`` (the write requested, driven by
    ``tag_write_select``) registered into ``tw_v`` / ``tw_a`` / ``tw_d``, which write the memory
    (``tag_wr``) a cycle later; ``tb_data``, the last tag written (the read a cycle ahead misses
    it)."""
    tb_data = Signal(tag_layout, name="tb_data")  # the last tag written
    with m.If(tag_wr.en):
        m.d.sync += tb_data.eq(tag_wr.data)
    # unnamed ("$signal"), as in the pinned netlist (tests/test_default_rtl.py)
    tw_en, tw_addr, tw_data = Signal(name="$signal"), Signal(slot_bits, name="$signal"), Signal(tag_layout, name="tw_data")
    tw_v, tw_a, tw_d = Signal(name="$signal"), Signal(slot_bits, name="$signal"), Signal(tag_layout, name="tw_d")
    m.d.sync += [tw_v.eq(tw_en), tw_a.eq(tw_addr), tw_d.eq(tw_data)]
    m.d.comb += [tag_wr.en.eq(tw_v), tag_wr.addr.eq(tw_a), tag_wr.data.eq(tw_d)]
    return SimpleNamespace(tb_data=tb_data, tw_en=tw_en, tw_addr=tw_addr, tw_data=tw_data, tw_v=tw_v, tw_a=tw_a,
                           tw_d=tw_d)


def tag_write_select(m: Module, tw: SimpleNamespace, *, tw_hit0: Value, clear: Value, clear_slot: Value, v1: Value,
                     adv: Value, last1: Value, op_c_nz: Value, slot1: Value, slot0: Value, tag_c: Value) -> None:
    """Request the tag write (``tw``'s ``tw_en``, ``tw_addr``, ``tw_data``): a window reset's
    FREE at ``clear_slot`` (``clear``; only the state matters: every check and the emitter ignore
    the other fields of a FREE tag), else stage 1's ``tag_c`` at ``slot1`` when its last beat
    leaves (``v1 & adv & last1``) with a data op (``op_c_nz``); ``tw_hit0``: the write requested
    is at stage 0's ``slot0`` (== tw_en & (tw_addr == slot0), without the address multiplexer)."""
    m.d.comb += [
        tw.tw_en.eq(clear | (v1 & adv & last1 & op_c_nz)),
        tw.tw_addr.eq(Mux(clear, clear_slot, slot1)),
        tw_hit0.eq(Mux(op_c_nz, Mux(clear, clear_slot == slot0, v1 & adv & last1 & (slot1 == slot0)),
                       clear & (clear_slot == slot0))),
        tw.tw_data.eq(tag_c),
        tw.tw_data.state.eq(Mux(clear, FREE, tag_c.state)),
    ]


def tag_writer_layout(slot_bits: int) -> data.StructLayout:
    """What requests a tag write (``tag_write_select``), by name."""
    return data.StructLayout({"clear": 1, "clear_slot": slot_bits, "v1": 1, "adv": 1, "last1": 1, "op_c_nz": 1,
                              "slot1": slot_bits, "slot0": slot_bits})


class TagWrite(wiring.Component):
    """The three as one component (the unit tests): ``req`` (``tag_writer_layout``) and ``tag_c``
    in; ``tw_en`` / ``tw_addr`` / ``tw_hit0`` (combinational), ``tw_v`` / ``tw_a``, ``tb_data`` out;
    the memory read back at ``rd_addr`` (``rd_data``, a cycle later) on the emitter's port."""

    def __init__(self, *, slots: int, jobs: int) -> None:
        check_core_params(slots=slots, jobs=jobs)
        self.slots, self.jobs = slots, jobs
        sb = (slots - 1).bit_length()
        tag = slot_tag_layout(jobs)
        super().__init__({
            "req": In(tag_writer_layout(sb)), "tag_c": In(tag), "rd_addr": In(sb),
            "tw_en": Out(1), "tw_addr": Out(sb), "tw_hit0": Out(1), "tw_v": Out(1), "tw_a": Out(sb),
            "tb_data": Out(tag), "rd_data": Out(tag),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb = (self.slots - 1).bit_length()
        mem = tag_memory(m, slots=self.slots, jobs=self.jobs, probe_port=False)
        tw = tag_write_register(m, mem.wr, tag_layout=slot_tag_layout(self.jobs), slot_bits=sb)
        r = self.req
        tag_write_select(m, tw, tw_hit0=self.tw_hit0, clear=r.clear, clear_slot=r.clear_slot, v1=r.v1, adv=r.adv,
                         last1=r.last1, op_c_nz=r.op_c_nz, slot1=r.slot1, slot0=r.slot0, tag_c=self.tag_c)
        m.d.comb += [self.tw_en.eq(tw.tw_en), self.tw_addr.eq(tw.tw_addr), self.tw_v.eq(tw.tw_v),
                     self.tw_a.eq(tw.tw_a), self.tb_data.eq(tw.tb_data), mem.rd_e.addr.eq(self.rd_addr),
                     mem.rd_e.en.eq(1), self.rd_data.eq(mem.rd_e.data)]
        return m
