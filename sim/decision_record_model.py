"""Python twin of the record decision (``hdl/record_decision.py``): the golden model itself
(``model.AggregatorModel.contribute``) decides; this module only converts between its slot state
and the record layout (``reducer_layouts.record_layout``), and looks up the configuration's
checks a command's side carries (``DecisionConfig``), as tests/test_record_decision.py and the
cocotb bench ``sim/tb_decision_records.py`` need them."""

from __future__ import annotations

from collections.abc import Callable

from wanreduce import wire
from wanreduce.hdl import reducer_layouts as rl
from wanreduce.hdl.layouts import payload_beats
from wanreduce.hdl.payload_gate import Decision
from wanreduce.model import AggregatorModel, Message, Outcome, ReleaseMode, Result, SlotState

__all__ = ["STATE_OF", "DecisionRecordModel", "decision_config", "decision_of", "emits", "pack", "record_bits",
           "side_bits", "tag_fields"]

# the model's slot state as the tag's state and the slot's pending bit (COMPLETE: done, held for
# in-order release; RELEASED: done, not pending)
STATE_OF = {SlotState.FREE: (rl.FREE, 0), SlotState.ACTIVE: (rl.ACTIVE, 0), SlotState.COMPLETE: (rl.DONE, 1),
            SlotState.RELEASED: (rl.DONE, 0)}


def pack(layout, fields: dict) -> int:
    """``fields`` (by name; a nested layout's value an int or a dict) as the bits of ``layout``;
    missing fields 0, each value cut to its field's width (signed ones two's complement)."""
    word = 0
    for name, f in layout:
        value = fields.get(name, 0)
        if isinstance(value, dict):
            value = pack(f.shape, value)
        word |= (int(value) & ((1 << f.width) - 1)) << f.offset
    return word


def tag_fields(am: AggregatorModel, slot: int, width: int) -> dict[str, int]:
    """The model's slot ``slot`` as a tag's fields (``slot_tag_layout``; ``nbm1`` from its count
    at data width ``width``)."""
    s = am.slot[slot]
    return {"state": STATE_OF[s.state][0], "job": s.job_id, "round": s.round_id, "chunk": s.chunk,
            "group": s.group_id, "scale": s.scale_exp, "count": s.count, "bitmap": s.bitmap,
            "session": s.session, "nbm1": payload_beats(s.count, width) - 1}


def record_bits(jobs: int, tag: int | dict, code: int, op: int, spare: int = 0, width: int = rl.RECORD_BITS,
                emit: int = 0) -> int:
    """A record (``record_layout(jobs, width)``) of a ``tag`` (bits or fields), ``code``, ``op``,
    ``spare`` and ``emit``."""
    layout = rl.record_layout(jobs, width)
    return pack(layout, {"tag": tag, "code": code, "op": op, "emit": emit, "spare": spare})


def decision_config(am: AggregatorModel, msg: Message, width: int) -> dict[str, int]:
    """The configuration's checks of ``msg`` (``DecisionConfig``'s fields) from the model's job
    and group tables, as the core's input stages look them up."""
    known = msg.job_id < am.n_jobs and msg.group_id < am.n_groups
    members = am.group_table[msg.group_id] if msg.group_id < am.n_groups else 0
    bit = 1 << msg.sender_id if msg.sender_id < wire.MAX_SENDERS else 0
    job = am.job_table[msg.job_id] if msg.job_id < am.n_jobs else None
    return {"members": members, "bit": bit, "unconf": int(not known or not job.enabled or members == 0),
            "nonmem": int(members & bit == 0), "in_order": int(am.release == ReleaseMode.IN_ORDER),
            "log2_window": job.log2_window if job else 0, "cwrite": int(members == bit),
            "nbm1": payload_beats(msg.element_count, width) - 1}


def side_bits(am: AggregatorModel, msg: Message, width: int) -> int:
    """A record command's side (``RecordSide``): ``msg``'s header and :func:`decision_config`."""
    hdr = {name: getattr(msg, name) for name, _ in rl.AggHeaderLayout}
    return pack(rl.RecordSide, {"hdr": hdr, "cfg": decision_config(am, msg, width)})


def emits(outcome: Outcome, results: list[Result]) -> bool:
    """The record decision's ``emit``: the contribution released or completed its chunk (its own
    store responses are the result's rows)."""
    return outcome == Outcome.AGGREGATED and bool(results)


def decision_of(outcome: Outcome, was_same: bool) -> Decision:
    """The payload gate's decision for a contribution: AGGREGATED onto the chunk the slot held
    (``was_same``) ADD, onto a new one WRITE, any other outcome DISCARD."""
    if outcome != Outcome.AGGREGATED:
        return Decision.DISCARD
    return Decision.ADD if was_same else Decision.WRITE


class DecisionRecordModel:
    """The golden model ``am`` with its slots' records: ``initial(slot)`` the record in memory
    before the run, ``records`` each slot's after its last ADD. :meth:`contribute` is one record
    ADD: the model decides, the record after is the model's slot as a tag (the tag as it was when
    nothing is written) with the outcome's code and decision, ``emit`` when it released or
    completed its chunk. ``sides``: each ADD's side
    (:func:`side_bits`) and ``in_order``: its release mode, as they were when it was made (the
    mode may change between messages)."""

    def __init__(self, am: AggregatorModel, jobs: int, width: int, initial: Callable[[int], int]) -> None:
        self.am, self.jobs, self.width = am, jobs, width
        self.layout = rl.record_layout(jobs)
        self.initial = initial
        self.records: dict[int, int] = {}
        self.sides: list[int] = []
        self.in_order: list[bool] = []

    def record(self, slot: int) -> int:
        """The slot's record now."""
        return self.records[slot] if slot in self.records else self.initial(slot)

    def reset_window(self, job_id: int, head: int) -> None:
        """A window reset of ``job_id`` to ``head``: the model's, and every record of the job's
        region a FREE record (``FreeSweep``'s WRITEs: the tag's state FREE, every other bit 0)."""
        self.am.reset_window(job_id, head)
        job = self.am.job_table[job_id]
        for i in range(job.window):
            self.records[(job.base + i) % self.am.slots] = record_bits(self.jobs, {"state": rl.FREE}, 0, 0)

    def contribute(self, msg: Message) -> tuple[Outcome, Decision, list[Result]]:
        """``msg``'s record ADD on its slot: the model's outcome, the decision, the results it
        released; the slot's record updated."""
        am = self.am
        slot = am.slot_index(am.job_table[msg.job_id], msg.chunk)
        s = am.slot[slot]
        was_same = s.state != SlotState.FREE and s.job_id == msg.job_id and s.chunk == msg.chunk
        self.sides.append(side_bits(am, msg, self.width))
        self.in_order.append(am.release == ReleaseMode.IN_ORDER)
        outcome, results = am.contribute(msg)
        decision = decision_of(outcome, was_same)
        before = self.record(slot)
        f = self.layout
        tag = (before >> f["tag"].offset) & ((1 << f["tag"].width) - 1) if decision == Decision.DISCARD \
            else tag_fields(am, slot, self.width)
        spare = before >> f["spare"].offset
        emit = int(emits(outcome, results))
        self.records[slot] = record_bits(self.jobs, tag, outcome, decision.value, spare, emit=emit)
        return outcome, decision, results
