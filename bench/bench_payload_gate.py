"""Size of the payload gate (docs/benchmarks.md, "The payload gate: a message waits for its
record's decision"; docs/large_slots.md, "Payload wait").

yosys ``synth_ecp5`` of the bare ``PayloadGate`` (its block-RAM ``PayloadFIFO``, the queue of
complete messages, the output side) for each W / depth pair: the Versa's 1 024 x 64 and the
AX7325B's 256 x 512. No place-and-route.

    .venv/bin/python bench/bench_payload_gate.py                        # 64:1024 and 512:256
    .venv/bin/python bench/bench_payload_gate.py --config 64:256 --messages 16
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wanreduce.hdl.payload_gate import PayloadGate

sys.path.insert(0, str(Path(__file__).parent))
from bench_dram_store import synth_cells  # noqa: E402 - the store bench's synthesis


def _configs(text: str) -> list[tuple[int, int]]:
    """``W:depth,W:depth`` -> pairs."""
    return [(int(w), int(d)) for w, d in (c.split(":") for c in text.split(","))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=_configs, default=[(64, 1024), (512, 256)],
                    help="W:depth pairs (default 64:1024,512:256)")
    ap.add_argument("--address-bits", type=int, default=24, help="the store's row address bits (default 24)")
    ap.add_argument("--messages", type=int, default=32, help="complete messages waiting (default 32)")
    a = ap.parse_args()
    for w, depth in a.config:
        dut = PayloadGate(w, depth, address_bits=a.address_bits, messages=a.messages)
        name = f"w{w}_d{depth}_m{a.messages}"
        print(f"W {w} depth {depth} messages {a.messages} address_bits {a.address_bits}: "
              f"{synth_cells(dut, Path('build/bench_payload_gate') / name)}", flush=True)


if __name__ == "__main__":
    main()
