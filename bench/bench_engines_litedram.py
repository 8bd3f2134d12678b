"""The two engines through LiteDRAM's real controller: the sums' DRAM efficiency with a 32-B
tag-record access per message among their bursts, beside the sums alone (issue 16, large S
step 4; docs/benchmarks.md, "DRAM slot store through LiteDRAM's controller", "Two engines, two
AXI IDs").

``hdl/boards/litedram_model_engines.py``: the sums' ``DramSlotStore`` (W = 64, AXI ID 0) and the
scaffold record engine (R = 256, ID 1) through ``AxiIdArbiter``, the Versa's 64 -> 128-bit
``AxiUpsizer``, the board's AXI port and controller (87.5 MHz) on ``SDRAMPHYModel``, Verilator,
driven by ``sim/tb_engines_on_litedram.py::throughput_mixed``: the sums get
``bench_slot_store_litedram.py``'s traffic (messages of ``--message-beats`` rows, three
contributions per chunk a region apart, every ADD reads DRAM, ``cmd`` always valid, ``rsp``
always ready); with records, one record command per message (the chunk's record: WRITE for its
first contribution, ADD — a 32-B read and a 32-B write — for the others), offered when the
message's first row is. Figures: the sums' steady-state commands per core cycle; the DRAM
efficiency of the sums' bytes (``dram_budget``'s quantity) and of the bus, records' bytes too;
every R beat and B checked against the AR / AW order and ID on the shared port.

    .venv/bin/python bench/bench_engines_litedram.py                       # without and with records
    .venv/bin/python bench/bench_engines_litedram.py --slots 4 --row-bits 8 --message-beats 256
"""

from __future__ import annotations

import argparse
import sys

from wanreduce.hdl.boards.litedram_model import simulate_on_model
from wanreduce.hdl.boards.litedram_model_engines import LiteDramModelEngines

RECORDS = {"slots": 16, "row_bits": 2, "outstanding": 32, "row_width": 256, "burst_beats": 16,
           "burst_hold": 64, "base_address": 0x20000}


def measure(with_records: bool, *, slots: int, row_bits: int, outstanding: int, burst_beats: int,
            burst_hold: int, commands: int, message_beats: int) -> dict:
    params = {"data_width": 64, "records": RECORDS,
              "sums": {"slots": slots, "row_bits": row_bits, "outstanding": outstanding,
                       "burst_beats": burst_beats, "burst_hold": burst_hold}}
    top = f"engines_on_litedram_w64_s{slots}_r{row_bits}_n{outstanding}_b{burst_beats}_h{burst_hold}"
    return simulate_on_model(LiteDramModelEngines, top, params, "wanreduce.sim.tb_engines_on_litedram", "throughput_mixed",
                             {"seed": 1, "commands": commands, "message_beats": message_beats, "with_records": with_records})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=lambda t: [bool(int(x)) for x in t.split(",")], default=[False, True],
                    help="runs without (0) and with (1) a record access per message (default 0,1)")
    ap.add_argument("--slots", type=int, default=16, help="the sums' slots (default 16)")
    ap.add_argument("--row-bits", type=int, default=6, help="the sums' rows per slot, log2 (default 6)")
    ap.add_argument("--outstanding", type=int, default=256, help="the sums' in-flight table (default 256)")
    ap.add_argument("--burst-beats", type=int, default=64, help="the sums' longest burst (default 64)")
    ap.add_argument("--burst-hold", type=int, default=128, help="the sums' burst hold (default 128)")
    ap.add_argument("--commands", type=int, default=3000, help="sums commands per run (default 3000)")
    ap.add_argument("--message-beats", type=int, default=64, help="rows per message (default 64)")
    args = ap.parse_args(argv)
    print("| records | sums commands/cycle | ADD share | record commands | mean AR / AW burst (sums) "
          "| DRAM efficiency, sums' bytes | bus, records' bytes too | R / B checked (ID 0, ID 1) "
          "| bursts accepted with the other ID outstanding (AR / AW) | wall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rec in args.records:
        r = measure(rec, slots=args.slots, row_bits=args.row_bits, outstanding=args.outstanding, burst_beats=args.burst_beats,
                    burst_hold=args.burst_hold, commands=args.commands, message_beats=args.message_beats)
        rb, bb = r["r_beats"], r["b"]
        print(f"| {'one per message' if rec else 'none'} | {r['rate']:.3f} | {r['adds']:.2f} "
              f"| {r['record_commands']} | {r['mean_ar_burst']:.1f} / {r['mean_aw_burst']:.1f} "
              f"| {r['dram_efficiency']:.3f} | {r['bus_efficiency']:.3f} "
              f"| {rb['0']} + {rb['1']} R beats, {bb['0']} + {bb['1']} B "
              f"| {r['mixed']['ar']} / {r['mixed']['aw']} | {r['wall_s']:.0f} s |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
