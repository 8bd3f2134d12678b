"""Planner results: family tables per memory size, winner intervals, hardware parameters, plots.

Everything the ``wanreduce plan`` command prints or draws is computed here so that tests and
benchmarks use the same code path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .optimiser import Optimiser, Plan, best_plan, plan_rank
from .roundmodel import AGREEMENT_BYTES, RoundModel
from .schedules import Schedule
from .sharded import ShardedRound, hardware_phases
from .topology import Topology, format_size

try:  # the wire-format module is the source of truth for the packet payload
    from wanreduce.wire import MAX_ELEMENTS_DEFAULT as _MAX_ELEMENTS
except ImportError:  # pragma: no cover - wire.py not present
    _MAX_ELEMENTS = 499  # (2048 MTU - 20 IPv4 - 8 UDP - 22 agg header) // 4

ELEMENT_BYTES = 4
#: Families that use in-network aggregation (the ring baseline does not).
IN_NETWORK = ("all-to-all", "cliques", "grid", "tree", "exponential")


def is_in_network(family: str) -> bool:
    """True for schedules that aggregate in the edge FPGAs (everything but the ring)."""
    return family != "ring"


#: What the edge hardware needs for each memory model (printed with the plan; docs/planner.md).
HARDWARE_NEEDS = {
    "shared": "slots freed on completion and an ack to every remote contributor (the core "
              "releases on completion but sends results only to its local hosts); the host "
              "driver keeps w <= W/2 chunks in flight (lost-result recovery), so give the job "
              "2S slots for this rate",
    "per-sender": "one slot per inbound stream (S x m_r slot buffers at a site merging m_r "
                  "streams), acks as for shared",
    "skew-only": "senders paced open loop at the planned rate from a common start (clock "
                 "sync well under the arrival skew), the local contribution delayed to the last "
                 "remote arrival, release on completion without acks, and an eviction + "
                 "end-to-end resend path for slots a lost packet keeps open (not in the core today)",
}


@dataclass
class MemoryResult:
    """All families' best plans at one FPGA memory size (None: each site's own memory)."""

    memory: int | None
    plans: dict[str, Plan]
    colocated: dict[str, float]  # family -> time to consensus on the zero-latency cluster

    @property
    def best(self) -> Plan:
        """Fastest plan overall (may be the ring baseline)."""
        return best_plan(self.plans)

    @property
    def best_in_network(self) -> Plan:
        """Fastest plan that uses the edge FPGAs."""
        return self.best_among()

    def best_among(self, families: Sequence[str] | None = None) -> Plan:
        """Fastest in-network plan of ``families`` (all of them by default)."""
        cands = [p for f, p in self.plans.items()
                 if is_in_network(f) and (families is None or f in families)]
        return min(cands, key=plan_rank)


def memory_label(topo: Topology, memory: int | None) -> str:
    """``64MiB``, or the per-site range when the sites' own (file) memory is used."""
    if memory is not None:
        return format_size(memory)
    lo, hi = topo.memory.min(), topo.memory.max()
    span = format_size(lo) if lo == hi else f"{format_size(lo)}..{format_size(hi)}"
    return f"per site {span}"


def evaluate(
    topo: Topology,
    nbytes: int,
    memory: int | None,
    eps: float = 1e-3,
    elements_per_packet: int = _MAX_ELEMENTS,
    memory_model: str = "shared",
    colocated: bool = True,
) -> MemoryResult:
    """Optimise every family at one memory size, None: each site's own (and on the co-located ideal)."""
    t = topo.with_memory(memory)
    chunk = elements_per_packet * ELEMENT_BYTES
    plans = Optimiser(t, nbytes, eps, chunk, memory_model).run()
    co: dict[str, float] = {}
    if colocated:
        model = RoundModel(t.colocated(), nbytes, chunk, memory_model)
        for fam, p in plans.items():
            times = [model.round_time(r).time for r in p.schedule.rounds]
            k = p.rounds or 0
            co[fam] = sum(times[i % len(times)] for i in range(k)) if k else math.inf
    return MemoryResult(memory, plans, co)


@dataclass(frozen=True)
class Interval:
    """A stretch of the memory axis [lo, hi) on which one in-network family is the fastest."""

    lo: int
    hi: int
    family: str


def winner_intervals(
    topo: Topology,
    nbytes: int,
    lo: int,
    hi: int,
    eps: float = 1e-3,
    memory_model: str = "shared",
    elements_per_packet: int = _MAX_ELEMENTS,
    steps: int = 8,
    families: Sequence[str] | None = None,
    cache: dict[int, MemoryResult] | None = None,
) -> list[Interval]:
    """The best in-network family over uniform memory [lo, hi], as intervals.

    ``families``: compare only these (e.g. the paper's ``PAPER_FINDING``); ``cache``: evaluations
    by memory, shared between calls over the same topology, bytes and model.

    The axis is sampled at every factor of 2 from ``lo`` (and at ``hi``); every change between
    neighbours is bisected ``steps`` times in log memory (to ~2^(1/2^steps)), and a third family
    found inside a step is split out recursively. A family winning only inside one factor-2
    step at no sample or bisection point is not seen.
    """
    seen: dict[int, str] = {}
    done: dict[int, MemoryResult] = {} if cache is None else cache

    def winner(m: int) -> str:
        if m not in seen:
            if m not in done:
                done[m] = evaluate(topo, nbytes, m, eps, elements_per_packet, memory_model,
                                   colocated=False)
            seen[m] = done[m].best_among(families).family
        return seen[m]

    def split(a: int, b: int, depth: int) -> list[tuple[int, str]]:
        """(memory where a new winner starts, family) for the changes between a and b."""
        if winner(a) == winner(b):
            return []
        mid = int(round(math.sqrt(a * b)))
        if depth == 0 or mid in (a, b):
            return [(b, winner(b))]
        return split(a, mid, depth - 1) + split(mid, b, depth - 1)

    k = max(1, math.ceil(math.log2(hi / lo) - 1e-9)) if hi > lo else 0
    grid = sorted({lo, hi, *(min(hi, lo << i) for i in range(1, k))})
    starts = [(lo, winner(lo))]
    for a, b in zip(grid, grid[1:], strict=False):
        starts += split(a, b, steps)
    merged: list[tuple[int, str]] = []
    for m, fam in starts:
        if not merged or merged[-1][1] != fam:
            merged.append((m, fam))
    ends = [m for m, _ in merged[1:]] + [hi]
    return [Interval(m, e, f) for (m, f), e in zip(merged, ends, strict=True)]


PAPER_FINDING = ("cliques-3", "all-to-all")  # cliques of 3 at small memory, all-to-all at large


def paper_verdict(intervals: Sequence[Interval]) -> bool:
    """The paper's finding holds over the whole sweep: cliques of 3 win from the smallest memory
    up to one crossover, all-to-all from there to the largest, and nothing else wins between.
    Pass the intervals of all families (does the paper's pair still win?) or of
    ``PAPER_FINDING`` alone (does its crossover between its own two families hold?)."""
    return tuple(iv.family for iv in intervals) == PAPER_FINDING


def format_intervals(intervals: Sequence[Interval], bdp: float) -> str:
    """``cliques-3 [4MiB, 75MiB) then all-to-all [75MiB, 16GiB]; changes at 75MiB (0.2 x BDP)``."""
    last = len(intervals) - 1
    text = " then ".join(f"{iv.family} [{format_size(iv.lo)}, {format_size(iv.hi)}{']' if k == last else ')'}"
                      for k, iv in enumerate(intervals))
    changes = ", ".join(f"{format_size(iv.lo)} ({iv.lo / bdp:.2g} x BDP)" for iv in intervals[1:])
    return text + (f"; changes at {changes}" if changes else "; no change")


# -- plan -> hardware ----------------------------------------------------------------------
@dataclass
class HardwarePlan:
    """What the edge FPGAs need for one plan."""

    slots: int  # S: slots per site (each E elements); the smallest site's when they differ
    elements: int  # E: elements per packet / slot
    rounds: list[list[dict[str, object]]]  # per round, per site: bitmap, expected, group
    multicast: list[list[tuple[str, str, list[str]]]]  # per round: (group address, sender, receivers)
    max_senders: int
    labels: list[str] = field(default_factory=list)  # per entry of ``rounds``: "round t [phase]"
    site_slots: dict[str, int] = field(default_factory=dict)  # per site, from its own memory
    memory_model: str = "shared"


def hardware_plan(
    schedule: Schedule,
    topo: Topology,
    memory: int | None,
    elements_per_packet: int = _MAX_ELEMENTS,
    memory_model: str = "shared",
) -> HardwarePlan:
    """Core parameters S and E, per-round group tables (contributor bitmaps), multicast groups.

    ``memory`` None: each site's own memory from the topology (S then differs per site).
    """
    names = topo.names
    slot_bytes = elements_per_packet * ELEMENT_BYTES
    rounds: list[list[dict[str, object]]] = []
    mcast: list[list[tuple[str, str, list[str]]]] = []
    max_src = 1
    labels: list[str] = []
    for t, rnd in enumerate(schedule.rounds):
        table: list[dict[str, object]] = []
        groups: list[tuple[str, str, list[str]]] = []
        if isinstance(rnd, ShardedRound):  # one entry per phase; each FPGA merges one shard
            for label, tab, sends in hardware_phases(rnd, names, len(rounds)):
                rounds.append(sorted(tab, key=lambda e: names.index(str(e["site"]))))
                mcast.append(sends)
                labels.append(f"round {t + 1} {label}")
                max_src = max([max_src] + [int(e["expected"]) for e in tab])
            continue
        labels.append(f"round {t + 1}")
        if rnd.ring is not None:
            order = [names[i] for i in rnd.ring]
            for i, s in enumerate(order):
                groups.append((f"unicast {s}->{order[(i + 1) % len(order)]}", s, [order[(i + 1) % len(order)]]))
            rounds.append([{"site": s, "bitmap": 0, "expected": 0, "group": "ring (host)"} for s in names])
            mcast.append(groups)
            continue
        dests: dict[int, set[int]] = {}
        for gi, g in enumerate(rnd.groups):
            bitmap = sum(1 << s for s in g.senders)
            for r in g.receivers:
                table.append({"site": names[r], "bitmap": bitmap, "expected": len(g.senders),
                              "group": gi})
                max_src = max(max_src, len(g.senders))
            for s in g.senders:
                dests.setdefault(s, set()).update(x for x in g.receivers if x != s)
        for s in sorted(dests):
            if dests[s]:
                addr = f"239.{t % 256}.{s // 256}.{s % 256}"
                groups.append((addr, names[s], sorted(names[r] for r in dests[s])))
        rounds.append(sorted(table, key=lambda e: names.index(str(e["site"]))))
        mcast.append(groups)
    per = max_src if memory_model == "per-sender" else 1
    site_slots = {s.name: int(m // (slot_bytes * per))
                  for s, m in zip(topo.sites, topo.with_memory(memory).memory, strict=True)}
    return HardwarePlan(min(site_slots.values()), elements_per_packet, rounds, mcast, max_src,
                        labels, site_slots, memory_model)


def board_core_params(hw: HardwarePlan, board: str, slot_memory: str) -> dict[str, int]:
    """Core parameters for ``board`` running this plan, checked by the core's parameter check
    (``hdl/params.py``): the board's ports and width, S (power of two) and E from the plan, a
    group-table entry per round (or phase), the default job count. ValueError if rejected."""
    from wanreduce.hdl.boards import BOARDS  # pure Python: no Amaranth
    from wanreduce.hdl.params import DEFAULTS, check_slot_memory

    params = {**DEFAULTS, **BOARDS[board].defaults,
              "slots": 1 << (max(hw.slots, 1).bit_length() - 1), "elements": hw.elements,
              "groups": max(1, len(hw.rounds))}
    return check_slot_memory(slot_memory, **params)


def format_hardware(hw: HardwarePlan, schedule: Schedule, topo: Topology, board=None) -> str:
    """Text block: S, E, per-round group table, multicast groups; with ``board`` (a
    ``hdl.boards.capacity.SlotCapacity``) the core parameters that board accepts."""
    n = topo.n
    from wanreduce.hdl.params import (  # the RTL's limits (no Amaranth)
        SLOT_LIMIT_WHY,
        check_wired,
        max_slots,
    )

    core_slots = 1 << (max(hw.slots, 1).bit_length() - 1)  # the RTL's S is a power of two
    memory = board.slot_memory if board is not None else "onchip"
    limit = max_slots(memory)
    lines = [
        f"  core parameters: S = {core_slots} slots (power of two; memory holds {hw.slots}) x "
        f"E = {hw.elements} elements ({hw.elements * ELEMENT_BYTES} B/slot), contributors per slot "
        f"<= {hw.max_senders}"
        + ("  [exceeds the 32-bit contributor bitmap]" if hw.max_senders > 32 else "")
        + (f"  [beyond the core's S <= {limit}: {SLOT_LIMIT_WHY[memory]} (docs/large_slots.md)]"
           if core_slots > limit else "")
    ]
    if board is not None:
        try:
            params = board_core_params(hw, board.board, memory)
            lines.append(f"  {board.board} ({memory} slot memory) core parameters: "
                         + " ".join(f"--{k} {v}" for k, v in params.items())
                         + (f" --slot-memory {memory}" if memory != "onchip" else ""))
        except ValueError as exc:
            lines.append(f"  {board.board} ({memory} slot memory): this plan does "
                         f"not fit the core: {exc}")
        else:
            try:  # checked and planned, but not built: say so (the generator refuses it)
                check_wired(memory)
            except ValueError as exc:
                lines.append(f"  {board.board} ({memory} slot memory): not buildable yet, "
                             f"`wanreduce verilog` / `build` refuse it: {exc}")
    if any(isinstance(r, ShardedRound) for r in schedule.rounds):
        lines.append("  sharded: in each reduce-scatter level every FPGA merges only its own shard, "
                     "so all S slots serve that shard (chunk ids count from the shard's offset); "
                     "the result goes to the local hosts, which multicast it in the all-gather "
                     "(FPGAs pass it through, no slots); one group table per level")
    if len(set(hw.site_slots.values())) > 1:
        lines.append("  slots per site (own memory): "
                     + ", ".join(f"{k} {v}" for k, v in hw.site_slots.items()))
    lines.append(f"  needs ({hw.memory_model} memory model): {HARDWARE_NEEDS[hw.memory_model]}")
    for t, (table, groups) in enumerate(zip(hw.rounds, hw.multicast, strict=True)):
        label = hw.labels[t] if t < len(hw.labels) else f"round {t + 1}"
        lines.append(f"  {label}: group table (contributor bitmap, bit i = site i)")
        for e in table:
            bits = format(int(e["bitmap"]), f"0{n}b")[::-1] if e["expected"] else "-" * n
            lines.append(f"    {e['site']:>6}  {bits}  expect {e['expected']}  {e['group']}"
                         if isinstance(e["group"], str) and e["group"].startswith("shard") else
                         f"    {e['site']:>6}  {bits}  expect {e['expected']}")
        kind = "unicast shard streams" if "reduce-scatter" in label else "multicast groups"
        lines.append(f"  {label}: {kind} (sender -> receivers)")
        for addr, s, rs in groups:
            lines.append(f"    {addr:<16} {s} -> {','.join(rs)}")
    return "\n".join(lines)


# -- text table ----------------------------------------------------------------------------
def format_result(res: MemoryResult, topo: Topology, eps: float, elements: int = _MAX_ELEMENTS) -> str:
    """Text table of every family at one memory size."""
    mem = topo.with_memory(res.memory).memory
    lo, hi = (int(x // (elements * ELEMENT_BYTES)) for x in (mem.min(), mem.max()))
    s_slots = str(lo) if lo == hi else f"{lo}..{hi}"
    out = [
        f"FPGA memory {memory_label(topo, res.memory)} (S = {s_slots} slots of {elements} elements): "
        f"best {res.best.schedule.label} {res.best.time:.3f} s; best in-network "
        f"{res.best_in_network.schedule.label} {res.best_in_network.time:.3f} s"
    ]
    out.append(f"  (every round's time includes the driver's scale agreement, a {AGREEMENT_BYTES} B "
               f"all-reduce in each group before the data; 'agreement': its part of the time)")
    out.append(f"  {'family':<14}{'rounds':>7}{'time to eps':>13}{'agreement':>11}{'co-located':>12}"
               f"{'gap':>7}  {'bound':<10} schedule")
    for fam, p in sorted(res.plans.items(), key=lambda kv: kv[1].time):
        co = res.colocated.get(fam, math.nan)
        gap = p.time / co if co and np.isfinite(co) and co > 0 else math.nan
        rounds = "-" if p.rounds is None else str(p.rounds)
        bound = max(dict.fromkeys(p.bounds), key=p.bounds.count) if p.bounds else "-"  # ties: first round
        out.append(f"  {fam:<14}{rounds:>7}{p.time:>12.3f}s{p.agreement_time:>10.3f}s{co:>11.3f}s"
                   f"{gap:>6.1f}x  {bound:<10} {p.schedule.label}")
    return "\n".join(out)


# -- plots ---------------------------------------------------------------------------------
def plot_memory_sweep(
    results: Sequence[MemoryResult], path: str, title: str, bdp: float | None = None
) -> None:
    """Time to consensus against FPGA memory, one line per family (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = sorted({f for r in results for f in r.plans})
    mem = [r.memory for r in results]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for fam in fams:
        ys = [r.plans[fam].time if fam in r.plans else math.nan for r in results]
        style = "--" if fam == "ring" else "-"
        ax.plot(mem, ys, style, marker="o", ms=3, label=fam)
    if bdp:
        ax.axvline(bdp, color="grey", lw=0.8, ls=":")
        ax.text(bdp, ax.get_ylim()[1], " long-haul BDP", va="top", fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("edge FPGA memory per site (bytes)")
    ax.set_ylabel("time to epsilon-consensus (s)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def winner_map(
    topo: Topology,
    byte_sizes: Sequence[int],
    memories: Sequence[int],
    eps: float = 1e-3,
    memory_model: str = "shared",
    elements_per_packet: int = _MAX_ELEMENTS,
) -> tuple[list[list[str]], list[list[bool]]]:
    """Winning in-network family per (bytes, memory) cell, and whether the ring beats it."""
    fams: list[list[str]] = []
    ring: list[list[bool]] = []
    for b in byte_sizes:
        row, rrow = [], []
        for m in memories:
            res = evaluate(topo, b, m, eps, elements_per_packet, memory_model, colocated=False)
            row.append(res.best_in_network.family)
            rrow.append(res.best.family == "ring")
        fams.append(row)
        ring.append(rrow)
    return fams, ring


def plot_map(
    byte_sizes: Sequence[int],
    memories: Sequence[int],
    fams: list[list[str]],
    ring: list[list[bool]],
    path: str,
    title: str,
) -> None:
    """(bytes x memory) plane coloured by the winning in-network family; 'r' where ring wins."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    names = sorted({f for row in fams for f in row})
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf"]
    grid = np.array([[names.index(f) for f in row] for row in fams])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.imshow(grid, origin="lower", aspect="auto", cmap=ListedColormap(palette[: len(names)]),
              vmin=-0.5, vmax=len(names) - 0.5)
    for i, row in enumerate(ring):
        for j, r in enumerate(row):
            if r:
                ax.text(j, i, "r", ha="center", va="center", fontsize=7, color="white")
    ax.set_xticks(range(len(memories)), [format_size(m) for m in memories], rotation=45, fontsize=7)
    ax.set_yticks(range(len(byte_sizes)), [format_size(b) for b in byte_sizes], fontsize=7)
    ax.set_xlabel("edge FPGA memory per site")
    ax.set_ylabel("bytes per synchronisation")
    ax.set_title(title + "\n(colour: best in-network family; r: ring all-reduce baseline is faster)",
                 fontsize=9)
    ax.legend(handles=[Patch(color=palette[i], label=f) for i, f in enumerate(names)],
              fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
