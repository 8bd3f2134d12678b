"""The send window's loss detection on a scripted timeline (host/send_window.py): what is resent
when, with a recording transport and explicit times (no sockets, no clock)."""

from __future__ import annotations

import numpy as np

from wanreduce import wire
from wanreduce.host.rtt import RttEstimator
from wanreduce.host.send_window import DUPTHRESH, SendWindow
from wanreduce.packetize import AGG_HEADER_STRUCT, packetize

E, N = 4, 20
RTO = 0.1


class Recorder:
    """Stands in for UdpTransport: records the chunk numbers of every datagram and the calls."""

    def __init__(self) -> None:
        self.gso = True
        self.chunks: list[int] = []
        self.calls = 0

    def _record(self, view, seg: int) -> None:
        self.calls += 1
        b = bytes(view)
        for off in range(0, len(b), seg):
            self.chunks.append(AGG_HEADER_STRUCT.unpack_from(b, off)[7])

    def send_segments(self, view, seg, dest) -> None:
        self._record(view, seg)

    def send_to(self, view, dest) -> bool:
        self._record(view, len(view))
        return True

    def take(self) -> list[int]:
        out, self.chunks = self.chunks, []
        return out


def _window(w=N, max_retries=3):
    pk = packetize(np.zeros(E * N, np.float32), exp=0, n_contributors=2, elements_per_packet=E)
    timer = RttEstimator(RTO, min_rto=RTO, max_rto=10 * RTO)
    tr = Recorder()
    win = SendWindow(pk, w, tr, ("127.0.0.1", 9), timer, rto_cap=10.0, max_retries=max_retries,
                     now=0.0)
    return win, tr, timer


def _answer(win, chunks, t):
    for i in chunks:
        win.complete(i, t)
    win.progressed(t)


def test_new_chunks_go_in_one_segmented_send():
    win, tr, _ = _window()
    win.send_new(0.0)
    assert tr.take() == list(range(N)) and tr.calls == 1


def test_a_stall_resends_only_the_blocking_chunk_then_recovers_at_round_trip_pace():
    """In-order results stop at chunk 5: after an RTO only chunk 5 is resent (not 6..19); the
    burst it unblocks stops at 12: chunk 12 is resent after the recovery gap, not an RTO."""
    win, tr, timer = _window()
    win.send_new(0.0)
    tr.take()
    _answer(win, range(5), 0.002)  # round trips of 2 ms
    assert timer.min_rtt == 0.002
    wake, over = win.resend_due(0.05)
    assert tr.take() == [] and over is None and wake > 0.05  # within the RTO: nothing
    _, over = win.resend_due(0.002 + timer.rto + 0.001)
    assert tr.take() == [5] and over is None
    assert win.timer_resends == 1 and win.recover == N
    _answer(win, range(5, 12), 0.11)
    gap = win.gap()
    assert gap < RTO / 10
    win.resend_due(0.11 + gap / 2)
    assert tr.take() == []
    win.resend_due(0.11 + gap + 1e-6)
    assert tr.take() == [12] and win.recovery_resends == 1


def test_lost_result_below_later_results_is_resent_at_once():
    """Results 0..4 and 6..8 arrived, 5 did not: a lost result (in-order release sent 5
    before 6), resent as soon as DUPTHRESH later results are in, without any timer."""
    win, tr, _ = _window()
    win.send_new(0.0)
    tr.take()
    _answer(win, [0, 1, 2, 3, 4, 6, 7], 0.002)
    assert tr.take() == []  # 2 later results: may be reordering
    assert DUPTHRESH == 3
    _answer(win, [8], 0.003)
    assert tr.take() == [5] and win.fast_resends == 1
    _answer(win, [9, 10], 0.004)
    assert tr.take() == []  # once


def test_retries_count_only_without_progress():
    """A blocker resent while results keep arriving never exhausts max_retries; with no new
    result at all it does, once its resends have backed off to the RTO (the quick paced ones
    of recovery do not count)."""
    win, tr, _ = _window(max_retries=2)
    win.send_new(0.0)
    _answer(win, [0], 0.001)
    t, over = 0.001, None
    for _ in range(60):
        wake, over = win.resend_due(t)
        if over is not None:
            break
        t = wake + 1e-6
    assert over == 1 and win.timer_resends == 2 and win.retransmissions > 2

    win, tr, _ = _window(max_retries=2)
    win.send_new(0.0)
    t = 0.0
    for k in range(N - 1):  # every stall ends with a new result: never over the limit
        wake, over = win.resend_due(t)
        assert over is None
        t = wake + 1e-6
        _, over = win.resend_due(t)  # the stall: the blocker is resent
        assert over is None
        t += 0.001
        _answer(win, [k], t)
    assert win.timer_resends >= 1 and win.retransmissions >= N - 1 and win.remaining == 1


def test_resent_chunks_and_flights_held_up_by_our_resends_give_no_sample():
    """Karn's rule, and one sample per flight: only the timed chunk, never after a resend."""
    win, tr, timer = _window(w=4)
    win.send_new(0.0)  # chunks 0..3, 0 timed
    _answer(win, [0, 1, 2, 3], 0.004)
    assert timer.samples == 1 and timer.srtt == 0.004
    win.send_new(0.004)  # 4..7, 4 timed
    win.resend_due(0.004 + 2 * RTO)  # stall: 4 resent
    _answer(win, [4, 5, 6, 7], 0.25)
    assert timer.samples == 1  # 4 was resent
    win.send_new(0.25)  # 8..11, 8 timed, sent after our last resend
    _answer(win, [8, 9, 10, 11], 0.253)
    assert timer.samples == 2


def test_recovery_resends_share_segmented_sends():
    win, tr, _ = _window()
    win.send_new(0.0)
    tr.take()
    tr.calls = 0
    _answer(win, [0, 4, 5, 6, 7, 8, 9, 10], 0.002)  # results 1, 2, 3 lost
    assert tr.take() == [1, 2, 3] and tr.calls == 1
    assert all(win.pk.buf[i, wire.FIELD["flags"].agg_offset] & wire.Flags.RETRANSMIT for i in (1, 2, 3))
