"""WAN topology as data: sites, links, per-site edge-FPGA memory and line rate.

A topology file (YAML) lists sites and undirected links with one-way latency (ms) and bandwidth
(Gb/s). The planner routes over the link graph (shortest one-way latency), so every pair of
sites has a path delay, a hop list and a set of directed links its traffic uses. Malformed files
raise :class:`TopologyError` with one line naming the offending field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import yaml

SHIPPED = ("nine-city", "nine-city-public-rtt", "geant-2012", "aws-ten-region-rtt")

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([KMGTP]?)(i?)B?\s*$", re.I)


class TopologyError(ValueError):
    """A topology file or argument is malformed; the message names the field."""


def parse_size(text: str | int | float) -> int:
    """Parse a byte size such as ``64MiB``, ``1GB``, ``4096`` into bytes (KiB = 1024, KB = 1000)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if text < 0:
            raise TopologyError(f"size must be non-negative, got {text}")
        return int(text)
    m = _SIZE_RE.match(str(text))
    if not m:
        raise TopologyError(f"not a byte size: {text!r} (use e.g. 64MiB, 1GB, 4096)")
    value, prefix, binary = float(m.group(1)), m.group(2).upper(), m.group(3)
    power = "KMGTP".index(prefix) + 1 if prefix else 0
    return int(round(value * (1024 if binary else 1000) ** power))


def format_size(n: float) -> str:
    """Human-readable binary size (``64MiB``) for tables."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f}{unit}" if abs(v - round(v)) < 1e-9 else f"{v:.3g}{unit}"
    return f"{n:.0f}B"


@dataclass(frozen=True)
class Site:
    """One site (island): its edge FPGA's buffer memory (bytes) and line rate (bit/s)."""

    name: str
    fpga_memory: int
    line_rate_bps: float


@dataclass(frozen=True)
class Link:
    """An undirected WAN link: one-way latency (s) and bandwidth (bit/s) in each direction."""

    a: str
    b: str
    latency_s: float
    bandwidth_bps: float


@dataclass
class Topology:
    """Sites + links, with all-pairs shortest-latency routing precomputed.

    ``delay[i, j]`` is the one-way latency (s) along the route, ``paths[i][j]`` the node list,
    ``path_links[i, j]`` a boolean mask over ``directed`` (the directed links the route uses).
    """

    name: str
    sites: list[Site]
    links: list[Link]
    provenance: str = ""
    index: dict[str, int] = field(init=False)
    directed: list[tuple[int, int]] = field(init=False)
    dir_bw: np.ndarray = field(init=False)
    delay: np.ndarray = field(init=False)
    hops: np.ndarray = field(init=False)
    path_links: np.ndarray = field(init=False)
    paths: list[list[list[int]]] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {s.name: i for i, s in enumerate(self.sites)}
        n = len(self.sites)
        g = nx.Graph()
        g.add_nodes_from(range(n))
        self.directed = []
        bws = []
        for link in self.links:
            a, b = self.index[link.a], self.index[link.b]
            g.add_edge(a, b, weight=link.latency_s)
            self.directed += [(a, b), (b, a)]
            bws += [link.bandwidth_bps, link.bandwidth_bps]
        self.dir_bw = np.array(bws, dtype=float)
        if n > 1 and not nx.is_connected(g):
            parts = [sorted(self.sites[i].name for i in c) for c in nx.connected_components(g)]
            raise TopologyError(f"links: graph is not connected, components {parts}")
        eidx = {e: k for k, e in enumerate(self.directed)}
        self.delay = np.zeros((n, n))
        self.hops = np.zeros((n, n), dtype=int)
        self.path_links = np.zeros((n, n, len(self.directed)), dtype=bool)
        self.paths = [[[i] for _ in range(n)] for i in range(n)]
        for src, targets in nx.all_pairs_dijkstra_path(g, weight="weight"):
            for dst, path in targets.items():
                self.paths[src][dst] = path
                self.hops[src, dst] = len(path) - 1
                for u, v in zip(path, path[1:], strict=False):
                    self.delay[src, dst] += g[u][v]["weight"]
                    self.path_links[src, dst, eidx[(u, v)]] = True

    @property
    def n(self) -> int:
        """Number of sites."""
        return len(self.sites)

    @property
    def names(self) -> list[str]:
        """Site names in index order."""
        return [s.name for s in self.sites]

    @property
    def memory(self) -> np.ndarray:
        """Per-site FPGA memory (bytes)."""
        return np.array([s.fpga_memory for s in self.sites], dtype=float)

    @property
    def line_rate(self) -> np.ndarray:
        """Per-site FPGA line rate (bytes/s)."""
        return np.array([s.line_rate_bps / 8 for s in self.sites], dtype=float)

    def with_memory(self, memory: int) -> Topology:
        """The same topology with every site's FPGA memory set to ``memory`` bytes."""
        t = Topology(
            self.name,
            [replace(s, fpga_memory=int(memory)) for s in self.sites],
            self.links,
            self.provenance,
        )
        return t

    def colocated(self) -> Topology:
        """The ideal co-located cluster: same sites, links and bandwidths, zero latency."""
        return Topology(
            self.name + "-colocated",
            self.sites,
            [replace(lk, latency_s=0.0) for lk in self.links],
            self.provenance,
        )

    def long_haul_bdp(self) -> float:
        """Bytes in flight to fill the worst route: max line rate x max round-trip time."""
        return float(self.line_rate.max() * 2 * self.delay.max())


def _field(obj: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise TopologyError(f"{where}.{key}: missing")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TopologyError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _number(obj: dict[str, Any], key: str, where: str, positive: bool = True) -> float:
    value = _field(obj, key, where, (int, float))
    if value < 0 or (positive and value == 0):
        raise TopologyError(f"{where}.{key}: must be {'> 0' if positive else '>= 0'}, got {value}")
    return float(value)


def topology_from_dict(doc: Any, default_name: str = "topology") -> Topology:
    """Build a :class:`Topology` from a parsed document, validating every field."""
    if not isinstance(doc, dict):
        raise TopologyError("top level: expected a mapping with 'sites' and 'links'")
    defaults = doc.get("defaults", {}) or {}
    if not isinstance(defaults, dict):
        raise TopologyError("defaults: expected a mapping")
    try:
        def_mem = parse_size(defaults.get("fpga_memory", "64MiB"))
    except TopologyError as exc:
        raise TopologyError(f"defaults.fpga_memory: {exc}") from None
    def_rate = defaults.get("line_rate_gbps", 10)
    if not isinstance(def_rate, int | float) or def_rate <= 0:
        raise TopologyError(f"defaults.line_rate_gbps: must be a positive number, got {def_rate!r}")
    raw_sites = doc.get("sites")
    if not isinstance(raw_sites, list) or not raw_sites:
        raise TopologyError("sites: missing or not a non-empty list")
    sites: list[Site] = []
    for i, entry in enumerate(raw_sites):
        where = f"sites[{i}]"
        if isinstance(entry, str):
            sites.append(Site(entry, def_mem, def_rate * 1e9))
            continue
        name = _field(entry, "name", where, str)
        mem = entry.get("fpga_memory", def_mem)
        try:
            mem = parse_size(mem)
        except TopologyError as exc:
            raise TopologyError(f"{where}.fpga_memory: {exc}") from None
        rate = _number(entry, "line_rate_gbps", where) if "line_rate_gbps" in entry else def_rate
        sites.append(Site(name, mem, rate * 1e9))
    names = [s.name for s in sites]
    dup = {x for x in names if names.count(x) > 1}
    if dup:
        raise TopologyError(f"sites: duplicate site name(s) {sorted(dup)}")
    raw_links = doc.get("links")
    if not isinstance(raw_links, list):
        raise TopologyError("links: missing or not a list")
    links: list[Link] = []
    seen: set[frozenset[str]] = set()
    for i, entry in enumerate(raw_links):
        where = f"links[{i}]"
        a = _field(entry, "a", where, str)
        b = _field(entry, "b", where, str)
        for end, key in ((a, "a"), (b, "b")):
            if end not in names:
                raise TopologyError(f"{where}.{key}: unknown site {end!r}")
        if a == b:
            raise TopologyError(f"{where}.b: link from {a!r} to itself")
        if frozenset((a, b)) in seen:
            raise TopologyError(f"{where}: duplicate link {a}-{b}")
        seen.add(frozenset((a, b)))
        lat = _number(entry, "latency_ms", where, positive=False)
        bw = _number(entry, "bandwidth_gbps", where)
        links.append(Link(a, b, lat / 1e3, bw * 1e9))
    name = doc.get("name", default_name)
    return Topology(str(name), sites, links, str(doc.get("provenance", "")).strip())


def load_topology(spec: str | Path) -> Topology:
    """Load a topology from a YAML file path or a shipped name (``nine-city``, ...)."""
    text: str
    label = str(spec)
    if str(spec) in SHIPPED:
        text = (
            resources.files("wanreduce.planner")
            .joinpath("topologies", f"{spec}.yaml")
            .read_text(encoding="utf-8")
        )
    else:
        path = Path(spec)
        if not path.is_file():
            raise TopologyError(f"topology file not found: {spec} (shipped: {', '.join(SHIPPED)})")
        text = path.read_text(encoding="utf-8")
        label = path.stem
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        pos = f" at line {mark.line + 1}" if mark is not None else ""
        raise TopologyError(f"{label}: not valid YAML{pos}") from None
    return topology_from_dict(doc, default_name=label)
