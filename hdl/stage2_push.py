"""Stage 2's pushes, out of ``Reducer.elaborate`` (issue 16 item 6; docs/reducer.md, "Parts built
inline"): each beat in stage 2 pushes its command (or, without a data op, a marker) into the slot
store's command port; a message's last beat pushes its release entry into the queue (the run
behind it when it emits its own chunk) and, when it emits, its result header into the assembler;
with the DRAM store the command says whether the message has more rows (its burst stays open).

A function that builds its logic into the caller's module (``store_command``, ``result_header``
and ``run_behind`` of hdl/stage2_issue.py, and the wiring between them), not a component: a
component boundary would add ports and a hierarchy level to the reducer's RTLIL, which
tests/test_default_rtl.py pins (the netlist being placed); the reducer calls it where its
statements were. ``StageTwoPush`` wraps it for the unit tests.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import AggHeaderLayout, JobCfgLayout
from .params import check_core_params
from .reducer_config import select_job_entry, slot_of
from .reducer_layouts import release_entry_layout, slot_tag_layout
from .slot_store_signature import cmd_layout
from .stage2_issue import result_header, run_behind, store_command

__all__ = ["StageTwoPush", "stage2_beat_layout", "stage2_push"]


def stage2_push(m: Module, *, arb: object, asm: object, queue: object, s2: object, push_c: Value, has_cmd: Value,
                queued: Value, emit2: Value, last2: Value, push_now: Value, tag_r: Value, entry_r: Value,
                mask_r: Value, job_cfg: Value, jobs: int, slots: int, dram: bool, emit_last: Value,
                run_slot: Value | None = None, run_err: Value | None = None,
                rest: tuple[Value, Value] | None = None, ahead: tuple[Value, Value] | None = None) -> None:
    """Stage 2's beat ``s2`` (``op2``, ``row2``, ``d2``, ``lanes2``, ``slot2``) onto the command
    port ``arb`` (``push_c``: a command or a marker, a marker without ``has_cmd``; then to the
    emitter if ``queued``; tagged ``emit2`` / ``last2``); the emitting message's header from its
    decision's tag ``tag_r`` into ``asm.hdr_c`` with ``push_now``; the release entry ``entry_r``
    (its slot mask ``mask_r``) into ``queue`` if ``queued``, as the run behind it when it emits
    (its job's configuration from ``job_cfg``). ``dram``: the command's ``more`` (not the
    message's last row; the emitter's READs: not its ``emit_last``). ``run_slot``: the run's
    first slot, held from the decision (else worked out here from ``job_cfg``); ``run_err`` is
    driven 1 when a queued run's ``run_slot`` is not that (copy_error). With ``queue.next_slots`` the queue
    also gets the pushed entry's next two slots (``queue.nslot`` / ``nslot2``: its chunk + 1 / + 2's,
    ``ReleaseQueue(next_slots=True)``), for the emitter's start. ``rest``: the entry's rest
    masks (without its own slot, without ``run_slot``: ``rest_masks``) into ``queue.rest``, the
    second when it emits. ``ahead``: the slots of ``entry_r``'s chunk + 2 / + 3, held from the
    decision as ``run_slot`` (its + 1) is: the queue's next slots then read no job table (the DRAM
    reducer; ``run_err`` also when they are not the job table's)."""
    store_command(m, arb, push=push_c, marker=~has_cmd, then_emit=queued, op=s2.op2, row=s2.row2, data_=s2.d2,
                  lanes_=s2.lanes2, slot=s2.slot2, emit=emit2, last=last2, slots=slots)  # hdl/stage2_issue.py
    # the emitting message's result header (tag_r: its decision's tag, still held)
    m.d.comb += asm.hdr_c.valid.eq(push_now & emit2)
    result_header(m, asm.hdr_c.payload, tag_r)
    # the release entry is queued with the message's last command (or marker); when the
    # message emits its own chunk, the entry is the run behind it, from the next chunk on
    cfg_e = select_job_entry(m, job_cfg, jobs, entry_r.job, "cfg_e")
    m.d.comb += [queue.push.eq(queued), queue.entry.eq(entry_r), queue.mask.eq(mask_r)]
    sb = (slots - 1).bit_length()
    run_behind(m, queue.entry, entry_r, emit2, cfg_e, sb, slot=run_slot)
    if rest is not None:
        m.d.comb += queue.rest.eq(Mux(emit2, rest[1], rest[0]))

    def at(k: int) -> Value:  # the slot of entry_r's chunk + k (slot_of reads the chunk's low sb bits)
        return slot_of(cfg_e, (entry_r.chunk[:sb] + k)[:sb], sb)

    # the pushed entry's next slots: its chunk is entry_r's, or the next one's (the run): both
    # sums, emit2 last
    nslots = (Mux(emit2, at(2), at(1)), Mux(emit2, at(3), at(2)))
    if run_err is not None:
        err = emit2 & (run_slot != at(1))
        if ahead is not None:
            err = err | (queue.nslot != nslots[0]) | (queue.nslot2 != nslots[1])
        m.d.comb += run_err.eq(queued & err)
    if ahead is not None:  # held: run_slot is entry_r's chunk + 1's
        m.d.comb += [queue.nslot.eq(Mux(emit2, ahead[0], run_slot)), queue.nslot2.eq(Mux(emit2, ahead[1], ahead[0]))]
    elif queue.next_slots:
        m.d.comb += [queue.nslot.eq(nslots[0]), queue.nslot2.eq(nslots[1])]

    if dram:
        # ``more``: the message (contribution or result) has more rows, so the DRAM store
        # keeps its burst open (left 0 for the on-chip store, which ignores it)
        m.d.comb += [arb.push_cmd.more.eq(~last2), arb.e_cmd.more.eq(~emit_last)]


def stage2_beat_layout(data_width: int, slots: int, row_bits: int) -> data.StructLayout:
    """Stage 2's beat as ``stage2_push`` reads it, by name."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"op2": 2, "row2": sb + row_bits, "d2": data_width, "lanes2": data_width // 32,
                              "slot2": sb})


class StageTwoPush(wiring.Component):
    """``stage2_push`` for the unit tests: ``s2`` (``stage2_beat_layout``), ``push_c``,
    ``has_cmd``, ``queued``, ``emit2``, ``last2``, ``push_now``, ``tag_r``, ``entry_r``, ``mask_r``,
    ``job_cfg``, ``emit_last`` in; the command port's push side (``push``, ``push_marker``,
    ``push_then_emit``, ``push_cmd``, the READ's ``e_more``), the header (``hdr_valid``, ``hdr``),
    the queue's ``q_push``, ``q_entry``, ``q_mask`` out; ``held_run_slot``: ``run_slot`` in,
    ``run_err`` out (the reducer's DRAM configuration); ``held_ahead``: also ``ahead2`` /
    ``ahead3`` in (``stage2_push``'s ``ahead``, the DRAM reducer's)."""

    def __init__(self, data_width: int, *, slots: int, jobs: int, row_bits: int, dram: bool,
                 held_run_slot: bool = False, held_ahead: bool = False) -> None:
        check_core_params(width=data_width, slots=slots, jobs=jobs, row_bits=row_bits)
        self.width, self.slots, self.jobs, self.row_bits, self.dram = data_width, slots, jobs, row_bits, dram
        self.held_run_slot, self.held_ahead = held_run_slot, held_ahead
        assert held_run_slot or not held_ahead, "held_ahead comes with held_run_slot"
        sb = (slots - 1).bit_length()
        entry = release_entry_layout(jobs, slots)
        held = ({"run_slot": In(sb), "run_err": Out(1), "q_nslot": Out(sb), "q_nslot2": Out(sb)}
                if held_run_slot else {})
        if held_ahead:
            held |= {"ahead2": In(sb), "ahead3": In(sb)}
        super().__init__({**held,
            "s2": In(stage2_beat_layout(data_width, slots, row_bits)), "push_c": In(1), "has_cmd": In(1),
            "queued": In(1), "emit2": In(1), "last2": In(1), "push_now": In(1), "tag_r": In(slot_tag_layout(jobs)),
            "entry_r": In(entry), "mask_r": In(slots), "job_cfg": In(data.ArrayLayout(JobCfgLayout, jobs)),
            "emit_last": In(1),
            "push": Out(1), "push_marker": Out(1), "push_then_emit": Out(1),
            "push_cmd": Out(cmd_layout(data_width, sb + row_bits)), "e_more": Out(1),
            "hdr_valid": Out(1), "hdr": Out(AggHeaderLayout), "q_push": Out(1), "q_entry": Out(entry),
            "q_mask": Out(slots),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        e_cmd = Signal(cmd_layout(self.width, 8))
        m.d.comb += self.e_more.eq(e_cmd.more)
        arb = SimpleNamespace(push=self.push, push_marker=self.push_marker, push_then_emit=self.push_then_emit,
                              push_cmd=self.push_cmd, e_cmd=e_cmd)
        asm = SimpleNamespace(hdr_c=SimpleNamespace(valid=self.hdr_valid, payload=self.hdr))
        queue = SimpleNamespace(push=self.q_push, entry=self.q_entry, mask=self.q_mask, next_slots=self.held_run_slot,
                                **({"nslot": self.q_nslot, "nslot2": self.q_nslot2} if self.held_run_slot else {}))
        stage2_push(m, arb=arb, asm=asm, queue=queue, s2=self.s2, push_c=self.push_c, has_cmd=self.has_cmd,
                    queued=self.queued, emit2=self.emit2, last2=self.last2, push_now=self.push_now, tag_r=self.tag_r,
                    entry_r=self.entry_r, mask_r=self.mask_r, job_cfg=self.job_cfg, jobs=self.jobs, slots=self.slots,
                    dram=self.dram, emit_last=self.emit_last,
                    **({"run_slot": self.run_slot, "run_err": self.run_err} if self.held_run_slot else {}),
                    **({"ahead": (self.ahead2, self.ahead3)} if self.held_ahead else {}))
        return m
