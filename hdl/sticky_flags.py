"""The slot store's sticky overflow flags, one bit per slot (docs/large_slots.md, "First step
(built): the sticky overflow flags in block RAM above 256 slots"): the one part both
``ResultAssembler`` (the reducer) and ``StoreReadSplit`` (the record path) keep them in.

A slot's response is answered in a stage that holds it (the assembler's stage R, the split's
head register) and is **loaded** into that stage the cycle before: ``load`` with the next slot
``next_slot``. In the stage (``slot``) the flag as it stands (``flag``: after every earlier
update) and the updated one (``new`` = 0 if ``clear`` else ``flag``, OR ``set_``) are out, and
``new`` is written back to ``slot`` when ``update`` — at most once per loaded slot, in its last
cycle in the stage (the memory's flag is read once, at ``load``). Up to ``FLAGS_IN_FLIP_FLOPS_MAX_SLOTS``
slots the flags are flip-flops (an S:1 multiplexer and S write enables: fewer cells than a block
RAM, and the netlist of every core built so far); above, a ``Memory`` of S x 1 bit read at
``next_slot`` with ``load`` (so the flag arrives with its stage), transparent to the write in
that cycle (often the same slot: every row of a message is): cycle for cycle the same outputs.
The memory keeps its flags over a reset (a flag is read only after the slot's first
contribution, a WRITE, has cleared it).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value, ValueLike
from amaranth.lib.memory import Memory

__all__ = ["FLAGS_IN_FLIP_FLOPS_MAX_SLOTS", "sticky_flags"]

# up to this many slots the flags are flip-flops, above a block RAM (the users read it at
# elaboration through their own class attribute, so tests can lower it)
FLAGS_IN_FLIP_FLOPS_MAX_SLOTS = 256


def sticky_flags(m: Module, slots: int, *, in_memory: bool, load: ValueLike, next_slot: ValueLike,
                 slot: ValueLike, update: ValueLike, clear: ValueLike, set_: ValueLike) -> tuple[Value, Signal]:
    """Add ``slots`` sticky flags to ``m`` (module docstring); returns (``flag``, ``new``) for the
    slot in the stage. ``in_memory``: a block RAM (the caller compares ``slots`` with its limit);
    ``load`` / ``next_slot`` are used only then."""
    new = Signal(name="s_new")
    if not in_memory:
        ovf = Signal(slots, name="ovf")
        flag = ovf.bit_select(slot, 1)
        m.d.comb += new.eq(Mux(clear, 0, flag) | set_)
        with m.If(update):
            m.d.sync += ovf.bit_select(slot, 1).eq(new)
        return flag, new
    m.submodules.ovf = ovf_mem = Memory(shape=1, depth=slots, init=[])
    ovf_w = ovf_mem.write_port()
    ovf_r = ovf_mem.read_port(transparent_for=(ovf_w,))
    m.d.comb += [ovf_r.addr.eq(next_slot), ovf_r.en.eq(load), new.eq(Mux(clear, 0, ovf_r.data) | set_),
                 ovf_w.en.eq(update), ovf_w.addr.eq(slot), ovf_w.data.eq(new)]
    return ovf_r.data, new
