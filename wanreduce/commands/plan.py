"""``wanreduce plan``: pick synchronisation schedules for a WAN topology and FPGA memory sizes."""

from __future__ import annotations

import click

from wanreduce.errors import WanreduceError
from wanreduce.planner import plan_report as pr
from wanreduce.planner.roundmodel import MEMORY_MODELS
from wanreduce.planner.topology import (
    SHIPPED,
    TopologyError,
    format_size,
    load_topology,
    parse_size,
)

DEFAULT_MEMORY = "4MiB,64MiB,1GiB,16GiB"
MAP_BYTES = [10**6, 3 * 10**6, 10**7, 3 * 10**7, 10**8, 3 * 10**8, 10**9]
MAP_MEMORY = [2**k for k in range(20, 35)]


def _sizes(value: str, param: str) -> list[int]:
    try:
        sizes = [parse_size(v) for v in value.split(",") if v.strip()]
    except TopologyError as exc:
        raise click.BadParameter(str(exc), param_hint=param) from None
    if not sizes or any(s <= 0 for s in sizes):
        raise click.BadParameter("expected a comma-separated list of positive sizes", param_hint=param)
    return sizes


@click.command("plan")
@click.option("--topology", "topology", default="nine-city", show_default=True,
              help=f"Topology YAML file, or a shipped name: {', '.join(SHIPPED)}.")
@click.option("--bytes", "nbytes", default="10MB", show_default=True,
              help="Bytes each site contributes per synchronisation (comma-separated list).")
@click.option("--memory", default=DEFAULT_MEMORY, show_default=True,
              help="Edge-FPGA memory sizes per site to evaluate (comma-separated).")
@click.option("--eps", default=1e-3, show_default=True, type=click.FloatRange(0, 1, min_open=True),
              help="Consensus target ||W_T..W_1 - J/n||_2 <= eps.")
@click.option("--memory-model", type=click.Choice(MEMORY_MODELS), default="shared", show_default=True,
              help="shared: one slot holds a group's running sum (wanreduce core); "
                   "per-sender: the FPGA buffers each inbound stream separately.")
@click.option("--elements-per-packet", default=pr._MAX_ELEMENTS, show_default=True,
              type=click.IntRange(1), help="E: int32 elements per packet/slot (wire format).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write time-to-consensus vs memory (one line per family) to this PNG.")
@click.option("--map", "map_path", type=click.Path(dir_okay=False), default=None,
              help="Write the (bytes x memory) plane coloured by the winning family to this PNG.")
@click.option("--hardware/--no-hardware", default=True, show_default=True,
              help="Print S, E, group tables and multicast groups for each best plan.")
@click.option("--crossover/--no-crossover", default=True, show_default=True,
              help="Bisect the memory at which the best in-network family changes.")
def plan(topology: str, nbytes: str, memory: str, eps: float, memory_model: str,
         elements_per_packet: int, plot_path: str | None, map_path: str | None,
         hardware: bool, crossover: bool) -> None:
    """Best schedule per FPGA memory size, a table of every family, crossovers and hardware.

    Time to consensus = rounds to reach eps x round time, from the analytic round model
    (docs/planner.md); the ring all-reduce baseline uses no FPGA.
    """
    try:
        topo = load_topology(topology)
    except TopologyError as exc:
        raise WanreduceError(str(exc)) from None
    byte_sizes = _sizes(nbytes, "--bytes")
    memories = sorted(_sizes(memory, "--memory"))
    chunk = elements_per_packet * pr.ELEMENT_BYTES
    if memories[0] < chunk:
        raise click.BadParameter(f"memory {memories[0]} B is smaller than one {chunk}-byte slot",
                                 param_hint="--memory")
    bdp = topo.long_haul_bdp()
    click.echo(f"topology {topo.name}: {topo.n} sites, {len(topo.links)} links; "
               f"long-haul BDP (line rate x max RTT) = {format_size(bdp)}; "
               f"memory model: {memory_model}; eps = {eps:g}")
    for b in byte_sizes:
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
                click.echo(pr.format_hardware(hw, best.schedule, topo))
        if crossover and len(memories) >= 2:
            cx = pr.crossover(topo, b, memories[0], memories[-1], eps, memory_model,
                              elements_per_packet)
            if cx is None:
                click.echo(f"crossover: none - {results[0].best_in_network.family} wins across "
                           f"{format_size(memories[0])}..{format_size(memories[-1])}")
            else:
                m_x, lo_f, hi_f = cx
                click.echo(f"crossover: {lo_f} -> {hi_f} at {format_size(m_x)} of FPGA memory "
                           f"({m_x / bdp:.2f} x long-haul BDP)")
        first, last = results[0].best_in_network.family, results[-1].best_in_network.family
        found = first == "cliques-3" and last == "all-to-all"
        click.echo(f"paper's finding (cliques of 3 at small memory, all-to-all at large): "
                   f"{'reproduced' if found else 'NOT reproduced'} "
                   f"(best in-network: {first} at {format_size(memories[0])}, "
                   f"{last} at {format_size(memories[-1])})")
        if plot_path:
            path = plot_path
            if len(byte_sizes) > 1:
                stem, dot, ext = plot_path.rpartition(".")
                path = f"{stem}-{b}.{ext}" if dot else f"{plot_path}-{b}"
            pr.plot_memory_sweep(results, path,
                                 f"{topo.name}, {format_size(b)}/sync, {memory_model} memory", bdp)
            click.echo(f"plot written to {path}")
    if map_path:
        mb = byte_sizes if len(byte_sizes) >= 2 else MAP_BYTES
        mm = memories if len(memories) >= 3 else MAP_MEMORY
        fams, ring = pr.winner_map(topo, mb, mm, eps, memory_model, elements_per_packet)
        pr.plot_map(mb, mm, fams, ring, map_path, f"{topo.name}, {memory_model} memory")
        click.echo(f"map written to {map_path}")
