"""Block RAM and Fmax of the on-chip slot store (``hdl/onchip_slot_store.py``) alone on the
ECP5-45F (docs/benchmarks.md, "On-chip slot store"): for each S x E (W 64 unless given), the
DP16KD count after ``synth_ecp5`` and the fraction of their capacity (18 Kbit each) that holds
sums (rows x W bits); with ``--pnr`` also LUT4/FF and Fmax (out of context, seed 1, one
nextpnr at a time).

    .venv/bin/python bench/bench_slot_store.py                     # the configurations below
    .venv/bin/python bench/bench_slot_store.py --config 128,256 --pnr
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from amaranth.back import verilog

from wanreduce.commands.report import place_and_route, synth_ecp5
from wanreduce.hdl.layouts import payload_beats
from wanreduce.hdl.onchip_slot_store import OnChipSlotStore

DP16KD_BITS = 18 * 1024
CONFIGS = [(16, 256), (64, 256), (128, 256), (32, 499), (16, 1024)]  # (S, E): default, largest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", action="append", default=None, help="S,E (e.g. 128,256)")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--pnr", action="store_true", help="also place and route (Fmax, LUT4, FF)")
    ap.add_argument("--out", type=Path, default=Path("build/bench_slot_store"))
    args = ap.parse_args()
    configs = CONFIGS if not args.config else [tuple(int(x) for x in c.split(",")) for c in args.config]
    print("| W | S | E | rows | sum bits | DP16KD | holds sums | LUT4 | FF | Fmax (MHz) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for slots, elements in configs:
        row_bits = (payload_beats(elements, args.width) - 1).bit_length()
        store = OnChipSlotStore(args.width, slots=slots, row_bits=row_bits)
        d = args.out / f"w{args.width}-s{slots}-e{elements}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "store.v").write_text(verilog.convert(store, name="slot_store"))
        synth_ecp5(d / "store.v", "slot_store", "store.json")
        stat = (d / "yosys_stat.txt").read_text()
        m = re.search(r"(\d+)\s+DP16KD", stat)
        brams = int(m.group(1)) if m else 0
        bits = store.rows * args.width
        lut = ff = fmax = "-"
        if args.pnr:
            r = place_and_route(d, json_name="store.json")
            lut, ff = r["lut4"][0], r["ff"][0]
            fmax = f"{min(a for a, _ in r['fmax'].values()):.1f}"
        frac = f"{100 * bits / (brams * DP16KD_BITS):.0f} %" if brams else "- (LUT RAM)"
        print(f"| {args.width} | {slots} | {elements} | {store.rows} | {bits} | {brams} | {frac} "
              f"| {lut} | {ff} | {fmax} |", flush=True)


if __name__ == "__main__":
    main()
