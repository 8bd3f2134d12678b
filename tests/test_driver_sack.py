"""Loss recovery asks the aggregator what it lacks (host/chunk_probe.py, SACK): through a proxy
that drops chosen contributions, each member resends exactly its own lost contributions."""

from __future__ import annotations

import numpy as np
from driver_helpers import golden, run_sites

from wanreduce import wire
from wanreduce.host import driver as drv
from wanreduce.host.faults import FaultProxy
from wanreduce.host.softagg import SoftAggregator
from wanreduce.packetize import AGG_HEADER_INDEX, AGG_HEADER_STRUCT

CHUNKS = 200
LOSER = 1


class DropChosen(FaultProxy):
    """Drops the first transmission of member ``LOSER``'s contributions to ``chunks``."""

    def __init__(self, *a, chunks: set[int], **k) -> None:
        super().__init__(*a, **k)
        self.chunks, self.dropped = chunks, 0

    def _forward(self, direction, via, data, dest) -> None:
        if direction == "up" and len(data) >= wire.AGG_HEADER_BYTES:
            h = AGG_HEADER_STRUCT.unpack_from(data)
            if (h[AGG_HEADER_INDEX["msg_type"]] == wire.MsgType.CONTRIBUTION
                    and h[AGG_HEADER_INDEX["sender_id"]] == LOSER
                    and h[AGG_HEADER_INDEX["chunk"]] in self.chunks
                    and not h[AGG_HEADER_INDEX["flags"]] & wire.Flags.RETRANSMIT):
                self.dropped += 1
                return
        super()._forward(direction, via, data, dest)


def test_each_member_resends_exactly_its_own_lost_contributions():
    """19 contributions of member 1 lost, spread over the window. Before: after a timeout every
    member resent each blocker in turn, one hole per round trip (members 0 and 2 resent about
    as many chunks as member 1: 18 and 39 of 19). Now member 1 resends its 19 (found by probing
    the window), and the others, whose contributions all arrived, resend (almost) nothing;
    results exact."""
    n = 3
    rng = np.random.default_rng(7)
    xs = [rng.uniform(-1, 1, 256 * CHUNKS).astype(np.float32) for _ in range(n)]
    lost = set(range(12, CHUNKS, 10))  # chunk numbers (the agreement chunk comes first)
    kw = {"group_sizes": {0: n}, "job_windows": {0: 512},
          # timers well above the recovery's round trips: what is measured is the SACK path
          "initial_rto": 1.0, "min_rto": 0.2}
    with SoftAggregator(slots=512) as a, DropChosen(a.address, chunks=lost) as px:
        a.configure(groups={0: range(n)}, jobs=[0])
        res, stats, errs = run_sites(px.address, [xs], n_sites=n, client_kw=kw,
                                     call_kw={"max_abs": 4.0})
    assert errs == [None] * n
    want = golden(xs, drv.exponent_for(4.0, n), n, np.float32, 256)
    for r in res:
        np.testing.assert_array_equal(r[0], want)
    assert px.dropped == len(lost)
    me = stats[LOSER]
    assert me.probes >= 1
    # every lost contribution resent; a timer resend of a blocker may have come first
    assert me.sack_resends + me.timer_resends >= len(lost) and me.sack_resends >= len(lost) // 2
    for i in (0, 2):  # lost nothing: at most the odd timer resend of a blocker
        assert stats[i].retransmissions <= len(lost) // 4, stats[i]
