"""Topology files: shipped data loads and routes sensibly; malformed files name the field."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from wanreduce.cli import cli
from wanreduce.planner.topology import SHIPPED, TopologyError, load_topology, parse_size


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_topologies_load_and_route(name: str) -> None:
    t = load_topology(name)
    sites = {"geant-2012": 12, "aws-ten-region-rtt": 10}
    if name.startswith("nine-city"):
        assert sorted(t.names) == ["AMS", "BAR", "FRA", "LAX", "LON", "NYC", "SEO", "SIN", "TYO"]
    else:
        assert t.n == sites[name]
    assert t.provenance
    # shortest-path delays are a metric: symmetric, zero diagonal, triangle inequality
    d = t.delay
    assert np.allclose(d, d.T) and np.all(np.diag(d) == 0)
    assert np.all(d[:, None, :] <= d[:, :, None] + d[None, :, :] + 1e-12)  # d[i,k] <= d[i,j] + d[j,k]
    for lk in t.links:  # a route is never longer than the direct link
        assert d[t.index[lk.a], t.index[lk.b]] <= lk.latency_s + 1e-12


def test_parse_size() -> None:
    assert parse_size("64MiB") == 64 * 2**20
    assert parse_size("1GB") == 10**9
    assert parse_size("4096") == 4096
    assert parse_size("1.5KiB") == 1536
    with pytest.raises(TopologyError):
        parse_size("lots")


GOOD = """
sites: [A, B]
links:
  - {a: A, b: B, latency_ms: 10, bandwidth_gbps: 10}
"""


@pytest.mark.parametrize(
    "text, field",
    [
        ("sites: [A, B]\n", "links"),
        ("links: []\n", "sites"),
        (GOOD.replace("latency_ms: 10", "latency_ms: -1"), "links[0].latency_ms"),
        (GOOD.replace("bandwidth_gbps: 10", "bandwidth_gbps: fast"), "links[0].bandwidth_gbps"),
        (GOOD.replace("b: B", "b: C"), "links[0].b"),
        (GOOD.replace(", latency_ms: 10", ""), "links[0].latency_ms"),
        ("sites: [A, {name: B, fpga_memory: huge}]\nlinks: []\n", "sites[1].fpga_memory"),
        ("sites: [A, B, C]\nlinks:\n  - {a: A, b: B, latency_ms: 1, bandwidth_gbps: 1}\n", "not connected"),
        ("sites: [A, A]\nlinks: []\n", "duplicate"),
        ("sites: [A\n", "YAML"),
    ],
)
def test_malformed_file_names_field(tmp_path, text: str, field: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(TopologyError) as exc:
        load_topology(path)
    assert field in str(exc.value)
    assert "\n" not in str(exc.value)


def test_cli_reports_malformed_file_in_one_line(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace("latency_ms: 10", "latency_ms: -1"))
    res = CliRunner().invoke(cli, ["plan", "--topology", str(path)])
    assert res.exit_code == 1
    assert "links[0].latency_ms" in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


# Issue 14 section 5: every bad value gets one line naming the field and the allowed range.
@pytest.mark.parametrize(
    "old, new, field, allowed",
    [
        ("latency_ms: 10", "latency_ms: .inf", "links[0].latency_ms", "[0, 10000] ms"),
        ("latency_ms: 10", "latency_ms: .nan", "links[0].latency_ms", "[0, 10000] ms"),
        ("bandwidth_gbps: 10", "bandwidth_gbps: .inf", "links[0].bandwidth_gbps", "[0.001, 100000] Gb/s"),
        ("bandwidth_gbps: 10", "bandwidth_gbps: 1.0e-300", "links[0].bandwidth_gbps", "[0.001, 100000] Gb/s"),
        ("bandwidth_gbps: 10", "bandwidth_gbps: 10 Gb/s", "links[0].bandwidth_gbps", "[0.001, 100000] Gb/s"),
        ("sites: [A, B]", "sites: [A, {name: B, fpga_mem: 1GiB}]", "sites[1].fpga_mem", "name, fpga_memory"),
        ("sites: [A, B]", "sites: [A, {name: B, fpga_memory: 1e40}]", "sites[1].fpga_memory", "[1B, 1TiB]"),
        ("sites: [A, B]", "sites: [A, {name: B, fpga_memory: .inf}]", "sites[1].fpga_memory", "[1B, 1TiB]"),
        ("sites: [A, B]", "sites: [A, {name: B, line_rate_gbps: .nan}]", "sites[1].line_rate_gbps", "[0.001, 100000]"),
        ("sites: [A, B]", "defaults: {fpga_memroy: 1GiB}\nsites: [A, B]", "defaults.fpga_memroy", "fpga_memory"),
        ("sites: [A, B]", "site: [C]\nsites: [A, B]", "top level.site", "sites, links"),
        ("latency_ms: 10", "latency_ms: 10, bw: 1", "links[0].bw", "bandwidth_gbps"),
        ("sites: [A, B]", "sites: [1, 2]", "sites[0]", "site name"),
        ("sites: [A, B]", "sites: [A, {name: 2}]", "sites[1].name", "site name"),
    ],
)
def test_bad_field_one_line_with_range(tmp_path, old: str, new: str, field: str, allowed: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace(old, new))
    with pytest.raises(TopologyError) as exc:
        load_topology(path)
    msg = str(exc.value)
    assert msg.startswith(field + ":") and allowed in msg and "\n" not in msg
    res = CliRunner().invoke(cli, ["plan", "--topology", str(path)])
    assert res.exit_code == 1 and res.output.strip() == f"wanreduce: error: {msg}"


def test_exponent_without_dot_is_a_number(tmp_path) -> None:
    # PyYAML's YAML 1.1 rules read 1e3 as text; the planner reads it as YAML 1.2 does.
    path = tmp_path / "t.yaml"
    path.write_text(GOOD.replace("latency_ms: 10", "latency_ms: 1e3").replace("sites: [A, B]",
                    "sites: [A, {name: B, fpga_memory: 2e6}]"))
    t = load_topology(path)
    assert t.delay[0, 1] == pytest.approx(1.0) and t.sites[1].fpga_memory == 2_000_000


@pytest.mark.parametrize(
    "args, field, allowed",
    [
        (["--memory", "lots"], "--memory", "[1B, 1TiB]"),
        (["--memory", "1e40"], "--memory", "[1B, 1TiB]"),
        (["--memory", ","], "--memory", "[1B, 1TiB]"),
        (["--bytes", "1e30"], "--bytes", "[1B, 1TiB]"),
        (["--bytes", "0"], "--bytes", "[1B, 1TiB]"),
        (["--eps", "nan"], "--eps", "[1e-09, 1]"),
        (["--eps", "0"], "--eps", "[1e-09, 1]"),
        (["--memory", "1KiB"], "--memory", ">= 1996 B"),
    ],
)
def test_cli_bad_option_one_line_with_range(args: list[str], field: str, allowed: str) -> None:
    res = CliRunner().invoke(cli, ["plan", *args])
    assert res.exit_code == 1, res.output
    (line,) = res.output.strip().splitlines()
    assert line.startswith(f"wanreduce: error: {field}: ") and allowed in line


@pytest.mark.parametrize("option", ["--plot", "--map"])
def test_plot_into_missing_directory_fails_before_computing(tmp_path, monkeypatch, option) -> None:
    from wanreduce.planner import plan_report

    def never(*a, **k):
        raise AssertionError("computed before checking the output path")

    monkeypatch.setattr(plan_report, "evaluate", never)
    res = CliRunner().invoke(cli, ["plan", option, str(tmp_path / "no-such-dir" / "p.png")])
    assert res.exit_code == 1
    (line,) = res.output.strip().splitlines()
    assert line.startswith(f"wanreduce: error: {option}: directory ") and "does not exist" in line
