"""DRAM slot store throughput: commands (beats) per cycle vs memory latency and vs memory
bandwidth (docs/benchmarks.md, "DRAM slot store").

The store (``hdl/dram_slot_store.py``) in ``DramSlotStoreHarness`` (delay lines of ``latency``
cycles on the AXI R and B channels) on cocotbext-axi's ``AxiRam``, Verilator, driven by
``sim/tb_slot_store.py::throughput``: the reducer's traffic (messages of 32 consecutive rows,
three contributions per chunk: a WRITE then two ADDs), ``cmd`` always valid, ``rsp`` always
ready. ``--pattern spread`` (default): a chunk's contributions a whole region apart, so every
ADD reads DRAM (the worst case); ``back-to-back``: they follow each other and ADDs forward.
Bandwidth: the RAM's R and W channels move on that fraction of cycles (a fixed pattern); an ADD
needs one read and one write beat, a WRITE one write beat. Figure: steady-state commands per
cycle (the middle half of the responses), median over ``--seeds`` where the bandwidth throttle
(random pauses) makes runs differ; at full bandwidth the timing does not depend on the seed.

    .venv/bin/python bench/bench_dram_store.py                       # latency and bandwidth sweeps
    .venv/bin/python bench/bench_dram_store.py --outstanding 64,256 --latency 20,200
    .venv/bin/python bench/bench_dram_store.py --latency 20,200 --bandwidth 1 --burst-hold 0,128
    .venv/bin/python bench/bench_dram_store.py --pattern back-to-back --message-beats 1 --bandwidth 1
    .venv/bin/python bench/bench_dram_store.py --synth                # + yosys/nextpnr on the ECP5
    .venv/bin/python bench/bench_dram_store.py --synth --no-sweep --outstanding 64,256
    .venv/bin/python bench/bench_dram_store.py --synth --no-sweep --no-pnr --outstanding 64,256,512
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from amaranth.back import verilog

from wanreduce.commands.report import synth_ecp5, yosys_cells
from wanreduce.hdl.dram_slot_store import DramSlotStore
from wanreduce.hdl.dram_slot_store_harness import DramSlotStoreHarness
from wanreduce.sim.simulator import generate_verilog, run_cocotb

sys.path.insert(0, str(Path(__file__).parent))
from bench_fpga_modules import run_module  # noqa: E402 - the per-module place-and-route flow


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def rate(params: dict, traffic: dict, latency: int, bandwidth: float, seed: int, commands: int) -> dict:
    top = f"dram_store_bench_w{params['data_width']}_n{params['outstanding']}_h{params['burst_hold']}"
    path = generate_verilog(DramSlotStoreHarness, name=top, params=params)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        run_cocotb(verilog=path, toplevel=top, test_module="wanreduce.sim.tb_slot_store",
                   testcase="throughput", timeout_s=None,
                   params={**params, **traffic, "latency": latency, "bandwidth": bandwidth, "seed": seed,
                           "commands": commands, "out": str(out)})
        return json.loads(out.read_text())


def sweep(params: dict, traffic: dict, points: list[tuple[int, float]], seeds: int, commands: int) -> None:
    print(f"\n## W {params['data_width']}, outstanding {params['outstanding']}, "
          f"burst_beats {params['burst_beats']}, burst_hold {params['burst_hold']}, traffic {traffic}")
    print("| latency (cycles) | bandwidth | commands/cycle (median) | per seed | ADD share "
          "| mean read / write burst |")
    print("|---|---|---|---|---|---|")
    for latency, bw in points:
        # At full bandwidth nothing in the run is random but the data: one seed is the figure.
        rs = [rate(params, traffic, latency, bw, s, commands) for s in range(1, (seeds if bw < 1 else 1) + 1)]
        rates = [r["rate"] for r in rs]
        print(f"| {latency} | {bw:g} | {statistics.median(rates):.3f} | "
              f"{', '.join(f'{x:.3f}' for x in rates)} | {rs[0]['adds']:.2f} | "
              f"{rs[0]['mean_read_burst']:.1f} / {rs[0]['mean_write_burst']:.1f} |", flush=True)


def synth_cells(dut, out: Path) -> str:
    """yosys ``synth_ecp5`` of the bare module; LUT4, flip-flops, block and LUT RAM from its stat."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "store.v").write_text(verilog.convert(dut, name="store", emit_src=False))
    synth_ecp5(out / "store.v", "store", "store.json")
    cells = yosys_cells(out / "yosys_stat.txt")
    return ", ".join(f"{k} {cells.get(k, 0)}" for k in ("LUT4", "TRELLIS_FF", "DP16KD", "TRELLIS_DPR16X4", "CCU2C"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=_ints, default=[64])
    ap.add_argument("--outstanding", type=_ints, default=[256])
    ap.add_argument("--burst-beats", type=int, default=16)
    ap.add_argument("--burst-hold", type=_ints, default=[128],
                    help="idle cycles a burst waits for its message's next row (default 128; 0: none)")
    ap.add_argument("--latency", type=_ints, default=[20, 50, 100, 200])
    ap.add_argument("--bandwidth", type=_floats, default=[1.0, 0.75, 0.5, 0.25],
                    help="R/W channel duty cycles, swept at --bandwidth-latency")
    ap.add_argument("--bandwidth-latency", type=int, default=50)
    ap.add_argument("--pattern", choices=["spread", "back-to-back"], default="spread")
    ap.add_argument("--message-beats", type=int, default=32,
                    help="rows per message (default 32; 1: back to back, every ADD forwards from "
                         "the command right before)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--commands", type=int, default=6144)
    ap.add_argument("--synth", action="store_true", help="also place and route on the ECP5-45F")
    ap.add_argument("--no-sweep", action="store_true", help="no simulation (with --synth: only that)")
    ap.add_argument("--no-pnr", action="store_true", help="with --synth: yosys only (cells, no Fmax)")
    args = ap.parse_args()
    for w, n, hold in ((w, n, h) for w in args.width for n in args.outstanding for h in args.burst_hold):
        params = {"data_width": w, "slots": 64, "row_bits": 5, "outstanding": n,
                  "burst_beats": args.burst_beats, "burst_hold": hold, "delay_depth": 1024}
        traffic = {"spread": args.pattern == "spread", "message_beats": args.message_beats}
        points = [(lat, 1.0) for lat in args.latency]
        points += [(args.bandwidth_latency, bw) for bw in args.bandwidth if bw != 1.0]
        if not args.no_sweep:
            sweep(params, traffic, points, args.seeds, args.commands)
        if args.synth:
            store = {k: v for k, v in params.items() if k not in ("data_width", "delay_depth")}
            if args.no_pnr:
                print(f"\nECP5 synthesis (yosys synth_ecp5, bare module): "
                      f"{synth_cells(DramSlotStore(w, **store), Path('build/bench_dram_store') / f'w{w}_n{n}_synth')}",
                      flush=True)
                continue
            r = run_module(f"dram_slot_store_w{w}_n{n}", DramSlotStore(w, **store),
                           Path("build/bench_dram_store") / f"w{w}_n{n}", wrap=True,
                           freq=125.0, seed=1, board="versa-ecp5")
            fmax = min((a for a, _ in r["fmax"].values()), default=float("nan"))
            print(f"\nECP5-45F (wrapped, 125 MHz target, seed 1): LUT4 {r['lut4'][0]}, "
                  f"FF {r['ff'][0]} (port FFs {r['port_bits']}), DP16KD {r['dp16kd'][0]}, "
                  f"Fmax {fmax:.1f} MHz", flush=True)


if __name__ == "__main__":
    main()
