"""Fast path of :meth:`wanreduce.model.AggregatorModel.contribute` for the common case.

What a software aggregator spends its time on is contributions that start a chunk in a free
(or reusable released) slot or add into their chunk's active slot, with completion and release
— the AGGREGATED outcome. :func:`contribute_run` does exactly what ``contribute`` does for
those cases, on the model's own state arrays (``AggregatorModel.tags`` and ``data``: one row per
slot), for a run of one sender's contributions to consecutive chunks with one tag (what a driver
sends as one segmented batch; a single contribution is a run of one), with a fixed number of
NumPy operations per run and no Python per slot: classification, payload writes/adds, slot
state, completion and the in-order head walk are each one vectorised step. For every other
case (rejects, duplicates, stale, out of window, resent results) it changes nothing and returns
None, and the caller hands the contributions to ``contribute`` one by one.

It lives beside the model because it must equal it: ``tests/test_softagg_fast.py`` runs random
message sequences and batches through both and compares outcomes, results, counters and state
after every step.
"""

from __future__ import annotations

import numpy as np

from wanreduce import wire
from wanreduce.model import SERIAL_HALF, AggregatorModel, Outcome, ReleaseMode, SlotState, Tag

_U32 = 0xFFFFFFFF
_FREE, _ACTIVE, _COMPLETE, _RELEASED = (int(s) for s in SlotState)
_STATE, _CHUNK, _BITMAP, _OVERFLOW, _JOB = (int(t) for t in (Tag.STATE, Tag.CHUNK, Tag.BITMAP,
                                                              Tag.OVERFLOW, Tag.JOB))
_KEY = slice(int(Tag.JOB), int(Tag.SESSION) + 1)  # the chunk's tag: job, round, group, ..., session
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_NO_SLOTS = np.zeros(0, np.intp)


def _walk_head(m: AggregatorModel, J, block: int) -> list[np.ndarray]:
    """In-order release: every complete chunk from the job's head on, in order, marked
    RELEASED; returns their slot rows (in pieces). One scalar look at the head's slot when
    nothing is released; else blocks of head positions (the first ``block`` long), doubling
    while every one was released."""
    tags, W, smask, base = m.tags, J.window, m.slots - 1, J.base
    mask = W - 1
    released = []
    while True:
        head = J.head
        r = (base + (head & mask)) & smask
        if tags[r, _STATE] != _COMPLETE or tags[r, _CHUNK] != head:
            return released
        block = min(W, block)
        heads = np.arange(head, head + block, dtype=np.int64) & _U32
        rows = (base + (heads & mask)) & smask
        t = tags[rows]
        ok = (t[:, _STATE] == _COMPLETE) & (t[:, _CHUNK] == heads)
        n = block if ok.all() else int(ok.argmin())
        tags[rows[:n], _STATE] = _RELEASED
        released.append(rows[:n])
        J.head = (head + n) & _U32
        if n < block or block == W:  # a full window released: its slots are RELEASED now
            return released
        block *= 2


def contribute_run(
    m: AggregatorModel, grp: int, job: int, rnd: int, chunk: int, sender: int, scale: int,
    count: int, ses: int, payloads: np.ndarray,
) -> np.ndarray | None:
    """``m.contribute`` on contributions to chunks ``chunk, chunk + 1, ...`` (one per row of
    ``payloads``, (k, count) int32, k >= 1) in order, if every one of them is AGGREGATED:
    returns the slot rows released (their results, in order; maybe none), or None having
    changed nothing (then go one by one).

    The k chunks fall into k distinct slots (k <= the job's window is required), so the
    outcome of each depends only on the state before the run and the result equals k single
    steps: a step changes only its own slot and releases only complete slots, in head order.
    """
    if job >= m.n_jobs or grp >= m.n_groups or sender >= wire.MAX_SENDERS:
        return None
    J = m.job_table[job]
    members = m.group_table[grp]
    if not J.enabled or not (members >> sender) & 1:
        return None
    k, W, S = len(payloads), J.window, m.slots
    in_order = m.release == ReleaseMode.IN_ORDER
    if k > W or (in_order and ((chunk - J.head) & _U32) + k - 1 >= W):
        return None  # out of window, late, or more chunks than slots
    bit = 1 << sender
    chunks = np.arange(chunk, chunk + k, dtype=np.int64)
    if chunk + k > _U32:
        chunks &= _U32
    r0 = (J.base + (chunk & (W - 1))) & (S - 1)
    if (chunk & (W - 1)) + k <= W and r0 + k <= S:
        rows = slice(r0, r0 + k)  # consecutive slots: views and copies, no gathers
    else:
        rows = (J.base + (chunks & (W - 1))) & (S - 1)
    tags, data = m.tags, m.data
    t = tags[rows]
    state, held = t[:, _STATE], t[:, _CHUNK]
    # A slot holding one of these chunks (not free): the contribution adds into it if it is
    # collecting, with an equal tag and without our bit; anything else there (duplicate,
    # mismatch, complete, released: resent) is not AGGREGATED.
    here = held == chunks
    add = None
    if here.any():
        add = (
            (state == _ACTIVE) & ((t[:, _BITMAP] & bit) == 0)
            & (t[:, _KEY] == (job, rnd, grp, scale, count, ses)).all(axis=1)
        )
        if here.all() and add.all():  # every one adds (the usual second member on)
            n_add = k
        else:
            same = here & (state != _FREE) & (t[:, _JOB] == job)
            add &= same
            if (same != add).any():
                return None
            n_add = int(np.count_nonzero(add))
    if add is None or n_add < k:
        # Every other slot must take a start: free, or released holding another job's chunk
        # or an older one of this job.
        start = (state == _FREE) | (
            (state == _RELEASED)
            & ((t[:, _JOB] != job) | (((held - chunks) & _U32) >= SERIAL_HALF))
        )
        if add is None:
            if not start.all():
                return None
            n_add = 0
        elif not (start | add).all():
            return None
    mixed = 0 < n_add < k
    if mixed and isinstance(rows, slice):
        rows = np.arange(rows.start, rows.stop)
    if n_add < k:  # starts: the payload, zeros past a short count; the new chunk's tag
        st = ~add if mixed else slice(None)
        st_rows = rows[st] if mixed else rows
        data[st_rows, :count] = payloads[st]
        if count < m.elements:
            data[st_rows, count:] = 0
        tags[st_rows] = (_ACTIVE, 0, bit, 0, job, rnd, grp, scale, count, ses)
        tags[st_rows, _CHUNK] = chunks[st]
    if n_add:  # adds: int64 sums, saturated, overflow per slot
        ad = add if mixed else slice(None)
        ad_rows = rows[ad] if mixed else rows
        s = np.add(data[ad_rows, :count], payloads[ad], dtype=np.int64)
        if s.max() > _INT32_MAX or s.min() < _INT32_MIN:
            ov = ((s > _INT32_MAX) | (s < _INT32_MIN)).any(axis=1)
            np.clip(s, _INT32_MIN, _INT32_MAX, out=s)
            tags[ad_rows, _OVERFLOW] |= ov
        data[ad_rows, :count] = s
        tags[ad_rows, _BITMAP] |= bit
    m.counters[Outcome.AGGREGATED] += k
    # Completion: a start completes only a one-member group (ours); an add when the bitmap is full.
    if n_add:
        done = tags[rows, _BITMAP] == members
        all_done = bool(done.all())
    else:
        all_done = bit == members
        done = None
    if not all_done and (done is None or not done.any()):
        return _NO_SLOTS
    if isinstance(rows, slice):
        rows = np.arange(rows.start, rows.stop)
    done_rows = rows if all_done else rows[done]
    if not in_order:  # released as they complete, in run order
        tags[done_rows, _STATE] = _RELEASED
        m.results_out += len(done_rows)
        return done_rows
    if all_done and chunk == J.head:  # the run itself is next: released at once
        tags[rows, _STATE] = _RELEASED
        J.head = (chunk + k) & _U32
        parts = [rows, *_walk_head(m, J, k)]
    else:
        tags[done_rows, _STATE] = _COMPLETE
        parts = _walk_head(m, J, k)
    out = parts[0] if len(parts) == 1 else np.concatenate(parts or [_NO_SLOTS])
    m.results_out += len(out)
    return out
