"""Board DDR3 (issue 16 item 3 groundwork): the generated LiteDRAM controllers against their
recorded widths, the CPU-less init sequencer, the AXI self-test, the board builds with
``--slot-memory dram`` / ``--dram-selftest``, slot capacity and the DRAM bandwidth budget."""

from __future__ import annotations

import json
import random
import re

import pytest
from amaranth.sim import Simulator
from board_helpers import assert_core_reset_by_gsr
from click.testing import CliRunner

from wanreduce.cli import cli
from wanreduce.commands.build import run_build
from wanreduce.hdl.boards import BOARDS
from wanreduce.hdl.boards.axi_memtest import AXIMemTest
from wanreduce.hdl.boards.capacity import (
    DRAM_EFFICIENCY,
    STATE_BYTES_PER_SLOT,
    board_capacity,
    dram_budget,
    dram_slot_stride,
)
from wanreduce.hdl.boards.dram_controller import check_board_memory
from wanreduce.hdl.boards.dram_init import DramInit
from wanreduce.hdl.boards.litedram_controller import (
    AXI_ID_WIDTH,
    DRAM_CONFIGS,
    cached,
    generate,
    module_name,
    read_csr_map,
)
from wanreduce.hdl.params import (
    DEFAULTS,
    DRAM_STORE_DEFAULTS,
    MAX_SLOTS_DRAM,
    MAX_SLOTS_LARGE,
    CoreParams,
    check_slot_memory,
)

MiB = 1 << 20


def module_ports(verilog: str, name: str) -> dict[str, int]:
    """Port name -> width of module ``name`` in ``verilog``."""
    head = re.search(rf"module {name} \((.*?)\);", verilog, re.S).group(1)
    ports = {}
    for m in re.finditer(r"(input|output|inout)\s+wire\s+(?:\[(\d+):0\]\s+)?(\w+)", head):
        ports[m.group(3)] = int(m.group(2) or 0) + 1
    return ports


@pytest.fixture(scope="module", params=sorted(DRAM_CONFIGS))
def generated(request, tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("WANREDUCE_CACHE", str(tmp_path_factory.mktemp("cache")))
    board = request.param
    return DRAM_CONFIGS[board], cached(board)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _design_lines(path) -> list[str]:
    """The Verilog's lines without its comments (they carry the date, LiteX's commit and the
    printed hierarchy, which differ on every run)."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    return [ln for ln in text.splitlines() if not ln.lstrip().startswith("//")]


def test_the_cached_controller_text_does_not_depend_on_the_process(tmp_path, monkeypatch):
    """Two cache fills, the second in a process that has since built a controller itself, give
    the same Verilog line for line: the statements' order, which alone moved the Versa DRAM
    build's controller clock by 15 % at one seed, must not depend on who filled the cache."""
    board = "versa-ecp5"
    monkeypatch.setenv("WANREDUCE_CACHE", str(tmp_path / "a"))
    first = _design_lines(cached(board))
    generate(board, tmp_path / "scratch")  # this process's Migen state moves on
    monkeypatch.setenv("WANREDUCE_CACHE", str(tmp_path / "b"))
    second = _design_lines(cached(board))
    assert len(first) > 1000
    assert first == second


def test_generated_controller_has_the_recorded_widths(generated):
    """The AXI port and the DDR3 pins of the generated module are what DramConfig records (and
    what the plan's capacity and the bandwidth budget are computed from)."""
    cfg, path = generated
    ports = module_ports(path.read_text(), module_name(cfg.board))
    assert ports["user_port_axi_wdata"] == ports["user_port_axi_rdata"] == cfg.data_width
    assert ports["user_port_axi_awaddr"] == ports["user_port_axi_araddr"] == cfg.addr_width
    assert 1 << cfg.addr_width == cfg.size_bytes
    assert ports["user_port_axi_awid"] == AXI_ID_WIDTH
    assert ports["ddram_dq"] == cfg.dq_bits and 1 << ports["ddram_a"] == cfg.rows
    assert 1 << ports["ddram_ba"] == cfg.banks
    assert {"axi_clk", "axi_rst", "init_done", "wb_ctrl_ack", "user_clk"} <= set(ports)


def test_ecp5_controller_pll_makes_the_configured_clock(generated):
    """The ECP5 controller clock is the generated PLL's sys2x output / 2 (CLKDIVF): its dividers
    (feedback through CLKOS2) give exactly 2 x DramConfig.sys_clk_hz from the oscillator, and the
    VCO is inside the EHXPLLL's 400-800 MHz, so the bandwidth budget's clock is the board's."""
    cfg, path = generated
    if cfg.phy != "ECP5DDRPHY":
        return
    pll = re.search(r"EHXPLLL #\((.*?)\) EHXPLLL", path.read_text(), re.S).group(1)
    p = {k: int(v) for k, v in re.findall(r"\.(\w+_DIV)\s+\(\d+'d(\d+)\)", pll)}
    assert '"INT_OS2"' in pll
    vco = cfg.input_clk_hz / p["CLKI_DIV"] * p["CLKFB_DIV"] * p["CLKOS2_DIV"]
    assert 400e6 <= vco <= 800e6
    assert vco / p["CLKOP_DIV"] == pytest.approx(2 * cfg.sys_clk_hz)


def test_init_program_brings_the_controller_up(generated):
    """The init program writes only registers of the generated map and ends with the DDR3 mode
    registers loaded, hardware control and init_done."""
    cfg, path = generated
    name = module_name(cfg.board)
    csr = read_csr_map(path.with_name(f"{name}_csr.csv"))
    prog = json.loads(path.with_name(f"{name}_init.json").read_text())
    by_addr = {a >> 2: n for n, a in csr.items()}
    names = [by_addr[adr] for adr, _, _ in prog]
    assert names[0] == "sdram_dfii_control" and prog[0][1] == 0  # software control, in reset
    assert names[-2:] == ["sdram_dfii_control", "ddrctrl_init_done"]
    assert prog[-2][1] == 0b1111 and prog[-1][1] == 1
    issued = [prog[k - 1][1] for k, n in enumerate(names) if n == "sdram_dfii_pi0_command_issue"]
    assert issued.count(0b1111) == 4  # MR2, MR3, MR1, MR0 (RAS|CAS|WE|CS)
    assert sum(w for _, _, w in prog) >= 500e-6 * cfg.sys_clk_hz  # DDR3: >= 500 us after reset


def test_dram_init_replays_the_program_with_its_waits():
    """Every write reaches the Wishbone bus in order, one at a time, held until ack (random
    ack delays), and the next starts only after the entry's wait; done at the end."""
    prog = [(0x400, 0, 0), (0x400, 12, 7), (0x403, 0x320, 0), (0x401, 0xF, 3), (0, 1, 0)]
    dut = DramInit(prog)
    seen = []

    gaps = []  # cycles from each ack to the next request

    async def bench(ctx):
        rng = random.Random(1)
        wait = 0  # cycles left until this request's ack (0: none in progress)
        idle = None
        for _ in range(300):
            req = ctx.get(dut.cyc) and ctx.get(dut.stb)
            assert req or not wait  # a request is held until its ack
            acked = False
            if req:
                assert ctx.get(dut.we) and ctx.get(dut.sel) == 0xF
                if idle is not None:
                    gaps.append(idle)
                    idle = None
                wait = wait or rng.randrange(1, 4)
                wait -= 1
                if not wait:
                    ctx.set(dut.ack, 1)
                    seen.append((ctx.get(dut.adr), ctx.get(dut.dat_w), ctx.get(dut.done)))
                    acked = True
            await ctx.tick()
            ctx.set(dut.ack, 0)
            if acked:
                idle = 0
            elif idle is not None:
                idle += 1
        assert ctx.get(dut.done)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert [(a, d) for a, d, _ in seen] == [(a, d) for a, d, _ in prog]
    assert not any(done for _, _, done in seen)
    assert [g >= w for g, (_, _, w) in zip(gaps, prog, strict=False)] == [True] * (len(prog) - 1)


def _axi_ram(dut, mem: dict, corrupt_beat: int | None):
    """An AXI4 slave for the self-test: INCR bursts, random ready/valid gaps. A transfer is
    sampled before the clock edge that takes it (valid and ready both high)."""

    async def ram(ctx):
        a = dut.axi
        rng = random.Random(2)
        nbytes = len(a["wdata"]) // 8
        reads = 0

        async def accept(ch: str) -> tuple[int, int]:
            """Take the address-channel request ``ch`` (aw/ar): (beat index, burst length)."""
            addr, n = ctx.get(a[f"{ch}addr"]), ctx.get(a[f"{ch}len"]) + 1
            ctx.set(a[f"{ch}ready"], 1)
            await ctx.tick()
            ctx.set(a[f"{ch}ready"], 0)
            return addr // nbytes, n

        while True:
            if ctx.get(a["awvalid"]) and rng.random() < 0.7:
                base, n = await accept("aw")
                k = 0
                while k < n:
                    ready = rng.random() < 0.8
                    ctx.set(a["wready"], ready)
                    if ready and ctx.get(a["wvalid"]):
                        assert ctx.get(a["wlast"]) == (k == n - 1)
                        mem[base + k] = ctx.get(a["wdata"])
                        k += 1
                    await ctx.tick()
                ctx.set(a["wready"], 0)
                ctx.set(a["bvalid"], 1)
                while not ctx.get(a["bready"]):
                    await ctx.tick()
                await ctx.tick()
                ctx.set(a["bvalid"], 0)
            elif ctx.get(a["arvalid"]) and rng.random() < 0.7:
                base, n = await accept("ar")
                k = 0
                while k < n:
                    valid = rng.random() < 0.8
                    data = mem[base + k] ^ ((1 << 5) if reads == corrupt_beat else 0)
                    ctx.set(a["rvalid"], valid)
                    ctx.set(a["rdata"], data)
                    ctx.set(a["rlast"], k == n - 1)
                    if valid and ctx.get(a["rready"]):
                        k += 1
                        reads += 1
                    await ctx.tick()
                ctx.set(a["rvalid"], 0)
            else:
                await ctx.tick()

    return ram


@pytest.mark.parametrize("corrupt", [None, 5])
def test_axi_memtest_passes_on_good_memory_and_flags_a_bad_beat(corrupt):
    dut = AXIMemTest(64, 12, 4, bursts=3, burst_len=4)
    mem: dict[int, int] = {}

    async def bench(ctx):
        for _ in range(3000):
            await ctx.tick()
            if ctx.get(dut.passes) >= 2:
                break
        assert ctx.get(dut.passes) >= 2
        assert ctx.get(dut.error) == (corrupt is not None)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(_axi_ram(dut, mem, corrupt), background=True)
    sim.add_testbench(bench)
    sim.run_until(1e-8 * 4000)
    assert len(mem) == 12 and len(set(mem.values())) == 12  # every beat distinct


def test_dram_selftest_builds_sources_with_the_controller(tmp_path):
    """versa-ecp5 --dram-selftest: the controller's Verilog is in the build, every port the
    top's instance names exists in it, and the DDR3 pins are constrained."""
    board = BOARDS["versa-ecp5"]
    run_build(board, {}, tmp_path, bitstream=False, dram_selftest=True, core_mhz=125.0)
    name = module_name("versa-ecp5")
    ports = module_ports((tmp_path / f"{name}.v").read_text(), name)
    top = (tmp_path / f"{board.top_name}.il").read_text()  # RTLIL: the instance is a cell
    cell = re.search(rf"cell \\{name} \S+\n(.*?)\n\s*end\n", top, re.S).group(1)
    used = set(re.findall(r"connect \\(\w+) ", cell))
    assert used and used <= set(ports), used - set(ports)
    assert {"clk", "axi_clk", "wb_ctrl_stb", "ddram_dq", "user_port_axi_wdata"} <= used
    lpf = (tmp_path / f"{board.top_name}.lpf").read_text()
    assert re.search(r'LOCATE COMP "ddr3_0__dq__io\[15\]"', lpf)


@pytest.mark.parametrize("args, msg", [
    (["--board", "versa-ecp5", "--slot-memory", "dram", "--width", "128"],
     "versa-ecp5 runs the core at width 64"),
    (["--board", "versa-ecp5", "--slot-memory", "sram"], "--slot-memory: must be one of onchip, dram"),
    (["--board", "alinx-ax7325b", "--dram-selftest"], "--dram-selftest is for the open-flow"),
    (["--board", "alinx-ax7325b", "--dram-store-test"], "--dram-store-test is for the open-flow"),
])
def test_build_dram_errors_are_one_line(tmp_path, args, msg):
    res = CliRunner().invoke(cli, ["build", "--out", str(tmp_path / "o"), "--elements", "16", *args])
    assert res.exit_code != 0
    assert msg in res.output, res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("board, at_least", [("versa-ecp5", 64 * MiB), ("alinx-ax7325b", 512 * MiB)])
def test_dram_capacity(board, at_least):
    """The issue's usable slot memory (>= 64 MiB Versa, >= 512 MiB AX7325B), slots and their
    state within the DDR3, and the largest power of two that fits (twice as many would not)."""
    cap = board_capacity(board, "dram", 499)
    assert cap.memory_slots * dram_slot_stride(499) >= at_least  # what the DDR3 holds
    per_slot = dram_slot_stride(499) + STATE_BYTES_PER_SLOT
    assert cap.memory_slots * per_slot <= cap.total_bytes < 2 * cap.memory_slots * per_slot
    # what the core takes today: its per-slot state is on chip (docs/large_slots.md)
    assert cap.slots == min(cap.memory_slots, MAX_SLOTS_DRAM) and cap.core_limited
    assert cap.used_bytes == cap.slots * per_slot
    check_slot_memory("dram", slots=cap.slots, elements=499)


@pytest.mark.parametrize("elements, slots", [(256, 64), (499, 32), (512, 32), (1024, 16)])
def test_onchip_capacity_is_the_measured_largest(elements, slots):
    """Versa on-chip: the configurations docs/benchmarks.md found to fit (64 x 256, 32 x 499,
    16 x 1024; 128 x 256 does not)."""
    assert board_capacity("versa-ecp5", "onchip", elements).slots == slots


def test_slot_memory_check():
    check_slot_memory("dram", slots=MAX_SLOTS_DRAM, elements=499, width=64)
    for mem, slots, msg in [("onchip", 8192, "from 2 to 4096"), ("dram", 3, "power of two"),
                            ("dram", 2 * MAX_SLOTS_DRAM, f"to {MAX_SLOTS_DRAM} (DRAM")]:
        with pytest.raises(ValueError, match=re.escape(msg)):
            check_slot_memory(mem, slots=slots)
    with pytest.raises(ValueError, match="slot memory must be one of onchip, dram"):
        check_slot_memory("flash", slots=2)


def test_records_slot_memory_allows_the_large_s():
    """``records`` (per-slot state in DRAM too) takes S up to MAX_SLOTS_LARGE, where ``dram``
    stops at MAX_SLOTS_DRAM; beyond it, one line naming slots and the range; the board's DDR3
    sets S (not the core's limit) on both boards."""
    assert dict(CoreParams("records", slots=32768, elements=499)) == \
        {**DEFAULTS, "slots": 32768, "elements": 499}
    check_slot_memory("records", slots=MAX_SLOTS_LARGE)
    with pytest.raises(ValueError) as exc:
        CoreParams("records", slots=2 ** 21)
    assert str(exc.value) == (f"slots must be a power of two from 2 to {MAX_SLOTS_LARGE} "
                              f"(DRAM records slot memory), got {2 ** 21}")
    with pytest.raises(ValueError, match=re.escape(f"to {MAX_SLOTS_DRAM} (DRAM slot memory), got 32768")):
        CoreParams("dram", slots=32768)
    for board in ("versa-ecp5", "alinx-ax7325b"):
        rec, dram = board_capacity(board, "records", 499), board_capacity(board, "dram", 499)
        assert rec.slots == rec.memory_slots == dram.memory_slots > MAX_SLOTS_DRAM and not rec.core_limited
        assert rec.used_bytes == rec.slots * (dram_slot_stride(499) + STATE_BYTES_PER_SLOT) <= rec.total_bytes


def test_the_core_builds_records_and_bad_input_is_one_line():
    """``WanreduceCore(slot_memory="records")`` takes the record path (``RecordReducer``, with the
    AXI4 port ``m_axi_mem_*``) at the large S; the parameters are checked first, and what the
    record path cannot take (W 512, the reducer's pending words) is refused in one line naming
    the field, as is the ``Reducer`` given ``records`` (it would build the slots on chip); a
    board's core (``board_core``) takes ``records`` with the board's DRAM parameters."""
    from wanreduce.hdl.boards.dram_controller import board_core
    from wanreduce.hdl.core import WanreduceCore
    from wanreduce.hdl.record_reducer import RecordReducer
    from wanreduce.hdl.reducer import Reducer

    core = WanreduceCore(slot_memory="records", slots=32768)
    assert isinstance(core.reducer, RecordReducer) and "m_axi_mem_awaddr" in core.signature.members
    with pytest.raises(ValueError, match="slots must be a power of two"):  # the parameters first
        WanreduceCore(slot_memory="records", slots=3)
    for kw, start in (({"width": 512}, "width must be 64..256 with slot memory records"),
                      ({"pending": "words"}, "pending must be 'vector'")):
        with pytest.raises(ValueError) as exc:
            WanreduceCore(slot_memory="records", **kw)
        assert "\n" not in str(exc.value) and str(exc.value).startswith(start), exc.value
    with pytest.raises(ValueError) as exc:
        Reducer(64, slots=8, elements=16, groups=2, jobs=2, slot_memory="records")
    assert "\n" not in str(exc.value) and str(exc.value).startswith("slot_memory: 'records' is the record path's")
    board = board_core("versa-ecp5", "records", slots=8)
    assert isinstance(board.reducer, RecordReducer)
    assert len(board.m_axi_mem_awaddr) == DRAM_CONFIGS["versa-ecp5"].addr_width


def test_versa_dram_bandwidth_covers_two_gigabit_ports_with_the_boards_bursts():
    """Read + write of every payload beat of two 1 GbE ports at line rate fits the Versa's
    DDR3 at its controller clock and the efficiency measured for the board's bursts (512 B: the
    slot store's burst_beats=64 at W=64); shorter bursts were not measured at this clock and
    say so (docs/boards.md)."""
    cfg = DRAM_CONFIGS["versa-ecp5"]
    assert cfg.burst_bytes == 512 and cfg.burst_beats(64) == 64
    b = dram_budget("versa-ecp5", 499)
    assert 470e6 < b.needed_bytes_per_s < 500e6
    assert b.peak_bytes_per_s == pytest.approx(8 * cfg.sys_clk_hz)  # 16 bits x 2 edges x sys2x
    assert b.efficiency == DRAM_EFFICIENCY["versa-ecp5"][cfg.burst_bytes]
    assert b.margin > 1.05
    assert dram_budget("versa-ecp5", 499, burst_bytes=4096).efficiency == b.efficiency
    with pytest.raises(ValueError, match="not measured for bursts of 128 B"):
        dram_budget("versa-ecp5", 499, burst_bytes=128)
    with pytest.raises(ValueError, match="alinx-ax7325b: DRAM efficiency not measured"):
        dram_budget("alinx-ax7325b", 499, burst_bytes=256)
    with pytest.raises(ValueError, match=r"ports must be 1\.\.2 \(versa-ecp5's data ports\), got 3"):
        dram_budget("versa-ecp5", 499, ports=3)


def test_ax7325b_dram_bandwidth_covers_two_10g_ports_with_2kib_bursts():
    """The AX7325B's DDR3 (8 GB/s peak at DDR3-1000) with the board's 2-KiB bursts (32 beats at
    W = 512) carries read + write of two 10 GbE data ports at line rate with margin; with
    512-B bursts it did not, and all three data ports are not covered either way
    (docs/boards.md, "The DRAM bandwidth budget")."""
    cfg = DRAM_CONFIGS["alinx-ax7325b"]
    assert cfg.burst_bytes == 2048 and cfg.burst_beats(512) == 32
    two = dram_budget("alinx-ax7325b", 499, ports=2)
    assert two.peak_bytes_per_s == pytest.approx(8e9)
    assert two.efficiency == DRAM_EFFICIENCY["alinx-ax7325b"][2048]
    assert 4.7e9 < two.needed_bytes_per_s < 4.9e9
    assert two.margin > 1.3
    assert dram_budget("alinx-ax7325b", 499, ports=2, burst_bytes=512).margin < 1.0
    assert dram_budget("alinx-ax7325b", 499).margin < 1.0  # three ports: 7.2 GB/s


def board_stores(core) -> list:
    """The core's DRAM engines: the sums' store (``dram``), or the sums' and the records'
    (``records``: the record path's two engines on one ``m_axi_mem``)."""
    if core.slot_memory == "dram":
        return [core.reducer.store]
    return [core.reducer.path.sums.store, core.reducer.path.records.engine]


@pytest.mark.parametrize("slot_memory", ["dram", "records"])
@pytest.mark.parametrize("board_name", ["versa-ecp5", "alinx-ax7325b"])
def test_slot_memory_dram_builds_the_core_on_the_boards_dram(tmp_path, board_name, slot_memory):
    """build --slot-memory dram / records (sources only): the core has m_axi_mem (its DRAM
    engines addressing the board's DRAM, the sums in the controller's burst size; with records
    the record engine too, both IDs of the ID arbiter on the one port), attached through the
    converter to the LiteDRAM instance, which uses only ports its Verilog has, beside the MACs;
    the open flow routes it with nextpnr's router2; a core without the port is still refused
    (one line)."""
    from wanreduce.hdl.core import WanreduceCore

    board = BOARDS[board_name]
    run_build(board, {"elements": 16}, tmp_path, bitstream=False, slot_memory=slot_memory)
    name = module_name(board_name)
    ports = module_ports((tmp_path / f"{name}.v").read_text(), name)
    if board.open_flow:  # RTLIL top: the instance is a cell
        top = (tmp_path / f"{board.top_name}.il").read_text()
        cell = re.search(rf"cell \\{name} \S+\n(.*?)\n\s*end\n", top, re.S).group(1)
        used = set(re.findall(r"connect \\(\w+) ", cell))
        subs = set(re.findall(rf"module \\{board.top_name}\.(\w+)\n", top))
    else:  # Verilog top (Vivado)
        top = (tmp_path / f"{board.top_name}.v").read_text()
        cell = re.search(rf"\n\s*{name} \w+ \((.*?)\);", top, re.S).group(1)
        used = set(re.findall(r"\.(\w+)\(", cell))
        subs = set(re.findall(rf"module \\{board.top_name}\.(\w+) \(", top))
    assert {"user_port_axi_wdata", "user_port_axi_awlen", "user_port_axi_rdata", "axi_clk"} <= used <= set(ports)
    assert {"core", "mem_upsizer", "dram"} <= subs, subs
    if slot_memory == "records":  # the record path: its record engine and the ID arbiter
        paths = set(re.findall(rf"module \\{board.top_name}\.([\w.]+)\n", top)) if board.open_flow \
            else set(re.findall(rf"module \\{board.top_name}\.([\w.]+) \(", top))
        assert {"core.reducer.path.records.engine", "core.reducer.path.sums.store",
                "core.reducer.path.arbiter"} <= paths, sorted(p for p in paths if ".path." in p)[:20]
    if board.open_flow:  # the two MACs (LiteEth, black-box cells)
        assert len(re.findall(r"cell \\liteeth_rgmii_mac \\mac[01]\n", top)) == 2
    if board_name == "versa-ecp5":  # the core clock's reset: the global set/reset, not a fabric net
        assert_core_reset_by_gsr(top, board.top_name)
    if board.open_flow:  # router1 does not route this design; router2 does, with its timing-driven
        # rip-up (docs/benchmarks.md)
        script = (tmp_path / f"build_{board.top_name}.sh").read_text()
        assert re.search(r'"\$NEXTPNR_ECP5" .*--router router2 --tmg-ripup', script), script
    cfg = DRAM_CONFIGS[board_name]
    core = board.top({"elements": 16}, slot_memory=slot_memory).core
    assert len(core.m_axi_mem_awaddr) == cfg.addr_width and len(core.m_axi_mem_awid) <= AXI_ID_WIDTH
    stores = board_stores(core)
    assert len(stores) == {"dram": 1, "records": 2}[slot_memory]
    assert stores[0].burst_beats == cfg.burst_beats(core.params["width"])
    # the Versa's dram table is 128 entries (two 1 GbE ports still covered through LiteDRAM,
    # margin 1.10; docs/benchmarks.md), the AX7325B's the store's default; both engines of
    # records at the default on both boards (at 128 the record path lost 42-53 % of its beats)
    for st in stores:
        assert st.address_width == cfg.addr_width
        assert st.outstanding == (128 if (board_name, slot_memory) == ("versa-ecp5", "dram")
                                  else DRAM_STORE_DEFAULTS["outstanding"])
    with pytest.raises(ValueError, match=f"--slot-memory {slot_memory}: the core has no m_axi_mem port"):
        check_board_memory(board_name, slot_memory, WanreduceCore())
