"""WAN topology as data: sites, links, per-site edge-FPGA memory and line rate.

A topology file (YAML) lists sites and undirected links with one-way latency (ms) and bandwidth
(Gb/s). The planner routes over the link graph (shortest one-way latency), so every pair of
sites has a path delay, a hop list and a set of directed links its traffic uses. Malformed files
raise :class:`TopologyError` with one line naming the offending field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
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


@dataclass(frozen=True)
class Bounds:
    """Allowed closed range of one numeric input, and how to show it in an error."""

    lo: float
    hi: float
    unit: str

    def text(self) -> str:
        """The range as the error message shows it (sizes in binary units)."""
        if self.unit == "bytes":
            return f"[{format_size(self.lo)}, {format_size(self.hi)}]"
        return f"[{self.lo:g}, {self.hi:g}]" + (f" {self.unit}" if self.unit else "")


#: The one table of allowed ranges: topology-file fields and the ``wanreduce plan`` options that
#: set the same quantity (``--memory`` is ``fpga_memory``). Every input is checked here only.
FIELDS: dict[str, Bounds] = {
    "latency_ms": Bounds(0.0, 10_000.0, "ms"),  # one-way; 10 s covers any terrestrial/GEO path
    "bandwidth_gbps": Bounds(1e-3, 1e5, "Gb/s"),  # 1 Mb/s .. 100 Tb/s
    "line_rate_gbps": Bounds(1e-3, 1e5, "Gb/s"),
    "fpga_memory": Bounds(1, 2**40, "bytes"),  # per site; >= one slot is checked with E
    "bytes": Bounds(1, 2**40, "bytes"),  # per site per synchronisation
    "eps": Bounds(1e-9, 1.0, ""),  # consensus target ||W_T..W_1 - J/n||_2 <= eps
}

#: Keys a topology file may use at each level (anything else is a typo and is refused).
KEYS: dict[str, tuple[str, ...]] = {
    "top level": ("name", "provenance", "defaults", "sites", "links"),
    "defaults": ("fpga_memory", "line_rate_gbps"),
    "site": ("name", "fpga_memory", "line_rate_gbps"),
    "link": ("a", "b", "latency_ms", "bandwidth_gbps"),
}


def check_number(name: str, value: Any, where: str | None = None) -> float:
    """``value`` as a finite float inside ``FIELDS[name]``, else a one-line TopologyError."""
    b = FIELDS[name]
    label = where or name
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and math.isfinite(value) and b.lo <= value <= b.hi:
        return float(value)
    raise TopologyError(f"{label}: must be a number in {b.text()}, got {value!r}")


def check_size(name: str, value: Any, where: str | None = None) -> int:
    """A byte size (``64MiB``, ``1e9``, ``4096``) inside ``FIELDS[name]``, else TopologyError."""
    b = FIELDS[name]
    label = where or name
    try:
        n = parse_size(value)
    except TopologyError as exc:
        raise TopologyError(f"{label}: {exc}; allowed {b.text()}") from None
    if not b.lo <= n <= b.hi:
        raise TopologyError(f"{label}: must be a size in {b.text()}, got {value!r}")
    return n


def parse_size(text: str | int | float) -> int:
    """Parse a byte size such as ``64MiB``, ``1GB``, ``4096`` into bytes (KiB = 1024, KB = 1000)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if not math.isfinite(text) or text < 0:
            raise TopologyError(f"not a byte size: {text!r}")
        return int(text)
    m = _SIZE_RE.match(str(text))
    if not m:
        raise TopologyError(f"not a byte size: {text!r} (use e.g. 64MiB, 1GB, 4096)")
    value, prefix, binary = float(m.group(1)), m.group(2).upper(), m.group(3)
    power = "KMGTP".index(prefix) + 1 if prefix else 0
    return int(round(value * (1024 if binary else 1000) ** power))


def format_size(n: float) -> str:
    """Human-readable binary size (``64MiB``) for tables."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
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
    memory_from_file: bool = False  # the file set fpga_memory (defaults or a site)
    index: dict[str, int] = field(init=False)
    directed: list[tuple[int, int]] = field(init=False)
    dir_bw: np.ndarray = field(init=False)
    dir_latency: np.ndarray = field(init=False)
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
        self.dir_latency = np.repeat([lk.latency_s for lk in self.links], 2).astype(float)
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

    def multicast_tree(self, src: int, dests: Iterable[int]) -> dict[int, list[tuple[int, int]]]:
        """``src``'s shortest-latency multicast tree to ``dests``: node -> sorted (directed-link
        index, child) pairs, the union of the routes (one copy per directed link). The simulator
        and the WAN emulator replicate along it."""
        eidx = {e: k for k, e in enumerate(self.directed)}
        children: dict[int, set[tuple[int, int]]] = {}
        for r in dests:
            path = self.paths[src][r]
            for u, v in zip(path, path[1:], strict=False):
                children.setdefault(u, set()).add((eidx[(u, v)], v))
        return {u: sorted(x) for u, x in children.items()}

    def with_memory(self, memory: int | None) -> Topology:
        """The same topology with every site's FPGA memory set to ``memory`` bytes (None: as is)."""
        if memory is None:
            return self
        return replace(self, sites=[replace(s, fpga_memory=int(memory)) for s in self.sites],
                       memory_from_file=False)

    def colocated(self) -> Topology:
        """The ideal co-located cluster: same sites, links and bandwidths, zero latency."""
        return replace(self, name=self.name + "-colocated",
                       links=[replace(lk, latency_s=0.0) for lk in self.links])

    def long_haul_bdp(self) -> float:
        """Bytes in flight to fill the worst route: max line rate x max round-trip time."""
        return float(self.line_rate.max() * 2 * self.delay.max())


def _keys(obj: Any, level: str, where: str) -> dict[str, Any]:
    """``obj`` as a mapping whose keys are all in ``KEYS[level]`` (a typo names the key)."""
    if not isinstance(obj, dict):
        raise TopologyError(f"{where}: expected a mapping with keys {', '.join(KEYS[level])}, "
                            f"got {obj!r}")
    for key in obj:
        if key not in KEYS[level]:
            raise TopologyError(f"{where}.{key}: unknown key (allowed: {', '.join(KEYS[level])})")
    return obj


def _name(obj: dict[str, Any], key: str, where: str) -> str:
    """A required site-name field: text (quote names YAML reads as numbers or booleans)."""
    if key not in obj:
        raise TopologyError(f"{where}.{key}: missing (a site name)")
    value = obj[key]
    if not isinstance(value, str) or not value:
        raise TopologyError(f"{where}.{key}: expected a site name (text; quote names YAML reads "
                            f"as numbers or booleans), got {value!r}")
    return value


def _required(obj: dict[str, Any], key: str, where: str) -> float:
    if key not in obj:
        raise TopologyError(f"{where}.{key}: missing (a number in {FIELDS[key].text()})")
    return check_number(key, obj[key], f"{where}.{key}")


def topology_from_dict(doc: Any, default_name: str = "topology") -> Topology:
    """Build a :class:`Topology` from a parsed document, validating every field."""
    if not isinstance(doc, dict):
        raise TopologyError("top level: expected a mapping with 'sites' and 'links'")
    _keys(doc, "top level", "top level")
    defaults = _keys(doc.get("defaults") or {}, "defaults", "defaults")
    from_file = "fpga_memory" in defaults
    def_mem = check_size("fpga_memory", defaults.get("fpga_memory", "64MiB"), "defaults.fpga_memory")
    def_rate = check_number("line_rate_gbps", defaults.get("line_rate_gbps", 10),
                            "defaults.line_rate_gbps")
    raw_sites = doc.get("sites")
    if not isinstance(raw_sites, list) or not raw_sites:
        raise TopologyError("sites: missing or not a non-empty list")
    sites: list[Site] = []
    for i, entry in enumerate(raw_sites):
        where = f"sites[{i}]"
        if isinstance(entry, str):
            sites.append(Site(entry, def_mem, def_rate * 1e9))
            continue
        if not isinstance(entry, dict):
            raise TopologyError(f"{where}: expected a site name (text) or a mapping with 'name', "
                                f"got {entry!r}")
        _keys(entry, "site", where)
        name = _name(entry, "name", where)
        mem = def_mem
        if "fpga_memory" in entry:
            mem, from_file = check_size("fpga_memory", entry["fpga_memory"], f"{where}.fpga_memory"), True
        rate = def_rate
        if "line_rate_gbps" in entry:
            rate = check_number("line_rate_gbps", entry["line_rate_gbps"], f"{where}.line_rate_gbps")
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
        _keys(entry, "link", where)
        a = _name(entry, "a", where)
        b = _name(entry, "b", where)
        for end, key in ((a, "a"), (b, "b")):
            if end not in names:
                raise TopologyError(f"{where}.{key}: unknown site {end!r}")
        if a == b:
            raise TopologyError(f"{where}.b: link from {a!r} to itself")
        if frozenset((a, b)) in seen:
            raise TopologyError(f"{where}: duplicate link {a}-{b}")
        seen.add(frozenset((a, b)))
        lat = _required(entry, "latency_ms", where)
        bw = _required(entry, "bandwidth_gbps", where)
        links.append(Link(a, b, lat / 1e3, bw * 1e9))
    name = doc.get("name", default_name)
    return Topology(str(name), sites, links, str(doc.get("provenance", "")).strip(), from_file)


class _Loader(yaml.SafeLoader):
    """Safe YAML loader that reads ``1e3`` as a number (YAML 1.2; PyYAML's 1.1 rules need a dot)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


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
        doc = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        pos = f" at line {mark.line + 1}" if mark is not None else ""
        raise TopologyError(f"{label}: not valid YAML{pos}") from None
    return topology_from_dict(doc, default_name=label)
