"""Python twin of ``hdl/record_modify_scaffold.py`` (the engine's test record modify): the
reference the engine's benches check a ``ScaffoldRecordModify`` engine against, one call per
command, in command order (as ``SlotStoreModel`` is for the sums)."""

from __future__ import annotations

from wanreduce.hdl.slot_store_signature import Op

from .slot_store_model import SlotStoreModel

__all__ = ["RecordModel", "scaffold_update"]

MASK = 0xFFFFFFFF


def scaffold_update(before: int, data: int, n_fields: int, side: int = 0) -> tuple[int, int]:
    """ADD: the record after, and the per-field flags (bit 1: the bitmaps share a bit);
    ``side``: the command's side input (the XOR of its 32-bit words is the count's extra
    increment)."""
    a = [(before >> (32 * k)) & MASK for k in range(n_fields)]
    b = [(data >> (32 * k)) & MASK for k in range(n_fields)]
    folded = 0
    while side:
        folded, side = folded ^ (side & MASK), side >> 32
    out = [(a[0] + 1 + folded) & MASK]
    if n_fields > 1:
        out.append(a[1] | b[1])
    if n_fields > 2:
        out.append(b[2])
    if n_fields > 3:
        out.append(max(a[3], b[3]))
    out += [a[k] ^ b[k] for k in range(4, n_fields)]
    flags = int(n_fields > 1 and a[1] & b[1] != 0) << 1
    return sum(v << (32 * k) for k, v in enumerate(out)), flags


class RecordModel(SlotStoreModel):
    """Records of ``width`` bits; WRITE stores, READ returns, ADD applies :func:`scaffold_update`
    (with the command's ``side``, 0 without one)."""

    def apply(self, op: int, row: int, data: int, lane_mask: int, side: int = 0) -> tuple[int, int]:
        """One command; returns the response ``(data, overflow)``."""
        if op != Op.ADD:
            return super().apply(op, row, data, lane_mask)
        old = self.rows[row] if row in self.rows else self.initial(row)
        self.rows[row], flags = scaffold_update(old, data, self.n_lanes, side)
        return self.rows[row], int(flags & lane_mask != 0)
