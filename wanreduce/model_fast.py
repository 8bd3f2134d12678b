"""Fast paths of :meth:`wanreduce.model.AggregatorModel.contribute` for the common cases.

What a software aggregator spends its time on is contributions that start a chunk in a free
(or reusable released) slot or add into their chunk's active slot, with completion and release
— the AGGREGATED outcome. These functions do exactly what ``contribute`` does for those cases,
on the model's own state (slots, job heads, counters), without building ``Message``/``Result``
objects; for every other case (rejects, duplicates, stale, out of window, resent results) they
change nothing and return None, and the caller hands the contribution to ``contribute``.

* :func:`contribute_one` — one contribution (header values + int32 payload);
* :func:`contribute_run` — a run of contributions of one sender to consecutive chunks with one
  tag (what a driver sends as one segmented batch): classified slot by slot first, then the
  payloads are written/added with one NumPy operation per kind for the whole run (the model's
  slot memory is one (S, E) array). Equal, step for step, to :func:`contribute_one` on each in
  order.

They live beside the model because they must equal it: ``tests/test_softagg_fast.py`` runs
random message sequences and batches through both and compares outcomes, results, counters and
state after every step.
"""

from __future__ import annotations

import numpy as np

from wanreduce import wire
from wanreduce.model import SERIAL_HALF, AggregatorModel, Outcome, ReleaseMode, Slot, SlotState

_U32 = 0xFFFFFFFF
_FREE, _ACTIVE, _COMPLETE, _RELEASED = (
    SlotState.FREE, SlotState.ACTIVE, SlotState.COMPLETE, SlotState.RELEASED
)
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _job_and_members(m: AggregatorModel, grp: int, job: int, sender: int):
    """(job entry, group bitmap) when the contribution passes the configuration checks, else
    None (rejects go through ``contribute``)."""
    if job >= m.n_jobs or grp >= m.n_groups or sender >= wire.MAX_SENDERS:
        return None
    J = m.job_table[job]
    members = m.group_table[grp]
    if not J.enabled or not (members >> sender) & 1:
        return None
    return J, members


def _starts(s: Slot, job: int, chunk: int) -> bool:
    """A contribution to ``chunk`` may start in slot ``s``: free, or released and reusable
    (another job's, the same chunk again, or an older one of this job)."""
    st = s.state
    return st is _FREE or (
        st is _RELEASED
        and (s.job_id != job or chunk == s.chunk or ((s.chunk - chunk) & _U32) >= SERIAL_HALF)
    )


def _adds(s: Slot, job, rnd, chunk, grp, scale, count, ses, bit) -> bool | None:
    """True: the contribution adds into ``s`` (its chunk, collecting, tags equal, bit unset);
    False: the slot holds another chunk; None: same chunk but not a plain add (slow path)."""
    if s.state is _FREE or s.job_id != job or s.chunk != chunk:
        return False
    if (
        s.state is not _ACTIVE
        or s.bitmap & bit
        or s.round_id != rnd
        or s.group_id != grp
        or s.scale_exp != scale
        or s.count != count
        or s.session != ses
    ):
        return None
    return True


def _start(s: Slot, job, rnd, chunk, grp, scale, count, ses, bit) -> None:
    s.state = _ACTIVE
    s.job_id, s.round_id, s.chunk = job, rnd, chunk
    s.group_id, s.scale_exp, s.count = grp, scale, count
    s.session, s.bitmap, s.overflow = ses, bit, False


def _release(m: AggregatorModel, J, s: Slot, members: int, out: list) -> None:
    """After an AGGREGATED contribution to ``s``: complete it if every member is in, and
    release (in order: every complete chunk from the head on; on completion: this one)."""
    if s.bitmap != members:
        return
    if m.release != ReleaseMode.IN_ORDER:
        s.state = _RELEASED
        out.append(s)
        m.results_out += 1
        return
    s.state = _COMPLETE
    _walk_head(m, J, out)


def _walk_head(m: AggregatorModel, J, out: list) -> None:
    """In-order release: every complete chunk from the job's head on, in order."""
    slot, base, mask, smask = m.slot, J.base, (1 << J.log2_window) - 1, m.slots - 1
    while True:
        head = J.head
        h = slot[(base + (head & mask)) & smask]
        if h.state is not _COMPLETE or h.chunk != head:
            break
        h.state = _RELEASED
        out.append(h)
        J.head = (head + 1) & _U32
        m.results_out += 1


def _in_window(m: AggregatorModel, J, chunk: int, k: int) -> bool:
    """In-order mode: chunks chunk..chunk+k-1 all at or after the head and before head + W."""
    return m.release != ReleaseMode.IN_ORDER or ((chunk - J.head) & _U32) + k - 1 < J.window


def contribute_one(
    m: AggregatorModel, grp: int, job: int, rnd: int, chunk: int, sender: int, scale: int,
    count: int, ses: int, payload: np.ndarray, scratch: np.ndarray,
) -> list[Slot] | None:
    """``m.contribute`` for one contribution if its outcome is AGGREGATED: returns the slots
    released (their results, in order; maybe none), or None having changed nothing.
    ``scratch``: int64, at least ``count`` long (the saturating add's wide sum)."""
    jm = _job_and_members(m, grp, job, sender)
    if jm is None:
        return None
    J, members = jm
    if not _in_window(m, J, chunk, 1):
        return None
    s = m.slot[(J.base + (chunk & (J.window - 1))) & (m.slots - 1)]
    bit = 1 << sender
    add = _adds(s, job, rnd, chunk, grp, scale, count, ses, bit)
    if add:
        acc = s.data[:count]
        t = scratch[:count]
        np.add(acc, payload, out=t, dtype=np.int64)
        if t.max() > _INT32_MAX or t.min() < _INT32_MIN:
            np.clip(t, _INT32_MIN, _INT32_MAX, out=t)
            s.overflow = True
        acc[:] = t
        s.bitmap |= bit
    elif add is False and _starts(s, job, chunk):
        _start(s, job, rnd, chunk, grp, scale, count, ses, bit)
        d = s.data
        d[:count] = payload
        if count < len(d):
            d[count:] = 0
    else:
        return None
    m.counters[Outcome.AGGREGATED] += 1
    out: list[Slot] = []
    _release(m, J, s, members, out)
    return out


def contribute_run(
    m: AggregatorModel, grp: int, job: int, rnd: int, chunk: int, sender: int, scale: int,
    count: int, ses: int, payloads: np.ndarray,
) -> list[Slot] | None:
    """``contribute_one`` on contributions to chunks ``chunk, chunk + 1, ...`` (one per row of
    ``payloads``, (k, count) int32, k >= 1) in order, if every one of them is AGGREGATED: returns
    the slots released, or None having changed nothing (then go one by one).

    The k chunks fall into k distinct slots (k <= the job's window is required), so the
    outcome of each depends only on the state before the run, and the payload work is one
    NumPy operation per kind (starts, adds) for the whole run.
    """
    jm = _job_and_members(m, grp, job, sender)
    if jm is None:
        return None
    J, members = jm
    k = len(payloads)
    if k > J.window or not _in_window(m, J, chunk, k):
        return None
    bit = 1 << sender
    mask, base, smask, slot = J.window - 1, J.base, m.slots - 1, m.slot
    idx = [(base + ((chunk + i) & mask)) & smask for i in range(k)]
    run = [slot[j] for j in idx]
    kinds = []  # True: add, False: start
    c = chunk
    for s in run:
        add = _adds(s, job, rnd, c, grp, scale, count, ses, bit)
        if add is None or (add is False and not _starts(s, job, c)):
            return None
        kinds.append(add)
        c = (c + 1) & _U32
    data = m.data
    n_add = sum(kinds)
    rows = np.array(idx)
    if n_add < k:  # starts: the payload, zeros past a short count
        st = ~np.array(kinds) if n_add else slice(None)
        st_rows = rows[st]
        data[st_rows, :count] = payloads[st]
        if count < m.elements:
            data[st_rows, count:] = 0
    over = ()
    if n_add:  # adds: int64 sums, saturated, overflow per slot
        ad = np.array(kinds) if n_add < k else slice(None)
        ad_rows = rows[ad]
        t = data[ad_rows, :count].astype(np.int64)
        t += payloads[ad]
        ov = ((t > _INT32_MAX) | (t < _INT32_MIN)).any(axis=1)
        if ov.any():
            np.clip(t, _INT32_MIN, _INT32_MAX, out=t)
            over = set(np.flatnonzero(ov).tolist())  # positions among the adds
        data[ad_rows, :count] = t
    # Slot state, then release. In-order: mark the completed slots, then walk the head once
    # (the k slots are distinct, so this releases what k single steps release, in order).
    out: list[Slot] = []
    in_order = m.release == ReleaseMode.IN_ORDER
    c = chunk
    a = 0
    complete = False
    for s, add in zip(run, kinds, strict=True):
        if add:
            if a in over:
                s.overflow = True
            a += 1
            s.bitmap |= bit
        else:
            _start(s, job, rnd, c, grp, scale, count, ses, bit)
        c = (c + 1) & _U32
        if s.bitmap == members:
            if in_order:
                s.state = _COMPLETE
                complete = True
            else:
                s.state = _RELEASED
                out.append(s)
    if complete:
        _walk_head(m, J, out)
    if not in_order:
        m.results_out += len(out)
    m.counters[Outcome.AGGREGATED] += k
    return out
