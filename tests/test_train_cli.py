"""wanreduce train: one-line errors for bad input, the torch extra named when missing, and a
short real run over a 3-site topology writing its report and plot."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from wanreduce.cli import cli
from wanreduce.emulator.scaling import slot_plan
from wanreduce.planner.topology import load_topology
from wanreduce.train.schedule_choice import choose
from wanreduce.wire import MAX_ELEMENTS_DEFAULT

THREE_SITES = """name: three
sites: [A, B, C]
links:
  - {a: A, b: B, latency_ms: 10, bandwidth_gbps: 10}
  - {a: B, b: C, latency_ms: 20, bandwidth_gbps: 10}
  - {a: A, b: C, latency_ms: 25, bandwidth_gbps: 10}
"""


def _run(args: list[str]):
    return CliRunner().invoke(cli, ["train", *args])


@pytest.mark.parametrize("args,field", [
    (["--schedule", "bogus"], "--schedule"),
    (["--schedule", "ring,tree"], "--schedule"),
    (["--memory", "lots"], "--memory"),
    (["--memory", "0"], "--memory"),
    (["--memory", "4MiB,64MiB"], "--memory"),
    (["--steps", "0"], "--steps"),
    (["--local-steps", "0"], "--local-steps"),
    (["--steps", "5", "--local-steps", "6"], "--local-steps"),
    (["--lr", "0"], "--lr"),
    (["--hidden", "0"], "--hidden"),
    (["--hidden", "16385"], "--hidden"),
    (["--topology", "/nonexistent/topo.yaml"], "nonexistent"),
    (["--out", "/nonexistent/dir/r.json"], "--out"),
])
def test_bad_input_is_one_line_naming_the_field(args, field):
    res = _run(args)
    assert res.exit_code != 0
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], res.output
    assert "Traceback" not in res.output


def test_without_torch_the_extra_is_named_and_the_package_still_imports():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import wanreduce.train.averager, wanreduce.train.launcher, wanreduce.train.training_run\n"
            "from wanreduce.cli import main\n"
            "main(['train', '--steps', '2'])\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 1
    assert res.stderr.strip() == ("wanreduce: error: wanreduce train needs the torch extra: "
                                  "pip install 'wanreduce[torch]'")


def test_short_run_reports_progress_and_writes_report_and_plot(tmp_path):
    """All-to-all through the aggregator and the hosts' ring all-reduce average everyone every
    round: both are the fixed-point sum of the same vectors, so the same training bit for bit,
    no consensus distance. ``--hidden 40``
    sets the model's width, hence the bytes per sync the planner is asked about."""
    pytest.importorskip("torch", reason="the torch extra (make test installs it)")
    topo = tmp_path / "three.yaml"
    topo.write_text(THREE_SITES)
    out, png = tmp_path / "r.json", tmp_path / "loss.png"
    res = _run(["--topology", str(topo), "--schedule", "all-to-all,ring", "--steps", "8",
                "--memory", "1MiB", "--local-steps", "2", "--hidden", "40", "--out", str(out), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    a2a, ring = json.loads(out.read_text())
    assert (a2a["family"], ring["family"]) == ("all-to-all", "ring")
    nbytes = 4 * (64 * 40 + 40 + 40 * 10 + 10)
    memory = slot_plan(1 << 20, MAX_ELEMENTS_DEFAULT).planner_memory
    assert a2a["model_bytes"] == ring["model_bytes"] == nbytes
    # the averager's job holds every slot of the memory the planner is asked about (it had
    # half, a DDP job sharing the slots: memory-bound rounds took twice the prediction)
    assert a2a["driver_window"] == slot_plan(1 << 20, MAX_ELEMENTS_DEFAULT).slots // 2
    planned = choose("all-to-all", load_topology(str(topo)), memory, nbytes).plan
    assert a2a["planner"]["time_to_consensus_s"] == pytest.approx(planned.time)
    assert planned.time != pytest.approx(
        choose("all-to-all", load_topology(str(topo)), memory, 9640).plan.time)
    for run in (a2a, ring):
        assert run["outer_steps"] == 4 and run["exchanges_per_site"] == [4, 4, 4]
        rows = run["rows"]
        assert [r["outer_step"] for r in rows] == [0, 1, 2, 3, 4]
        assert rows[-1]["loss"] < rows[0]["loss"]
        assert all(r["consensus"] < 1e-5 for r in rows)
    for ra, rr in zip(a2a["rows"], ring["rows"], strict=True):
        assert ra["loss"] == rr["loss"]
    # the forwarder's lateness (its timing error, held against the scaled delays in
    # bench_train_schedules) is reported; the all-to-all run's copies passed it
    late = a2a["forwarder_late_s"]
    assert 0 <= late["mean"] <= late["max"] and late["max"] > 0
    assert png.stat().st_size > 0


@pytest.mark.parametrize("hidden", [1, 32, 1700])
def test_bytes_per_sync_are_the_models_parameter_bytes(hidden):
    """What the planner is asked about (mlp_bytes) is what the sites exchange."""
    pytest.importorskip("torch", reason="the torch extra (make test installs it)")
    from wanreduce.train.digits import make_mlp, mlp_bytes

    assert mlp_bytes(hidden) == 4 * sum(p.numel() for p in make_mlp(0, hidden).parameters())
