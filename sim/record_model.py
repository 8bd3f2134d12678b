"""Python twin of ``hdl/record_modify_scaffold.py`` (the engine's test record modify): the
reference the engine's benches check a ``ScaffoldRecordModify`` engine against, one call per
command, in command order (as ``SlotStoreModel`` is for the sums). With ``jobs`` it also holds
the ``DecisionState`` the modify's late operand comes from (each job's head, each slot's
pending bit) and applies each ADD's effect to it."""

from __future__ import annotations

from collections.abc import Callable

from wanreduce.hdl.decision_state import CHUNK_BITS
from wanreduce.hdl.slot_store_signature import Op

from .slot_store_model import SlotStoreModel

__all__ = ["RecordModel", "fold32", "scaffold_effect", "scaffold_update"]

MASK = 0xFFFFFFFF


def fold32(value: int) -> int:
    """The XOR of ``value``'s 32-bit words."""
    folded = 0
    while value:
        folded, value = folded ^ (value & MASK), value >> 32
    return folded


def scaffold_update(before: int, data: int, n_fields: int, side: int = 0, late: int = 0) -> tuple[int, int]:
    """ADD: the record after, and the per-field flags (bit 1: the bitmaps share a bit);
    ``side``: the command's side input, ``late``: its late operand's bits (the XOR of each one's
    32-bit words is a further increment of the count)."""
    a = [(before >> (32 * k)) & MASK for k in range(n_fields)]
    b = [(data >> (32 * k)) & MASK for k in range(n_fields)]
    out = [(a[0] + 1 + fold32(side) + fold32(late)) & MASK]
    if n_fields > 1:
        out.append(a[1] | b[1])
    if n_fields > 2:
        out.append(b[2])
    if n_fields > 3:
        out.append(max(a[3], b[3]))
    out += [a[k] ^ b[k] for k in range(4, n_fields)]
    flags = int(n_fields > 1 and a[1] & b[1] != 0) << 1
    return sum(v << (32 * k) for k, v in enumerate(out)), flags


def scaffold_effect(data: int, head: tuple[int, int], pending: int, slots: int) -> tuple[tuple[int, int] | None, int | None]:
    """ADD's effect on the state: the job's new head ``(chunk, slot)`` (None: unchanged) and the
    slot's new pending bit (None: unchanged), from the data's field 0 (bit 0: advance, bit 1:
    keep the pending bit)."""
    chunk, slot = head
    new_head = ((chunk + 1 + pending) % (1 << CHUNK_BITS), (slot + 1) % slots) if data & 1 else None
    return new_head, None if data & 2 else 1 - pending


class RecordModel(SlotStoreModel):
    """Records of ``width`` bits; WRITE stores, READ returns, ADD applies :func:`scaffold_update`
    (with the command's ``side``, 0 without one). With ``jobs``: the job is the side's low bits,
    the slot the row (``slots`` of them); each ADD's late operand is the job's head and the slot's
    pending bit (packed as ``late_layout``), its effect :func:`scaffold_effect`."""

    def __init__(self, width: int, initial: Callable[[int], int], *, jobs: int | None = None,
                 slots: int = 0) -> None:
        super().__init__(width, initial)
        self.jobs, self.slots = jobs, slots
        self.heads = [(0, 0)] * (jobs or 0)  # (chunk, slot) per job
        self.pending = [0] * slots

    def late(self, job: int, slot: int) -> int:
        """The late operand's bits (``late_layout``: head.chunk, head.slot, pending)."""
        chunk, head_slot = self.heads[job]
        sb = (self.slots - 1).bit_length()
        return chunk | head_slot << CHUNK_BITS | self.pending[slot] << (CHUNK_BITS + sb)

    def apply(self, op: int, row: int, data: int, lane_mask: int, side: int = 0) -> tuple[int, int]:
        """One command; returns the response ``(data, overflow)``."""
        if op != Op.ADD:
            return super().apply(op, row, data, lane_mask)
        old = self.rows[row] if row in self.rows else self.initial(row)
        late = 0
        if self.jobs:
            job = side % self.jobs
            late = self.late(job, row)
            head, pending = scaffold_effect(data, self.heads[job], self.pending[row], self.slots)
            if head is not None:
                self.heads[job] = head
            if pending is not None:
                self.pending[row] = pending
        self.rows[row], flags = scaffold_update(old, data, self.n_lanes, side, late)
        return self.rows[row], int(flags & lane_mask != 0)
