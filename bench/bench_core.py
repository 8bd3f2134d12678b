"""Benchmark the generated core in simulation: throughput through the reduction pipeline and
completion-to-result latency, per configuration and payload size (cycles, not seconds).

Run: .venv/bin/python bench/bench_core.py [--quick]
(the pending store's cost, ``pending="words"``, is measured by bench/bench_pending_words.py --cycles)
Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from wanreduce.hdl.core import WanreduceCore
from wanreduce.hdl.core_dram_harness import CoreDramHarness
from wanreduce.hdl.layouts import header_beats, lanes, payload_beats
from wanreduce.sim.simulator import generate_verilog, run_cocotb

CONFIGS = [  # (width, ports, slots, elements E) with clock for the line-rate column
    (64, 2, 64, 2048, 156.25e6),
    (256, 4, 64, 2048, 250e6),
    (512, 8, 16, 2048, 250e6),
]


def run(cfg: dict, test: str, extra: dict, dram: dict | None = None) -> dict:
    """``sim/tb_core_perf.py``'s ``test`` on the core of ``cfg``; ``dram``: the slots in DRAM
    (``CoreDramHarness``) with these store parameters (``{}``: the defaults; ``slot_memory``
    ``records``: the record path, the bench's RAM then holds the records too)."""
    core = {k: cfg[k] for k in ("ports", "width", "slots", "elements")} | {"groups": 2, "jobs": 1}
    factory, top = (WanreduceCore, "wanreduce_core") if dram is None else (CoreDramHarness, "wanreduce_core_dram")
    build = core | (dram or {})
    verilog = generate_verilog(factory, name=top, params=build)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out.json"
        run_cocotb(verilog=verilog, toplevel=top, test_module="wanreduce.sim.tb_core_perf",
                   params={**core, **extra, **{k: v for k, v in build.items() if k == "slot_memory"},
                           "out": str(out)}, testcase=test, timeout_s=1800)
        return json.loads(out.read_text())


def chunks_for(count: int, width: int, ports: int, slots: int, beats: int = 4096) -> int:
    """Chunks in a throughput run: about ``beats`` payload beats in all, 4 to ``slots`` chunks."""
    return max(4, min(slots, beats // max(1, payload_beats(count, width) * (ports + 1))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="first configuration only, two sizes")
    args = ap.parse_args()
    os.environ.setdefault("COCOTB_LOG_LEVEL", "WARNING")
    print("| W | P+1 | S | payload | offered beats/cycle | reducer beats/cycle | elements/cycle | at clock | latency (cycles) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for width, ports, slots, e, clk in CONFIGS[:1] if args.quick else CONFIGS:
        cfg = dict(width=width, ports=ports, slots=slots, elements=e)
        sizes = [lanes(width), 64, 256, 2048] if not args.quick else [lanes(width), 256]
        for count in sizes:
            beats = payload_beats(count, width)
            t = run(cfg, "throughput", {"count": count, "chunks": chunks_for(count, width, ports, slots)})
            lat = run(cfg, "latency", {"count": count})
            bpc = t["beats_per_cycle"]
            epc = bpc * count / beats
            gbps = epc * 32 * clk / 1e9
            # what the ports can deliver: each frame spends header beats on its port
            offered = (ports + 1) * beats / (beats + header_beats(width))
            print(f"| {width} | {ports + 1} | {slots} | {4 * count} B | {offered:.2f} | {bpc:.3f} | {epc:.2f} | "
                  f"{gbps:.1f} Gb/s @ {clk / 1e6:g} MHz | {max(lat['latency_cycles'])} = "
                  f"{max(lat['latency_cycles']) - beats} + {beats} payload beats |", flush=True)


if __name__ == "__main__":
    main()
