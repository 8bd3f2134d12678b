"""Two concurrent runs on one job id (issue 13): never a silently wrong sum.

Six sites in threads against one software aggregator, two runs of three members on the same
job id: (a) both runs use group 0 and sender ids 0, 1, 2; (b) the runs use different groups and
sender ids. Every site either returns its own run's exact sum or raises a ``DriverError``.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from driver_helpers import FAST, wait_until

from wanreduce import wire
from wanreduce.host.driver import AggregatorClient, DriverError
from wanreduce.host.reference import expected_allreduce
from wanreduce.host.softagg import SoftAggregator
from wanreduce.host.transport import UdpTransport
from wanreduce.model import AggregatorModel, Message, Outcome
from wanreduce.packetize import AGG_HEADER_STRUCT, packetize

ELEMENTS = 256


def _two_runs(groups, senders, sessions, *, size=4 * ELEMENTS, calls=2, seed=0):
    """Run two 3-member runs concurrently; returns per run the sites' (results or errors) and
    the expected sums. ``groups[r]``, ``senders[r]``, ``sessions[r]``: run r's settings."""
    rng = np.random.default_rng(seed)
    xs = [[[rng.standard_normal(size).astype(np.float32) * (1 + 100 * r) for _ in range(3)]
           for _ in range(calls)] for r in range(2)]
    out = [[None] * 3 for _ in range(2)]
    with SoftAggregator(slots=16, elements=ELEMENTS, groups=4, jobs=2) as agg:
        agg.configure(groups={g: s for g, s in zip(groups, senders, strict=True)}, jobs=(0,))
        start = threading.Barrier(6)

        def site(r, i):
            kw = {**FAST, "timeout": 4.0, "max_retries": 8}
            if sessions[r] is not None:
                kw["session"] = sessions[r]
            try:
                with AggregatorClient(agg.address, sender_id=senders[r][i], **kw) as c:
                    start.wait()
                    out[r][i] = [c.allreduce(xs[r][k][i], job=0, group=groups[r], round=k)
                                 for k in range(calls)]
            except DriverError as exc:
                out[r][i] = exc

        threads = [threading.Thread(target=site, args=(r, i)) for r in range(2) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    want = [[expected_allreduce(xs[r][k], elements=ELEMENTS) for k in range(calls)] for r in range(2)]
    return out, want


def _wrong(out, want) -> list[str]:
    """Sites that returned a result other than their own run's exact sum."""
    bad = []
    for r in range(2):
        for i in range(3):
            got = out[r][i]
            if isinstance(got, DriverError):
                continue
            for k, (g, w) in enumerate(zip(got, want[r], strict=True)):
                if not np.array_equal(g, w):
                    bad.append(f"run {r} site {i} call {k}: {np.sum(g != w)} of {g.size} wrong")
    return bad


@pytest.mark.parametrize("seed", [0, 1])
def test_same_ids_different_sessions_never_wrong(seed):
    """(a) identical job, group and sender ids; the runs pass different sessions."""
    out, want = _two_runs([0, 0], [[0, 1, 2], [0, 1, 2]], [1, 2], seed=seed)
    assert _wrong(out, want) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_different_groups_one_job_never_wrong(seed):
    """(b) one job id, different groups and sender ids; the runs pass different sessions."""
    out, want = _two_runs([0, 1], [[0, 1, 2], [3, 4, 5]], [7, 8], seed=seed)
    assert _wrong(out, want) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_different_groups_one_job_default_session_never_wrong(seed):
    """(b) without sessions: the group id in the slot tag already refuses the other run."""
    out, want = _two_runs([0, 1], [[0, 1, 2], [3, 4, 5]], [None, None], seed=seed)
    assert _wrong(out, want) == []


# ---- the golden model, packetize and the driver's session argument ----

def _model():
    mdl = AggregatorModel(slots=4, elements=4, groups=1, jobs=1)
    mdl.set_group(0, 0b11)
    mdl.set_job(0, enabled=True)
    return mdl


def _m(chunk, sender, session, values=(1, 2)):
    return Message(int(wire.MsgType.CONTRIBUTION), 0, 0, 0, 0, chunk, sender, 0, len(values),
                   np.asarray(values, np.int32), session)


def test_model_session_mismatch_and_resend_rule():
    mdl = _model()
    assert mdl.contribute(_m(0, 0, 7))[0] == Outcome.AGGREGATED
    assert mdl.contribute(_m(0, 1, 8, (100, 100)))[0] == Outcome.REJECT_MISMATCH
    assert mdl.slot[0].bitmap == 0b01 and list(mdl.slot[0].data[:2]) == [1, 2]  # untouched
    out, res = mdl.contribute(_m(0, 1, 7))
    assert out == Outcome.AGGREGATED and res[0].session == 7 and list(res[0].payload) == [2, 4]
    assert mdl.contribute(_m(0, 0, 8)) == (Outcome.REJECT_MISMATCH, [])  # no held result for B
    out, res = mdl.contribute(_m(0, 0, 7))
    assert out == Outcome.RESULT_RESENT and res[0].resent and res[0].session == 7


def test_packetize_and_softagg_carry_the_session():
    pk = packetize(np.ones(10, np.float32), exp=0, n_contributors=2, elements_per_packet=4,
                   session=0xBEEF)
    assert list(pk.headers["session"]) == [0xBEEF] * 3
    with SoftAggregator(slots=4, elements=4, groups=1, jobs=1) as agg:
        agg.configure(groups={0: [0]}, jobs=(0,))
        t = UdpTransport(bind=("127.0.0.1", 0))
        try:
            t.send_to(pk.datagram(0), agg.address)
            buf = bytearray(2048)
            assert wait_until(lambda: t.recv_batch([buf]) is not None)
            h = AGG_HEADER_STRUCT.unpack_from(buf)
            assert h[2] == wire.MsgType.RESULT and h[-1] == 0xBEEF
        finally:
            t.close()


@pytest.mark.parametrize("value,env,want", [
    (None, None, 0), (None, "513", 513), (None, "0x10", 16), (9, "513", 9), (65535, None, 65535),
])
def test_client_session_default_and_environment(monkeypatch, value, env, want):
    if env is None:
        monkeypatch.delenv("WANREDUCE_SESSION", raising=False)
    else:
        monkeypatch.setenv("WANREDUCE_SESSION", env)
    with AggregatorClient(("127.0.0.1", 9), sender_id=0, session=value, use_control=False) as c:
        assert c.session == want
        pk = c._packets(np.ones(3, np.float32), 0, 1, 0, 0, 0)
        assert list(pk.headers["session"]) == [want]


@pytest.mark.parametrize("value,env,match", [
    (65536, None, r"^session must be 0\.\.65535, got 65536$"),
    (-1, None, r"^session must be 0\.\.65535, got -1$"),
    ("3", None, r"^session must be 0\.\.65535, got '3'$"),
    (None, "abc", r"^WANREDUCE_SESSION must be an integer 0\.\.65535, got 'abc'$"),
    (None, "70000", r"^WANREDUCE_SESSION must be 0\.\.65535, got 70000$"),
])
def test_client_session_range_errors(monkeypatch, value, env, match):
    if env is None:
        monkeypatch.delenv("WANREDUCE_SESSION", raising=False)
    else:
        monkeypatch.setenv("WANREDUCE_SESSION", env)
    with pytest.raises(ValueError, match=match):
        AggregatorClient(("127.0.0.1", 9), sender_id=0, session=value, use_control=False)


def test_driver_ignores_a_result_of_another_session():
    """A RESULT for the very chunk a client waits for, from the aggregator's own address, but
    with another session (another run's result) is counted and ignored, not taken as the sum."""

    x = [np.full(8, 0.25, np.float32), np.full(8, 0.5, np.float32)]
    # The first chunk every member sends is the agreement's (host/agreement.py, at scale 0):
    # the forged result answers exactly that chunk, in everything but the session.
    E = 64
    out = {}
    with SoftAggregator(slots=4, elements=E, groups=1, jobs=1) as agg:
        agg.configure(groups={0: [0, 1]}, jobs=(0,))
        kw = {**FAST, "elements_per_packet": E, "session": 3}
        c0 = AggregatorClient(agg.address, sender_id=0, **kw)
        c1 = AggregatorClient(agg.address, sender_id=1, **kw)
        try:
            t = threading.Thread(target=lambda: out.setdefault(
                0, c0.allreduce(x[0], job=0, group=0, round=0, max_abs=1.0)))
            t.start()
            assert wait_until(lambda: agg.model.slot[0].bitmap == 0b01)  # c0 contributed
            forged = AGG_HEADER_STRUCT.pack(wire.MAGIC, wire.VERSION, wire.MsgType.RESULT, 0, 0, 0,
                                            0, 0, 0, 0, E, 4) + np.full(E, 999, "<i4").tobytes()
            agg.transport.send_to(forged, c0.transport.address)
            out[1] = c1.allreduce(x[1], job=0, group=0, round=0, max_abs=1.0)
            t.join()
            assert c0.stats.stray == 1  # counted (the exchange's counters reach stats at its end)
        finally:
            c0.close()
            c1.close()
    np.testing.assert_array_equal(out[0], np.full(8, 0.75, np.float32))
    np.testing.assert_array_equal(out[1], out[0])
