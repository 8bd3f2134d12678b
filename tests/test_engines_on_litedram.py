"""The two read-modify-write engines (sums on AXI ID 0, the scaffold records on ID 1) through
``AxiIdArbiter``, the board's ``attach_memory`` and LiteDRAM's AXI frontend and controller on its
DDR3 model (hdl/boards/litedram_model_engines.py, sim/tb_engines_on_litedram.py): issue 16, large
S step 4, whether the board's path may carry two IDs (docs/large_slots.md)."""

from __future__ import annotations

import json

import pytest

from wanreduce.hdl.boards.litedram_model import cached_model
from wanreduce.hdl.boards.litedram_model_engines import LiteDramModelEngines
from wanreduce.sim.simulator import generate_verilog, run_cocotb

TB = "wanreduce.sim.tb_engines_on_litedram"

# The default bus (W 64) on the Versa: the sums' store (64-bit rows, 8 KiB) and the records
# (256-bit rows = 4 beats, 64 records, 2 KiB), in the model's distinct 256 KiB, apart.
ENGINES = {
    "data_width": 64,
    "sums": {"slots": 16, "row_bits": 6, "outstanding": 64, "burst_beats": 16, "burst_hold": 64,
             "base_address": 0x3000},
    "records": {"slots": 16, "row_bits": 2, "outstanding": 32, "row_width": 256, "burst_beats": 16,
                "burst_hold": 64, "base_address": 0x20000},
}


def test_both_regions_must_fit_the_model_memory() -> None:
    LiteDramModelEngines(**ENGINES)
    records = {**ENGINES["records"], "base_address": 0x3F000}  # 2 KiB from 252 KiB: fits
    LiteDramModelEngines(64, sums=ENGINES["sums"], records=records)
    records["base_address"] = 0x40000
    with pytest.raises(ValueError, match=r"the record engine's region ends at 0x40800, beyond the model's 0x40000"):
        LiteDramModelEngines(64, sums=ENGINES["sums"], records=records)


def sources(top: str, params: dict) -> list:
    return [generate_verilog(LiteDramModelEngines, name=top, params=params), cached_model("versa-ecp5")]


@pytest.mark.slow
@pytest.mark.cocotb
def test_cocotb_two_engines_through_litedram(tmp_path) -> None:
    """Random commands to both engines at once through the Versa's real path: every response
    as its engine's reference, every R beat and B with the ID of the burst the path pairs it
    with (in AR / AW order), bursts of both IDs outstanding together, no error flag."""
    top = "engines_on_litedram_w64"
    out = tmp_path / "r.json"
    run_cocotb(verilog=sources(top, ENGINES), toplevel=top, test_module=TB,
               testcase="random_commands_both",
               params={**ENGINES, "seed": 5, "commands": 1200, "out": str(out)})
    r = json.loads(out.read_text())
    print(r)  # with -s: the overlap and beat counts docs/large_slots.md quotes
    assert min(r["mixed"].values()) > 10 and min(r["r_beats"].values()) > 100, r
