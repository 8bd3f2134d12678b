"""Reference of the slot-store interface (``hdl/slot_store_signature.py``) for the benches of
every backend: a dict of rows and the golden model's saturating int32 add
(``wanreduce.fixedpoint.saturating_add``), one call per command, in command order."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from wanreduce.fixedpoint import saturating_add
from wanreduce.hdl.slot_store_signature import Op

__all__ = ["SlotStoreModel", "lanes_of", "row_of"]


def lanes_of(value: int, n_lanes: int) -> np.ndarray:
    """W-bit row value -> int32 lanes (lane k in bits 32k+31..32k)."""
    return np.array([(value >> (32 * k)) & 0xFFFFFFFF for k in range(n_lanes)],
                    np.uint32).view(np.int32)


def row_of(lanes: np.ndarray) -> int:
    """int32 lanes -> W-bit row value."""
    return sum(int(v) << (32 * k) for k, v in enumerate(np.asarray(lanes, np.int32).view(np.uint32)))


class SlotStoreModel:
    """Rows of ``width`` bits; ``initial(row)`` gives a row never written (the memory's content)."""

    def __init__(self, width: int, initial: Callable[[int], int]) -> None:
        self.n_lanes = width // 32
        self.initial = initial
        self.rows: dict[int, int] = {}

    def apply(self, op: int, row: int, data: int, lane_mask: int) -> tuple[int, int]:
        """One command; returns the response ``(data, overflow)``."""
        old = self.rows[row] if row in self.rows else self.initial(row)
        if op == Op.READ:
            return old, 0
        if op == Op.WRITE:
            self.rows[row] = data
            return data, 0
        if op != Op.ADD:
            raise ValueError(f"op must be 0..2 (WRITE, ADD, READ), got {op}")
        acc, q = lanes_of(old, self.n_lanes), lanes_of(data, self.n_lanes)
        total, _ = saturating_add(acc, q)
        masked = [k for k in range(self.n_lanes) if lane_mask >> k & 1]
        _, overflow = saturating_add(acc[masked], q[masked])
        self.rows[row] = row_of(total)
        return self.rows[row], int(overflow)
