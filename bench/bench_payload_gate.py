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

``--records W:latency,...``: the gate deciding on the scaffold record engine's responses
(``hdl/gate_record_harness.py``, cocotb ``gate_on_records``: a record ADD per message on AXI ID 1,
the sums on ID 0, one ``AxiRam`` through ``AxiIdArbiter``), every stream always valid / ready,
no AXI pause, a fixed latency: steady-state messages (requests taken) and commands per cycle.

    .venv/bin/python bench/bench_payload_gate.py --config 64:256 --records 64:20,64:200 --record-depth 256
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from wanreduce.hdl.payload_gate import PayloadGate
from wanreduce.sim.tb_gate_record import run_gate_records
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
    ap.add_argument("--records", type=_configs, default=[],
                    help="W:latency pairs: gate on the record engine, messages per cycle (default none)")
    ap.add_argument("--record-depth", type=int, default=256, help="the gate's FIFO in the --records runs (default 256)")
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
    for w, latency in a.records:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "records.json"
            run_gate_records(w, seed=1, messages=a.rate_messages, depth=a.record_depth, outstanding=a.outstanding,
                             latency_range=[latency, latency], p_axi=0.0, p_stream=1.0, out=str(out))
            r = json.loads(out.read_text())
        print(f"gate on records W {w} latency {latency} depth {a.record_depth} outstanding {a.outstanding}: "
              f"{r['msg_rate']:.3f} messages/cycle, {r['rate']:.3f} commands/cycle steady state ({r['messages']} "
              f"messages, {r['beats']} input beats, {r['commands']} commands in {r['cycles']} cycles; decided "
              f"{r['decided_WRITE']} WRITE / {r['decided_ADD']} ADD / {r['decided_DISCARD']} DISCARD; AR / AW beats: "
              f"sums {r['sums_ar_beats']} / {r['sums_aw_beats']}, records {r['records_ar_beats']} / "
              f"{r['records_aw_beats']})", flush=True)


if __name__ == "__main__":
    main()
