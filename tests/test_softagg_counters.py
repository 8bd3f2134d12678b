"""The software aggregator's counters read from another thread are one snapshot: a frame
counted in PORT0_FRAMES_IN already has its drop or outcome (the accounting identity that
test_driver_faults checks once a run is over held 488 against 487 under load when a late,
reordered datagram was being processed while the counters were read)."""

from __future__ import annotations

import threading

import numpy as np

from wanreduce import wire
from wanreduce.host.softagg import SoftAggregator
from wanreduce.packetize import AGG_HEADER_STRUCT


def _identity_holds(c: dict[str, int]) -> bool:
    return c["PORT0_FRAMES_IN"] == sum(
        v for k, v in c.items() if k.startswith(("PORT0_DROP", "OUTCOME_", "CONTROL_IN")))


def test_counters_read_during_a_batch_are_one_snapshot():
    payload = np.arange(8, dtype="<i4").tobytes()
    row = AGG_HEADER_STRUCT.pack(wire.MAGIC, wire.VERSION, 1, 0, 0, 0, 0, 0, 0, 0, 8, 0) + payload
    with SoftAggregator(slots=8, elements=8, fast=False) as a:
        a.configure(groups={0: [0, 1]}, jobs=[0])
        inside, go_on = threading.Event(), threading.Event()
        orig = a.model.contribute

        def slow_contribute(m):  # the frame is counted in FRAMES_IN, its outcome not yet
            inside.set()
            assert go_on.wait(60)
            return orig(m)

        a.model.contribute = slow_contribute
        worker = threading.Thread(
            target=a.handle_batch, args=(len(row), len(row), ("127.0.0.1", 9), memoryview(row)))
        worker.start()
        assert inside.wait(60)
        read: list[dict[str, int]] = []
        reader = threading.Thread(target=lambda: read.append(a.counters()))
        reader.start()
        reader.join(0.5)  # blocked until the batch is through (or, unguarded, already read)
        go_on.set()
        worker.join(60)
        reader.join(60)
        assert read and _identity_holds(read[0]), read
        assert read[0]["PORT0_FRAMES_IN"] == 1 and read[0]["OUTCOME_AGGREGATED"] == 1
