"""AXI4 upconverter (hdl/axi_upsizer.py): parameter errors, and the cocotb bench
(sim/tb_axi_upsizer.py) of a narrow AxiMaster through it onto a wide AxiRam with random
backpressure on every channel, 64 -> 128 (the Versa's DDR3 port) and 64 -> 512 (the AX7325B's)."""

from __future__ import annotations

import pytest
from stream_helpers import comb_cone

from wanreduce.hdl.axi_upsizer import AxiUpsizer
from wanreduce.sim.simulator import generate_verilog, run_cocotb

TB = "wanreduce.sim.tb_axi_upsizer"


@pytest.mark.parametrize(("args", "kw", "msg"), [
    ((48, 128), {}, "narrow_width must be a power of two"),
    ((128, 64), {}, "wide_width must be >= narrow_width"),
    ((64, 128), {"addr_width": 8}, "addr_width must be 12..64"),
    ((64, 128), {"depth": 1}, "depth must be >= 2"),
])
def test_rejects_bad_parameters(args, kw, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        AxiUpsizer(*args, **kw)


def _dut(narrow: int, wide: int):
    params = {"narrow_width": narrow, "wide_width": wide, "addr_width": 16, "id_width": 1}
    top = f"axi_upsizer_{narrow}_{wide}"
    return params, generate_verilog(AxiUpsizer, name=top, params=params), top


@pytest.mark.cocotb
@pytest.mark.parametrize(("narrow", "wide", "seed"), [(64, 128, 1), (64, 512, 2)])
def test_cocotb_random_transfers(narrow: int, wide: int, seed: int) -> None:
    params, path, top = _dut(narrow, wide)
    run_cocotb(verilog=path, toplevel=top, test_module=TB, testcase="random_transfers",
               params={**params, "seed": seed, "ops": 25})


@pytest.mark.cocotb
def test_cocotb_one_narrow_beat_per_cycle() -> None:
    params, path, top = _dut(64, 128)
    run_cocotb(verilog=path, toplevel=top, test_module=TB, testcase="throughput",
               params={**params, "seed": 3})


def test_narrow_w_reaches_only_its_input_register() -> None:
    """The manager's W (valid, last, data) enters through a skid buffer: the lane choice, the
    accumulator's enables and the wide beat's valid are decided from flip-flops. Before, the
    DRAM store's wlast (its beat count against the burst length) ran on through them into 72
    enables: the Versa DRAM build's core path at vdram22's seed 2 (9.6 ns; docs/benchmarks.md)."""
    sources, _ = comb_cone(AxiUpsizer(64, 128), "w_out.s__valid")
    assert not {s for s in sources if s.startswith("s_axi_w")}, sorted(sources)
    sources, _ = comb_cone(AxiUpsizer(64, 128), "s_axi_wready")
    assert not {s for s in sources if s.startswith("s_axi_")}, sorted(sources)
