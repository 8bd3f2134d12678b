"""Planner reports: the winner as intervals over the memory axis, the paper's verdict over the
whole sweep, and per-site FPGA memory from the topology file (issue 14 sections 3 and 4)."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from wanreduce.cli import cli
from wanreduce.planner import plan_report as pr
from wanreduce.planner.topology import load_topology

MIB = 2**20


def _winner(topo, nbytes: int, memory: int, model: str) -> str:
    return pr.evaluate(topo, nbytes, memory, memory_model=model, colocated=False).best_in_network.family


def test_paper_verdict_needs_the_whole_sweep() -> None:
    iv = pr.Interval
    assert pr.paper_verdict([iv(1, 5, "cliques-3"), iv(5, 9, "all-to-all")])
    # Right at both ends, but another family wins in between: not the paper's finding.
    assert not pr.paper_verdict([iv(1, 3, "cliques-3"), iv(3, 5, "tree"), iv(5, 9, "all-to-all")])
    assert not pr.paper_verdict([iv(1, 9, "all-to-all")])
    assert not pr.paper_verdict([iv(1, 5, "all-to-all"), iv(5, 9, "cliques-3")])


def test_intervals_find_a_winner_that_changes_twice() -> None:
    # Public-RTT nine cities, 1 MB, per-sender slots: the one-round sharded plan wins at 1 MiB
    # (since every round pays the scale agreement, ~one group latency: the pairs that won there
    # before need more rounds), triples from ~2 MiB, the tree from ~4 MiB, all-to-all from ~8 MiB.
    topo = load_topology("nine-city-public-rtt")
    lo, hi, nbytes, model = 1 * MIB, 16 * 2**30, 10**6, "per-sender"
    ivs = pr.winner_intervals(topo, nbytes, lo, hi, memory_model=model)
    fams = [iv.family for iv in ivs]
    assert len(fams) >= 4 and fams[0] == "sharded" and fams[1].startswith("cliques-") and "tree" in fams
    assert fams[-1] == "all-to-all"
    assert ivs[0].lo == lo and ivs[-1].hi == hi
    assert all(a.hi == b.lo for a, b in zip(ivs, ivs[1:], strict=False))
    for prev, iv in zip([None, *ivs], ivs, strict=False):
        mid = int(math.sqrt(iv.lo * iv.hi))
        assert _winner(topo, nbytes, iv.lo, model) == iv.family
        assert _winner(topo, nbytes, mid, model) == iv.family
        if prev is not None:  # the boundary is bisected to well under 1 %
            assert _winner(topo, nbytes, int(iv.lo / 1.01), model) == prev.family
    assert not pr.paper_verdict(ivs)
    text = pr.format_intervals(ivs, topo.long_haul_bdp())
    assert text.startswith(f"{fams[0]} [1MiB, ") and " then tree [" in text and "16GiB]; changes at " in text


HETERO = """
name: hetero
defaults: {fpga_memory: 64MiB, line_rate_gbps: 10}
sites: [A, {name: B, fpga_memory: 2MiB}, C, D]
links:
  - {a: A, b: B, latency_ms: 20, bandwidth_gbps: 10}
  - {a: B, b: C, latency_ms: 30, bandwidth_gbps: 10}
  - {a: C, b: D, latency_ms: 5, bandwidth_gbps: 10}
  - {a: D, b: A, latency_ms: 40, bandwidth_gbps: 10}
"""


def test_file_memory_is_honoured_per_site(tmp_path) -> None:
    path = tmp_path / "hetero.yaml"
    path.write_text(HETERO)
    topo = load_topology(path)
    assert list(topo.memory) == [64 * MIB, 2 * MIB, 64 * MIB, 64 * MIB] and topo.memory_from_file
    own = pr.evaluate(topo, 10**8, None, colocated=False)
    uniform = pr.evaluate(topo, 10**8, 64 * MIB, colocated=False)
    assert own.plans["all-to-all"].time > uniform.plans["all-to-all"].time  # B's 2 MiB limits it
    res = CliRunner().invoke(cli, ["plan", "--topology", str(path), "--bytes", "100MB"])
    assert res.exit_code == 0, res.output
    assert "memory: each site's fpga_memory from the topology file" in res.output
    best = own.best
    assert (f"FPGA memory per site 2MiB..64MiB (S = 1050..33621 slots of 499 elements): best "
            f"{best.schedule.label} {best.time:.3f} s") in res.output
    assert "slots per site (own memory): A 33621, B 1050, C 33621, D 33621" in res.output
    # --memory sweeps the same size at every site and says it overrides the file.
    res = CliRunner().invoke(cli, ["plan", "--topology", str(path), "--memory", "4MiB,8MiB",
                                   "--no-hardware"])
    assert res.exit_code == 0 and "(overrides the file's fpga_memory)" in res.output
    assert "FPGA memory 4MiB (S = 2101 slots" in res.output


@pytest.mark.parametrize("model", ["shared", "per-sender", "skew-only"])
def test_hardware_block_says_what_the_model_needs(model: str) -> None:
    res = CliRunner().invoke(cli, ["plan", "--memory", "64MiB", "--memory-model", model,
                                   "--no-crossover"])
    assert res.exit_code == 0, res.output
    assert f"  needs ({model} memory model): {pr.HARDWARE_NEEDS[model]}" in res.output


def test_paper_families_only_share_evaluations_and_find_the_crossover() -> None:
    # Nine cities, 30 MB, skew-only: new families (sharded, mixed cliques) win overall, but
    # between the paper's own two families cliques-3 win small memory and all-to-all large.
    # (At 10 MB, since every round pays the scale agreement, all-to-all's one round wins at
    # every memory against cliques-3's two: no crossover there.)
    topo = load_topology("nine-city")
    lo, hi, nbytes, model = 4 * MIB, 16 * 2**30, 3 * 10**7, "skew-only"
    cache: dict = {}
    every = pr.winner_intervals(topo, nbytes, lo, hi, memory_model=model, cache=cache)
    evaluated = len(cache)
    own = pr.winner_intervals(topo, nbytes, lo, hi, memory_model=model,
                              families=pr.PAPER_FINDING, cache=cache)
    assert {iv.family for iv in own} <= set(pr.PAPER_FINDING)
    assert not pr.paper_verdict(every) and pr.paper_verdict(own)
    assert len(cache) >= evaluated  # the second pass reuses the first's evaluations
    for iv in own:
        mid = int(math.sqrt(iv.lo * iv.hi))
        res = pr.evaluate(topo, nbytes, mid, memory_model=model, colocated=False)
        assert res.best_among(pr.PAPER_FINDING).family == iv.family
    out = CliRunner().invoke(cli, ["plan", "--topology", "nine-city", "--bytes", "30MB",
                                   "--memory-model", model, "--no-hardware"]).output
    assert ("between the paper's two families only: reproduced ("
            + pr.format_intervals(own, topo.long_haul_bdp()) + ")") in out
