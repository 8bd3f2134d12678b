"""The record emitter's pace and size (issue 16, large S step 4; ``hdl/record_emitter.py``): rows
per cycle of released runs read back (record READ, then the chunk's data READs), and the yosys
size of ``RecordEmitter`` and ``StoreReadSplit``.

Pace: ``RecordEmitter`` alone in Amaranth's simulator, every stream ready, the record engine and
the slot store stood in for by the testbench (each READ answered ``--latency`` cycles after it
is issued, in order, one a cycle); one run of ``--chunks`` chunks of ``--beats`` rows each: the
cycles from the run's arrival to its last row, and rows per cycle, at each ``--prefetch``.
Simulation cycles of the component, not of DRAM. Usage:

    .venv/bin/python bench/bench_record_emitter.py --latency 20,100,200 --beats 1,4,32 --prefetch 1,4,8 --size
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from pathlib import Path

from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from wanreduce.hdl.decision_state import region_layout
from wanreduce.hdl.record_emitter import RecordEmitter
from wanreduce.hdl.record_release_queue import release_item_layout
from wanreduce.hdl.reducer_layouts import record_layout
from wanreduce.hdl.store_read_split import StoreReadSplit

sys.path.insert(0, str(Path(__file__).parent))
from bench_dram_store import _ints, synth_cells  # noqa: E402 - the store bench's synthesis

SLOTS, JOBS, ROW_BITS = 256, 2, 6


def run_cycles(*, latency: int, beats: int, chunks: int, prefetch: int, headers: int) -> int:
    """Cycles from a run of ``chunks`` chunks of ``beats`` rows arriving to its last row leaving."""
    dut = RecordEmitter(64, slots=SLOTS, jobs=JOBS, row_bits=ROW_BITS, prefetch=prefetch, headers=headers)
    m = Module()
    m.domains.sync = ClockDomain()
    m.submodules.dut = dut
    result = {}

    async def tb(ctx) -> None:
        rl = region_layout(SLOTS)
        ctx.set(dut.region.as_value(), sum(rl.const({"base": 0, "log2_window": 8}).as_value().value << (j * rl.size)
                                           for j in range(JOBS)))
        for port in (dut.rec_read, dut.data_cmd, dut.row):
            ctx.set(port.ready, 1)
        record = record_layout(JOBS).const({"tag": {"nbm1": beats - 1}}).as_value().value
        item = release_item_layout(SLOTS, JOBS).const({"job": 0, "start": 0, "run": chunks - 1}).as_value().value
        ctx.set(dut.run.payload.as_value(), item)
        ctx.set(dut.run.valid, 1)
        records, reads, rows, cycle = deque(), deque(), 0, 0
        while rows < chunks * beats:
            rec_ok = bool(records) and records[0] <= cycle
            ctx.set(dut.rec_data.valid, rec_ok)
            ctx.set(dut.rec_data.payload.as_value(), record)
            rsp_ok = bool(reads) and reads[0] <= cycle
            ctx.set(dut.data_rsp.valid, rsp_ok)
            taken = ctx.get(dut.run.valid) and ctx.get(dut.run.ready)
            if ctx.get(dut.rec_read.valid):
                records.append(cycle + latency)
            if rec_ok and ctx.get(dut.rec_data.ready):
                records.popleft()
            if ctx.get(dut.data_cmd.valid):
                reads.append(cycle + latency)
            if rsp_ok and ctx.get(dut.data_rsp.ready):
                reads.popleft()
            rows += ctx.get(dut.row.valid)
            await ctx.tick()
            if taken:
                ctx.set(dut.run.valid, 0)
            cycle += 1
            assert cycle < 100 * (latency + beats) * chunks, f"stuck: {rows} rows, {len(records)} records, {len(reads)} reads"
        result["cycles"] = cycle

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return result["cycles"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=_ints, default=[20, 200], help="READ latencies, cycles (default 20,200)")
    ap.add_argument("--beats", type=_ints, default=[1, 4, 32], help="rows per chunk (default 1,4,32)")
    ap.add_argument("--prefetch", type=_ints, default=[1, 4, 8], help="the slot queue's depth (default 1,4,8)")
    ap.add_argument("--headers", type=_ints, default=[4], help="the header queue's depth (default 4)")
    ap.add_argument("--chunks", type=int, default=32, help="chunks in the run (default 32)")
    ap.add_argument("--size", action="store_true",
                    help="also the yosys synth_ecp5 size (the emitter at S 1024, J 4; the split at S 64)")
    a = ap.parse_args()
    for lat, b, p, h in ((lat, b, p, h) for lat in a.latency for b in a.beats for p in a.prefetch for h in a.headers):
        c = run_cycles(latency=lat, beats=b, chunks=a.chunks, prefetch=p, headers=h)
        print(f"latency {lat} beats {b} prefetch {p} headers {h}: {a.chunks} chunks in {c} cycles, "
              f"{a.chunks * b / c:.3f} rows/cycle", flush=True)
    if a.size:
        out = Path("build/bench_record_emitter")
        for w, rb in ((64, 8), (256, 6)):
            em = RecordEmitter(w, slots=1024, jobs=4, row_bits=rb, prefetch=4, headers=4)
            print(f"RecordEmitter W {w} S 1024 J 4 row_bits {rb} prefetch 4 headers 4: "
                  f"{synth_cells(em, out / f'emitter_w{w}')}", flush=True)
            # (its flags are flip-flops, as in the harnesses' small S: at S 1024 yosys gives up)
            print(f"StoreReadSplit W {w} S 64 row_bits {rb} depth 64: "
                  f"{synth_cells(StoreReadSplit(w, slots=64, row_bits=rb), out / f'split_w{w}')}", flush=True)


if __name__ == "__main__":
    main()
