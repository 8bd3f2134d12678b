"""The reducer's release queue (docs/reducer.md, "Result emission and pinned slots"): a few
entries (job, first chunk, slot, run length ``more``, resent), each a chunk or an in-order run to
emit, kept in registers because the decision compares every entry for pinning.

Each entry may carry an S-bit mask of the slots it holds (its slot and its run, used for pinning
up to ``Reducer.RUN_TABLE_MAX_SLOTS``). The head entry is a register of its own worked out a
cycle ahead (the entry after it on a pop, or the entry pushed into that position), so the
emitter's next read address is a multiplexer of flip-flops. The producer must not push into a
full queue (the decision holds stage 1 while fewer than two entries are free).
"""

from __future__ import annotations

from amaranth.hdl import Array, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .reducer_layouts import release_entry_layout

__all__ = ["QUEUE_DEPTH", "ReleaseQueue"]

QUEUE_DEPTH = 4  # release-queue entries (each entry may cover a whole run of chunks)


class ReleaseQueue(wiring.Component):
    """Release-queue registers (see the module docstring).

    In: ``push`` with ``entry`` (and its slot ``mask`` if ``masks``), ``pop``. Out: ``head`` (the
    oldest entry, a register), ``head_mask``, ``count``, every entry (``entries``) with
    ``occupied`` (one bit per position), and ``held_mask``: the union of the occupied entries'
    masks. ``head_rest`` (with ``masks``): a register equal to ``head_mask`` without the head's
    own slot (what the emitter's rest holds after starting the head's first chunk), worked out
    a cycle ahead from the entries' masks without their slots (``q_rest``, stored at the push). ``head_next`` (only if asked for): ``head``'s next value, for a consumer that
    reads a memory a cycle ahead at the head's slot (the emitter's ``multi`` bits). ``rest_in``:
    the pushed entry's rest mask is the input ``rest`` (the producer's, equal to ``mask`` without
    ``entry.slot``; registered there), not decoded here from ``entry.slot``.
    ``next_slots`` (the DRAM reducer, and on chip above S 16): each entry also holds ``nslot`` / ``nslot2`` given at its
    push (the slots of its chunk + 1 and + 2), the head's as registers ``head_nslot`` /
    ``head_nslot2`` worked out a cycle ahead, so the emitter's start reads no job table.
    """

    def __init__(self, *, slots: int, jobs: int, masks: bool, depth: int = QUEUE_DEPTH,
                 head_next: bool = False, rest_in: bool = False, next_slots: bool = False) -> None:
        self.slots, self.jobs, self.masks, self.depth = slots, jobs, masks, depth
        self.rest_in, self.next_slots = rest_in, next_slots
        self.entry_layout = release_entry_layout(jobs, slots)
        self.with_head_next = head_next
        ports = {
            "push": In(1),
            "entry": In(self.entry_layout),
            "mask": In(slots),
            "pop": In(1),
            "head": Out(self.entry_layout),
            "head_mask": Out(slots),
            "count": Out(range(depth + 1)),
            "occupied": Out(depth),
            "held_mask": Out(slots),
            "head_rest": Out(slots),
        }
        if head_next:
            ports["head_next"] = Out(self.entry_layout)
        if rest_in:
            ports["rest"] = In(slots)
        if next_slots:
            sb = (slots - 1).bit_length()
            ports |= {"nslot": In(sb), "nslot2": In(sb), "head_nslot": Out(sb), "head_nslot2": Out(sb)}
        super().__init__(ports)
        # every entry, one signal each (not an ArrayLayout port): yosys' ABC9 pass confused the
        # bits of the flattened array ``entries`` with the wires named ``entries[i]`` and wired
        # entry 0's chunk bits onto entries 1-3's job bits (three nets with two drivers each,
        # which nextpnr refuses; docs/benchmarks.md, "Cut 4")
        self.entries = [Signal(self.entry_layout, name=f"entry{i}") for i in range(depth)]

    def elaborate(self, platform: object) -> Module:
        m = Module()
        D = self.depth
        q = [Signal(self.entry_layout, name=f"q{i}") for i in range(D)]
        q_mask = [Signal(self.slots, name=f"q_mask{i}") for i in range(D)] if self.masks else []
        # each entry's mask without its own slot, stored at the push (the slot decode on the push
        # side), so head_rest's next value is a select of flip-flops (cut 10's seed 8: the pop ->
        # q_rptr -> the next head's slot -> its decode -> head_rest, 8.10 ns)
        q_rest = [Signal(self.slots, name=f"q_rest{i}") for i in range(D)] if self.masks else []
        rest_in = self.rest if self.rest_in else self.mask & ~(Const(1, self.slots) << self.entry.slot)
        q_rptr = Signal(range(D))
        q_wptr = Signal(range(D))
        q_count = self.count
        push, pop, q_in = self.push, self.pop, self.entry
        q_arr = Array([e.as_value() for e in q])
        q_rptr1 = (q_rptr + 1)[: len(q_rptr)]
        head_n = Signal(self.entry_layout)
        m.d.comb += head_n.eq(Mux(pop, Mux(push & (q_wptr == q_rptr1), q_in, q_arr[q_rptr1]),
                                  Mux(push & (q_wptr == q_rptr), q_in, self.head)))
        m.d.sync += self.head.eq(head_n)
        if self.with_head_next:
            m.d.comb += self.head_next.eq(head_n)
        held = []  # (value pushed, per-entry registers, the head's register): the next-slot fields
        if self.next_slots:
            for f in ("nslot", "nslot2"):
                regs = [Signal(len(getattr(self, f)), name=f"q_{f}{i}") for i in range(D)]
                held.append((getattr(self, f), regs, getattr(self, "head_" + f)))

        def head_ahead(pushed, regs, head):  # `head`'s next value, as head_n's
            arr = Array(regs)
            return Mux(pop, Mux(push & (q_wptr == q_rptr1), pushed, arr[q_rptr1]),
                       Mux(push & (q_wptr == q_rptr), pushed, head))

        m.d.sync += [head.eq(head_ahead(pushed, regs, head)) for pushed, regs, head in held]
        with m.If(push):
            for i in range(D):
                with m.If(q_wptr == i):
                    m.d.sync += q[i].eq(q_in)
                    m.d.sync += [regs[i].eq(pushed) for pushed, regs, _ in held]
                    if q_mask:
                        m.d.sync += [q_mask[i].eq(self.mask), q_rest[i].eq(rest_in)]
            m.d.sync += q_wptr.eq(q_wptr + 1)
        with m.If(pop):
            m.d.sync += q_rptr.eq(q_rptr + 1)
        m.d.sync += q_count.eq(q_count + push - pop)
        union = Const(0, self.slots)
        for i in range(D):
            occupied = (Const(i, q_rptr.shape()) - q_rptr)[: len(q_rptr)] < q_count
            m.d.comb += [self.entries[i].eq(q[i]), self.occupied[i].eq(occupied)]
            if q_mask:
                union = union | Mux(self.occupied[i], q_mask[i], 0)
        if q_mask:
            qm_arr = Array(q_mask)
            m.d.comb += [self.head_mask.eq(qm_arr[q_rptr]), self.held_mask.eq(union)]
            # head_mask's next value (as head_n's) without head_n's slot: the entries' rest masks
            m.d.sync += self.head_rest.eq(head_ahead(rest_in, q_rest, self.head_rest))
        return m
