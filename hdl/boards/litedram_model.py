"""The board's LiteDRAM controller on LiteDRAM's DDR3 model, as one Verilog module for cocotb.

Issue 16 item 5: simulate the slot store through the *real* controller. This is not
``litedram.gen --sim`` (which needs ``litescope`` and swaps in LiteX-sim's 1:4 PHY settings,
docs/boards.md) but a Migen top of its own, exported with LiteX's Verilog back end:

* ``SDRAMPHYModel`` (``litedram.phy.model``) at the ECP5 PHY's settings (``ECP5DDRPHY``'s
  ``settings``: 1:2, its CL/CWL and read/write latencies at :attr:`DramConfig.sys_clk_hz`) and
  the board's DDR3 part (``litedram.modules``, :attr:`DramConfig.part`);
* ``LiteDRAMCore`` with :func:`~wanreduce.hdl.boards.litedram_controller.controller_settings`
  (the generator's controller settings: the same controller as the board's Verilog);
* the board's AXI port, built by the board generator's own
  :func:`~wanreduce.hdl.boards.litedram_controller._add_axi_port` (async FIFOs to ``axi_clk``,
  register slices, ``LiteDRAMAXI2Native``, requests refused until ``init_done``): the same
  frontend, the same port names (``user_port_axi_*``).

What differs from the board: the PHY is the model (no ECP5 I/O, no PLL: ``sys_clk`` /
``sys_rst`` are ports), and ``init_done`` is a port (the model needs no DDR3 init sequence;
the bench raises it after reset, as ``DramInit`` does on the board).

**Memory size.** The model keeps each bank in a Verilog memory of the bank's whole size (for the
Versa 8 x 16 MiB, twice that at the ECP5 settings, whose bank words are 128 bits per 4
columns). Here each bank memory keeps only its first :data:`MODEL_ROWS` DRAM rows
(:func:`small_bank_memories`): the bank address is truncated to its low bits, so higher rows
alias onto these. With LiteDRAM's ROW_BANK_COL mapping the byte addresses below
:func:`model_bytes` (256 KiB on the Versa: 16 rows x 8 banks x 2 KiB) are distinct memory; a
bench must keep its traffic there. The controller is untouched (full geometry, same address
widths), so its timing (activates, precharges, refresh) is the board's. The memory has no
initial content (the simulator's: Verilator's zeros): a bench writes a row before it reads it.
(The model's ``init`` option is not used: at the ECP5 PHY's settings, four DFI words per phase,
its init layout puts a row's data at half the bank-word index the controller's column addresses
reach, so initial content would read back at the wrong addresses.)

:func:`cached_model` generates once per configuration and reuses the Verilog.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from wanreduce.hdl.boards import litedram_controller
from wanreduce.hdl.boards.litedram_controller import (
    AXI_ID_WIDTH,
    DRAM_CONFIGS,
    DramConfig,
    cache_dir,
    controller_settings,
    module_name,
)

__all__ = ["MODEL_ROWS", "TIME_ZERO", "cached_model", "comb_runs_at_time_zero", "generate_model", "model_bytes", "model_module_name",
           "phy_settings", "small_bank_memories"]

MODEL_ROWS = 16  # DRAM rows kept per bank by the model's memories


def model_module_name(board: str) -> str:
    return module_name(board) + "_model"


def model_bytes(cfg: DramConfig) -> int:
    """Byte addresses ``0 .. model_bytes(cfg) - 1`` are distinct memory in the model: the first
    :data:`MODEL_ROWS` rows of every bank (ROW_BANK_COL: row, then bank, then column)."""
    return MODEL_ROWS * cfg.banks * cfg.cols * 2 * cfg.chips


@contextlib.contextmanager
def small_bank_memories(words: int):
    """While active, ``SDRAMPHYModel`` builds its bank memories with at most ``words`` words
    (the model's ``Memory``, module-level in ``litedram.phy.model``, is swapped for one that
    caps the depth): a bank's address is then its low bits, so rows alias. Used because the
    model has no sparse-memory option: it holds the whole DRAM, as Python lists in Migen's
    simulator (gigabytes) or Verilog memories (the whole 128 MiB)."""
    from litedram.phy import model

    real = model.Memory

    def small(width, depth, **kw):
        return real(width, min(depth, words), **kw)

    model.Memory = small
    try:
        yield
    finally:
        model.Memory = real


class _Pads:
    """Stand-in DDR3 pads: the PHY is built only for its settings (latencies, phases);
    ``differential``: the negative DQS and clock pins too (the Kintex-7 PHY drives them)."""

    def __init__(self, cfg: DramConfig, *, differential: bool = False) -> None:
        from migen import Signal

        lanes = 2 * cfg.chips
        for name, w in (("a", (cfg.rows - 1).bit_length()), ("ba", 3), ("ras_n", 1),
                        ("cas_n", 1), ("we_n", 1), ("cs_n", 1), ("cke", 1), ("odt", 1),
                        ("reset_n", 1), ("dm", lanes), ("dq", 8 * lanes), ("dqs_p", lanes),
                        ("clk_p", 1)):
            setattr(self, name, Signal(w, name=name))
        if differential:
            self.dqs_n, self.clk_n = Signal(lanes, name="dqs_n"), Signal(1, name="clk_n")


def phy_settings(cfg: DramConfig):
    """The board PHY's ``PhySettings``: the ECP5's or the Kintex-7's PHY built on stand-in pads
    for its settings alone (latencies, phases; neither needs a device to be built)."""
    from litedram.phy import ECP5DDRPHY, K7DDRPHY

    if cfg.phy == "ECP5DDRPHY":
        return ECP5DDRPHY(_Pads(cfg), sys_clk_freq=cfg.sys_clk_hz).settings
    if cfg.phy == "K7DDRPHY":
        return K7DDRPHY(_Pads(cfg, differential=True), memtype="DDR3", sys_clk_freq=cfg.sys_clk_hz).settings
    raise ValueError(f"{cfg.board}: only the ECP5 and Kintex-7 PHYs' settings are modelled, not {cfg.phy}")


def _top(cfg: DramConfig, platform, bank_lock_fix: bool):
    """The Migen top: model + controller + the board's AXI port; returns the module."""
    from litedram import modules
    from litedram.core import LiteDRAMCore
    from litedram.phy.model import SDRAMPHYModel
    from litex.build.generic_platform import Pins
    from migen import ClockDomain, Module, Signal

    module = getattr(modules, cfg.part)(cfg.sys_clk_hz, cfg.rate)
    settings = phy_settings(cfg)
    # The model's bank word index is (row x cols | column) >> log2(2 x nphases) (DDR3: its
    # burst_length 2), so a row takes cols / (2 x nphases) words.
    words = MODEL_ROWS * cfg.cols // (2 * settings.nphases)

    class _Storage:
        def __init__(self, sig) -> None:
            self.storage = sig

    class _Ctrl:  # what _add_axi_port reads of the generator's ddrctrl
        def __init__(self, done, error) -> None:
            self.init_done, self.init_error = _Storage(done), _Storage(error)

    top = Module()
    platform.add_extension([("sys_clk", 0, Pins(1)), ("sys_rst", 0, Pins(1)),
                            ("init_done", 0, Pins(1))])
    top.clock_domains.cd_sys = ClockDomain()
    top.comb += [top.cd_sys.clk.eq(platform.request("sys_clk")),
                 top.cd_sys.rst.eq(platform.request("sys_rst"))]
    with small_bank_memories(words):
        top.submodules.ddrphy = phy = SDRAMPHYModel(module, settings, clk_freq=cfg.sys_clk_hz)
    with litedram_controller.litedram_patches(bank_lock_fix):
        top.submodules.sdram = LiteDRAMCore(phy, module.geom_settings, module.timing_settings,
                                            cfg.sys_clk_hz,
                                            controller_settings=controller_settings(cfg))
        top.ddrctrl = _Ctrl(platform.request("init_done"), Signal(reset=0))
        litedram_controller._add_axi_port(top, platform)
    return top


def generate_model(board: str, out_dir: Path, *, bank_lock_fix: bool = True) -> Path:
    """Write ``<out_dir>/<model_module_name(board)>.v``; return its path. ``bank_lock_fix``:
    the controller with :func:`~wanreduce.hdl.boards.litedram_bank_lock.fixed_bank_lock`, as the
    board generator builds it (False: LiteDRAM's own bank lock, to show what it breaks)."""
    from litex.build.generic_platform import GenericPlatform
    from litex.build.sim.common import sim_special_overrides
    from litex.gen import LiteXContext

    cfg = DRAM_CONFIGS[board]
    name = model_module_name(board)
    with contextlib.redirect_stdout(io.StringIO()), litedram_controller._quiet_logging():
        platform = GenericPlatform(cfg.device, [])
        top = _top(cfg, platform, bank_lock_fix)
        # LiteX prints LiteXContext.top's hierarchy into the Verilog: a global, left at whatever
        # SoC was built last in this process (the board's generator): print none.
        previous, LiteXContext.top = LiteXContext.top, None
        try:
            conv = platform.get_verilog(top, name=name, special_overrides=sim_special_overrides,
                                        regular_comb=False)
        finally:
            LiteXContext.top = previous
    if conv.data_files:  # memory init files: none expected (no init content)
        raise RuntimeError(f"{name}: unexpected data files {sorted(conv.data_files)}")
    path = Path(out_dir) / f"{name}.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(comb_runs_at_time_zero(conv.main_source))
    return path


#: the signal :func:`comb_runs_at_time_zero` adds (one event at time 0)
TIME_ZERO = "wanreduce_time_zero"


def comb_runs_at_time_zero(verilog: str) -> str:
    """Make every ``always @(*)`` block of LiteX's Verilog run once at time 0, as in hardware.

    An ``always @(*)`` block runs only when a signal it reads changes. Icarus starts none at
    time 0 (Verilator evaluates all), so a block whose inputs keep their initial values holds
    its target's declared initial value instead of what the block computes: LiteDRAM's
    multiplexer steers both DFI phases to no command until its state machine first leaves
    READ, and the bank machines' first ACTIVATEs never reach the DDR3 model (their banks'
    writes are dropped and later reads return X). Migen's own back end adds a dummy event for
    this; LiteX's does not. Here each block reads :data:`TIME_ZERO`, which goes from X to 0 at
    time 0 (simulation only: inside ``translate_off``)."""
    head = "always @(*) begin\n"
    if head not in verilog or TIME_ZERO in verilog:
        raise RuntimeError("LiteX's Verilog is not as expected: no `always @(*) begin` "
                           f"blocks, or {TIME_ZERO} already in it")
    decl = (f"// synthesis translate_off\nreg {TIME_ZERO};\ninitial {TIME_ZERO} <= 1'd0;\n"
            "// synthesis translate_on\n")
    module_end = verilog.index(");\n", verilog.index("module ")) + 3
    body = verilog[module_end:].replace(
        head, head + f"// synthesis translate_off\n    if ({TIME_ZERO}) begin end\n"
                     "// synthesis translate_on\n")
    return verilog[:module_end] + "\n" + decl + body


def _cache_key(board: str, bank_lock_fix: bool) -> str:
    here = b"".join(Path(f).read_bytes() for f in (__file__, litedram_controller.__file__,
                                                     *litedram_controller.PATCH_SOURCES))
    text = json.dumps([asdict(DRAM_CONFIGS[board]), AXI_ID_WIDTH, MODEL_ROWS, bank_lock_fix,
                       litedram_controller.LITEDRAM_VERSION, hashlib.sha256(here).hexdigest()],
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_model(board: str, *, bank_lock_fix: bool = True) -> Path:
    """The model's Verilog for ``board``, generated once per configuration (key: the board's
    :class:`DramConfig`, the model's size, LiteDRAM's version, this file and the generator's)
    under ``cache_dir()``, and reused."""
    path = cache_dir() / f"model-{_cache_key(board, bank_lock_fix)}" / f"{model_module_name(board)}.v"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            os.replace(generate_model(board, Path(tmp), bank_lock_fix=bank_lock_fix), path)  # complete, or absent
    return path


def simulate_on_model(component: type, top: str, params: dict, test_module: str, testcase: str,
                      run_params: dict, board: str = "versa-ecp5") -> dict:
    """Simulate ``component(**params)`` (a harness with the board's LiteDRAM model beside it) in
    cocotb's ``test_module.testcase``; the testcase writes its figures to ``run_params``' ``out``
    JSON file, returned here with the wall time (``wall_s``). What the DRAM benches share."""
    import time

    from wanreduce.sim.simulator import generate_verilog, run_cocotb

    sources = [generate_verilog(component, name=top, params=params), cached_model(board)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        t0 = time.perf_counter()
        run_cocotb(verilog=sources, toplevel=top, test_module=test_module, testcase=testcase,
                   timeout_s=None, params={**params, **run_params, "out": str(out)})
        return {**json.loads(out.read_text()), "wall_s": time.perf_counter() - t0}
