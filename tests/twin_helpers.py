"""Two builds of one component side by side on the same random inputs (a timing cut against the
logic before it): every output compared in every cycle."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from amaranth.hdl import ClockDomain, Module, Value
from amaranth.lib.wiring import Flow
from amaranth.sim import Simulator


def run_twins(old: Any, new: Any, *, cycles: int, seed: int,
              value: Callable[[random.Random, str, int], int] | None = None,
              valid_of: dict[str, str] | None = None, only_new: tuple[str, ...] = (),
              each_cycle: Callable[[Any, Any, Any, int], None] | None = None) -> None:
    """Drive ``old`` and ``new`` (components with the same ports, ``new`` may have ``only_new``
    outputs more, which must stay 0) with the same random inputs for ``cycles`` cycles (reset
    first) and assert that every output is equal in every cycle; an output named in ``valid_of``
    only while the output it maps to is high (a payload looked at only when valid).
    ``value(rng, name, width)``: an input's next value (default random bits); names are the
    flattened port paths joined by ``__`` (``cmd__payload``).
    ``each_cycle(ctx, old, new, cycle)``: extra checks, called before each clock edge."""
    rng = random.Random(seed)
    valid_of = valid_of or {}
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.old, top.submodules.new = old, new
    new_ports = {"__".join(map(str, p)): (mem, v) for p, mem, v in new.signature.flatten(new)}
    ins, outs = [], []
    for path, mem, v in old.signature.flatten(old):
        name = "__".join(map(str, path))
        pair = (name, Value.cast(v), Value.cast(new_ports[name][1]))
        (ins if mem.flow == Flow.In else outs).append(pair)
    extra = [Value.cast(new_ports[n][1]) for n in only_new]

    async def tb(ctx) -> None:
        for cycle in range(cycles):
            for name, a, b in ins:
                x = value(rng, name, len(a)) if value is not None else rng.getrandbits(len(a))
                ctx.set(a, x)
                ctx.set(b, x)
            got = {name: (ctx.get(a), ctx.get(b)) for name, a, b in outs}
            for name, (a, b) in got.items():
                if name in valid_of and not got[valid_of[name]][0]:
                    continue
                assert a == b, f"cycle {cycle}: {name} {a:#x} (old) != {b:#x} (new)"
            for x in extra:
                assert ctx.get(x) == 0, f"cycle {cycle}: {x} set"
            if each_cycle is not None:
                each_cycle(ctx, old, new, cycle)
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
