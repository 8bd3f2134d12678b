"""DRAM slot store through LiteDRAM's real controller: commands per cycle, the DRAM efficiency
they amount to, and the latency the store sees (issue 16 item 5; docs/benchmarks.md, "DRAM slot
store through LiteDRAM's controller").

The store (``DramSlotStore``, W = 64, the Versa's) in the core clock (125 MHz), through the
board's 64 -> 128-bit converter and LiteDRAM AXI frontend to the board's controller (100 MHz) on
``SDRAMPHYModel`` at the ECP5 PHY's settings (``hdl/boards/litedram_model_store.py``), Verilator,
driven by ``sim/tb_slot_store_litedram.py::throughput``: the reducer's traffic (messages of
``--message-beats`` consecutive rows, ``more`` set but on a message's last row, a chunk's
three contributions a whole region apart, so every ADD reads DRAM: a WRITE then two ADDs),
``cmd`` always valid, ``rsp`` always ready; the store's bursts held open for ``--burst-hold``
idle cycles while a message goes on. Figures: steady-state commands (payload beats) per core
cycle (x 8 B x 125 MHz: the payload rate, against two 1 GbE ports' 239 MB/s); DRAM efficiency = the bytes they move on the DQ bus
(a write beat per command, a read beat per ADD) / the bus's peak — the quantity
``bench/bench_dram.py`` measures on a bare native port (0.52 at 128-B bursts, 0.78 at 512 B);
the store's read latency (AR -> first R) and write latency (last W -> B) in core cycles.
Nothing here is random but the data: one run per point.

    .venv/bin/python bench/bench_slot_store_litedram.py                  # bursts 16 and 64
    .venv/bin/python bench/bench_slot_store_litedram.py --burst-beats 16 --commands 6000
    .venv/bin/python bench/bench_slot_store_litedram.py --burst-beats 64 --burst-hold 0,128
    .venv/bin/python bench/bench_slot_store_litedram.py --burst-beats 64 --burst-hold 0,128 --message-beats 64
"""

from __future__ import annotations

import argparse
import sys

from wanreduce.hdl.boards.litedram_model import simulate_on_model
from wanreduce.hdl.boards.litedram_model_store import LiteDramModelStore


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def measure(burst_beats: int, outstanding: int, commands: int, burst_hold: int,
            message_beats: int = 32) -> dict:
    params = {"data_width": 64, "slots": 16, "row_bits": 6, "outstanding": outstanding,
              "burst_beats": burst_beats, "burst_hold": burst_hold}
    top = f"store_on_litedram_w64_n{outstanding}_b{burst_beats}_h{burst_hold}"
    return simulate_on_model(LiteDramModelStore, top, params, "wanreduce.sim.tb_slot_store_litedram", "throughput",
                             {"seed": 1, "commands": commands, "message_beats": message_beats})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burst-beats", type=_ints, default=[16, 64],
                    help="the store's longest burst, 64-bit beats (default 16,64)")
    ap.add_argument("--burst-hold", type=_ints, default=[128],
                    help="idle cycles a burst waits for its message's next row (default 128; 0: none)")
    ap.add_argument("--outstanding", type=int, default=256, help="in-flight table (default 256)")
    ap.add_argument("--commands", type=int, default=3000, help="commands per run (default 3000)")
    ap.add_argument("--message-beats", type=int, default=32,
                    help="rows per message (default 32; a slot of the bench's store has 64; E = 499 "
                         "at W = 64 is 250)")
    args = ap.parse_args(argv)
    print("| burst_beats (64-bit beats, bytes) | burst_hold | commands/cycle | ADD share "
          "| mean AR / AW burst | DRAM efficiency | DRAM MB/s | read latency min / median / max "
          "| write latency min / median / max | wall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for bb, hold in ((bb, h) for bb in args.burst_beats for h in args.burst_hold):
        r = measure(bb, args.outstanding, args.commands, hold, args.message_beats)
        rl, wl = r["read_latency"], r["write_latency"]
        print(f"| {bb} ({bb * 8} B) | {hold} | {r['rate']:.3f} | {r['adds']:.2f} "
              f"| {r['mean_ar_burst']:.1f} / {r['mean_aw_burst']:.1f} | {r['dram_efficiency']:.3f} "
              f"| {r['dram_bytes_per_s'] / 1e6:.0f} | {rl['min']} / {rl['median']:g} / {rl['max']} "
              f"| {wl['min']} / {wl['median']:g} / {wl['max']} | {r['wall_s']:.0f} s |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
