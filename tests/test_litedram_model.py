"""The board's LiteDRAM controller on its DDR3 model (hdl/boards/litedram_model.py): what the
model's Verilog is made of, and a write-then-read through it in cocotb (sim/tb_litedram_model.py)."""

from __future__ import annotations

import re

import pytest

from wanreduce.hdl.boards.litedram_model import TIME_ZERO, cached_model, comb_runs_at_time_zero
from wanreduce.sim.simulator import run_cocotb

TB = "wanreduce.sim.tb_litedram_model"


def test_every_comb_block_runs_at_time_zero() -> None:
    """Each ``always @(*)`` block of the model reads the signal that changes at time 0 (Icarus
    runs such a block only when something it reads changes), and that signal is set in an
    ``initial`` hidden from synthesis."""
    text = cached_model("versa-ecp5").read_text()
    blocks = re.findall(r"always @\(\*\) begin\n(.*?)\nend\n", text, flags=re.S)
    assert len(blocks) > 100  # LiteX writes one block per target
    assert all(f"if ({TIME_ZERO}) begin end" in b for b in blocks)
    assert f"// synthesis translate_off\nreg {TIME_ZERO};\ninitial {TIME_ZERO} <= 1'd0;\n" in text


def test_time_zero_refuses_verilog_it_does_not_know() -> None:
    with pytest.raises(RuntimeError, match="not as expected"):
        comb_runs_at_time_zero("module m (\n);\nassign a = b;\nendmodule\n")


@pytest.mark.cocotb
def test_cocotb_every_bank_reads_back_what_was_written() -> None:
    """Through the controller, on the model: the first write of each of the eight banks lands
    (Icarus dropped the first ACTIVATEs before every block ran at time 0)."""
    run_cocotb(verilog=[cached_model("versa-ecp5")], toplevel="litedram_versa_ecp5_model",
               test_module=TB, testcase="write_then_read",
               params={"board": "versa-ecp5", "base": 0x3000, "bank_stride": 0x800,
                       "banks": [0, 1, 2, 3, 4, 5, 6, 7], "seed": 5})
