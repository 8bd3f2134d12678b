"""``wanreduce loopback``: host drivers all-reduce through the simulated RTL core over UDP."""

from __future__ import annotations

import click

from wanreduce.commands.verilog import core_options, core_params
from wanreduce.errors import WanreduceError


def print_summary(r) -> None:
    """A short readable summary of a loopback run."""
    from rich.console import Console
    from rich.table import Table

    t = Table(show_header=False, box=None, pad_edge=False)
    status = "[green]bit-exact with the golden model[/]" if r.verified else "[red]MISMATCH[/]"
    t.add_row("result", f"{r.sites} sites x {r.rounds} round(s) x {r.elements:,} {r.dtype}: {status}")
    t.add_row("packets", f"{r.packets_sent:,} contributions sent + {r.retransmissions} retransmissions, "
                         f"{r.results_out:,} results from the core")
    t.add_row("timers", "retransmission timeout at the end " + ", ".join(f"{x:.2f}" for x in r.final_rto) + " s")
    t.add_row("outcomes", ", ".join(f"{k} {v:,}" for k, v in r.outcomes.items()) or "-")
    t.add_row("drops", ", ".join(f"{k} {v:,}" for k, v in r.drops.items()) or "none")
    t.add_row("simulated", f"{r.cycles:,} cycles ({r.cycles_per_element:.2f} cycles/element incl. idle), "
                           f"wall time {r.wall_s:.1f} s")
    t.add_row("core", ", ".join(f"{k}={v}" for k, v in r.core.items()))
    Console().print(t)


def run_and_report(**kw) -> None:
    from rich.console import Console

    from wanreduce.host.loopback import run_loopback
    from wanreduce.sim.simulator import SimulatorError

    console = Console(stderr=True)
    try:
        with console.status("starting") as status:
            r = run_loopback(progress=lambda m: (status.update(m), console.log(m)), **kw)
    except (SimulatorError, ValueError, RuntimeError, TimeoutError) as exc:
        raise WanreduceError(str(exc).splitlines()[0]) from None
    print_summary(r)
    if not r.verified:
        raise WanreduceError("results differ from the golden model: " + "; ".join(r.mismatches[:5]))


@click.command("loopback")
@click.option("--sites", type=click.IntRange(1, 32), default=3, show_default=True, help="site processes (senders)")
@click.option("--elements", type=click.IntRange(1, None), default=4096, show_default=True, help="tensor length per site")
@click.option("--rounds", type=click.IntRange(1, None), default=1, show_default=True, help="all-reduces per site")
@click.option("--dtype", type=click.Choice(["float32", "float16", "bfloat16"]), default="float32", show_default=True)
@click.option("--sim", type=click.Choice(["verilator", "icarus"]), default=None, help="simulator (default $SIM or verilator)")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--timeout", type=click.FloatRange(1, None), default=120.0, show_default=True,
              help="seconds a site may go without progress before it fails")
@core_options(prefix="core-")
def loopback(sites, elements, rounds, dtype, sim, seed, timeout, **core) -> None:
    """N host-driver processes all-reduce random tensors through the generated core in simulation.

    A UDP bridge on 127.0.0.1 wraps the drivers' datagrams into Ethernet/IPv4/UDP frames for the
    core's AXI4-Stream ports and multicasts its result frames back; every result is compared
    with the golden model.
    """
    params = core_params(**core)
    run_and_report(sites=sites, elements=elements, rounds=rounds, dtype=dtype, sim=sim, core=params,
                   seed=seed, timeout=timeout)
