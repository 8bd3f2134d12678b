"""Driver through a lossy / duplicating / reordering UDP proxy: results stay exact."""

from __future__ import annotations

import numpy as np
import pytest
from driver_helpers import golden, run_sites

from wanreduce.host import agreement
from wanreduce.host import driver as drv
from wanreduce.host.faults import FaultProxy, FaultSpec
from wanreduce.host.reference import agreed_exponent
from wanreduce.host.softagg import SoftAggregator

CASES = {
    "loss1": FaultSpec(loss=0.01),
    "loss10": FaultSpec(loss=0.10),
    "dup": FaultSpec(duplicate=0.2),
    "reorder": FaultSpec(reorder=0.2),
    "all": FaultSpec(loss=0.05, duplicate=0.1, reorder=0.1),
}


@pytest.mark.parametrize("direction", ["up", "down", "both"])
@pytest.mark.parametrize("case", list(CASES))
def test_faults_results_exact(case, direction):
    spec = CASES[case]
    n = 3
    rng = np.random.default_rng(len(case) * 7 + len(direction))
    xs = [rng.standard_normal(40000).astype(np.float32) for _ in range(n)]
    up = spec if direction in ("up", "both") else FaultSpec()
    down = spec if direction in ("down", "both") else FaultSpec()
    with SoftAggregator(slots=64) as a, FaultProxy(
        a.address, to_aggregator=up, to_client=down, seed=sum(map(ord, case + direction))
    ) as px:
        a.configure(groups={0: range(n)}, jobs=[0])
        res, stats, errs = run_sites(
            px.address, [xs], n_sites=n, client_kw={"group_sizes": {0: n}, "job_windows": {0: 64}}
        )
        assert errs == [None] * n
        want = golden(xs, agreed_exponent(xs), n, np.float32, 256)
        for r in res:
            np.testing.assert_array_equal(r[0], want)
        lost = px.counts["up_lost"] + px.counts["down_lost"]
        if lost:
            assert sum(s.retransmissions for s in stats) >= 1
        if spec.loss >= 0.05:
            assert lost > 0
        if spec.duplicate and direction != "down":
            assert a.counters()["OUTCOME_DUPLICATE"] >= 1
        c = a.counters()
        assert c["PORT0_FRAMES_IN"] == sum(
            v for k, v in c.items() if k.startswith(("PORT0_DROP", "OUTCOME_", "CONTROL_IN"))
        )
        assert c["OUTCOME_AGGREGATED"] == n * (-(-40000 // 256) + -(-agreement.LANES // 256))


def test_ten_percent_loss_eight_sites_two_rounds():
    n = 8
    rng = np.random.default_rng(99)
    calls = [[rng.standard_normal(2000).astype(np.float16) for _ in range(n)] for _ in range(2)]
    spec = FaultSpec(loss=0.1)
    with SoftAggregator(slots=32) as a, FaultProxy(a.address, to_aggregator=spec,
                                                   to_client=spec, seed=5) as px:
        a.configure(groups={0: range(n)}, jobs=[0])
        res, stats, errs = run_sites(px.address, calls, n_sites=n,
                                     client_kw={"group_sizes": {0: n}, "job_windows": {0: 32}})
        assert errs == [None] * n
        for k, xs in enumerate(calls):
            want = golden(xs, agreed_exponent(xs), n, np.float16, 256)
            for i in range(n):
                np.testing.assert_array_equal(res[i][k], want)
        assert sum(s.retransmissions for s in stats) > 0
        assert a.counters()["OUTCOME_RESULT_RESENT"] > 0  # lost results recovered


def _slow_run(n, delay, calls, *, up=None, client_kw=None, seed=0):
    """``calls`` all-reduces of n sites through a proxy that delays every result by ``delay`` s
    (a slow aggregator); returns (results, per-call retransmissions per site, RTOs, errors, proxy
    counts, the golden results)."""
    retx = [[0] * len(calls) for _ in range(n)]
    rto = [0.0] * n

    def after(i, k, c):
        retx[i][k] = c.stats.retransmissions - sum(retx[i][:k])
        rto[i] = c.timer.rto

    kw = {"group_sizes": {0: n}, "job_windows": {0: 16}, **(client_kw or {})}
    up = up or FaultSpec()
    with SoftAggregator(slots=16) as a, FaultProxy(
        a.address, to_aggregator=up, to_client=FaultSpec(loss=up.loss, delay=delay), seed=seed
    ) as px:
        a.configure(groups={0: range(n)}, jobs=[0])
        res, _, errs = run_sites(px.address, calls, n_sites=n, client_kw=kw, call_kw={"max_abs": 4.0},
                                 after_call=after)
        counts = dict(px.counts)
    want = [golden(xs, drv.exponent_for(4.0, n), n, np.float32, 256) for xs in calls]
    return res, retx, rto, errs, counts, want


def _calls(n, chunks, k, seed):
    rng = np.random.default_rng(seed)
    return [[rng.uniform(-1, 1, 256 * chunks).astype(np.float32) for _ in range(n)] for _ in range(k)]


def test_timer_follows_a_slow_aggregator():
    """Results 0.25 s late, no loss, a timer starting at 0.05 s (the old fixed driver timers
    stayed <= 0.2 s): after a warm-up all-reduce the RTO has followed the latency and (almost)
    nothing is resent; the same run with the timer pinned below the latency resends (the chunk
    holding up each flight of 8, job window 16: only that chunk, not the flight)."""
    n, chunks, delay = 2, 40, 0.25
    calls = _calls(n, chunks, 2, seed=3)
    res, retx, rto, errs, _, want = _slow_run(n, delay, calls, client_kw={"min_rto": 0.05})
    assert errs == [None] * n
    for i in range(n):
        for k in range(2):
            np.testing.assert_array_equal(res[i][k], want[k])
    contributions = n * chunks
    after_warmup = sum(r[1] for r in retx)
    print(f"retransmissions per call {retx}, final RTO {rto}")
    assert after_warmup <= max(1, 0.03 * contributions), retx  # a few % at most
    assert all(r > delay for r in rto)

    _, fixed, _, errs, _, _ = _slow_run(
        n, delay, calls, client_kw={"min_rto": 0.1, "max_rto": 0.1, "initial_rto": 0.1}
    )
    assert errs == [None] * n
    flights = n * chunks // 8
    assert sum(r[1] for r in fixed) >= flights  # what an RTO below the latency does
    assert sum(r[1] for r in fixed) < contributions  # not the whole window each time


def test_slow_aggregator_with_loss_recovers():
    """Results 0.2 s late and 5 % loss each way: every result exact, losses resent."""
    n, chunks = 3, 30
    calls = _calls(n, chunks, 2, seed=4)
    res, retx, rto, errs, counts, want = _slow_run(
        n, 0.2, calls, up=FaultSpec(loss=0.05), client_kw={"min_rto": 0.05}, seed=11
    )
    assert errs == [None] * n
    for i in range(n):
        for k in range(2):
            np.testing.assert_array_equal(res[i][k], want[k])
    lost = counts.get("up_lost", 0) + counts.get("down_lost", 0)
    print(f"lost {lost}, retransmissions {retx}, final RTO {rto}")
    assert lost > 0 and sum(map(sum, retx)) >= 1
