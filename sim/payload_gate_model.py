"""Python twin of ``hdl/payload_gate.py``: the commands a :class:`PayloadGate` sends for given
messages, requests and decisions (issue 16, large S step 4), and its counters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from wanreduce.hdl.layouts import beat_lanes, lane_bits, lanes, payload_beats
from wanreduce.hdl.slot_store_signature import EMIT_TAG

__all__ = ["GateCommand", "GateMessage", "GateResult", "expected_commands"]

WRITE, ADD, READ, DISCARD = 0, 1, 2, 3  # Op.WRITE, Op.ADD; Decision.DISCARD
EMIT = 4  # a decision's ``emit`` bit (``decision_layout``): WRITE | EMIT, ...


@dataclass(frozen=True)
class GateMessage:
    """One message: its beats' data, its request (``row``, ``elements``, ``tag``)."""

    data: Sequence[int]
    row: int
    elements: int
    tag: int


@dataclass(frozen=True)
class GateCommand:
    """One slot-store command (``cmd_layout``'s fields)."""

    op: int
    row: int
    data: int
    lanes: int
    tag: int
    more: int


@dataclass
class GateResult:
    commands: list[GateCommand] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("written", "added", "discarded", "mismatches", "orphans"), 0))

    @property
    def error(self) -> bool:
        """The gate's sticky error: a mismatch or an orphan decision."""
        return bool(self.counts["mismatches"] or self.counts["orphans"])


def expected_commands(messages: Sequence[GateMessage], decisions: Sequence[int], width: int,
                      address_bits: int, max_elements: int) -> GateResult:
    """Commands and counters for ``messages`` decided by ``decisions`` (in order; decisions
    beyond the messages are orphans). A message whose beat count is not its elements' is
    drained with no command (a mismatch) whatever its decision. A command's data is its beat's
    with the lanes outside its ``lanes`` zeroed. A decision with ``EMIT`` sets ``EMIT_TAG`` in its
    commands' tag; drained (a mismatch or DISCARD), it READs its chunk's rows with ``EMIT_TAG``."""
    res = GateResult()
    for k, dec in enumerate(decisions):
        if k >= len(messages):
            res.counts["orphans"] += 1
            continue
        msg = messages[k]
        n = len(msg.data)
        emit, dec = bool(dec & EMIT), dec & 3
        tag = msg.tag | (EMIT_TAG if emit else 0)
        ok = msg.elements <= max_elements and n == -(-msg.elements // lanes(width))
        if not ok:
            res.counts["mismatches"] += 1
        else:
            res.counts[{WRITE: "written", ADD: "added", DISCARD: "discarded"}[dec]] += 1
        if ok and dec != DISCARD:
            for b, word in enumerate(msg.data):
                on = beat_lanes(msg.elements, b, width)  # a short last beat's other lanes go out as 0
                res.commands.append(GateCommand(dec, (msg.row + b) % (1 << address_bits), word & lane_bits(on, width),
                                                on, tag, int(b != n - 1)))
        elif emit:  # the awaited rows always come
            reads = payload_beats(min(msg.elements, max_elements), width)
            res.commands += [GateCommand(READ, (msg.row + b) % (1 << address_bits), 0, (1 << lanes(width)) - 1, tag,
                                         int(b != reads - 1)) for b in range(reads)]
    return res
