"""``wanreduce build``: board sources + constraints, and (open-flow boards) the bitstream."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import click

from wanreduce.commands.slot_memory import slot_memory_option
from wanreduce.commands.verilog import core_options, core_params
from wanreduce.errors import WanreduceError


def board_params(board, ctx: click.Context, kw: dict, slot_memory: str = "onchip") -> dict:
    """Core parameters: the board's defaults for any option the user did not give; ``slots``
    checked against ``slot_memory``'s range (``records``: up to 2^20)."""
    from click.core import ParameterSource

    for name, value in board.defaults.items():
        if ctx.get_parameter_source(name) in (ParameterSource.DEFAULT, None):
            kw[name] = value
    return core_params(slot_memory, **kw)


def run_build(board, params: dict, out: Path, *, bitstream: bool, core_mhz: float | None = None,
              nextpnr_opts=(), slot_memory: str = "onchip", dram_selftest: bool = False,
              dram_store_test: bool = False) -> Path:
    """Write the build tree into ``out``; with ``bitstream`` run the open flow. Returns ``out``."""
    from wanreduce.hdl.boards import prepare, yowasp_env

    try:
        plan = prepare(board, params, core_mhz=core_mhz, nextpnr_opts=nextpnr_opts,
                       slot_memory=slot_memory, dram_selftest=dram_selftest,
                       dram_store_test=dram_store_test)
    except ValueError as exc:
        raise WanreduceError(str(exc)) from None
    try:
        plan.extract(str(out))
    except OSError as exc:
        raise WanreduceError(f"cannot write {out}: {exc.strerror}") from None
    if bitstream:
        if not board.open_flow:
            raise WanreduceError(f"{board.name}: no open flow; run the Vivado script "
                                 f"build_{board.top_name}.sh in {out} on a machine with Vivado")
        log = out / "flow.log"
        with log.open("w") as fh:
            res = subprocess.run(["sh", f"build_{board.top_name}.sh"], cwd=out, env=yowasp_env(),
                                 stdout=fh, stderr=subprocess.STDOUT)
        if res.returncode != 0:
            tail = [ln for ln in log.read_text().splitlines() if ln.strip()][-1:]
            raise WanreduceError(f"{board.name}: open flow failed (exit {res.returncode}): "
                                 f"{tail[0] if tail else ''} (see {log})")
    return out


@click.command("build")
@click.option("--board", required=True, type=click.Choice(["versa-ecp5", "alinx-ax7325b"]),
              help="target board")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="build directory [default: build/boards/BOARD]")
@click.option("--bitstream", is_flag=True,
              help="run the open flow (yowasp yosys + nextpnr + ecppack) and write the .bit")
@click.option("--core-mhz", type=float, default=None,
              help="core clock in MHz: versa-ecp5 125, 100, 62.5, 50 or 40 (default, see docs/boards.md); "
                   "alinx-ax7325b fixed at 156.25")
@click.option("--slot-memory", default="onchip", show_default=True, callback=slot_memory_option,
              help="where the core's slots live: onchip (block RAM), dram (the sums in the board's "
                   "DDR3 through LiteDRAM) or records (the sums and the per-slot records there: "
                   "S up to what the DDR3 holds, e.g. 32768 at E 499 on versa-ecp5)")
@click.option("--dram-selftest", is_flag=True,
              help="versa-ecp5: build the DRAM bring-up design instead of the core (LiteDRAM "
                   "controller + AXI self-test, LEDs; docs/boards.md)")
@click.option("--dram-store-test", is_flag=True,
              help="versa-ecp5: build the core's DRAM path with a stand-in for the core (the "
                   "DRAM slot store and an exerciser, through the width converter onto LiteDRAM; "
                   "docs/boards.md)")
@click.option("--seed", type=click.IntRange(min=1), default=None,
              help="nextpnr placement seed (open flow; default: nextpnr's own)")
@core_options
@click.pass_context
def build(ctx: click.Context, board: str, out_dir: Path | None, bitstream: bool,
          core_mhz: float | None, slot_memory: str, dram_selftest: bool, dram_store_test: bool,
          seed: int | None, **kw: int) -> None:
    """Board top level (core + Ethernet MACs + LEDs), constraints and build script; optionally
    the bitstream. Board defaults: versa-ecp5 ports=1 width=64; alinx-ax7325b ports=2 width=64."""
    from wanreduce.hdl.boards import BOARDS

    b = BOARDS[board]
    params = board_params(b, ctx, kw, slot_memory)
    out = out_dir or Path("build") / "boards" / board
    t0 = time.perf_counter()
    run_build(b, params, out, bitstream=bitstream, core_mhz=core_mhz, slot_memory=slot_memory,
              dram_selftest=dram_selftest, dram_store_test=dram_store_test,
              nextpnr_opts=() if seed is None else ("--seed", str(seed)))
    desc = ("DRAM self-test, no core" if dram_selftest else
            "DRAM slot store and exerciser, no core" if dram_store_test else
            ", ".join(f"{k}={v}" for k, v in params.items()) + f", {slot_memory} slot memory")
    desc += f", core clock {core_mhz or b.core_mhz:g} MHz"
    what = f"bitstream {out / (b.top_name + '.bit')}" if bitstream else f"sources in {out}"
    click.echo(f"{board}: {what} ({desc}) in {time.perf_counter() - t0:.1f} s")
    if bitstream:
        from wanreduce.commands.report import format_report, parse_nextpnr_report
        rep = out / f"{b.top_name}.report.json"
        if rep.exists():
            click.echo(format_report(parse_nextpnr_report(rep)))
