# amaranth: UnusedElaboratable=no
"""UnguardedFIFO against Amaranth's SyncFIFO, cycle for cycle, while no write meets a full FIFO.

The ingress parser's descriptor FIFO is an UnguardedFIFO (no full check in its write enable, no
level counter shared by both enables); its writer keeps count of room itself. Both FIFOs get the
same random writes (only when there is room) and reads (only when ready): ``r_rdy``, ``level``
and, when ready, ``r_data`` must agree in every cycle, through empty and full.
"""

from __future__ import annotations

import random
import re

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module
from amaranth.lib.fifo import SyncFIFO
from amaranth.sim import Simulator
from stream_helpers import comb_cells_between, comb_cone, min_flops_between

from wanreduce.hdl.unguarded_fifo import UnguardedFIFO

# (registered_head, registered_one, lazy_head, free_head)
CONFIGS = [(False, False, False, False), (True, False, False, False), (True, True, False, False),
           (True, False, True, False), (True, True, True, False), (True, False, False, True),
           (True, True, True, True)]


async def check_and_drive(ctx, dut, ref, rng, width: int, write: int, read: int,
                          last: list | None = None) -> None:
    """Check the FIFO's head (when the SyncFIFO reference has one) and its flip-flop copies,
    then one cycle of the same write (random data) / read on both. ``last`` (with
    ``lazy_head``): a one-element list, the entry read in the cycle before (or None): ``r_last``
    must hold it."""
    if ctx.get(ref.r_rdy):
        assert ctx.get(dut.r_data) == ctx.get(ref.r_data)
    assert not ctx.get(dut.copy_error), "a flip-flop copy (rdy, consume + 1, one) is wrong"
    if last is not None:
        if last[0] is not None:
            assert ctx.get(dut.r_last) == last[0], "r_last is not the entry read"
        last[0] = ctx.get(ref.r_data) if read else None
    data = rng.randrange(1 << width)
    for f in (dut, ref):
        ctx.set(f.w_data, data)
        ctx.set(f.w_en, write)
        ctx.set(f.r_en, read)
    await ctx.tick()


def run(m, tb) -> None:
    """Simulate ``m`` with one clock and the testbench ``tb``."""
    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize(("registered_head", "registered_one", "lazy_head", "free_head"), CONFIGS)
@pytest.mark.parametrize("depth,p_write,p_read", [(2, 0.5, 0.5), (16, 0.8, 0.3), (16, 0.5, 0.5)])
def test_matches_syncfifo_cycle_for_cycle(depth: int, p_write: float, p_read: float,
                                          registered_head: bool, registered_one: bool,
                                          lazy_head: bool, free_head: bool) -> None:
    """Phases of 150 cycles alternate (p_write, p_read) with (p_read, p_write): fills and
    drains. With ``registered_head`` (``r_data`` from a register loaded a cycle ahead) too,
    with ``registered_one`` (its "one entry" flag a flip-flop; ``copy_error`` checks it) and
    with ``lazy_head`` (the head and the entry after it registered, picked by ``popped``)."""
    width = 12
    m = Module()
    m.submodules.dut = dut = UnguardedFIFO(width, depth, registered_head=registered_head,
                                           registered_one=registered_one, lazy_head=lazy_head,
                                           free_head=free_head)
    last = [None] if lazy_head else None
    m.submodules.ref = ref = SyncFIFO(width=width, depth=depth)
    rng = random.Random(depth * 100 + int(10 * p_write))
    seen = {"full": 0, "empty": 0, "reads": 0}

    async def tb(ctx) -> None:
        for cycle in range(1500):
            pw, pr = (p_write, p_read) if cycle // 150 % 2 == 0 else (p_read, p_write)
            level = ctx.get(ref.level)
            assert ctx.get(dut.level) == level
            assert ctx.get(dut.r_rdy) == ctx.get(ref.r_rdy)
            seen["full"] += level == depth
            seen["empty"] += level == 0
            write = level < depth and rng.random() < pw
            read = bool(ctx.get(ref.r_rdy)) and rng.random() < pr
            seen["reads"] += read
            await check_and_drive(ctx, dut, ref, rng, width, write, read, last)

    run(m, tb)
    assert seen["full"] and seen["empty"] and seen["reads"] > 300


def test_construction_validation() -> None:
    for bad_depth in (0, 1, 3, 12, True, 4.0):
        with pytest.raises(ValueError, match="depth"):
            UnguardedFIFO(8, bad_depth)
    for bad_width in (0, -1, "8"):
        with pytest.raises(ValueError, match="width"):
            UnguardedFIFO(bad_width, 4)
    with pytest.raises(ValueError, match="registered_one needs registered_head"):
        UnguardedFIFO(8, 4, registered_one=True)
    with pytest.raises(ValueError, match="lazy_head needs registered_head"):
        UnguardedFIFO(8, 4, lazy_head=True)
    with pytest.raises(ValueError, match="free_head needs registered_head"):
        UnguardedFIFO(8, 4, free_head=True)


def test_registered_head_read_address_and_ready_are_flip_flops() -> None:
    """With ``registered_head`` the LUT RAM's read address and ``r_rdy`` are flip-flop outputs:
    ``r_en`` (the reader's decision) reaches no adder, comparator or read address, only the
    head's next-value multiplexer (the command port's 8.97 ns path at store16 cut 2 ran
    ``r_en`` -> ``consume + r_en`` -> read address -> head)."""
    text = rtlil.convert(UnguardedFIFO(94, 32, registered_head=True), name="fifo")
    flops = set(re.findall(r"cell \$dff \S+\n(?:\s+parameter .*\n)*(?:\s+connect \\(?:D|CLK) .*\n)*"
                           r"\s+connect \\Q \\(\S+)", text))
    (addr,) = re.findall(r"cell \$memrd\S* \S+\n(?:.*\n)*?\s+connect \\ADDR \\(\S+)", text)
    assert addr in flops, f"read address from {addr}, not a flip-flop ({sorted(flops)})"
    assert "r_rdy" in flops, "r_rdy is not a flip-flop output"
    assert "consume_n" in flops and addr == "consume_n"


@pytest.mark.parametrize("registered_one", [False, True])
def test_registered_one_keeps_the_pointers_out_of_the_head(registered_one: bool) -> None:
    """With ``registered_one`` the head's next value (``r_data_next``, the head register's D)
    has no pointer in its cone: the "one entry" flag is a flip-flop. Without it the write
    pointer reaches every head bit through ``produce == consume_n`` (the Versa DRAM build's
    command port: ``consume_n`` -> the 6-bit compare -> 74 head bits, 9.12 ns at seed 1,
    docs/benchmarks.md, session 34)."""
    sources, _ = comb_cone(UnguardedFIFO(94, 32, registered_head=True, registered_one=registered_one),
                           "r_data_next")
    pointers = sources & {"produce", "consume_n", "consume"}
    if registered_one:
        assert not pointers and "one" in sources, sorted(sources)
    else:
        assert "produce" in pointers, sorted(sources)


@pytest.mark.parametrize("lazy_head", [False, True])
def test_lazy_head_keeps_r_en_out_of_the_head_registers(lazy_head: bool) -> None:
    """With ``lazy_head`` no path within a cycle runs from ``r_en`` (the reader's ready
    decides it) to the wide registers ``head`` and ``nxt``: it first goes through a flip-flop
    (``popped``, ``consume_n``), so at least two from ``r_en`` to their outputs. Without it
    ``r_en`` picks every head bit's next value (one: the DRAM core's ingress parser,
    ``m_msg.ready`` -> ``desc_fifo.head``, 11.87 ns at session 42's seed 5): the before-case."""
    fifo = UnguardedFIFO(94, 16, registered_head=True, lazy_head=lazy_head)
    wide = ["head", "nxt"] if lazy_head else ["head"]
    assert min_flops_between(fifo, ["r_en"], wide) == (2 if lazy_head else 1)


@pytest.mark.parametrize(("registered_head", "registered_one", "lazy_head", "free_head"), CONFIGS)
@pytest.mark.parametrize("depth", [2, 4, 16])
def test_zero_one_two_entries_every_enable_pair(depth: int, registered_head: bool,
                                                registered_one: bool, lazy_head: bool,
                                                free_head: bool) -> None:
    """The bypasses' corner cases, against ``SyncFIFO(fwft=True)`` cycle for cycle: random
    enables (write, read, both, neither) while the FIFO holds 0, 1 or 2 entries (writes only
    below 3, or below ``depth``), until every allowed pair of enables has been seen at each of
    those levels; ``copy_error`` low every cycle."""
    width = 10
    m = Module()
    m.submodules.dut = dut = UnguardedFIFO(width, depth, registered_head=registered_head,
                                           registered_one=registered_one, lazy_head=lazy_head,
                                           free_head=free_head)
    last = [None] if lazy_head else None
    m.submodules.ref = ref = SyncFIFO(width=width, depth=depth)
    rng = random.Random(depth)
    cap = min(3, depth)
    want = {(lv, w, r) for lv in range(min(3, depth + 1)) for w in (0, 1) for r in (0, 1)
            if (r == 0 or lv > 0) and (w == 0 or lv < depth)}
    seen: set[tuple[int, int, int]] = set()

    async def tb(ctx) -> None:
        for _ in range(1200):
            level = ctx.get(ref.level)
            assert ctx.get(dut.level) == level
            assert ctx.get(dut.r_rdy) == ctx.get(ref.r_rdy)
            write = int(level < cap and rng.random() < 0.5)
            read = int(bool(ctx.get(ref.r_rdy)) and rng.random() < 0.5)
            seen.add((level, write, read))
            await check_and_drive(ctx, dut, ref, rng, width, write, read, last)

    run(m, tb)
    assert want <= seen, sorted(want - seen)


@pytest.mark.parametrize("registered_one", [False, True])
def test_lazy_head_with_registered_one_selects_nxt_by_a_flip_flop(registered_one: bool) -> None:
    """With ``lazy_head`` and ``registered_one`` the entry after the head (``nxt``) is loaded
    through one 2:1 multiplexer whose select is the flip-flop ``one``: no pointer compare and no
    write enable within the cycle (the fewest flip-flops from ``produce`` / ``w_en`` to ``nxt``'s
    output is 2, ``nxt`` included; what is left is the LUT RAM's read at ``consume_n`` and
    ``w_data``). With
    ``lazy_head`` alone (the before-case) ``consume_n`` / ``produce`` -> ``produce ==
    consume_n`` -> ``w_en & one`` -> every ``nxt`` bit (the DRAM core's parsers, 9.90 ns at
    session 42's seed 1): 1."""
    fifo = UnguardedFIFO(94, 16, registered_head=True, registered_one=registered_one, lazy_head=True)
    assert min_flops_between(fifo, ["produce", "w_en"], ["nxt"]) == (2 if registered_one else 1)
    cells = comb_cells_between(fifo, "consume_n", "nxt")
    assert ("$eq" in cells) != registered_one, cells
    if registered_one:
        # multiplexers only (the bypass and the reset's): no $and with w_en, no compare
        assert set(comb_cells_between(fifo, "one", "nxt")) == {"$mux"}


@pytest.mark.parametrize("free_head", [False, True])
def test_free_head_keeps_w_en_out_of_the_head(free_head: bool) -> None:
    """With ``free_head`` (the DRAM core's parsers) no cell from the write enable to the head
    register (``r_last`` with ``lazy_head``): its select is the flip-flop ``rdy`` alone, so the
    write enable reaches ``produce``, ``rdy``, ``one`` and the LUT RAM only. Without it (db90a43's
    DRAM parsers) ``w_en & ~rdy`` picks every head bit (``v_push`` -> ``desc_fifo.r_last``,
    8.32-8.56 ns at session 44's seeds 1 / 2): the before-case."""
    fifo = UnguardedFIFO(94, 16, registered_head=True, registered_one=True, lazy_head=True,
                         free_head=free_head)
    assert bool(sum(comb_cells_between(fifo, "w_en", "r_last").values())) != free_head  # (the head)
