"""Python twin of ``hdl/record_modify_scaffold.py`` (the engine's test record modify): the
reference the engine's benches check a ``ScaffoldRecordModify`` engine against, one call per
command, in command order (as ``SlotStoreModel`` is for the sums). With ``jobs`` it also holds
the ``DecisionState`` the modify's late operand comes from (each job's head, each slot's
pending bit) and applies each ADD's effect to it."""

from __future__ import annotations

from collections.abc import Callable

from wanreduce.hdl.decision_state import CHUNK_BITS, run_step
from wanreduce.hdl.slot_store_signature import Op

from .slot_store_model import SlotStoreModel

__all__ = ["RecordModel", "first_step_reach", "fold32", "region_slot", "release_parts", "release_run", "scaffold_effect", "scaffold_update"]

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
    """A non-release ADD's effect on the state: the job's new head ``(chunk, slot)`` (None:
    unchanged) and the slot's new pending bit (None: unchanged), from the data's field 0 (bit 0:
    advance, bit 1: keep the pending bit)."""
    chunk, slot = head
    new_head = ((chunk + 1 + pending) % (1 << CHUNK_BITS), (slot + 1) % slots) if data & 1 else None
    return new_head, None if data & 2 else 1 - pending


def region_slot(start: int, k: int, slots: int, region: tuple[int, int] | None = None) -> int:
    """The slot ``k`` after ``start`` in region order (``region`` = (base, window): wrapping at
    its end and at S; None: the whole ring)."""
    base, window = region or (0, slots)
    return (base + (start - base + k) % window) % slots


def release_run(pending: list[int], start: int, region: tuple[int, int] | None = None) -> int:
    """The run of pending slots right behind ``start`` (in its ``region``, default the whole
    ring, wrapping at its end; ``start``'s own bit counts as clear, so the run stops there at the
    latest): what ``PendingWords``' RELEASE finds."""
    slots, run = len(pending), 0
    window = region[1] if region else slots
    while run < window - 1 and pending[region_slot(start, 1 + run, slots, region)]:
        run += 1
    return run


def first_step_reach(start: int, slots: int, region: tuple[int, int] | None = None) -> int:
    """How far ``PendingWords``' first scan step from the slot after ``start`` sees (its
    ``reach``: a run this long or longer is not found in that step): the slot after the last word
    it reads (the start's word and the next one of the region, one word where both fall in one
    bank at the region's wrap), in region order from that slot; the whole region if one word
    holds it. The hardware's word geometry, modelled."""
    base, window = region or (0, slots)
    wbits = min(64, slots)
    words, first = slots // wbits, region_slot(start, 1, slots, region)
    whole, w_base, w_last = window == slots, base // wbits, region_slot(base, window - 1, slots, region) // wbits

    def next_word(w: int) -> int:
        return w_base if not whole and w == w_last else (w + 1) % words

    wa = first // wbits
    wb = next_word(wa)
    if wa == wb:
        return window
    last = wb if words >= 2 and wa % 2 != wb % 2 else wa
    past = base if not whole and last == w_last else (last + 1) % words * wbits
    return (past - first) % window or window  # 0: the step saw the whole region (the run found)


def release_parts(head: tuple[int, int], run: int, slots: int,
                  region: tuple[int, int] | None = None) -> tuple[int, list[tuple[int, int, int, int]]]:
    """A release at ``head`` (chunk, slot) of a ``run`` of pending slots behind it, as
    ``DecisionState`` does it: the candidate's ``late.run`` (the first part: the run as far as
    the first scan step saw it, :func:`first_step_reach`, at most ``run_step``) and the released
    parts in order, each (head chunk, head slot after it, start, run: 1 + run chunks from
    start); the rest of the run, if any, is a second part from the first part's head; slots
    wrap in ``region`` (base, window; default the whole ring)."""
    step, (chunk, start) = run_step(slots), head
    reach = first_step_reach(start, slots, region)
    first = min(run if run < reach else reach, step)
    parts, done = [], 0
    for part_start, part_run in ((start, first), (region_slot(start, 1 + first, slots, region), run - first - 1)):
        if part_run < 0:
            break
        done += 1 + part_run
        parts.append(((chunk + done) % (1 << CHUNK_BITS), region_slot(start, done, slots, region), part_start, part_run))
    return first, parts


class RecordModel(SlotStoreModel):
    """Records of ``width`` bits; WRITE stores, READ returns, ADD applies :func:`scaffold_update`
    (with the command's ``side``, 0 without one). With ``jobs``: the job is the side's low bits,
    the slot the row (``slots`` of them); each ADD's late operand is the job's head, the slot's
    pending bit and (a release) the run behind the head (packed as ``late_layout``). An ADD with
    the side's bit ``release_bit`` set releases at the head (the run's pending bits cleared, the
    head advanced by 1 + run; recorded in ``released`` as (job, head chunk, head slot, start,
    run)), any other ADD has the effect :func:`scaffold_effect`. ``regions`` ((base, log2 window)
    per job, as ``DecisionState(regions=True)``'s ``region`` inputs): runs wrap in the job's
    region, a head's slot is its chunk's there (the state derives it), and :meth:`reset` is the
    window reset."""

    def __init__(self, width: int, initial: Callable[[int], int], *, jobs: int | None = None,
                 slots: int = 0, release_bit: int | None = None, regions: list[tuple[int, int]] | None = None) -> None:
        super().__init__(width, initial)
        self.jobs, self.slots, self.release_bit = jobs, slots, release_bit
        self.regions = regions
        self.heads = [(0, 0)] * (jobs or 0)  # (chunk, slot) per job
        self.pending = [0] * slots
        self.released: list[tuple[int, int, int, int, int]] = []

    def late(self, job: int, slot: int, run: int = 0) -> int:
        """The late operand's bits (``late_layout``: head.chunk, head.slot, pending, run)."""
        chunk, head_slot = self.heads[job]
        sb = (self.slots - 1).bit_length()
        return chunk | head_slot << CHUNK_BITS | (self.pending[slot] | run << 1) << (CHUNK_BITS + sb)

    def region(self, job: int) -> tuple[int, int] | None:
        """The job's region as (base, window), None without ``regions`` (the whole ring)."""
        return None if self.regions is None else (self.regions[job][0], 1 << self.regions[job][1])

    def _head(self, job: int, chunk: int, slot: int) -> tuple[int, int]:
        """A new head for ``job``: with regions its slot is the chunk's in the region."""
        region = self.region(job)
        return (chunk, slot) if region is None else (chunk, region_slot(region[0], chunk, self.slots, region))

    def reset(self, job: int, chunk: int) -> None:
        """The window reset: the job's region's pending bits cleared, its head ``chunk``."""
        region = self.region(job)
        for k in range(region[1]):
            self.pending[region_slot(region[0], k, self.slots, region)] = 0
        self.heads[job] = self._head(job, chunk, 0)

    def _release(self, job: int, run: int) -> None:
        """The job's head chunk completes: the ``run`` behind it released."""
        start, region = self.heads[job][1], self.region(job)
        for k in range(run):
            self.pending[region_slot(start, 1 + k, self.slots, region)] = 0
        parts = release_parts(self.heads[job], run, self.slots, region)[1]
        self.heads[job] = self._head(job, *parts[-1][:2])
        self.released += [(job, *part) for part in parts]

    def apply(self, op: int, row: int, data: int, lane_mask: int, side: int = 0) -> tuple[int, int]:
        """One command; returns the response ``(data, overflow)``."""
        if op != Op.ADD:
            return super().apply(op, row, data, lane_mask)
        old = self.rows[row] if row in self.rows else self.initial(row)
        late = 0
        if self.jobs:
            job = side % self.jobs
            if self.release_bit is not None and side >> self.release_bit & 1:
                run = release_run(self.pending, self.heads[job][1], self.region(job))
                late = self.late(job, row, release_parts(self.heads[job], run, self.slots, self.region(job))[0])
                self._release(job, run)
            else:
                late = self.late(job, row)
                head, pending = scaffold_effect(data, self.heads[job], self.pending[row], self.slots)
                if head is not None:
                    self.heads[job] = self._head(job, *head)
                if pending is not None:
                    self.pending[row] = pending
        self.rows[row], flags = scaffold_update(old, data, self.n_lanes, side, late)
        return self.rows[row], int(flags & lane_mask != 0)
