"""The retransmission timer (host/rtt.py) and the CONTROL client's use of it against slow and
silent aggregators (a software aggregator behind a delaying proxy)."""

from __future__ import annotations

import socket
import time

import pytest

from wanreduce import regs
from wanreduce.host.control import ControlClient, ControlTimeout
from wanreduce.host.faults import FaultProxy, FaultSpec
from wanreduce.host.rtt import RttEstimator
from wanreduce.host.softagg import SoftAggregator


def test_first_sample_and_rfc6298_update():
    t = RttEstimator(1.0, min_rto=0.01, max_rto=60)
    assert t.rto == 1.0 and t.srtt is None
    t.sample(0.2)
    assert t.srtt == 0.2 and t.rttvar == 0.1 and t.rto == pytest.approx(0.2 + 4 * 0.1)
    t.sample(0.4)
    assert t.rttvar == pytest.approx(0.75 * 0.1 + 0.25 * 0.2)
    assert t.srtt == pytest.approx(0.875 * 0.2 + 0.125 * 0.4)
    assert t.rto == pytest.approx(t.srtt + 4 * t.rttvar)


def test_steady_rtt_keeps_min_rto_above_srtt():
    t = RttEstimator(1.0, min_rto=0.05, max_rto=60)
    for _ in range(200):
        t.sample(0.3)
    assert t.srtt == pytest.approx(0.3)
    assert t.rto == pytest.approx(0.3 + 0.05)  # 4 * RTTVAR decayed below the floor


def test_backoff_doubles_until_max_and_a_sample_resets_it():
    t = RttEstimator(0.1, min_rto=0.01, max_rto=0.5)
    seen = []
    for _ in range(6):
        t.expired()
        seen.append(t.rto)
    assert seen == pytest.approx([0.2, 0.4, 0.5, 0.5, 0.5, 0.5])
    t.sample(0.02)
    assert t.backoffs == 0 and t.rto == pytest.approx(0.02 + 4 * 0.01)


def test_a_callers_ceiling_caps_the_backed_off_timeout_not_below_min_rto():
    """``rto_at_most``: one wait's own ceiling (CONTROL: timeout / 8) over the backed-off RTO,
    floored at ``min_rto``; the backoff itself goes on (a wait without the ceiling gets it)."""
    t = RttEstimator(0.05, min_rto=0.01, max_rto=60)
    for _ in range(3):
        t.expired()
    assert t.rto == pytest.approx(0.4)
    assert t.rto_at_most(0.075) == pytest.approx(0.075)
    assert t.rto_at_most(1.0) == pytest.approx(0.4)
    assert t.rto_at_most(0.001) == pytest.approx(0.01)
    assert t.backoffs == 3 and t.rto == pytest.approx(0.4)


@pytest.mark.parametrize(
    "args, message",
    [((0.0,), "initial_rto"), ((1.0,), "max_rto must be >= min_rto"), ((float("nan"),), "initial_rto")],
)
def test_bad_parameters_name_the_field(args, message):
    kw = {"min_rto": 0.5, "max_rto": 0.1} if "max_rto" in message else {"min_rto": 0.01, "max_rto": 1}
    with pytest.raises(ValueError, match=message):
        RttEstimator(*args, **kw)


def _slow_aggregator(delay: float):
    """A software aggregator whose answers come ``delay`` s late (a loaded simulator)."""
    a = SoftAggregator(slots=16).start()
    return a, FaultProxy(a.address, to_client=FaultSpec(delay=delay)).start()


def test_control_adapts_to_a_slow_aggregator():
    """Replies 0.3 s late, timer starting at 0.05 s: the first message is resent while the timer
    backs off (Karn: its late reply is no sample), after that no message is resent."""
    a, px = _slow_aggregator(0.3)
    try:
        with ControlClient(px.address, initial_rto=0.05, min_rto=0.05, timeout=30) as c:
            assert c.read(regs.ID) == regs.CORE_ID
            first = c.resends
            assert first >= 2 and c.timer.samples == 0  # resent; no sample from a resent message
            for _ in range(8):
                assert c.read(regs.ID) == regs.CORE_ID
            assert c.timer.samples >= 7 and c.timer.srtt >= 0.3
            assert c.resends - first <= 1  # the old fixed 0.05 s timer resends every message 5x
    finally:
        px.close()
        a.close()


def test_control_waits_for_an_aggregator_slower_than_one_attempt():
    """The loopback's failure: an answer after 2.5 s is not lost to a 1 s per-attempt timer."""
    a, px = _slow_aggregator(2.5)
    try:
        with ControlClient(px.address) as c:
            t0 = time.monotonic()
            assert c.ping()
            assert time.monotonic() - t0 >= 2.5
    finally:
        px.close()
        a.close()


def test_control_timeout_is_honoured_with_retries():
    """A silent aggregator: resent with backoff, fails no earlier than the caller's timeout."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))  # bound and silent: datagrams vanish without an ICMP error
    try:
        with ControlClient(s.getsockname(), initial_rto=0.05, timeout=0.6) as c:
            t0 = time.monotonic()
            with pytest.raises(ControlTimeout, match=r"did not answer a CONTROL message within .* timeout 0.6 s"):
                c.read(regs.ID)
            elapsed = time.monotonic() - t0
            assert elapsed >= 0.6
            assert elapsed < 0.6 + 10  # loose: a loaded machine wakes late, a missing bound hangs
            # backed off (0.05, then 0.1 capped at timeout / 8 = 0.075 s: 0.05 + 7 x 0.075 > 0.6),
            # not every 50 ms (11-12 resends)
            assert 2 <= c.resends <= 9  # 8 on an idle machine; a late wake-up only lowers it
            got = 0
            s.setblocking(False)
            while True:
                try:
                    s.recv(2048)
                    got += 1
                except BlockingIOError:
                    break
            assert got == c.resends + 1
    finally:
        s.close()
