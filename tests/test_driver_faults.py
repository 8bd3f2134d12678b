"""Driver through a lossy / duplicating / reordering UDP proxy: results stay exact."""

from __future__ import annotations

import numpy as np
import pytest
from driver_helpers import golden, run_sites

from wanreduce.host import driver as drv
from wanreduce.host.faults import FaultProxy, FaultSpec
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
        bins = np.bincount([drv.agreement_bin(x) for x in xs], minlength=drv.AGREE_BINS)
        e = drv.exponent_for(drv.bound_from_bins(bins), n)
        want = golden(xs, e, n, np.float32, 256)
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
        assert c["OUTCOME_AGGREGATED"] == n * (-(-40000 // 256) + 1)


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
            bins = np.bincount([drv.agreement_bin(x) for x in xs], minlength=drv.AGREE_BINS)
            want = golden(xs, drv.exponent_for(drv.bound_from_bins(bins), n), n, np.float16, 256)
            for i in range(n):
                np.testing.assert_array_equal(res[i][k], want)
        assert sum(s.retransmissions for s in stats) > 0
        assert a.counters()["OUTCOME_RESULT_RESENT"] > 0  # lost results recovered
