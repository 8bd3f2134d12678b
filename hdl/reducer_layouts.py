"""Layouts shared by the reducer's parts (docs/reducer.md, "Parts"): the slot tag, the release
queue entry, and the named check flags the decision registers between its stages (each was a
bit vector read by position before the split).

Defined once here; ``hdl/reducer.py`` (decision), ``hdl/release_queue.py``,
``hdl/result_emitter.py`` and ``hdl/tag_probe.py`` all use them.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Value
from amaranth.lib import data

from .layouts import AggHeaderLayout

__all__ = [
    "FREE", "ACTIVE", "DONE", "OP_NONE", "OP_WRITE", "OP_ADD",
    "HeadChecks", "HdrChecks", "BitmapChecks", "PriorityInputs", "TagChecks",
    "DecisionFlags", "DecisionLate", "DecisionOutcome", "PendingInputs",
    "RECORD_BITS", "DecisionConfig", "RecordSide",
    "bits_for", "forwarded_head_layout", "pack_flags", "record_layout", "release_entry_layout", "slot_tag_layout",
    "store_tag_layout",
]

# Stored slot state. COMPLETE and RELEASED share DONE; the per-slot ``pending`` bit (COMPLETE,
# waiting for in-order release) tells them apart, so a release never writes the tag memory.
FREE, ACTIVE, DONE = 0, 1, 2
# Data operation of a message (decided on its first beat).
OP_NONE, OP_WRITE, OP_ADD = 0, 1, 2


def bits_for(n: int) -> int:
    """Bits to hold 0..n-1 (at least 1)."""
    return max(1, (n - 1).bit_length())


def slot_tag_layout(jobs: int) -> data.StructLayout:
    """A slot's tag: state, the chunk's header fields, the contributor bitmap, beats - 1."""
    return data.StructLayout({
        "state": 2, "job": bits_for(jobs), "round": 32, "chunk": 32, "group": 8,
        "scale": AggHeaderLayout["scale_exp"].shape, "count": 16, "bitmap": 32,
        "session": AggHeaderLayout["session"].shape,
        "nbm1": 17,  # payload beats - 1, so the emitter needs no arithmetic on the tag
    })


RECORD_BITS = 256  # a slot's record in DRAM (docs/large_slots.md, "How a 256-bit record travels")


def record_layout(jobs: int, width: int = RECORD_BITS) -> data.StructLayout:
    """A slot's record in the record store (docs/large_slots.md, "How a 256-bit record travels"):
    its ``tag``, then the last ADD's outcome ``code`` (a ``model.Outcome``) and data ``op`` (a
    ``payload_gate.Decision``: WRITE / ADD / DISCARD), kept in the record because the engine's
    response is the row after the command (the record decision's answer rides in it), ``emit``
    (the ADD released or completed its chunk: its own store responses are the result's rows;
    docs/large_slots.md, "Results from the completing contribution's own ADD responses"), and
    the ``spare`` bits up to ``width``."""
    tag = slot_tag_layout(jobs)
    spare = width - tag.size - 7
    if spare < 0:
        raise ValueError(f"width must be at least {tag.size + 7} (the record of {jobs} jobs), got {width}")
    return data.StructLayout({"tag": tag, "code": 4, "op": 2, "emit": 1, "spare": spare})


# What the record decision (hdl/record_decision.py) takes per command besides the header: the
# configuration's checks of the message, as ``TagDecision``'s inputs of the same names (the
# owner looks them up when it makes the command: the input stages' job).
DecisionConfig = data.StructLayout({
    "members": 32,  # the group's bitmap
    "bit": 32,  # the sender's bit (0: sender_id beyond the bitmap)
    "unconf": 1,  # job or group unconfigured
    "nonmem": 1,  # the sender is not a member of the group
    "in_order": 1,  # in-order release (else on completion)
    "log2_window": range(33),  # the job's window
    "cwrite": 1,  # a single-member group: a first contribution completes
    "nbm1": 17,  # the message's payload beats - 1 (the tag's ``nbm1``)
})

# A record command's side input (the engine's ``side_shape``): the message header and its config.
RecordSide = data.StructLayout({"hdr": AggHeaderLayout, "cfg": DecisionConfig})


def release_entry_layout(jobs: int, slots: int) -> data.StructLayout:
    """A release-queue entry; ``more``: chunks released after ``chunk`` (a run), so the count is
    more + 1."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"job": bits_for(jobs), "chunk": 32, "slot": sb, "more": sb, "resent": 1})


def store_tag_layout(slots: int) -> data.StructLayout:
    """The reducer's slot-store command tag, returned with each response (at most 16 bits,
    ``slot_store_signature.TAG_BITS``): the slot, ``write`` (a chunk's first contribution: the
    sticky overflow restarts), ``emit`` (the response is a row of a result released by this
    contribution), ``read`` (a row read for a queued result), ``last`` (the message's last row)."""
    return data.StructLayout({"slot": (slots - 1).bit_length(), "write": 1, "emit": 1, "read": 1, "last": 1})


# A tag (memory or a pending write) checked against a beat's header and sender bit (stage 0).
TagChecks = data.StructLayout({
    "done": 1,  # state DONE (COMPLETE or RELEASED, told apart by ``pending``)
    "active": 1,  # state ACTIVE
    "same": 1,  # not FREE, same job and chunk
    # round, group, scale, count or session differ: ``mismatch_round`` | ``mismatch`` (the round
    # compare registered on its own, so neither compare tree has the whole 80 bits; the
    # decision ORs them in the LUT that selects the checks)
    "mismatch_round": 1,  # round differs
    "mismatch": 1,  # group, scale, count or session differ
    "dup": 1,  # the sender's bit is already in the bitmap
    "cadd": 1,  # bitmap | bit == members: this contribution completes the chunk
    "older": 1,  # same job, the tag's chunk is ahead of the beat's
})

# A tag's header fields against a beat's header (part of TagChecks, also for the tag stage 1
# may write while the next beat is in stage 0).
HdrChecks = data.StructLayout({"job_eq": 1, "chunk_eq": 1, "back": 1, "mismatch": 1})

# The bitmap checks against the tag stage 1 requests, for both bitmaps it may carry: ``a`` the
# bitmap decided with ``same`` (bm | bit), ``bc`` the other (bit, or the held tag's).
BitmapChecks = data.StructLayout({"dup_a": 1, "cadd_a": 1, "dup_bc": 1, "cadd_bc": 1})

# A beat's chunk against its job's head (computed a cycle ahead, registered).
HeadChecks = data.StructLayout({
    "late": 1,  # chunk - head < 0
    "below_end": 1,  # (chunk - 2**lw) - head < 0: inside the window unless late
    "at_head": 1,  # chunk == head
})

# The decision's inputs in the model's order of checks (the priority chain of stage 1).
PriorityInputs = data.StructLayout({
    "unconf": 1, "nonmem": 1, "oow": 1, "same": 1, "mismatch": 1, "released": 1, "dup": 1,
    "late": 1, "busy": 1, "older": 1,
})

# Stage 1's own flags the decision reads (flip-flops of stage 1 and the configuration).
DecisionFlags = data.StructLayout({
    "valid": 1,  # stage 1 holds a beat
    "first": 1, "last": 1,  # its message's first / last beat
    "adv": 1,  # stage 1 moves on this cycle
    "unconf": 1,  # job or group not configured
    "nonmem": 1,  # the sender is not a member of the group
    "in_order": 1,  # in-order release (else on completion)
    "cwrite": 1,  # a first contribution completes the chunk (single-member group)
    "op_r_nz": 1,  # a later beat: its message's decided op is not OP_NONE
    "queued_r": 1,  # a later beat: its message's release entry goes to the emitter
    "run_nz": 1,  # the in-order release run behind the slot is not empty
})

# Stage 1's pending bit: the slot's bit a cycle ago, and whether the previous decision clears it
# (its release run) or sets it (its own slot); which one happened is fx_c / fx_s (DecisionLate).
PendingInputs = data.StructLayout({"bit": 1, "clr": 1, "set": 1})

# The decision's late inputs, loaded by the previous decision, picking at the last multiplexers.
DecisionLate = data.StructLayout({
    "live": 1,  # the checks are against the tag the previous decision wrote (else stage 0's)
    "fx_c": 1,  # the previous decision completed a chunk at its job's head (a release run)
    "fx_s": 1,  # ... behind the head (set its pending bit)
})

# The decision's outcome (the reducer registers it or acts on it in the decision cycle).
DecisionOutcome = data.StructLayout({
    "op": 2,  # data op: OP_NONE / OP_WRITE / OP_ADD
    "resend": 1,  # RESULT_RESENT: the held result is sent again
    "done": 1,  # the tag written is complete (state DONE)
    "push": 1,  # a release entry is pushed
    "queued": 1,  # ... and goes to the emitter (a resend, or a non-empty run at the head)
    "fxc": 1,  # the effect: completes at its job's head in order (release run, new head)
    "fxs": 1,  # ... behind the head (its pending bit is set)
    "opc_nz": 1,  # stage 1's beat has a data op (first beat: this decision's; else op_r's)
    "push_c": 1,  # stage 2 pushes a command or a marker (the command FIFO's registered push)
})


def pack_flags(layout: data.StructLayout, **flags: Value) -> Value:
    """The one-bit ``flags`` as a value of ``layout`` (every field given, by name)."""
    names = [name for name, _ in layout]
    if set(names) != set(flags):
        raise ValueError(f"flags of {names} needed, got {sorted(flags)}")
    return Cat(*[flags[name] for name in names])


def forwarded_head_layout(job_bits: int, run_bits: int) -> data.StructLayout:
    """The previous decision's effect on its job's head, from registers: it completed a chunk at
    the head (``valid``), of job ``job``, releasing ``run`` chunks behind it; ``cp1`` is its
    chunk + 1, so the new head is ``cp1 + run`` (``HeadCheck``, hdl/head_check.py)."""
    return data.StructLayout({"valid": 1, "job": job_bits, "cp1": 32, "run": run_bits})
