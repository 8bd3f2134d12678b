"""Shared helper of the stream-component unit tests (register slices, demux)."""

from __future__ import annotations


class HoldingSink:
    """One valid/ready output observed once per cycle: collects the transferred beats and checks
    the AXI rule that a beat offered but not taken stays on the output, unchanged, until taken."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.received: list = []
        self.stalled = None  # the beat offered last cycle and not taken

    def step(self, cycle: int, valid: bool, data, ready: bool) -> None:
        if self.stalled is not None:
            assert valid and data == self.stalled, f"cycle {cycle}: {self.name} changed while stalled"
        if valid and ready:
            self.received.append(data)
            self.stalled = None
        elif valid:
            self.stalled = data
