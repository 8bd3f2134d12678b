"""A site's training process killed mid-run: the others stop within the driver's timeout with an
error naming it, and every process ends."""

from __future__ import annotations

import multiprocessing
import time

import pytest

pytest.importorskip("torch", reason="the torch extra (make test installs it)")

from wanreduce.planner import schedules as S  # noqa: E402
from wanreduce.planner.group_table import group_table  # noqa: E402
from wanreduce.train.digits import load_digits_split  # noqa: E402
from wanreduce.train.launcher import TrainingFailed, run_sites  # noqa: E402
from wanreduce.train.local_network import LocalNetwork  # noqa: E402
from wanreduce.train.site_worker import RunSpec  # noqa: E402

TIMEOUT = 2.0


def test_killed_site_stops_the_others_with_an_error_naming_it():
    table = group_table(S.all_to_all(3))
    spec = RunSpec(mode="average", table=table, steps=10_000, timeout=TIMEOUT, kill=(1, 3))
    with LocalNetwork(3) as net:
        net.configure(table, jobs=[0, 1])
        t = time.monotonic()
        with pytest.raises(TrainingFailed) as err:
            run_sites(spec, net, load_digits_split(0))
        elapsed = time.monotonic() - t
    msg = str(err.value)
    assert "site 1's process died (killed by signal 9)" in msg
    # the survivors' own errors: the aggregator lacks member 1's contribution
    for s in (0, 2):
        assert f"site {s} stopped: ChunksMissing" in msg and "1" in msg.split(f"site {s} stopped")[1]
    assert "\n" not in msg
    assert "killed by the launcher" not in msg  # the survivors stopped on their own
    assert multiprocessing.active_children() == []
    print(f"{elapsed:.1f} s: {msg}")
