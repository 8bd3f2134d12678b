"""`wanreduce plan` end to end on the shipped topology: the printed tables, hardware, winner
intervals and plots must be what the planner's API computes for the same inputs."""

from __future__ import annotations

import re

import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest
from click.testing import CliRunner

from wanreduce.cli import cli
from wanreduce.planner import plan_report as pr
from wanreduce.planner.topology import format_size, load_topology

E = 256  # --elements-per-packet given explicitly, so the API call needs no CLI default
HEADER = re.compile(r"^FPGA memory (\S+) \(S = (\d+) slots of (\d+) elements\): best (.+) ([\d.]+) s; "
                    r"best in-network (.+) ([\d.]+) s$")
ROW = re.compile(r"^  (\S+)\s+(\d+|-)\s+([\d.]+)s\s+([\d.]+|inf)s\s+([\d.]+|nan)s\s+([\d.]+|nan)x\s+(\S+)"
                 r"\s+(.+)$")
AGREEMENT = "  (every round's time includes the driver's scale agreement, a 1432 B all-reduce in each group"
CORE = re.compile(r"^  core parameters: S = (\d+) slots \(power of two; memory holds (\d+)\) x E = (\d+) ")


@pytest.fixture
def figures(monkeypatch):
    """Every figure the command closes (after saving it), for checking what was plotted."""
    closed = []
    real = plt.close

    def close(fig=None):
        closed.append(fig)
        real(fig)

    monkeypatch.setattr(plt, "close", close)
    return closed


def _png(path, shape=(540, 840)):
    """The decoded PNG: 7 x 4.5 in at 120 dpi, not blank."""
    img = matplotlib.image.imread(str(path))
    assert img.shape[:2] == shape
    rgb = img[..., :3].reshape(-1, 3)
    assert len(np.unique(rgb, axis=0)) > 50  # lines, text and fills, not an empty canvas
    return img


def _sections(out: str) -> list[tuple[re.Match, list[re.Match], list[str]]]:
    """(header, table rows, following lines) per memory size."""
    lines = out.splitlines()
    found = []
    for k, ln in enumerate(lines):
        if m := HEADER.match(ln):
            assert lines[k + 1].startswith(AGREEMENT)  # says the times include it
            rows, j = [], k + 3
            while j < len(lines) and (r := ROW.match(lines[j])):
                rows.append(r)
                j += 1
            found.append((m, rows, lines[j:]))
    return found


def test_plan_output_equals_the_planner_api(tmp_path, figures) -> None:
    plot = tmp_path / "p.png"
    memories, nbytes = [4 << 20, 16 << 30], 10_000_000
    res = CliRunner().invoke(cli, ["plan", "--memory", "4MiB,16GiB", "--bytes", "10MB",
                                   "--memory-model", "per-sender", "--elements-per-packet", str(E),
                                   "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    topo = load_topology("nine-city")
    want = [pr.evaluate(topo, nbytes, m, 1e-3, E, "per-sender") for m in memories]
    sections = _sections(res.output)
    assert len(sections) == len(memories)
    for (head, rows, rest), r, m in zip(sections, want, memories, strict=True):
        assert head.group(1) == format_size(m) and int(head.group(2)) == m // (4 * E)
        assert head.group(4) == r.best.schedule.label and float(head.group(5)) == round(r.best.time, 3)
        assert head.group(6) == r.best_in_network.schedule.label
        # Every family once, in order of time, with the API's rounds, time and schedule.
        assert [x.group(1) for x in rows] == sorted(r.plans, key=lambda f: r.plans[f].time)
        for x in rows:
            p = r.plans[x.group(1)]
            assert x.group(2) == ("-" if p.rounds is None else str(p.rounds))
            assert float(x.group(3)) == round(p.time, 3) and x.group(8) == p.schedule.label
            # the scale agreement is part of every in-network round (none for the ring)
            assert float(x.group(4)) == round(p.agreement_time, 3)
            assert (p.agreement_time > 0) == pr.is_in_network(x.group(1))
        # The hardware block: S, E and the first round's group table of the best plan.
        hw = pr.hardware_plan(r.best_in_network.schedule, topo, m, E, "per-sender")
        core = next(CORE.match(ln) for ln in rest if CORE.match(ln))
        assert int(core.group(2)) == hw.slots and int(core.group(3)) == hw.elements == E
        assert int(core.group(1)) == 1 << (hw.slots.bit_length() - 1)
        table = {e["site"]: e for e in hw.rounds[0]}
        k = next(i for i, ln in enumerate(rest)  # "round 1" or "round 1 reduce-scatter level 0"
                 if ln.startswith("  round 1") and ln.endswith(": group table (contributor bitmap, bit i = site i)"))
        for ln in rest[k + 1 : k + 1 + topo.n]:
            site, bits, _, expected = ln.split()[:4]  # sharded rows add the shard they merge
            assert int(bits[::-1], 2) == table[site]["bitmap"] and int(expected) == table[site]["expected"]
    ivs = pr.winner_intervals(topo, nbytes, memories[0], memories[-1], 1e-3, "per-sender", E)
    assert len(ivs) >= 2
    assert f"best in-network family over memory: {pr.format_intervals(ivs, topo.long_haul_bdp())}" \
        in res.output
    verdict = "reproduced" if pr.paper_verdict(ivs) else "NOT reproduced"
    winners = " -> ".join(iv.family for iv in ivs)
    assert f"{verdict} over 4MiB..16GiB (winners in order: {winners})" in res.output
    # The plot: one line per family through the API's times, and a real image on disk.
    (fig,) = figures
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines() if not ln.get_label().startswith("_")}
    assert sorted(lines) == sorted(want[0].plans)
    for fam, ln in lines.items():
        np.testing.assert_array_equal(ln.get_xdata(), memories)
        np.testing.assert_allclose(ln.get_ydata(), [r.plans[fam].time for r in want])
    _png(plot)


def test_plan_map_equals_winner_map(tmp_path, figures) -> None:
    path = tmp_path / "m.png"
    byte_sizes, memories = [10**6, 10**8], [4 << 20, 256 << 20, 16 << 30]
    res = CliRunner().invoke(cli, ["plan", "--bytes", "1MB,100MB", "--memory", "4MiB,256MiB,16GiB",
                                   "--elements-per-packet", str(E), "--no-hardware", "--no-crossover",
                                   "--map", str(path)])
    assert res.exit_code == 0, res.output
    fams, ring = pr.winner_map(load_topology("nine-city"), byte_sizes, memories, 1e-3, "shared", E)
    names = sorted({f for row in fams for f in row})
    (fig,) = figures
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), [[names.index(f) for f in row] for row in fams])
    marks = {(round(t.get_position()[1]), round(t.get_position()[0])) for t in ax.texts if t.get_text() == "r"}
    assert marks == {(i, j) for i, row in enumerate(ring) for j, r in enumerate(row) if r}
    assert [t.get_text() for t in ax.get_legend().get_texts()] == names
    _png(path)
