"""Board builds without place-and-route: sources for every board, constraint files against the
generated top-level ports, the LiteEth MAC's ports against the top's instance, CLI errors."""

from __future__ import annotations

import fnmatch
import json
import random
import re
from pathlib import Path

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator
from board_helpers import assert_core_reset_by_gsr
from click.testing import CliRunner
from stream_helpers import min_flops_between

from wanreduce.cli import cli
from wanreduce.commands.build import run_build
from wanreduce.commands.report import format_report, parse_nextpnr_report
from wanreduce.hdl.axis import AXIStreamSignature
from wanreduce.hdl.boards import BOARDS
from wanreduce.hdl.boards.versa_ecp5 import MAC_WIDTH, VersaTop

SMALL = {"ports": 1, "width": 64, "slots": 2, "elements": 16, "groups": 1, "jobs": 1}


def _build(name: str, tmp_path_factory):
    board = BOARDS[name]
    out = tmp_path_factory.mktemp(board.name)
    run_build(board, dict(SMALL), out, bitstream=False)
    return board, out


@pytest.fixture(scope="module", params=sorted(BOARDS))
def built(request, tmp_path_factory):
    return _build(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def built_versa(tmp_path_factory):
    return _build("versa-ecp5", tmp_path_factory)


def top_ports(board, out: Path) -> set[str]:
    """Top-level port names, from the generated pin constraints (every port has a location)."""
    if board.name == "versa-ecp5":
        text = (out / f"{board.top_name}.lpf").read_text()
        names = re.findall(r'LOCATE COMP "([^"\[]+)(?:\[\d+\])?"', text)
    else:
        text = (out / f"{board.top_name}.xdc").read_text()
        names = re.findall(r'get_ports "([^"\[]+)(?:\[\d+\])?"', text)
    assert names
    return set(names)


def constraint_port_refs(path: Path) -> list[str]:
    text = "\n".join(ln.split("#")[0] for ln in path.read_text().splitlines())
    if path.suffix == ".lpf":
        return re.findall(r'(?:PORT|COMP)\s+"([^"\[]+)', text)
    refs = []
    for group in re.findall(r"get_ports\s+(?:-quiet\s+)?(\{[^}]*\}|\S+)\]", text):
        refs += group.strip("{}\"").split()
    return refs


def test_every_board_emits_sources(built):
    board, out = built
    assert (out / f"build_{board.top_name}.sh").is_file()
    if board.name == "versa-ecp5":
        assert (out / f"{board.top_name}.il").is_file()
        assert (out / f"{board.top_name}.ys").is_file()
        mac = (out / "liteeth_rgmii_mac.v").read_text()
        assert "module liteeth_rgmii_mac" in mac
        assert "IDDRX1F" in mac and "ODDRX1F" in mac  # real ECP5 DDR I/O, not a generic model
    else:
        top = (out / f"{board.top_name}.v").read_text()
        tcl = (out / f"{board.top_name}.tcl").read_text()
        assert "axi_10g_ethernet_0 eth10g_0" in top and "axi_10g_ethernet_1 eth10g_1" in top
        assert "create_ip -name axi_10g_ethernet" in tcl
        assert "xc7k325tffg900-2" in tcl


def test_project_constraints_reference_existing_ports(built):
    board, out = built
    refs = constraint_port_refs(board.constraint_path())
    assert refs, f"{board.constraint_file} references no port"
    ports = top_ports(board, out)
    for ref in refs:
        assert fnmatch.filter(ports, ref), f"{board.constraint_file}: no top-level port {ref!r}"


def test_project_constraints_are_merged(built):
    board, out = built
    project = board.constraint_path().read_text()
    key = next(ln for ln in project.splitlines() if ln.strip() and not ln.startswith("#"))
    if board.name == "versa-ecp5":
        assert key in (out / f"{board.top_name}.lpf").read_text()
        assert 'FREQUENCY PORT "clk100_0__p" 100 MHZ;' in (out / f"{board.top_name}.lpf").read_text()
    else:
        assert (out / board.constraint_file).read_text() == project
        assert f'read_xdc "{board.constraint_file}"' in (out / f"{board.top_name}.tcl").read_text()


def test_mac_instance_ports_exist_in_mac_module(built_versa):
    """Every connection the top makes to the LiteEth instance is a port of the generated module
    (the LiteEth RGMII MAC is the Versa's; the Kintex-7 board uses the vendor 10G IP)."""
    board, out = built_versa
    mac = (out / "liteeth_rgmii_mac.v").read_text()
    header = mac[mac.index("module liteeth_rgmii_mac"):mac.index(");")]
    mac_ports = set(re.findall(r"(?:input|output|inout)\s+wire\s+(?:\[\d+:0\]\s+)?(\w+)", header))
    il = (out / f"{board.top_name}.il").read_text()
    cells = re.findall(r"cell \\liteeth_rgmii_mac \S+\n(.*?)\n\s*end", il, re.S)
    assert len(cells) == 2  # network port and host port
    for cell in cells:
        used = set(re.findall(r"connect \\(\w+)", cell))
        assert used == mac_ports, used ^ mac_ports


def mac_cdc_depths(mac_verilog: str) -> dict[str, int]:
    """Entries of the MAC's transmit and receive clock-crossing FIFOs, by their write ports."""
    depths = {}
    mems = dict((name, int(last) + 1) for name, last in
                re.findall(r"reg \[\d+:0\] (storage\w*)\[0:(\d+)\];", mac_verilog))
    for name, side in re.findall(r"(storage\w*)\[mac_(tx|rx)_cdc_cdc_wrport_adr\] <=", mac_verilog):
        depths[side] = mems[name]
    return depths


def mac_resets(il: str) -> dict[str, str]:
    """The net each LiteEth instance's ``sys_rst`` is connected to, by instance name."""
    cells = re.findall(r"cell \\liteeth_rgmii_mac \\(\w+)\n(.*?)\n\s*end", il, re.S)
    return {name: re.search(r"connect \\sys_rst \\(\w+)", body).group(1) for name, body in cells}


def dff_d(il: str, q: str) -> str:
    """The D input of the ``$dff`` whose Q is the net ``q``."""
    for body in re.findall(r"cell \$dff \S+\n(.*?)\n\s*end", il, re.S):
        if re.search(rf"connect \\Q \\{q}\b", body):
            return re.search(r"connect \\D (\S+)", body).group(1).lstrip("\\")
    raise AssertionError(f"no $dff drives {q}")


def test_each_mac_has_its_own_reset_register_in_the_dram_builds(built_versa, tmp_path):
    """The Versa DRAM build resets each MAC from a register of its own, MAC 1's loaded from MAC 0's
    (distinct inputs: yosys keeps both): one register for both MACs and LiteDRAM was 9.53 ns of
    routing from mac1's receive FIFO read counter at one placement. The on-chip build's MACs share
    the synchronised reset."""
    board, out = built_versa
    onchip = mac_resets((out / f"{board.top_name}.il").read_text())
    assert len(onchip) == 2 and len(set(onchip.values())) == 1
    run_build(BOARDS["versa-ecp5"], {"elements": 16}, tmp_path, bitstream=False, slot_memory="dram")
    il = (tmp_path / f"{board.top_name}.il").read_text()
    assert mac_resets(il) == {"mac0": "mac0_rst", "mac1": "mac1_rst"}
    assert dff_d(il, "mac1_rst") == "mac0_rst"
    assert dff_d(il, "mac0_rst") == onchip["mac0"]  # the synchronised reset


def mac_rx_cdc_feed(mac_verilog: str) -> str:
    """What drives the receive clock-crossing FIFO's input valid: the converter, or a buffer."""
    return re.search(r"assign mac_rx_cdc_sink_sink_valid = (\w+);", mac_verilog).group(1)


def test_mac_fifos_are_16_deep_in_the_dram_builds_only(built_versa, tmp_path):
    """The Versa DRAM build's MAC has 16-entry transmit and receive clock-crossing FIFOs (one LUT
    RAM per 4 bits, no read multiplexer: their read sides were the host MAC's transmit and the
    core clock's failing 125 MHz paths on the fuller chip); the on-chip build's MAC keeps
    LiteEth's 32 entries; other depths refused. The DRAM builds' receive path also has a
    registered valid / ready buffer between the 8 -> 64 converter and the FIFO (its writable
    reached the converter's strobe and the CRC checker's buffer: ETH0's receive clock missed
    125 MHz at one placement); the on-chip build's converter feeds the FIFO directly."""
    from wanreduce.hdl.boards.liteeth_mac import MAC_NAME, generate

    _, out = built_versa
    onchip = (out / f"{MAC_NAME}.v").read_text()
    assert mac_cdc_depths(onchip) == {"tx": 32, "rx": 32}
    assert mac_rx_cdc_feed(onchip) == "mac_rx_converter_source_valid"
    run_build(BOARDS["versa-ecp5"], {"elements": 16}, tmp_path, bitstream=False, slot_memory="dram")
    dram = (tmp_path / f"{MAC_NAME}.v").read_text()
    assert mac_cdc_depths(dram) == {"tx": 16, "rx": 16}
    buf = re.fullmatch(r"(buffer\d+)_source_source_valid", mac_rx_cdc_feed(dram)).group(1)
    assert f"assign {buf}_sink_sink_valid = mac_rx_converter_source_valid;" in dram
    # pipe_valid and pipe_ready: the converter's ready comes from the buffer's registers
    assert f"reg           {buf}_pipe_ready_sink_d_valid" in dram
    assert f"reg           {buf}_pipe_valid_source_valid" in dram
    with pytest.raises(ValueError, match="tx_cdc_depth must be one of"):
        generate(tmp_path / "bad", tx_cdc_depth=8)
    with pytest.raises(ValueError, match="rx_cdc_depth must be one of"):
        generate(tmp_path / "bad", rx_cdc_depth=64)


def slices_with_ready_copy(il: str) -> dict[str, bool]:
    """Each board register slice's skid buffer: has it a ready copy (``skid_en``)?"""
    mods = re.findall(r"^module \\\w+\.slice_(\w+)\.skid\n(.*?)^end", il, re.M | re.S)
    return {name: bool(re.search(r"wire .*\\skid_en\b", body)) for name, body in mods}


def test_versa_input_slices_copy_their_ready_in_the_dram_build_only(built_versa, tmp_path):
    """The Versa DRAM build's two input slices (behind the MACs' receive FIFOs) are
    ``AXIStreamRegisterSlice(ready_copy=True)``: the ready flip-flop the MAC's FIFO read side
    reads drives none of the skid register's 74 enables (``slice_net_in.skid.s__ready`` ->
    ``mac0.mac_rx_cdc_cdc_readable`` -> ... -> ``mac0.storage_2_dat1``, 8.20 ns at session 45's
    seed 4). The output slice and the on-chip build's slices (and 193bd2d's DRAM build) have none."""
    board, out = built_versa
    assert slices_with_ready_copy((out / f"{board.top_name}.il").read_text()) == dict.fromkeys(
        ("net_in", "host_in", "host_out"), False)
    run_build(BOARDS["versa-ecp5"], {"elements": 16}, tmp_path, bitstream=False, slot_memory="dram")
    il = (tmp_path / f"{board.top_name}.il").read_text()
    assert slices_with_ready_copy(il) == {"net_in": True, "host_in": True, "host_out": False}
    assert not VersaTop(slot_memory="records", **SMALL).input_ready_copy


def test_versa_onchip_core_reset_by_gsr(built_versa):
    """The on-chip Versa build resets its core clock domain through the global set/reset, as
    the DRAM build does: a fabric reset register fanning out to ~6,500 flip-flops' LSR inputs
    stalled nextpnr's router1 at the default seed (docs/benchmarks.md, issue 12)."""
    board, out = built_versa
    assert_core_reset_by_gsr((out / f"{board.top_name}.il").read_text(), board.top_name)


class _Adapters(Elaboratable):
    def __init__(self):
        n = MAC_WIDTH // 8
        self.mac = {k: Signal(w, name=k) for k, w in (
            ("source_valid", 1), ("source_ready", 1), ("source_last", 1), ("source_data", MAC_WIDTH),
            ("source_last_be", n), ("source_error", n), ("sink_valid", 1), ("sink_ready", 1),
            ("sink_last", 1), ("sink_data", MAC_WIDTH), ("sink_last_be", n))}
        self.rx = AXIStreamSignature(MAC_WIDTH).flip().create()
        self.tx = AXIStreamSignature(MAC_WIDTH).create()

    def elaborate(self, platform):
        m = Module()
        VersaTop.mac_to_axis(m, self.mac, self.rx)
        VersaTop.axis_to_mac(m, self.tx, self.mac)
        return m


@pytest.mark.parametrize("mhz", [125.0, 100.0, 62.5, 50.0, 40.0])
def test_versa_pll_settings_in_range(mhz):
    """PLL output equals the requested clock; VCO 400..800 MHz, PFD >= 10 MHz (ECP5 limits)."""
    from wanreduce.hdl.boards.versa_ecp5 import pll_params

    p = pll_params(mhz)
    pfd = 100.0 / p["p_CLKI_DIV"]
    out = pfd * p["p_CLKFB_DIV"]  # feedback from CLKOP
    assert out == mhz
    assert 400 <= out * p["p_CLKOP_DIV"] <= 800 and pfd >= 10
    assert p["p_CLKOP_CPHASE"] == p["p_CLKOP_DIV"] - 1


def test_liteeth_axis_adapters():
    """last_be (one-hot) <-> tkeep (contiguous low bytes), error -> tuser, handshake passthrough."""
    dut = _Adapters()
    sim = Simulator(dut)

    async def tb(ctx):
        mac = dut.mac
        for nbytes in range(1, 9):
            ctx.set(mac["source_valid"], 1)
            ctx.set(mac["source_last"], 1)
            ctx.set(mac["source_last_be"], 1 << (nbytes - 1))
            ctx.set(mac["source_error"], 0 if nbytes % 2 else 1 << (nbytes - 1))
            ctx.set(dut.rx.tready, nbytes % 3 == 0)
            assert ctx.get(dut.rx.tkeep) == (1 << nbytes) - 1
            assert ctx.get(dut.rx.tuser) == (nbytes % 2 == 0)
            assert ctx.get(dut.rx.tlast) == 1 and ctx.get(dut.rx.tvalid) == 1
            assert ctx.get(mac["source_ready"]) == (nbytes % 3 == 0)
            ctx.set(mac["source_last"], 0)
            assert ctx.get(dut.rx.tkeep) == 0xFF  # not the last beat: all bytes
            ctx.set(dut.tx.tvalid, 1)
            ctx.set(dut.tx.tlast, 1)
            ctx.set(dut.tx.tkeep, (1 << nbytes) - 1)
            ctx.set(mac["sink_ready"], nbytes % 2)
            assert ctx.get(mac["sink_last_be"]) == 1 << (nbytes - 1)
            assert ctx.get(dut.tx.tready) == nbytes % 2
            ctx.set(dut.tx.tlast, 0)
            assert ctx.get(mac["sink_last_be"]) == 0

    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("args, msg", [
    (["--board", "versa-ecp5", "--width", "128"], "width 64"),
    (["--board", "alinx-ax7325b", "--ports", "4"], "ports must be 1..3"),
    (["--board", "versa-ecp5", "--slots", "3"], "slots must be a power of two"),
    (["--board", "alinx-ax7325b", "--bitstream"], "no open flow"),
    (["--board", "versa-ecp5", "--core-mhz", "70"], "core clock must be one of 125, 100, 62.5, 50, 40"),
    (["--board", "alinx-ax7325b", "--core-mhz", "100"], "fixed at 156.25 MHz"),
])
def test_build_cli_errors_are_one_line(tmp_path, args, msg):
    res = CliRunner().invoke(cli, ["build", "--out", str(tmp_path / "o"), "--elements", "16", *args])
    assert res.exit_code != 0
    assert msg in res.output, res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_parse_nextpnr_report(tmp_path):
    rep = {
        "utilization": {"TRELLIS_COMB": {"used": 1200, "available": 43848},
                        "TRELLIS_FF": {"used": 900, "available": 43848},
                        "DP16KD": {"used": 7, "available": 108}},
        "fmax": {"$glbnet$clk": {"achieved": 131.2, "constraint": 125.0}},
        "critical_paths": [{"from": "clk", "to": "clk", "path": [
            {"type": "clk-to-q", "delay": 0.5, "from": {"cell": "a"}, "to": {"cell": "a"}},
            {"type": "logic", "delay": 2.0, "from": {"cell": "a"}, "to": {"cell": "b"}},
            {"type": "routing", "delay": 3.0, "from": {"cell": "b"}, "to": {"cell": "c"}}]}],
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps(rep))
    r = parse_nextpnr_report(path)
    assert r["lut4"] == (1200, 43848) and r["ff"] == (900, 43848) and r["dp16kd"] == (7, 108)
    assert r["fmax"]["$glbnet$clk"] == (131.2, 125.0)
    assert r["critical_paths"][0]["logic_levels"] == 1
    assert abs(r["critical_paths"][0]["delay_ns"] - 5.5) < 1e-9
    text = format_report(r)
    assert "131.2 MHz (meets 125.0 MHz)" in text and "DP16KD" in text


class _Stretcher(wiring.Component):
    """One LED pulse stretcher (versa_ecp5._pulse_stretch) between ports, for cone checks."""

    def __init__(self, registered: bool) -> None:
        self.registered = registered
        super().__init__({"event": In(1), "led": Out(1)})

    def elaborate(self, platform):
        from wanreduce.hdl.boards.versa_ecp5 import _pulse_stretch

        m = Module()
        m.d.comb += self.led.eq(_pulse_stretch(m, self.event, bits=6, registered=self.registered))
        return m


@pytest.mark.parametrize("registered", [False, True])
def test_versa_led_event_reaches_one_flip_flop(registered: bool) -> None:
    """``registered`` (the Versa DRAM build's LEDs): the event (a register slice's ready and the
    MAC's valid) reaches the pulse counter only through one flip-flop, two to the counter's
    output (``slice_net_in.skid.s__ready`` -> ``count``, 10 endpoints, 8.70 ns at session 44's
    seed 5). Without it (the on-chip build; db90a43's DRAM build) within the cycle: one, the
    before-case."""
    assert min_flops_between(_Stretcher(registered), ["event"], ["count"]) == (2 if registered else 1)


def test_versa_led_registered_event_is_one_cycle_later() -> None:
    """The registered stretcher's LED is the plain one's, one cycle later, for random events."""
    top = Module()
    top.submodules.a, top.submodules.b = a, b = _Stretcher(False), _Stretcher(True)
    top.d.comb += b.event.eq(a.event)
    sim = Simulator(top)
    sim.add_clock(1e-6)
    rng = random.Random(5)
    leds: list[tuple[int, int]] = []

    async def tb(ctx) -> None:
        for _ in range(2000):
            ctx.set(a.event, rng.random() < 0.006)
            leds.append((ctx.get(a.led), ctx.get(b.led)))
            await ctx.tick()

    sim.add_testbench(tb)
    sim.run()
    plain, late = [x for x, _ in leds], [y for _, y in leds]
    rises = sum(1 for x, y in zip(plain, plain[1:], strict=False) if y and not x)
    assert late[1:] == plain[:-1] and rises >= 3 and sum(plain) < len(plain) // 2


def test_versa_leds_registered_in_the_dram_build_only() -> None:
    assert VersaTop(slot_memory="dram", **SMALL).registered_leds
    assert not VersaTop(**SMALL).registered_leds
