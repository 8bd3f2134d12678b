"""``wanreduce plan --board``: the board's real slot capacity as the memory axis, core parameters
the core's parameter check accepts (capped by the core's S limit), no "beyond the core's S" note
for a board plan, and one-line errors for bad input."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from wanreduce.cli import cli
from wanreduce.hdl.boards.capacity import board_capacity, dram_slot_stride
from wanreduce.hdl.params import MAX_SLOTS, MAX_SLOTS_DRAM, check_slot_memory, check_wired
from wanreduce.planner.topology import format_size

MiB = 1 << 20
BOARD_LINE = re.compile(r"^  (\S+) \((\w+) slot memory\) core parameters: (.*)$")
BEYOND = "beyond the core's S <="


def _plan(*args: str):
    res = CliRunner().invoke(cli, ["plan", "--topology", "nine-city", "--bytes", "100MB",
                                   "--no-crossover", *args])
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("board, slot_memory, at_least", [
    ("versa-ecp5", "dram", 64 * MiB), ("alinx-ax7325b", "dram", 512 * MiB),
    ("versa-ecp5", "onchip", 32 * 1024 * 2), ("alinx-ax7325b", "onchip", 256 * 1024 * 2),
])
def test_plan_board_prints_parameters_the_core_accepts(board, slot_memory, at_least):
    """The printed parameters pass the one parameter check and build the core (its constructor
    runs every check, the DRAM store's too); S is the board's capacity, capped by the core's
    limit, and the header says when the cap, not the memory, sets it."""
    from wanreduce.hdl.core import WanreduceCore

    out = _plan("--board", board, "--slot-memory", slot_memory)
    found = [m for ln in out.splitlines() if (m := BOARD_LINE.match(ln))]
    assert len(found) == 1, out
    name, mem, text = found[0].groups()
    assert (name, mem) == (board, slot_memory)
    flags = dict(re.findall(r"--([\w-]+) (\S+)", text))
    assert flags.pop("slot-memory", "onchip") == slot_memory
    params = {k: int(v) for k, v in flags.items()}
    assert check_slot_memory(slot_memory, **params) == params  # the one parameter check
    WanreduceCore(slot_memory=slot_memory, **params)._MustUse__silence = True  # builds (raises if not)
    cap = board_capacity(board, slot_memory, params["elements"])
    assert params["slots"] == cap.slots == min(cap.memory_slots, MAX_SLOTS_DRAM if slot_memory == "dram"
                                                else MAX_SLOTS)
    footprint = dram_slot_stride(499) if slot_memory == "dram" else 1024 * 2  # bytes per slot
    assert cap.memory_slots * footprint >= at_least  # what the board's memory holds
    head = out.splitlines()[0]
    assert f"S = {cap.slots} x E = 499" in head
    assert (f"holds S = {cap.memory_slots}" in head) == cap.core_limited
    if cap.core_limited:  # what the memory holds, in sums: S_memory x E x 4 B
        assert f"{format_size(cap.memory_slots * 499 * 4)} of sums;" in head
    assert BEYOND not in out


def test_plan_with_the_board_dram_says_the_core_limits_s():
    """64 MiB per site plans S = 32768, beyond the core's S <= 4096 whichever memory holds the
    sums (the per-slot state is on chip); with the Versa's DRAM the plan takes the S the core
    builds and says what the DRAM would hold."""
    note = _plan("--memory", "64MiB")
    assert BEYOND in note and "S = 32768 slots" in note
    out = _plan("--board", "versa-ecp5", "--slot-memory", "dram")
    assert BEYOND not in out and f"S = {MAX_SLOTS_DRAM} slots" in out
    assert "its DRAM holds S = 32768" in out.splitlines()[0]


def test_verilog_refuses_the_dram_capacity_in_one_line(tmp_path):
    """The DRAM's 32768 slots are refused by `wanreduce verilog` in one line, as by the planner's
    check (they disagreed: the planner printed --slots 32768, the generator failed with a
    traceback from the DRAM store's own check)."""
    res = CliRunner().invoke(cli, ["verilog", "--out", str(tmp_path), "--slot-memory", "dram",
                                   "--slots", "32768", "--elements", "499"])
    lines = res.output.strip().splitlines()
    assert res.exit_code != 0 and len(lines) == 1 and "Traceback" not in res.output, res.output
    assert f"slots must be a power of two from 2 to {MAX_SLOTS_DRAM} (DRAM slot memory), got 32768" in lines[0]


def test_plan_with_records_takes_the_boards_dram_and_the_core_builds_it():
    """``--slot-memory records`` (per-slot state in DRAM too): the Versa's DDR3 sets S (32768 at
    E 499), no "beyond" note, the parameters pass the one check, end in ``--slot-memory
    records`` and build the core (the record path); ``dram`` keeps the core's S <= 4096."""
    from wanreduce.hdl.core import WanreduceCore

    out = _plan("--board", "versa-ecp5", "--slot-memory", "records")
    cap = board_capacity("versa-ecp5", "records", 499)
    assert cap.slots == 32768 and not cap.core_limited
    assert BEYOND not in out and f"S = {cap.slots} x E = 499" in out.splitlines()[0]
    lines = out.splitlines()
    (k,) = [i for i, ln in enumerate(lines) if BOARD_LINE.match(ln)]
    name, mem, text = BOARD_LINE.match(lines[k]).groups()
    assert (name, mem) == ("versa-ecp5", "records") and text.endswith(" --slot-memory records")
    params = {f: int(v) for f, v in re.findall(r"--([\w-]+) (\d+)", text)}
    assert params["slots"] == cap.slots and check_slot_memory("records", **params) == params
    assert "not buildable" not in out and check_wired("records") == "records"
    assert WanreduceCore(slot_memory="records", **params).params["slots"] == cap.slots
    dram = _plan("--board", "versa-ecp5", "--slot-memory", "dram")
    assert f"--slots {MAX_SLOTS_DRAM} " in dram and "not buildable" not in dram


def test_verilog_and_build_take_records_with_the_plans_parameters(tmp_path):
    """``verilog --slot-memory records`` writes the core with the AXI4 port; ``build --board
    versa-ecp5`` takes the parameters ``plan --board versa-ecp5 --slot-memory records`` prints
    (S 32768: the build checked S against the onchip limit, 4096, before), the top has the
    records core on LiteDRAM; twice the S the board's DRAM holds is refused in one line naming
    the board, slots and its range, and nothing is written."""
    res = CliRunner().invoke(cli, ["verilog", "--out", str(tmp_path / "v"), "--slot-memory", "records",
                                   "--slots", "8", "--elements", "16"])
    assert res.exit_code == 0 and "records slot memory" in res.output, res.output
    assert "m_axi_mem_awaddr" in (tmp_path / "v" / "wanreduce_core.ports.txt").read_text()
    text = BOARD_LINE.match(next(ln for ln in _plan("--board", "versa-ecp5", "--slot-memory", "records")
                                 .splitlines() if BOARD_LINE.match(ln))).group(3)
    assert "--slots 32768 " in text, text
    res = CliRunner().invoke(cli, ["build", "--board", "versa-ecp5", "--out", str(tmp_path / "out"),
                                   *text.split()])
    assert res.exit_code == 0, res.output
    assert "slots=32768, elements=499" in res.output and "records slot memory" in res.output, res.output
    top = (tmp_path / "out" / "wanreduce_versa_ecp5.il").read_text()
    for part in ("module \\wanreduce_versa_ecp5.core.reducer.path.records.engine\n",
                 "cell \\litedram_versa_ecp5 \\litedram\n", "cell \\liteeth_rgmii_mac \\mac1\n"):
        assert part in top, part
    res = CliRunner().invoke(cli, ["build", "--board", "versa-ecp5", "--out", str(tmp_path / "big"),
                                   *text.replace("--slots 32768", "--slots 65536").split()])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and "Traceback" not in res.output, res.output
    assert lines[0] == ("wanreduce: error: versa-ecp5 --slot-memory records: slots must be a power of two "
                        "from 2 to 32768 at elements 499 (what the board's 128 MiB of DRAM hold), got 65536")
    assert not (tmp_path / "big").exists()


@pytest.mark.parametrize("args, field, text", [
    (["--board", "zcu102"], "--board", "must be one of versa-ecp5, alinx-ax7325b, got 'zcu102'"),
    (["--slot-memory", "dram"], "--slot-memory", "needs --board"),
    (["--board", "versa-ecp5", "--slot-memory", "hbm"], "--slot-memory",
     "must be one of onchip, dram, records, got 'hbm'"),
    (["--board", "versa-ecp5", "--memory", "64MiB"], "--memory", "not with --board"),
    (["--board", "versa-ecp5", "--elements-per-packet", "5000"], "--elements-per-packet",
     "elements must be 1..2237"),
])
def test_plan_board_bad_input_is_one_line(args, field, text):
    res = CliRunner().invoke(cli, ["plan", "--topology", "nine-city", *args])
    assert res.exit_code != 0
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert field in lines[0] and text in lines[0], lines[0]
