"""How often one lost contribution is NACKed (host/wan_recovery.py): issue 15 saw up to 80 NACKs
for one chunk at start-up, one requester re-NACKing every ~20 ms for 1.5 s. Its client's SRTT is
the round trip of its *results*, a few milliseconds for a site whose contribution completes the
chunk, so the re-NACK interval (2 x SRTT) was far below the time a NACK and its resend take to
cross the WAN. Now re-NACKs of one (chunk, member) back off exponentially, and once a NACK round
trip to the member was measured, the interval is that estimate."""

import time

import numpy as np
import pytest

from wanreduce.host.chunk_probe import ProbeAnswer
from wanreduce.host.driver import AggregatorClient
from wanreduce.host.softagg import SoftAggregator


class _Window:
    """What ``WanRecovery.missing`` reads of a SendWindow (rows 0-1 in flight)."""

    def __init__(self) -> None:
        self.done = bytearray(2)
        self.held = bytearray(b"\1\1")
        self.last_progress = time.monotonic()

    def rto(self) -> float:
        return 5.0

    def probe_fast(self) -> None:
        pass

    def probe_at_least_every(self, interval: float) -> None:
        pass


@pytest.fixture()
def client():
    with SoftAggregator(slots=64, elements=16, groups=2, jobs=1) as agg:
        agg.configure(groups={0: (0, 1)}, jobs=[0])
        with AggregatorClient(agg.address, sender_id=0, elements_per_packet=16, window=4,
                              rtt=0.002, timeout=20, wan_recovery=True) as c:
            yield c


def test_a_lost_copy_is_not_renacked_at_the_pace_of_a_loopback_srtt(client):
    """Probe answers every 10 ms for 1.5 s show member 1's copy of row 0 lost (its row 1 is
    here: a gap) while our results' SRTT is 10 ms (a site that contributes last). The NACKs for
    it back off: at most log2(1.5 s / 20 ms) + 2 = 8 (before: one per 20 ms, ~75)."""
    c = client
    c.timer.sample(0.01)
    assert c.wan.interval() == pytest.approx(0.02)
    win = _Window()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        c.wan.missing(ProbeAnswer([0, 1], [0b01, 0b11], 0, time.monotonic()), win, job=0,
                      group=0, round_id=0, first=50)
        time.sleep(0.01)
    tries = c.wan._asked[(0, 50, 1)].tries
    assert 4 <= tries <= 8, tries
    assert c.wan.stats.nacks_sent == tries


def test_the_interval_toward_a_member_is_its_measured_nack_round_trip(client):
    """A copy NACKed once and then seen at our aggregator 0.3 s later is a sample of the NACK
    round trip to its member: the next NACKs to that member wait its estimate, not 2 x SRTT."""
    c = client
    c.timer.sample(0.01)
    win = _Window()
    c.wan.missing(ProbeAnswer([0, 1], [0b01, 0b11], 0, time.monotonic()), win, job=0, group=0,
                  round_id=0, first=50)
    assert c.wan.stats.nacks_sent == 1 and c.wan.member_interval(1) == pytest.approx(0.02)
    time.sleep(0.3)
    c.wan.missing(ProbeAnswer([0, 1], [0b11, 0b11], 0, time.monotonic()), win, job=0, group=0,
                  round_id=0, first=50)  # the resend came
    path = c.wan._paths[1]
    assert path.samples == 1 and 0.3 <= path.srtt < 1.0
    assert c.wan.member_interval(1) == pytest.approx(min(path.estimate, 20 / 16))
    assert c.wan.member_interval(1) > 0.3


def test_renacks_still_fit_many_times_in_the_timeout(client):
    """The backoff is capped at timeout / 16 (issue 15's traced failure needed 7 tries on a
    4-hop path at 5 % loss): a NACK that stays unanswered is still re-sent every 1.25 s."""
    c = client
    t0 = 1000.0
    asked = [t for t in np.arange(t0, t0 + 20, 0.01)
             if c.wan._ask(1, [7], job=0, group=0, round_id=0, now=float(t), gap=0.02)]
    assert len(asked) >= 16
    assert max(np.diff(asked)) <= 20 / 16 + 0.011


def test_a_tail_nack_is_asked_again_no_sooner_than_the_rto(client):
    """A member silent for an RTO is NACKed at its first missing chunk (the tail rule), a guess:
    it may not have sent that chunk yet (stalled by a loss of its own). Every receiver used to
    re-ask it at the loopback SRTT's pace, backing off from 20 ms: 7-8 NACKs each in 2 s of
    stall (issue 15: 14-16 NACKs for one lost copy with 4 sites). Now the re-asks wait the RTO
    (0.5 s here), backing off: at most 3 in 2 s."""
    c = client
    c.timer.sample(0.01)
    win = _Window()
    win.last_progress = time.monotonic() - 1.0  # stalled for longer than the RTO
    win.rto = lambda: 0.5
    c.wan._since = time.monotonic() - 1.0  # member 1 silent since the exchange began
    c.wan._exchange = (0, 50)
    end = time.monotonic() + 2.0
    while time.monotonic() < end:  # member 1's row 0 lacking, nothing later of it: the tail
        c.wan.missing(ProbeAnswer([0, 1], [0b01, 0b01], 0, time.monotonic()), win, job=0,
                      group=0, round_id=0, first=50)
        time.sleep(0.01)
    tries = c.wan._asked[(0, 50, 1)].tries
    assert 2 <= tries <= 3, tries
    assert c.wan.stats.nacked_by_gap == 0 and c.wan.stats.nacks_sent == tries
