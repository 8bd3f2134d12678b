"""`wanreduce plan` end to end on the shipped topology."""

from __future__ import annotations

from click.testing import CliRunner

from wanreduce.cli import cli


def test_plan_prints_tables_hardware_and_plot(tmp_path) -> None:
    plot = tmp_path / "p.png"
    res = CliRunner().invoke(cli, ["plan", "--memory", "4MiB,16GiB", "--bytes", "10MB",
                                   "--memory-model", "per-sender", "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    out = res.output
    for fam in ("all-to-all", "cliques-3", "ring", "tree", "exponential"):
        assert fam in out
    assert "core parameters: S =" in out and "E = " in out
    assert "multicast groups" in out and "239." in out
    assert "crossover: cliques-3 -> all-to-all at" in out
    assert "reproduced" in out and "NOT reproduced" not in out
    assert plot.stat().st_size > 1000


def test_plan_map(tmp_path) -> None:
    path = tmp_path / "m.png"
    res = CliRunner().invoke(cli, ["plan", "--bytes", "1MB,100MB", "--memory", "4MiB,256MiB,16GiB",
                                   "--no-hardware", "--no-crossover", "--map", str(path)])
    assert res.exit_code == 0, res.output
    assert path.stat().st_size > 1000
