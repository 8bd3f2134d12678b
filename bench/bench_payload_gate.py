"""Size of the payload gate (docs/benchmarks.md, "The payload gate: a message waits for its
record's decision"; docs/large_slots.md, "Payload wait").

yosys ``synth_ecp5`` of the bare ``PayloadGate`` (its block-RAM ``PayloadFIFO``, the queue of
complete messages, the output side) for each W / depth pair: the Versa's 1 024 x 64 and the
AX7325B's 256 x 512. No place-and-route.

``--rate W:latency,...``: also the gate driving the DRAM slot store (``hdl/gate_store_harness.py``,
cocotb ``gate_drives_store``: through the CommandArbiter onto AxiRam) with every stream always
valid / ready, no AXI pause and a fixed memory latency: steady-state commands (beats) per cycle.

    .venv/bin/python bench/bench_payload_gate.py                        # 64:1024 and 512:256
    .venv/bin/python bench/bench_payload_gate.py --config 64:256 --messages 16
    .venv/bin/python bench/bench_payload_gate.py --config 64:256 --rate 64:20,64:200,256:20,256:200
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from wanreduce.hdl.payload_gate import PayloadGate
from wanreduce.sim.tb_payload_gate import run_gate_store

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
    ap.add_argument("--rate", type=_configs, default=[],
                    help="W:latency pairs: gate + DRAM store commands per cycle (default none)")
    ap.add_argument("--rate-messages", type=int, default=400, help="messages per rate run (default 400)")
    ap.add_argument("--outstanding", type=int, default=32, help="the store's table entries in the rate runs (default 32)")
    a = ap.parse_args()
    for w, depth in a.config:
        dut = PayloadGate(w, depth, address_bits=a.address_bits, messages=a.messages)
        name = f"w{w}_d{depth}_m{a.messages}"
        print(f"W {w} depth {depth} messages {a.messages} address_bits {a.address_bits}: "
              f"{synth_cells(dut, Path('build/bench_payload_gate') / name)}", flush=True)
    for w, latency in a.rate:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "rate.json"
            run_gate_store(w, seed=1, messages=a.rate_messages, outstanding=a.outstanding, latency_range=[latency, latency], p_axi=0.0,
                           p_stream=1.0, out=str(out))
            r = json.loads(out.read_text())
        print(f"gate + DRAM store W {w} latency {latency} outstanding {a.outstanding}: {r['rate']:.3f} commands/cycle steady state "
              f"({r['commands']} commands from {r['beats']} input beats in {r['cycles']} cycles)", flush=True)


if __name__ == "__main__":
    main()
