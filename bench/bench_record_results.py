"""What the record path's admission rule costs (issue 16, large S step 4; docs/large_slots.md,
"The results", the three waits (a)): results per 1 000 cycles of a back-to-back in-order stream
through ``DecisionOnRecords`` at each release queue depth.

``DecisionOnRecords`` admits a release candidate (every configured member's contribution) into
the record engine only if the release queue can take every entry the candidates already in may
push: at ``release_depth`` 8 one candidate at a time, at 16 up to four, at 32 up to twelve. This
runs the cocotb bench ``decisions_on_records`` (``sim/tb_decision_records.py``) with ``stream``:
contributions to job 0's chunks in order from its head, every member of the group in turn (one
W-bit beat each; the last completes the chunk, which is released and read back), every stream
always valid / ready, no AXI pause, a fixed memory latency, no window reset; every outcome,
response, released chunk, record and result row is still checked against the golden model.
Figures: results (= released chunks) per 1 000 cycles from the first request to the last result
row, the steady-state requests per cycle, the cycles requests waited for the pin. Simulation
cycles, not a board. ``--size``: also the yosys ``synth_ecp5`` size of the queue itself
(``RecordReleaseQueue``, S 1 024, J 4) at each depth. Usage:

    .venv/bin/python bench/bench_record_results.py --depths 8,16,32 --groups 1,0 --latency 20,100 --size
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from wanreduce.hdl.record_release_queue import RecordReleaseQueue
from wanreduce.sim.tb_decision_records import GROUPS, run_decision_records

sys.path.insert(0, str(Path(__file__).parent))
from bench_dram_store import _ints, synth_cells  # noqa: E402 - the store bench's list parsing and synthesis


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=64, help="W, bits (default 64)")
    ap.add_argument("--depths", type=_ints, default=[8, 16, 32], help="release_depth values (default 8,16,32)")
    ap.add_argument("--groups", type=_ints, default=[1, 0],
                    help="the tb's GROUPS indices: 1 one member, 0 three (default 1,0)")
    ap.add_argument("--latency", type=_ints, default=[20], help="fixed memory latencies, cycles (default 20)")
    ap.add_argument("--messages", type=int, default=400, help="contributions per run (default 400)")
    ap.add_argument("--log2-window", type=int, default=5, help="job 0's window, log2 slots (default 5)")
    ap.add_argument("--size", action="store_true", help="also the queue's yosys synth_ecp5 size at each depth")
    a = ap.parse_args()
    for g in a.groups:
        if not 0 <= g < len(GROUPS) or not GROUPS[g]:
            raise SystemExit(f"--groups: each must be a configured group 0..{len(GROUPS) - 2}, got {g}")
    for lat in a.latency:
        for g in a.groups:
            members = bin(GROUPS[g]).count("1")
            for d in a.depths:
                with tempfile.TemporaryDirectory() as tmp:
                    out = Path(tmp) / "results.json"
                    run_decision_records(a.width, seed=1, in_order=True, messages=a.messages,
                                         queues={"release_depth": d}, log2_window=a.log2_window, stream=g,
                                         p_stream=1.0, p_axi=0.0, latency_range=[lat, lat], p_reset=0.0,
                                         p_pause=0.0, p_result_pause=0.0, out=str(out))
                    r = json.loads(out.read_text())
                print(f"W {a.width} latency {lat} members {members} window {1 << a.log2_window} release_depth {d}: "
                      f"{r['results_per_kcycle']:.1f} results/1000 cycles ({r['results_emitted']} results in "
                      f"{r['result_cycles']} cycles; steady state {1000 * r['result_rate']:.1f} results, "
                      f"{1000 * r['msg_rate']:.1f} requests /1000 cycles; requests pinned {r['pin_waits']} cycles)",
                      flush=True)
    for d in a.depths if a.size else []:
        q = RecordReleaseQueue(slots=1024, jobs=4, depth=d)
        print(f"RecordReleaseQueue S 1024 J 4 depth {d}: {synth_cells(q, Path('build/bench_record_results') / f'q{d}')}",
              flush=True)


if __name__ == "__main__":
    main()
