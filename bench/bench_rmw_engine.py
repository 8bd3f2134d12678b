"""Size of the DRAM read-modify-write engine vs its row width (docs/benchmarks.md, "The
read-modify-write engine's row width"; docs/large_slots.md, "How a 256-bit record travels"),
and what its late operand's owner adds (``--late``: docs/benchmarks.md, "The read-modify-write
engine's late operand and DecisionState").

yosys ``synth_ecp5`` of the bare ``DramRmwEngine`` with the scaffold record modify
(``hdl/record_modify_scaffold.py``) on a W-bit bus, for each row width R: what a 256-bit record
on the core's 64-bit port costs against rows as wide as the bus. No place-and-route.

    .venv/bin/python bench/bench_rmw_engine.py                       # W 64, R 64 and 256, N 128
    .venv/bin/python bench/bench_rmw_engine.py --row-width 256 --outstanding 64
    .venv/bin/python bench/bench_rmw_engine.py --row-width 256 --side-width 0,160  # side inputs
    .venv/bin/python bench/bench_rmw_engine.py --row-width 256 --row-stride 2048 --row-offset 2016
    .venv/bin/python bench/bench_rmw_engine.py --row-width 256 --side-width 8 --late --jobs 4

With ``--late`` each configuration is synthesized twice: the engine alone (side, no late
operand) and the engine with the scaffold's late operand and its ``DecisionState`` of ``--jobs``
heads and a pending bit per row (``EngineWithState``); the side must hold the job (>= log2 J bits).
Then the ``DecisionState`` alone. ``--pnr-seed S`` (with ``--late``): instead, the
``EngineWithState`` of the first row width / side width placed and routed alone on the ECP5-45F
with the per-module flow (``bench/bench_fpga_modules.py``: wrapped ports, 125 MHz, out of
context), seed S: LUT4, FF, DP16KD, Fmax and the critical path; ``--netlist`` places an earlier
seed's netlist again (the same design, only the placement seed differs).

    .venv/bin/python bench/bench_rmw_engine.py --row-width 256 --side-width 8 --late --jobs 4 \
        --release-depth 16 --regions --pnr-seed 1
    .venv/bin/python bench/bench_rmw_engine.py ... --pnr-seed 2 --netlist build/bench_rmw_engine/NAME_seed1/NAME.json

``--modify decision`` (with ``--late``; R 256): the record decision (``hdl/record_decision.py``)
instead of the scaffold: ``RecordDecision`` alone, then the engine (R 256) with its
``DecisionState`` and the scaffold modify at the same side width (``RecordSide``, 243 bits) and
the same with ``RecordDecision`` (``record_engine``, ``hdl/decision_record_harness.py``): what the
decision costs over the scaffold in the engine.

    .venv/bin/python bench/bench_rmw_engine.py --row-width 256 --late --modify decision --jobs 4 --regions
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from wanreduce.commands.report import place_and_route
from wanreduce.hdl.decision_record_harness import record_engine
from wanreduce.hdl.decision_state import DecisionState
from wanreduce.hdl.record_decision import RecordDecision
from wanreduce.hdl.reducer_layouts import RECORD_BITS, RecordSide
from wanreduce.hdl.scaffold_engine_harness import scaffold_engine

sys.path.insert(0, str(Path(__file__).parent))
from bench_dram_store import _ints, synth_cells  # noqa: E402 - the store bench's synthesis
from bench_fpga_modules import critical_path_text, port_bits, run_module  # noqa: E402 - the per-module flow


def pnr(a: argparse.Namespace) -> None:
    """Place and route ``EngineWithState`` (the first row width and side width) on the ECP5-45F."""
    r, side = a.row_width[0], a.side_width[0]
    dut = scaffold_engine(a.width, slots=a.slots, row_bits=0, axi_id=1, row_width=r, side_width=side or None,
                          jobs=a.jobs, outstanding=a.outstanding, release_depth=a.release_depth,
                          regions=a.regions, row_stride=a.row_stride, row_offset=a.row_offset)
    name = f"engine_with_state_w{a.width}_r{r}_n{a.outstanding}_j{a.jobs}" + \
        (f"_q{a.release_depth}" if a.release_depth else "") + ("_regions" if a.regions else "")
    out = Path("build/bench_rmw_engine") / f"{name}_seed{a.pnr_seed}"
    if a.netlist is None:
        res = run_module(name, dut, out, wrap=True, freq=125.0, seed=a.pnr_seed, board="versa-ecp5")
    else:  # another seed of the same netlist: place and route only
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(a.netlist, out / f"{name}.json")
        res = place_and_route(out, freq_mhz=125.0, seed=a.pnr_seed, json_name=f"{name}.json")
        res.update(port_bits=port_bits(dut), synth_s=0.0, crit_text=critical_path_text(out / "nextpnr.log"))
    fmax = min((f for f, _ in res["fmax"].values()), default=float("nan"))
    print(f"W {a.width} R {r} N {a.outstanding} rows {a.slots} side {side} J {a.jobs} release queue "
          f"{a.release_depth} regions {a.regions}, ECP5-45F (wrapped, 125 MHz target, seed {a.pnr_seed}): "
          f"LUT4 {res['lut4'][0]}, FF {res['ff'][0]} (port FFs {res['port_bits']}), DP16KD {res['dp16kd'][0]}, "
          f"Fmax {fmax:.1f} MHz, synth {res['synth_s']:.0f} s, P&R {res['pnr_s']:.0f} s\n{res['crit_text']}",
          flush=True)


def decision_sizes(a: argparse.Namespace) -> None:
    """``RecordDecision`` alone, then the engine (R 256, ``--row-width`` not used) with its
    ``DecisionState`` and the scaffold modify at the decision's side width, and the same with the
    decision."""
    out = Path("build/bench_rmw_engine")
    print(f"RecordDecision S {a.slots} J {a.jobs} alone: "
          f"{synth_cells(RecordDecision(slots=a.slots, jobs=a.jobs), out / f'record_decision_s{a.slots}_j{a.jobs}')}",
          flush=True)
    state = {"release_depth": a.release_depth, "regions": a.regions}
    engine = {"slots": a.slots, "outstanding": a.outstanding, "row_stride": a.row_stride, "row_offset": a.row_offset}
    name = f"w{a.width}_r{RECORD_BITS}_n{a.outstanding}_j{a.jobs}" + (f"_q{a.release_depth}" if a.release_depth else "") \
        + ("_regions" if a.regions else "")
    for modify, dut in (
            ("scaffold", scaffold_engine(a.width, row_bits=0, axi_id=1, row_width=RECORD_BITS, side_width=RecordSide.size,
                                         jobs=a.jobs, **state, **engine)),
            ("decision", record_engine(a.width, jobs=a.jobs, **state, **engine))):
        print(f"W {a.width} R {RECORD_BITS} N {a.outstanding} rows {a.slots} J {a.jobs} release queue "
              f"{a.release_depth} regions {a.regions}, the engine with its DecisionState and the {modify} modify "
              f"(side {RecordSide.size}): {synth_cells(dut, out / f'{name}_{modify}')}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=64, help="AXI data width W (default 64)")
    ap.add_argument("--row-width", type=_ints, default=[64, 256], help="row widths R (default 64,256)")
    ap.add_argument("--outstanding", type=int, default=128, help="in-flight table entries N")
    ap.add_argument("--slots", type=int, default=4096, help="rows (row_bits 0; default 4096)")
    ap.add_argument("--side-width", type=_ints, default=[0],
                    help="side input widths (the engine's side_shape; 0 = none, the default)")
    ap.add_argument("--row-stride", type=int, default=None, help="row_stride in bytes (default: dense)")
    ap.add_argument("--row-offset", type=int, default=0, help="row_offset in bytes (with --row-stride)")
    ap.add_argument("--late", action="store_true",
                    help="also the engine with a late operand and its DecisionState (--jobs heads)")
    ap.add_argument("--jobs", type=int, default=4, help="with --late: the DecisionState's jobs J (default 4)")
    ap.add_argument("--release-depth", type=int, default=None,
                    help="with --late: the DecisionState's release queue depth (default: none)")
    ap.add_argument("--regions", action="store_true",
                    help="with --late: the DecisionState's per-job regions and window reset")
    ap.add_argument("--pnr-seed", type=int, default=None,
                    help="with --late: place and route the engine with its DecisionState (first R and "
                         "side width) on the ECP5-45F with this seed instead of synthesizing every row")
    ap.add_argument("--netlist", type=Path, default=None,
                    help="with --pnr-seed: place this synthesized netlist (an earlier seed's <name>.json) "
                         "instead of synthesizing again")
    ap.add_argument("--modify", choices=("scaffold", "decision"), default="scaffold",
                    help="with --late: the scaffold modify (default) or the record decision (R 256)")
    a = ap.parse_args()
    if a.modify == "decision":
        if not a.late or a.pnr_seed is not None:
            ap.error("--modify decision needs --late (and no --pnr-seed)")
        decision_sizes(a)
        return
    if a.pnr_seed is not None:
        if not a.late:
            ap.error("--pnr-seed needs --late (the engine with its DecisionState)")
        pnr(a)
        return
    for r in a.row_width:
        for side in a.side_width:
            for jobs in (None, a.jobs) if a.late else (None,):
                dut = scaffold_engine(a.width, slots=a.slots, row_bits=0, axi_id=1, row_width=r,
                                      side_width=side or None, jobs=jobs, outstanding=a.outstanding,
                                      **({"release_depth": a.release_depth, "regions": a.regions} if jobs else {}),
                                      row_stride=a.row_stride, row_offset=a.row_offset)
                name = f"w{a.width}_r{r}_n{a.outstanding}" + (f"_side{side}" if side else "") + \
                    (f"_stride{a.row_stride}_{a.row_offset}" if a.row_stride else "") + \
                    (f"_late_j{jobs}" if jobs else "") + \
                    (f"_q{a.release_depth}" if jobs and a.release_depth else "") + ("_regions" if jobs and a.regions else "")
                print(f"W {a.width} R {r} N {a.outstanding} rows {a.slots} side {side} "
                      f"stride {a.row_stride or 'dense'} late {f'DecisionState J {jobs}' if jobs else 'none'}: "
                      f"{synth_cells(dut, Path('build/bench_rmw_engine') / name)}", flush=True)
    if a.late:  # the owner on its own: the heads and PendingWords (all of it: its scan too)
        state = DecisionState(slots=a.slots, jobs=a.jobs, release_depth=a.release_depth, regions=a.regions)
        tag = f"state_s{a.slots}_j{a.jobs}" + (f"_q{a.release_depth}" if a.release_depth else "") + \
            ("_regions" if a.regions else "")
        print(f"DecisionState S {a.slots} J {a.jobs} release queue {a.release_depth} regions {a.regions} alone: "
              f"{synth_cells(state, Path('build/bench_rmw_engine') / tag)}", flush=True)


if __name__ == "__main__":
    main()
