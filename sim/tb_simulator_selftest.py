"""cocotb module that checks sim.simulator.run_cocotb itself: params arrive, failures surface.

Run against any design with a ``clk`` port (tests use the register slice). ``params["fail"]``
makes ``param_controlled`` fail, so the helper's failure reporting can be tested;
``params["hang"]`` makes it run the clock forever, so its CPU-time limit can be.
"""

from __future__ import annotations

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles

from wanreduce.sim.simulator import tb_params


@cocotb.test()
async def param_controlled(dut):
    """Passes unless params["fail"]; checks params["marker"] arrived intact."""
    p = tb_params()
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    await ClockCycles(dut.clk, 2)
    assert p.get("marker") == "häßlich \"quoted\" {json}", f"params garbled: {p!r}"
    assert not p.get("fail"), "failing on purpose (params['fail'] is set)"
    while p.get("hang"):  # a bench that never finishes: only the CPU-time limit ends it
        await ClockCycles(dut.clk, 10_000)
