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


def test_cli_rejects_bad_size() -> None:
    res = CliRunner().invoke(cli, ["plan", "--memory", "lots"])
    assert res.exit_code == 2 and "--memory" in res.output
