"""``wanreduce verilog``: write the core as one Verilog module, ``wanreduce_core``."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import click

from wanreduce.commands.slot_memory import slot_memory_option
from wanreduce.errors import WanreduceError

CORE_NAME = "wanreduce_core"


def core_options(f=None, *, prefix: str = ""):
    """The core's parameters as click options (shared by verilog, loopback, report, build, ...).

    ``prefix`` renames them (``--core-elements``) where a command has options of its own with
    the same names; the values arrive as keyword arguments ``core_<name>`` then (see
    :func:`core_params`, which accepts both).
    """
    from wanreduce.hdl.core import DEFAULTS

    helps = {
        "ports": "network ingress ports P (1..8)",
        "width": "AXI4-Stream data width W in bits (64..512, power of two)",
        "slots": "reorder-buffer slots S (power of two)",
        "elements": "maximum int32 elements per packet E",
        "groups": "group-table entries G (1..32)",
        "jobs": "job-table entries J (1..16)",
    }

    def decorate(fn):
        for name in reversed(list(DEFAULTS)):
            dest = f"{prefix.replace('-', '_')}{name}"
            fn = click.option(f"--{prefix}{name}", dest, type=int, default=DEFAULTS[name],
                              show_default=True, help=helps[name])(fn)
        return fn

    return decorate(f) if f is not None else decorate


def core_params(slot_memory: str = "onchip", **kw: int) -> dict:
    """Validate core parameters (names with or without a ``core_`` prefix; ``slots`` against
    ``slot_memory``'s range); a bad one becomes a one-line CLI error."""
    from wanreduce.hdl.core import CoreParams

    kw = {k.removeprefix("core_"): v for k, v in kw.items()}
    try:
        return dict(CoreParams(slot_memory, **kw))
    except ValueError as exc:
        raise WanreduceError(str(exc)) from None


def port_list(params: dict, slot_memory: str = "onchip") -> list[tuple[str, str, int]]:
    """(Verilog port name, direction, width) of the core, clock and reset first."""
    from amaranth.lib import wiring

    from wanreduce.hdl.core import WanreduceCore

    core = WanreduceCore(slot_memory=slot_memory, **params)
    core._MustUse__silence = True  # only its signature is read
    rows = [("clk", "input", 1), ("rst", "input", 1)]
    for path, member, value in core.signature.flatten(core):
        name = "__".join(str(p) for p in path)
        rows.append((name, "input" if member.flow == wiring.In else "output", len(value)))
    return rows


def checked_ports(params: dict, slot_memory: str = "onchip") -> list[tuple[str, str, int]]:
    """:func:`port_list`, the core's constructor checking what involves several parameters (e.g.
    W 512 with records) before anything is converted; its refusal a one-line CLI error."""
    try:
        return port_list(params, slot_memory)
    except ValueError as exc:
        raise WanreduceError(str(exc)) from None


def write_verilog(out: Path, params: dict, slot_memory: str = "onchip", pending: str = "vector") -> Path:
    """Generate (cached) and copy ``wanreduce_core.sv`` into ``out``; returns its path. ``pending``:
    the reducer's pending store (``hdl.params.PENDING_STORES``)."""
    from wanreduce.hdl.core import WanreduceCore
    from wanreduce.sim.simulator import generate_verilog

    extra = {"slot_memory": slot_memory} if slot_memory != "onchip" else {}  # same cache key as before
    if pending != "vector":  # likewise: the default's key is unchanged
        extra["pending"] = pending
    src = generate_verilog(WanreduceCore, name=CORE_NAME, params={**params, **extra})
    out.mkdir(parents=True, exist_ok=True)
    dst = out / f"{CORE_NAME}.sv"
    shutil.copyfile(src, dst)
    return dst


def _range(width: int) -> str:
    return f"[{width - 1}:0]" if width > 1 else ""


@click.command("verilog")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="directory to write wanreduce_core.sv and its port list into")
@click.option("--slot-memory", default="onchip", show_default=True, callback=slot_memory_option,
              help="where the partial sums live: onchip (block RAM) or dram (an AXI4 master port "
                   "m_axi_mem_* on the core; docs/slot_store.md); records (per-slot state in DRAM "
                   "too) is refused until the record path is wired into the core")
@core_options
def verilog(out_dir: Path, slot_memory: str, **kw: int) -> None:
    """Generate the aggregator core as one Verilog module (wanreduce_core)."""
    params = core_params(slot_memory, **kw)
    t0 = time.perf_counter()
    ports = checked_ports(params, slot_memory)
    try:
        path = write_verilog(out_dir, params, slot_memory)
    except OSError as exc:
        raise WanreduceError(f"cannot write {out_dir}: {exc.strerror}") from None
    table = "\n".join(f"{d:6} {_range(w):8} {n}" for n, d, w in ports)
    (out_dir / f"{CORE_NAME}.ports.txt").write_text(table + "\n")
    desc = ", ".join(f"{k}={v}" for k, v in params.items()) + f", {slot_memory} slot memory"
    click.echo(f"wrote {path} ({path.stat().st_size // 1024} KiB, {len(ports)} ports; {desc}) "
               f"in {time.perf_counter() - t0:.1f} s")
