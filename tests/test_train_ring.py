"""wanreduce train --schedule ring over the emulated WAN: the ring all-reduce of the hosts
(host/ring_allreduce.py) crosses the emulated links (their delays and rates), around the
planner's ring order, and averages exactly like the in-network all-to-all."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_train_cli import THREE_SITES

from wanreduce.cli import cli
from wanreduce.emulator.scaling import scale_topology
from wanreduce.planner.topology import load_topology
from wanreduce.train.digits import mlp_bytes
from wanreduce.train.schedule_choice import choose


def test_ring_training_over_the_emulated_wan_crosses_its_links(tmp_path):
    """Three sites, 4 rounds of H = 2: every site averages every round (consensus 0), the
    loss falls, each ring hop's link carries at least the ring's 2 (n - 1) / n of the model per
    round, and a round takes at least the chain of 2 (n - 1) hop delays it waits for (65 ms
    here): the data crossed the emulated WAN (gloo on loopback took milliseconds)."""
    pytest.importorskip("torch", reason="the torch extra (make test installs it)")
    topo_file = tmp_path / "three.yaml"
    topo_file.write_text(THREE_SITES)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(cli, [
        "train", "--topology", str(topo_file), "--schedule", "ring", "--network", "wan",
        "--steps", "8", "--local-steps", "2", "--hidden", "40", "--memory", "256KiB",
        "--timeout", "30", "--out", str(out)])
    assert res.exit_code == 0, res.output
    (run,) = json.loads(out.read_text())
    assert run["family"] == "ring" and run["exchanges_per_site"] == [4, 4, 4]
    rows = run["rows"]
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert all(r["consensus"] == 0 for r in rows)  # exact: every site has the same sum
    topo = scale_topology(load_topology(str(topo_file)), 1e-3, 1.0)
    order = choose("ring", topo, 1 << 18, mlp_bytes(40)).table.ring_steps(0).order
    names = topo.names
    for i, s in enumerate(order):
        hop = f"{names[s]}->{names[order[(i + 1) % 3]]}"
        assert run["link_bytes"][hop] >= 4 * 2 * 2 / 3 * mlp_bytes(40)
    delays = [10e-3, 20e-3, 25e-3]  # THREE_SITES' links; any 4 consecutive ring hops hold all 3
    assert run["mean_round_s"] >= sum(delays) + min(delays)
    assert run["planner"]["predicted_round_s"] > run["planner"]["round_times_s"][0]  # + agreement
    assert "with the scale agreement" in res.output
