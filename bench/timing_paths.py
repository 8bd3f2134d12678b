"""Every failing endpoint of a placed-and-routed design, not only nextpnr's one critical path.

nextpnr reports a single critical path per clock; after the timing work the core has a few
hundred endpoints at a similar slack in different components, so fixing one path at a time
by re-running place-and-route with new seeds is slow. This reads the SDF that nextpnr writes
after routing (``--sdf``: every interconnect and cell delay), runs a plain longest-path
analysis from clock-to-output arcs to setup checks (single clock, rising edge), and prints the
endpoints that miss the period grouped by the register they belong to, with the worst path
of each group.

    .venv/bin/python bench/timing_paths.py DIR/core.sdf --period 8 [--paths 15]

Delays are the SDF "max" corner. The worst arrival agrees with nextpnr's Fmax to within a few
percent (nextpnr's own report uses slightly different clock-to-output figures).
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

_TOKEN = re.compile(r'\(|\)|"[^"]*"|[^\s()]+')


def _parse(text: str) -> list:
    """S-expression of the SDF as nested lists of strings."""
    stack: list[list] = [[]]
    for tok in _TOKEN.findall(text):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    return stack[0]


def _unescape(name: str) -> str:
    return name.replace("\\", "")


def _max(triple: list) -> float:
    """ns from an SDF value ``(min:typ:max)`` in ps."""
    return float(triple[0].split(":")[-1]) / 1000.0


def load(path: Path) -> tuple[dict, set, dict]:
    """(edges: node -> [(node, delay)], launch: {node: clock-to-output}, setup: {node: ns})."""
    root = _parse(Path(path).read_text())[0]
    edges: dict[str, list[tuple[str, float]]] = defaultdict(list)
    launch: dict[str, float] = {}
    setup: dict[str, float] = {}
    for cell in root:
        if not isinstance(cell, list) or not cell or cell[0] != "CELL":
            continue
        inst = ""
        for item in cell[1:]:
            if item[0] == "INSTANCE":
                inst = _unescape(item[1]) if len(item) > 1 else ""
        for item in cell[1:]:
            if item[0] == "DELAY":
                for absl in item[1:]:
                    for arc in absl[1:]:
                        if arc[0] == "INTERCONNECT":
                            edges[_unescape(arc[1])].append((_unescape(arc[2]), _max(arc[3])))
                        elif arc[0] == "IOPATH":
                            src, dst, d = arc[1], arc[2], _max(arc[3])
                            if isinstance(src, list):  # (posedge CLK): a launch arc
                                launch[f"{inst}/{dst}"] = max(launch.get(f"{inst}/{dst}", 0.0), d)
                            elif src.startswith("CLK"):
                                launch[f"{inst}/{dst}"] = max(launch.get(f"{inst}/{dst}", 0.0), d)
                            else:
                                edges[f"{inst}/{src}"].append((f"{inst}/{dst}", d))
            elif item[0] == "TIMINGCHECK":
                for chk in item[1:]:
                    if chk[0] in ("SETUPHOLD", "SETUP"):
                        pin = chk[1][1] if isinstance(chk[1], list) else chk[1]
                        node = f"{inst}/{pin}"
                        setup[node] = max(setup.get(node, 0.0), _max(chk[3]))
    return edges, launch, setup


def arrivals(edges: dict, launch: dict) -> tuple[dict, dict]:
    """Longest arrival time at every node reachable from a launch point, and its predecessor."""
    indeg: dict[str, int] = defaultdict(int)
    for outs in edges.values():
        for dst, _ in outs:
            indeg[dst] += 1
    arr: dict[str, float] = {}
    pred: dict[str, str | None] = {}
    for n, d in launch.items():
        arr[n], pred[n] = d, None
    # Kahn's order over the whole graph (nodes without predecessors first)
    nodes = set(edges) | set(indeg) | set(launch)
    ready = [n for n in nodes if indeg[n] == 0]
    while ready:
        n = ready.pop()
        a = arr.get(n)
        for dst, d in edges.get(n, ()):
            if a is not None and (dst not in arr or a + d > arr[dst]):
                arr[dst], pred[dst] = a + d, n
            indeg[dst] -= 1
            if indeg[dst] == 0:
                ready.append(dst)
    return arr, pred


def _group(node: str) -> str:
    """The register an endpoint belongs to: its cell name up to the yosys suffixes."""
    cell = node.rsplit("/", 1)[0]
    return re.sub(r"(_TRELLIS_FF_Q|\$|_DI_|_LUT4|_CCU2C|_PFUMX|_L6MUX|\.\d+_DO).*$", "", cell)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sdf", type=Path)
    ap.add_argument("--period", type=float, default=8.0, help="clock period, ns")
    ap.add_argument("--paths", type=int, default=15, help="groups to print with their worst path")
    ap.add_argument("--detail", type=int, default=0,
                    help="for the first N groups, print every hop of the worst path with its arrival")
    args = ap.parse_args()
    edges, launch, setup = load(args.sdf)
    arr, pred = arrivals(edges, launch)
    ends = sorted(((arr[n] + s, n) for n, s in setup.items() if n in arr), reverse=True)
    failing = [(t, n) for t, n in ends if t > args.period]
    print(f"worst arrival {ends[0][0]:.2f} ns (Fmax ~{1000 / ends[0][0]:.1f} MHz); "
          f"{len(failing)} of {len(ends)} endpoints miss {args.period} ns")
    groups: dict[str, list] = defaultdict(list)
    for t, n in failing:
        groups[_group(n)].append((t, n))
    order = sorted(groups.items(), key=lambda kv: -kv[1][0][0])
    for rank, (name, items) in enumerate(order[: args.paths]):
        t, n = items[0]
        path = []
        while n is not None:
            path.append(n)
            n = pred.get(n)
        start = _group(path[-1])
        print(f"\n{name}: {len(items)} endpoint(s), worst {t:.2f} ns, from {start}")
        hops = [f"{_group(p)}" for p in reversed(path)]
        squeezed = [h for i, h in enumerate(hops) if i == 0 or h != hops[i - 1]]
        print("   " + " -> ".join(squeezed))
        if rank < args.detail:
            for p in reversed(path):
                if p.endswith(("/FCI", "/FCO")):  # inside a carry chain: its ends are enough
                    continue
                cell, pin = p.rsplit("/", 1)
                short = cell if len(cell) <= 70 else cell[:40] + "..." + cell[-27:]
                print(f"      {arr[p]:6.2f}  {short}/{pin}")
    rest = order[args.paths:]
    if rest:
        print(f"\n... {len(rest)} more groups: " + ", ".join(f"{k} ({len(v)})" for k, v in rest))


if __name__ == "__main__":
    main()
