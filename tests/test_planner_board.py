"""``wanreduce plan --board``: the board's real slot capacity as the memory axis, core parameters
the core's parameter check accepts, no "needs off-chip slot memory" note for a plan the board
holds, and one-line errors for bad input."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from wanreduce.cli import cli
from wanreduce.hdl.boards.capacity import board_capacity, dram_slot_stride
from wanreduce.hdl.params import check_slot_memory

MiB = 1 << 20
BOARD_LINE = re.compile(r"^  (\S+) \((\w+) slot memory\) core parameters: (.*)$")
BEYOND = "needs off-chip slot memory"


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
    out = _plan("--board", board, "--slot-memory", slot_memory)
    found = [m for ln in out.splitlines() if (m := BOARD_LINE.match(ln))]
    assert len(found) == 1, out
    name, mem, text = found[0].groups()
    assert (name, mem) == (board, slot_memory)
    flags = dict(re.findall(r"--([\w-]+) (\S+)", text))
    assert flags.pop("slot-memory", "onchip") == slot_memory
    params = {k: int(v) for k, v in flags.items()}
    assert check_slot_memory(slot_memory, **params) == params  # the one parameter check
    cap = board_capacity(board, slot_memory, params["elements"])
    assert params["slots"] == cap.slots  # the board's whole capacity, as the header says
    footprint = dram_slot_stride(499) if slot_memory == "dram" else 1024 * 2  # bytes per slot
    assert params["slots"] * footprint >= at_least
    assert f"S = {cap.slots} x E = 499" in out.splitlines()[0]
    assert BEYOND not in out


def test_offchip_note_disappears_with_the_board_dram():
    """The issue's complaint: 64 MiB per site plans S = 32768, 'beyond the core's S <= 4096:
    needs off-chip slot memory'; with the Versa's DRAM the same memory is the board's, no note."""
    assert BEYOND in _plan("--memory", "64MiB")
    out = _plan("--board", "versa-ecp5", "--slot-memory", "dram")
    assert BEYOND not in out and "S = 32768 slots" in out


@pytest.mark.parametrize("args, field, text", [
    (["--board", "zcu102"], "--board", "must be one of versa-ecp5, alinx-ax7325b, got 'zcu102'"),
    (["--slot-memory", "dram"], "--slot-memory", "needs --board"),
    (["--board", "versa-ecp5", "--slot-memory", "hbm"], "--slot-memory",
     "must be one of onchip, dram, got 'hbm'"),
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
