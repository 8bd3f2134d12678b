"""The FREE sweep's cost (issue 16, large S step 4; ``hdl/free_sweep.py``): the cycles of a window
reset of a region of 2**lw records on the record engine, and FreeSweep's yosys size.

Sweep time: ``FreeSweep`` on the record engine (``record_engine``: ``DramRmwEngine`` with
``RecordDecision``, its ``DecisionState`` with regions), in Amaranth's simulator, with an AXI
slave in the testbench that takes every AW and W beat and answers each write burst's B
``--latency`` cycles after its last beat; the engine idle when the reset comes (no drain):
the cycles from ``reset.valid`` to ``reset.ready`` (the requests held) and to the last WRITE's B
(every record in memory; the engine's later commands to those records forward from or wait for
them), and the AW bursts. Usage:

    .venv/bin/python bench/bench_free_sweep.py --width 64,256 --log2-window 4,6,8,10 --slots 1024
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from amaranth.hdl import ClockDomain, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from wanreduce.hdl.decision_record_harness import record_engine
from wanreduce.hdl.decision_state import region_layout
from wanreduce.hdl.free_sweep import FreeSweep
from wanreduce.hdl.layouts import ResetLayout
from wanreduce.hdl.reducer_layouts import RECORD_BITS, RecordSide

sys.path.insert(0, str(Path(__file__).parent))
from bench_dram_store import _ints, synth_cells  # noqa: E402 - the store bench's synthesis

JOBS = 2
AXI = "m_axi_mem_"


def sweep_cycles(width: int, *, slots: int, log2_window: int, latency: int, outstanding: int) -> dict[str, int]:
    """One window reset of job 0 (region 2**log2_window records from 0) on an idle record engine
    at ``width``: ``held`` (cycles from ``reset.valid`` to ``reset.ready``: the requests stopped),
    ``written`` (to the last WRITE's B: every record in memory), ``bursts`` (AW)."""
    eng = record_engine(width, slots=slots, jobs=JOBS, outstanding=outstanding, address_width=32)
    sw = FreeSweep(slots=slots, jobs=JOBS, row_width=RECORD_BITS, side_shape=RecordSide)
    m = Module()
    m.domains.sync = ClockDomain()
    m.submodules.eng, m.submodules.sweep = eng, sw
    wiring.connect(m, sw.cmd, eng.cmd)
    wiring.connect(m, sw.state_reset, eng.reset)
    m.d.comb += [eng.region.eq(sw.region), eng.rsp.ready.eq(1), sw.cmd_fire.eq(eng.cmd.valid & eng.cmd.ready),
                 sw.rsp_fire.eq(eng.rsp.valid)]
    rl = region_layout(slots)
    result = {}

    async def tb(ctx) -> None:
        ctx.set(sw.region.as_value(), sum(rl.const({"base": 0, "log2_window": log2_window}).as_value().value
                                          << (j * rl.size) for j in range(JOBS)))
        for name in ("awready", "wready", "arready"):
            ctx.set(getattr(eng, AXI + name), 1)
        ctx.set(getattr(eng, AXI + "bid"), 1)
        ctx.set(sw.reset.payload.as_value(), ResetLayout(JOBS).const({"job": 0, "head": 5}).as_value().value)
        await ctx.tick().repeat(4)
        ctx.set(sw.reset.valid, 1)
        b_due, cycle, bursts, beats, held = [], 0, 0, 0, None
        want_beats = (RECORD_BITS // width) << log2_window
        while held is None or beats < want_beats or b_due:
            assert not ctx.get(getattr(eng, AXI + "arvalid")), "the sweep read"
            bursts += ctx.get(getattr(eng, AXI + "awvalid"))
            if ctx.get(getattr(eng, AXI + "wvalid")):
                beats += 1
                if ctx.get(getattr(eng, AXI + "wlast")):
                    b_due.append(cycle + latency)
            bvalid = bool(b_due) and b_due[0] <= cycle
            ctx.set(getattr(eng, AXI + "bvalid"), bvalid)
            if bvalid and ctx.get(getattr(eng, AXI + "bready")):
                b_due.pop(0)
            if held is None and ctx.get(sw.reset.ready):
                held = cycle + 1
            await ctx.tick()
            cycle += 1
            if held is not None:
                ctx.set(sw.reset.valid, 0)
            assert cycle < 100 * want_beats + 1000, "stuck"
        assert ctx.get(sw.records_freed) == 1 << log2_window and ctx.get(eng.state_error) == 0
        result.update(held=held, written=cycle, bursts=bursts)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=_ints, default=[64, 256], help="AXI data widths W (default 64,256)")
    ap.add_argument("--log2-window", type=_ints, default=[4, 6, 8], help="region sizes, log2 (default 4,6,8)")
    ap.add_argument("--slots", type=int, default=1024, help="S (default 1024)")
    ap.add_argument("--latency", type=int, default=40, help="cycles from a burst's last W beat to its B (default 40)")
    ap.add_argument("--outstanding", type=int, default=64, help="the engine's in-flight table N (default 64)")
    ap.add_argument("--size", action="store_true", help="also FreeSweep's yosys synth_ecp5 size at S, J 4")
    a = ap.parse_args()
    for w in a.width:
        for lw in a.log2_window:
            r = sweep_cycles(w, slots=a.slots, log2_window=lw, latency=a.latency, outstanding=a.outstanding)
            n = 1 << lw
            print(f"W {w} S {a.slots} N {a.outstanding} B latency {a.latency}: 2^{lw} = {n} records "
                  f"({RECORD_BITS // w} beats each): requests held {r['held']} cycles, every record written "
                  f"(last B) after {r['written']} cycles ({r['written'] / n:.2f} per record), {r['bursts']} AW bursts",
                  flush=True)
    if a.size:
        out = Path("build/bench_free_sweep")
        print(f"FreeSweep S {a.slots} J 4 alone: "
              f"{synth_cells(FreeSweep(slots=a.slots, jobs=4, side_shape=RecordSide), out / f'free_sweep_s{a.slots}')}",
              flush=True)


if __name__ == "__main__":
    main()
