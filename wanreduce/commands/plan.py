"""``wanreduce plan``: pick synchronisation schedules for a WAN topology and FPGA memory sizes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from wanreduce.commands.slot_memory import slot_memory_option
from wanreduce.errors import WanreduceError
from wanreduce.planner import plan_report as pr
from wanreduce.planner.roundmodel import MEMORY_MODELS
from wanreduce.planner.topology import (
    FIELDS,
    SHIPPED,
    TopologyError,
    check_number,
    check_size,
    format_size,
    load_topology,
)

DEFAULT_MEMORY = "4MiB,64MiB,1GiB,16GiB"
MAP_BYTES = [10**6, 3 * 10**6, 10**7, 3 * 10**7, 10**8, 3 * 10**8, 10**9]
MAP_MEMORY = [2**k for k in range(20, 35)]


def _sizes(field: str) -> Callable[[click.Context, click.Parameter, str | None], list[int] | None]:
    """Option callback: a comma-separated list of sizes, each checked as topology field ``field``."""

    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
        if value is None:
            return None
        name = param.opts[0]
        items = [v for v in value.split(",") if v.strip()]
        if not items:
            raise WanreduceError(f"{name}: expected a comma-separated list of sizes in "
                                 f"{FIELDS[field].text()}, got {value!r}")
        try:
            return [check_size(field, v.strip(), name) for v in items]
        except TopologyError as exc:
            raise WanreduceError(str(exc)) from None

    return parse


def _size(field: str) -> Callable[[click.Context, click.Parameter, str], int]:
    """Option callback: one size, checked as topology field ``field``."""

    def parse(ctx: click.Context, param: click.Parameter, value: str) -> int:
        try:
            return check_size(field, value, param.opts[0])
        except TopologyError as exc:
            raise WanreduceError(str(exc)) from None

    return parse


def _eps(ctx: click.Context, param: click.Parameter, value: float) -> float:
    try:
        return check_number("eps", value, "--eps")
    except TopologyError as exc:
        raise WanreduceError(str(exc)) from None


def _out_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An output path whose directory exists and is writable: checked before any computation."""
    if value is None:
        return None
    folder = Path(value).parent
    if not folder.is_dir():
        raise WanreduceError(f"{param.opts[0]}: directory {str(folder)!r} does not exist "
                             f"(create it, or write to an existing directory)")
    if not os.access(folder, os.W_OK):
        raise WanreduceError(f"{param.opts[0]}: directory {str(folder)!r} is not writable")
    return value


def _board(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--board``: a board of ``wanreduce build``; anything else a one-line error."""
    from wanreduce.hdl.boards import BOARDS

    if value is not None and value not in BOARDS:
        raise WanreduceError(f"--board: must be one of {', '.join(BOARDS)}, got {value!r}")
    return value


def _board_capacity(board: str | None, slot_memory: str | None, memory: list[int] | None,
                    elements: int) -> Any:
    """The board's slot capacity for E = ``elements`` (None without ``--board``)."""
    if board is None:
        if slot_memory is not None:
            raise WanreduceError("--slot-memory: needs --board (the board whose slot memory "
                                 "it is)")
        return None
    if memory is not None:
        raise WanreduceError("--memory: not with --board (the board's slot capacity is the "
                             "memory axis)")
    from wanreduce.hdl.boards import BOARDS
    from wanreduce.hdl.boards.capacity import board_capacity

    try:
        return board_capacity(board, slot_memory or "onchip", elements,
                              BOARDS[board].defaults["width"])
    except ValueError as exc:
        raise WanreduceError(f"--elements-per-packet: {exc}") from None


@click.command("plan")
@click.option("--topology", "topology", default="nine-city", show_default=True,
              help=f"Topology YAML file, or a shipped name: {', '.join(SHIPPED)}.")
@click.option("--bytes", "nbytes", default="10MB", show_default=True, callback=_sizes("bytes"),
              help="Bytes each site contributes per synchronisation (comma-separated list).")
@click.option("--memory", default=None, callback=_sizes("fpga_memory"),
              help="Edge-FPGA memory sizes to evaluate, the same at every site (comma-separated). "
                   "Default: each site's fpga_memory if the topology file sets it, else "
                   f"{DEFAULT_MEMORY}.")
@click.option("--eps", default=1e-3, show_default=True, type=float, callback=_eps,
              help=f"Consensus target ||W_T..W_1 - J/n||_2 <= eps, in {FIELDS['eps'].text()}.")
@click.option("--memory-model", type=click.Choice(MEMORY_MODELS), default="shared", show_default=True,
              help="shared: one slot holds a group's running sum for a round trip (wanreduce core); "
                   "per-sender: the FPGA buffers each inbound stream separately; skew-only: shared "
                   "slots held from first to last arrival, senders paced open loop "
                   "(docs/planner.md).")
@click.option("--elements-per-packet", default=pr._MAX_ELEMENTS, show_default=True,
              type=click.IntRange(1), help="E: int32 elements per packet/slot (wire format).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              callback=_out_path,
              help="Write time-to-consensus vs memory (one line per family) to this PNG.")
@click.option("--map", "map_path", type=click.Path(dir_okay=False), default=None, callback=_out_path,
              help="Write the (bytes x memory) plane coloured by the winning family to this PNG.")
@click.option("--board", default=None, callback=_board,
              help="Take the memory axis from this board's real slot capacity (versa-ecp5, "
                   "alinx-ax7325b) and print core parameters it accepts; replaces --memory.")
@click.option("--slot-memory", default=None, callback=slot_memory_option,
              help="With --board: where the slots live, onchip (block RAM, default), dram "
                   "(the sums in the board's DDR3) or records (sums and per-slot state there: "
                   "S as the DDR3 holds; `wanreduce build` takes the parameters printed).")
@click.option("--hardware/--no-hardware", default=True, show_default=True,
              help="Print S, E, group tables and multicast groups for each best plan.")
@click.option("--crossover/--no-crossover", default=True, show_default=True,
              help="Find the memory intervals on which each in-network family wins (bisected "
                   "between the swept sizes) and judge the paper's finding over them.")
def plan(topology: str, nbytes: list[int], memory: list[int] | None, eps: float,
         memory_model: str, elements_per_packet: int, plot_path: str | None,
         map_path: str | None, board: str | None, slot_memory: str | None, hardware: bool,
         crossover: bool) -> None:
    """Best schedule per FPGA memory size, a table of every family, winner intervals, hardware.

    Time to consensus = rounds to reach eps x round time, from the analytic round model
    (docs/planner.md); the ring all-reduce baseline uses no FPGA.
    """
    try:
        topo = load_topology(topology)
    except TopologyError as exc:
        raise WanreduceError(str(exc)) from None
    memories: list[Any]
    cap = _board_capacity(board, slot_memory, memory, elements_per_packet)
    if cap is not None:
        memories = [cap.memory_bytes]
    elif memory is not None:
        memories = sorted(memory)
    elif topo.memory_from_file:
        memories = [None]  # each site's own fpga_memory
    else:
        memories = sorted(check_size("fpga_memory", m) for m in DEFAULT_MEMORY.split(","))
    chunk = elements_per_packet * pr.ELEMENT_BYTES
    smallest = min(topo.with_memory(m).memory.min() for m in memories)
    if smallest < chunk:
        where = "--memory" if memory is not None else "fpga_memory"
        raise WanreduceError(f"{where}: {format_size(smallest)} is smaller than one slot "
                             f"({chunk} B = E x 4 B); allowed >= {chunk} B")
    if plot_path and memories == [None]:
        raise WanreduceError("--plot: needs a memory sweep; give --memory (the topology file's "
                             "per-site memory is one point)")
    bdp = topo.long_haul_bdp()
    if cap is not None:
        source = (f"board {cap.board}, {cap.slot_memory} slots: S = {cap.slots} x E = "
                  f"{cap.elements} ({format_size(cap.memory_bytes)} of sums) at every site")
        if cap.core_limited:
            from wanreduce.hdl.params import SLOT_LIMIT_WHY  # pure Python

            where = "block RAM" if cap.slot_memory == "onchip" else "DRAM"
            source += (f" (its {where} holds S = {cap.memory_slots}, "
                       f"{format_size(cap.memory_slots_bytes)} of sums; "
                       f"the core takes S <= {cap.slots} while {SLOT_LIMIT_WHY[cap.slot_memory]}: "
                       f"docs/large_slots.md)")
    elif memories == [None]:
        source = "each site's fpga_memory from the topology file"
    elif memory is None:
        source = f"the default sweep {DEFAULT_MEMORY} at every site (the file sets none)"
    else:
        source = "--memory at every site" + (" (overrides the file's fpga_memory)"
                                             if topo.memory_from_file else "")
    click.echo(f"topology {topo.name}: {topo.n} sites, {len(topo.links)} links; "
               f"long-haul BDP (line rate x max RTT) = {format_size(bdp)}; "
               f"memory model: {memory_model}; memory: {source}; eps = {eps:g}")
    for b in nbytes:
        click.echo(f"\n== {format_size(b)} ({b} bytes) per synchronisation ==")
        results = []
        for m in memories:
            res = pr.evaluate(topo, b, m, eps, elements_per_packet, memory_model)
            results.append(res)
            click.echo(pr.format_result(res, topo, eps, elements_per_packet))
            if hardware:
                best = res.best_in_network
                hw = pr.hardware_plan(best.schedule, topo, m, elements_per_packet, memory_model)
                click.echo(f"  edge FPGAs for {best.schedule.label}:")
                click.echo(pr.format_hardware(hw, best.schedule, topo, board=cap))
        if crossover and len(memories) >= 2:
            lo, hi = memories[0], memories[-1]
            cache: dict = {}
            ivs = pr.winner_intervals(topo, b, lo, hi, eps, memory_model, elements_per_packet,
                                      cache=cache)
            click.echo(f"best in-network family over memory: {pr.format_intervals(ivs, bdp)}")
            found = pr.paper_verdict(ivs)
            click.echo(f"paper's finding (cliques of 3 at small memory, all-to-all at large): "
                       f"{'reproduced' if found else 'NOT reproduced'} over "
                       f"{format_size(lo)}..{format_size(hi)} (winners in order: "
                       f"{' -> '.join(iv.family for iv in ivs)})")
            own = pr.winner_intervals(topo, b, lo, hi, eps, memory_model, elements_per_packet,
                                      families=pr.PAPER_FINDING, cache=cache)
            click.echo(f"  between the paper's two families only: "
                       f"{'reproduced' if pr.paper_verdict(own) else 'NOT reproduced'} "
                       f"({pr.format_intervals(own, bdp)})")
        if plot_path:
            path = plot_path
            if len(nbytes) > 1:
                stem, dot, ext = plot_path.rpartition(".")
                path = f"{stem}-{b}.{ext}" if dot else f"{plot_path}-{b}"
            pr.plot_memory_sweep(results, path,
                                 f"{topo.name}, {format_size(b)}/sync, {memory_model} memory", bdp)
            click.echo(f"plot written to {path}")
    if map_path:
        mb = nbytes if len(nbytes) >= 2 else MAP_BYTES
        mm = memories if len(memories) >= 3 else MAP_MEMORY
        fams, ring = pr.winner_map(topo, mb, mm, eps, memory_model, elements_per_packet)
        pr.plot_map(mb, mm, fams, ring, map_path, f"{topo.name}, {memory_model} memory")
        click.echo(f"map written to {map_path}")
