"""The simulation time limit counts CPU time, not wall-clock time: a loaded machine slows a
simulation down without failing it, a hung one is still stopped (sim/simulator.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from wanreduce.sim.simulator import cpu_limit_prefix, run_cocotb


def test_cpu_limit_stops_a_spinning_process():
    r = subprocess.run([*cpu_limit_prefix(1), sys.executable, "-c", "while True: pass"])
    assert r.returncode in (-24, -9)  # SIGXCPU at the limit (SIGKILL 10 CPU-seconds later)


def test_cpu_limit_ignores_time_spent_waiting():
    """Waiting 2.5 s of wall-clock time (as a process on a loaded machine waits for the CPU)
    uses almost no CPU time: a 1 s CPU limit lets it finish."""
    r = subprocess.run([*cpu_limit_prefix(1), sys.executable, "-c", "import time; time.sleep(2.5)"])
    assert r.returncode == 0


@pytest.mark.parametrize("bad", [0, -1, float("nan")])
def test_cpu_limit_must_be_positive(bad):
    with pytest.raises(ValueError, match="CPU-time limit must be > 0 s"):
        cpu_limit_prefix(bad)


@pytest.mark.cocotb
def test_hung_bench_is_stopped_and_reported(tmp_path):
    verilog = tmp_path / "clocked.sv"  # the smallest design with a clock: no HDL dependency
    verilog.write_text("module clocked(input wire clk);\nendmodule\n")
    with pytest.raises(AssertionError, match=r"no cocotb results \(stopped after 8 s of CPU time\)"):
        run_cocotb(verilog=verilog, toplevel="clocked",
                   test_module="wanreduce.sim.tb_simulator_selftest",
                   params={"marker": "häßlich \"quoted\" {json}", "hang": True}, timeout_s=8)
