"""The send window's loss detection on a scripted timeline (host/send_window.py): what is resent
when, with a recording transport and explicit times (no sockets, no clock)."""

from __future__ import annotations

import numpy as np

from wanreduce import wire
from wanreduce.host.chunk_probe import ProbeAnswer
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


def _window(w=N, max_retries=3, sender=None):
    pk = packetize(np.zeros(E * N, np.float32), exp=0, n_contributors=2, elements_per_packet=E)
    timer = RttEstimator(RTO, min_rto=RTO, max_rto=10 * RTO)
    tr = Recorder()
    win = SendWindow(pk, w, tr, ("127.0.0.1", 9), timer, rto_cap=10.0, max_retries=max_retries,
                     now=0.0, sender=sender)
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


# ---- SACK: the aggregator's contributor bitmaps (host/chunk_probe.py answers) ----
ME, OTHER = 1 << 0, 1 << 1  # sender 0 (us) and sender 1


def _stalled(sender=0):
    """Chunks 0..19 sent at t=0, results 0..4 in at 2 ms (min RTT 2 ms, gap 4 ms), then nothing."""
    win, tr, timer = _window(sender=sender)
    win.send_new(0.0)
    tr.take()
    _answer(win, range(5), 0.002)
    assert win.stall() == win.gap()
    return win, tr, timer


def test_a_stall_asks_about_every_chunk_in_flight_and_resends_exactly_our_missing_ones_at_once():
    """Instead of the blocker alone after an RTO and each later hole one round trip later, one
    probe round after a gap of silence covers the whole window: our contributions the
    aggregator lacks (5, 9, 14) go out together at once; those it holds (or lacks only from
    another member: 7) are not resent and not asked about again."""
    win, tr, _ = _stalled()
    gap = win.gap()
    rows, wake = win.probe_due(0.002 + gap / 2)
    assert rows is None and wake == 0.002 + gap  # results just stopped: wait a gap
    rows, _ = win.probe_due(0.002 + gap)
    assert rows == list(range(5, N)) and win.probes == 1
    bitmaps = [OTHER if i in (5, 9, 14) else (ME if i == 7 else ME | OTHER) for i in rows]
    win.probe_answer(ProbeAnswer(rows, bitmaps, head=5, sent_at=0.002 + gap), 0.003 + gap)
    assert tr.take() == [5, 9, 14] and win.sack_resends == 3 and win.retransmissions == 3
    assert win.probe_due(0.004 + gap)[0] is None  # a gap after our resends: not yet
    rows, _ = win.probe_due(0.003 + 3 * gap)
    assert rows == [5, 9, 14]  # only what is not confirmed held
    # no blind resend of the blocker at the recovery pace: that is the timer's (RTO) job now
    win.resend_due(0.003 + 3 * gap)
    assert tr.take() == []


def test_released_chunks_without_a_result_are_resent_once_the_head_passed_them():
    """JOBj_HEAD 9 (read in the same message): 5..8 were released; 5, 7 and 8 have no result
    here: their results may still be on the way (the answer can overtake them). When the next
    answer, asked a gap later, still shows them released and they still have no result, they
    were lost on the way back (too few later results for fast retransmit): resent, only those."""
    win, tr, _ = _stalled()
    _answer(win, [6], 0.003)
    t = 0.003 + win.gap()
    rows, _ = win.probe_due(t)
    assert rows == [5, 7, 8] + list(range(9, N))
    win.probe_answer(ProbeAnswer(rows, [0, 0, 0] + [ME] * (N - 9), head=9, sent_at=t), t + 0.001)
    assert tr.take() == []
    _answer(win, [7], t + 0.0015)  # 7's result was on its way
    t2 = t + 0.001 + 2 * win.gap()
    rows, _ = win.probe_due(t2)
    assert rows == [5, 8]
    win.probe_answer(ProbeAnswer(rows, [0, 0], head=9, sent_at=t2), t2 + 0.001)
    assert tr.take() == [5, 8] and win.sack_resends == 2


def test_a_contribution_sent_just_before_the_question_is_not_taken_as_lost():
    """Chunk 19 sent 1 ms before the probe (less than a gap): the aggregator lacking it says
    nothing yet (it may be on its way); it is asked about again, not resent."""
    win, tr, _ = _window(w=N - 1, sender=0)
    win.send_new(0.0)
    _answer(win, [0], 0.002)
    win.send_new(0.0025)  # chunk 19
    tr.take()
    t = 0.0025 + 0.001
    win.probe_answer(ProbeAnswer([18, 19], [0, 0], head=1, sent_at=t), t + 0.001)
    assert tr.take() == [18]


def test_probe_rounds_back_off_while_they_find_nothing_and_not_without_a_sack():
    """A stall caused by another member (every answer: ours held) is asked about at a gap,
    then 2, 4, 8 gaps (up to the RTO); progress starts over at a gap. Without a sender id
    (no CONTROL) there are no probes."""
    win, tr, _ = _stalled()
    gap, t, spacing = win.gap(), 0.002, []
    for _ in range(4):
        rows, wake = win.probe_due(t)
        if rows is None:
            t = wake
            rows, _ = win.probe_due(t)
        win.probe_answer(ProbeAnswer(rows, [ME] * len(rows), head=5, sent_at=t), t + 0.002)
        spacing.append(t)
    assert tr.take() == [] and win.sack_resends == 0
    assert [round((b - a) / gap) for a, b in zip(spacing, spacing[1:], strict=False)] == [2, 4, 8]
    _answer(win, [5], t + 0.001)
    assert win.probe_due(t + 0.001 + gap)[0] == []  # all held: JOBj_HEAD alone
    assert _stalled(sender=None)[0].probe_due(1.0) == (None, float("inf"))


def test_a_question_awaiting_its_answer_is_not_repeated_until_given_up():
    win, tr, _ = _stalled()
    gap = win.gap()
    t = 0.002 + gap
    assert win.probe_due(t)[0] == list(range(5, N))
    assert win.probe_due(t + 2 * gap)[0] == []  # every row awaits an answer: JOBj_HEAD alone
    win.probe_unanswered([7, 8])  # their message was lost
    assert win.probe_due(t + 6 * gap)[0] == [7, 8]


def test_only_contributions_old_enough_to_judge_are_asked_about_and_head_reads_wait_for_answers():
    """Chunk 19 sent half a gap before the round is left for a later one (a question about it
    could not be judged); with every other row confirmed and a question still unanswered, no
    JOBj_HEAD read is added (the aggregator is asked at the pace it answers)."""
    win, tr, _ = _window(w=N - 1, sender=0)
    win.send_new(0.0)
    _answer(win, [0], 0.002)
    gap = win.gap()
    t = 0.002 + 2 * gap
    win.send_new(t - gap / 2)  # chunk 19
    rows, wake = win.probe_due(t)
    assert rows == list(range(1, N - 1)) and wake > t
    win.probe_answer(ProbeAnswer(rows, [ME] * len(rows), head=1, sent_at=t), t + 0.001)
    t2 = t + 2 * gap
    assert win.probe_due(t2)[0] == [19]
    t3 = t2 + 8 * gap
    assert win.probe_due(t3, busy=True)[0] is None
    assert win.probe_due(t3)[0] == []


def test_a_pause_that_ends_with_nothing_lost_raises_the_probe_floor():
    """No loss on a busy machine: a scheduling pause of 6 ms (longer than the 4 ms gap) is probed
    once, the aggregator had released everything asked about, and the results come: the pause
    was jitter. The probe floor becomes twice it (12 ms), so the next pauses of that size are
    not probed (issue 13: probes were a third of serve's busy time with no loss), and the next
    exchange starts from it; a probe that finds our contribution lost sets it back to 0."""
    win, tr, _ = _window(w=10, sender=0)
    win.send_new(0.0)
    _answer(win, range(5), 0.002)
    tr.take()
    t = 0.002 + win.gap()
    rows, _ = win.probe_due(t)
    assert rows == list(range(5, 10))
    win.probe_answer(ProbeAnswer(rows, [0] * 5, head=10, sent_at=t), t + 0.001)  # all released
    assert tr.take() == []
    _answer(win, range(5, 10), 0.008)  # the pause ended on its own after 6 ms
    assert abs(win.probe_floor - 0.012) < 1e-9 and abs(win.stall() - 0.012) < 1e-9
    win.send_new(0.008)
    tr.take()
    _answer(win, range(10, 15), 0.010)
    assert win.probe_due(0.010 + 0.011)[0] is None  # an 11 ms pause: within the floor
    rows, _ = win.probe_due(0.010 + 0.012)
    assert rows == list(range(15, N))
    later = SendWindow(win.pk, N, tr, ("127.0.0.1", 9), win.timer, rto_cap=10.0, max_retries=3,
                       now=0.0, sender=0, probe_floor=win.probe_floor)
    assert later.stall() == win.stall()  # kept across exchanges (the client passes it on)
    t = 0.010 + 0.012
    win.probe_answer(ProbeAnswer(rows, [OTHER] + [ME | OTHER] * 4, head=15, sent_at=t), t + 0.001)
    assert tr.take() == [15] and win.probe_floor == 0 and win.stall() == win.gap()


def test_a_pause_caused_by_another_members_loss_leaves_the_probe_floor_alone():
    """The answer shows chunks we contributed to still unreleased (another member's contribution
    missing): the pause that follows is a loss elsewhere, not jitter."""
    win, tr, _ = _stalled()
    t = 0.002 + win.gap()
    rows, _ = win.probe_due(t)
    win.probe_answer(ProbeAnswer(rows, [ME] * len(rows), head=5, sent_at=t), t + 0.001)
    _answer(win, range(5, N), 0.030)
    assert win.probe_floor == 0


def test_the_window_timeout_is_capped_by_rto_cap_but_never_below_min_rto():
    """``rto_cap`` bounds a backed-off timeout (a stall is retried before it fails), but a cap
    below the timer's ``min_rto`` does not push the timeout under that floor."""
    pk = packetize(np.zeros(E * N, np.float32), exp=0, n_contributors=2, elements_per_packet=E)
    timer = RttEstimator(RTO, min_rto=RTO, max_rto=100 * RTO)
    for _ in range(5):
        timer.expired()  # backed off to 32 x RTO
    assert timer.rto == 32 * RTO
    capped = SendWindow(pk, N, Recorder(), ("127.0.0.1", 9), timer, rto_cap=4 * RTO,
                        max_retries=3, now=0.0)
    assert capped.rto() == 4 * RTO
    floored = SendWindow(pk, N, Recorder(), ("127.0.0.1", 9), timer, rto_cap=RTO / 10,
                         max_retries=3, now=0.0)
    assert floored.rto() == RTO  # min_rto, not the cap
