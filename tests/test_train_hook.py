"""train/ddp_hook.py: DDP gradients through the aggregator equal gloo's within fixed-point error."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="the torch extra (make test installs it)")

from wanreduce.emulator.local_network import LocalNetwork  # noqa: E402
from wanreduce.planner import schedules as S  # noqa: E402
from wanreduce.planner.group_table import group_table  # noqa: E402
from wanreduce.train.digits import load_digits_split  # noqa: E402
from wanreduce.train.launcher import run_sites  # noqa: E402
from wanreduce.train.site_worker import RunSpec  # noqa: E402

STEPS = 3


def test_hook_gives_gloos_gradients_within_fixed_point_error():
    """Plain SGD with lr 1: after each step the parameters moved by exactly the averaged
    gradient, so the hook run and the gloo run differ by the fixed-point error of 3 steps."""
    data = load_digits_split(0)
    spec = RunSpec(mode="ddp", steps=STEPS, lr=1.0, momentum=0.0, timeout=30)
    with LocalNetwork(2) as net:
        net.configure(group_table(S.all_to_all(2)), jobs=[0, 1])
        hook = run_sites(spec, net, data)
        gloo = run_sites(RunSpec(**{**spec.__dict__, "mode": "ddp-gloo"}), net, data)
    assert [p["driver"]["allreduces"] for p in hook] == [STEPS, STEPS]  # one bucket a step
    assert all(not p["driver"] for p in gloo)  # the baseline never touched the aggregator
    start = gloo[0]["snapshots"][0][2]
    for h, g in zip(hook, gloo, strict=True):
        for (k, _, vh), (_, _, vg) in zip(h["snapshots"], g["snapshots"], strict=True):
            if k:
                assert np.abs(vg - start).max() > 1e-2  # training moved the parameters
            # gradients < 8 in size: 2^-27 per element per step at most (safe headroom, N = 2)
            np.testing.assert_allclose(vh, vg, rtol=0, atol=STEPS * 2.0**-24)
