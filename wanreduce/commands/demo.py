"""``wanreduce demo``: the end-to-end story in one command (what ``make demo`` runs).

1. Generate the default core's Verilog (``wanreduce_core.sv`` in ``--out``).
2. Three sites — three separate OS processes running the host driver with real UDP sockets —
   all-reduce a tensor through that Verilog running in simulation (the UDP bridge plays the
   network and its multicast replication).
3. Every site's result is verified bit for bit against the golden model and summarised.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from wanreduce.commands.loopback import run_and_report


@click.command("demo")
@click.option("--sites", type=click.IntRange(2, 32), default=3, show_default=True, help="contributing sites")
@click.option("--elements", type=click.IntRange(1, None), default=10_000, show_default=True, help="tensor length")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("build/demo"),
              show_default=True, help="where to write the Verilog")
@click.option("--sim", type=click.Choice(["verilator", "icarus"]), default=None, help="simulator (default $SIM or verilator)")
def demo(sites: int, elements: int, out_dir: Path, sim: str | None) -> None:
    """Generate the core's Verilog, all-reduce through it in simulation, verify, summarise."""
    from wanreduce.commands.verilog import write_verilog
    from wanreduce.hdl.core import DEFAULTS

    params = dict(DEFAULTS)
    t0 = time.perf_counter()
    path = write_verilog(out_dir, params)
    click.echo(f"[1/2] Verilog for the default core: {path} in {time.perf_counter() - t0:.1f} s")
    click.echo(f"[2/2] {sites} sites all-reduce {elements:,} float32 elements each through it over UDP:")
    run_and_report(sites=sites, elements=elements, rounds=1, dtype="float32", sim=sim, core=params)
