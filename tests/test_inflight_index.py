"""The DRAM engine's in-flight table and row index alone (hdl/inflight_index.py), against a small
Python model (:class:`Model`): the table (entries taken and not yet released, in order), each
entry's row, and each set's two ways (the entry each leads to, written with the way the index
reports). Random command and release sequences on 16 rows with 2, 4 and 16 sets (``index_bits``
1, 2, 4) and 4 to 16 entries: conflicts, stale pointers, entries freed and taken again within the
lookup's ``recent`` window. Checked every cycle: the entry taken, the row's newest entry in the
table as the hit (or a miss), every row of the table in its set and no way leading to an older
entry of its row, at most two rows of a set in the table, and no wait in A with room but for a
conflict. ``IX_SEED`` / ``IX_COMMANDS`` (environment) vary the random runs, ``VCD`` writes a trace.
"""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import data
from amaranth.sim import Simulator

from wanreduce.hdl.inflight_index import LOOKUP_STAGES, InflightIndex

ROW_BITS = 2  # 4 slots of 4 rows
ADDRESS_BITS = 4
CMD = data.StructLayout({"row": ADDRESS_BITS, "tag": 12})


def set_of(row: int, set_bits: int, row_bits: int = ROW_BITS, address_bits: int = ADDRESS_BITS) -> int:
    """The Python twin of ``index_key``'s set: the row's low ``set_bits`` XOR the higher bits folded
    onto them bit-reversed, ``row_bits`` (or ``set_bits``) at a time."""
    top = row_bits if 0 < row_bits < set_bits else set_bits
    low = row & ((1 << set_bits) - 1)
    for i in range(set_bits, address_bits, top):
        width = min(top, address_bits - i)
        chunk = (row >> i) & ((1 << width) - 1)
        rev = int(format(chunk, f"0{width}b")[::-1], 2)
        low ^= rev << (top - width)
    return low & ((1 << set_bits) - 1)


def test_set_twin_is_the_hardware_key() -> None:
    """The model's sets are the index's: ``index_key``'s low ``set_bits`` for every row."""
    for index_bits in (1, 2, 3):
        ix = InflightIndex(CMD, entries=4, index_bits=index_bits, row_bits=ROW_BITS)
        row, key = Signal(ADDRESS_BITS), Signal(ADDRESS_BITS)
        m = Module()
        m.d.comb += key.eq(ix.key(row))
        got = {}

        async def bench(ctx, got=got, row=row, key=key, index_bits=index_bits) -> None:
            for r in range(1 << ADDRESS_BITS):
                ctx.set(row, r)
                got[r] = ctx.get(key) & ((1 << index_bits) - 1)

        sim = Simulator(m)
        sim.add_testbench(bench)
        sim.run()
        assert got == {r: set_of(r, index_bits) for r in got}


@pytest.mark.parametrize(("kw", "msg"), [
    ({"entries": 6}, r"entries must be a power of two from 2, got 6"),
    ({"cmd_shape": data.StructLayout({"addr": 4})}, r"cmd_shape must be a StructLayout with a row field"),
])
def test_rejects_bad_parameters(kw, msg) -> None:
    args = {"cmd_shape": CMD, "entries": 4, "index_bits": 1, "row_bits": ROW_BITS, **kw}
    with pytest.raises(ValueError, match=msg):
        InflightIndex(args.pop("cmd_shape"), **args)


class Model:
    """The table (entries taken and not yet released, oldest first: (entry, row)), each entry's
    row (``keys``: the row of the command that took it last) and each set's two ways (the entry
    each points to, None before its first write)."""

    def __init__(self, entries: int, set_bits: int) -> None:
        self.entries, self.set_bits = entries, set_bits
        self.table: list[tuple[int, int]] = []
        self.keys: dict[int, int] = {}
        self.ways: dict[int, list[int | None]] = {s: [None, None] for s in range(1 << set_bits)}
        self.recent: list[int] = []  # the entries of the LOOKUP_STAGES commands accepted last
        self.tail = 0

    def in_table(self, entry: int) -> bool:
        return any(e == entry for e, _ in self.table)

    def live(self, row: int) -> int | None:
        """The row's newest entry in the table, if any."""
        return next((e for e, r in reversed(self.table) if r == row), None)

    def set_rows(self, row: int) -> set[int]:
        """The rows of the table in the row's set."""
        s = set_of(row, self.set_bits)
        return {r for _, r in self.table if set_of(r, self.set_bits) == s}

    def owner(self, row: int, way: int, *, recent: bool) -> int | None:
        """The other row of the table that the row's set's ``way`` leads to, if any (``recent``:
        an entry a command of the lookup window took counts as in the table: the lookup takes the
        window's ways as owned without checking that their entries are still in the table)."""
        e = self.ways[set_of(row, self.set_bits)][way]
        if e is None or (not self.in_table(e) and not (recent and e in self.recent)):
            return None
        r = self.keys[e]
        return r if r != row and set_of(r, self.set_bits) == set_of(row, self.set_bits) else None

    def conflict(self, row: int, *, recent: bool = False) -> bool:
        """Both ways of the row's set lead to other rows of the table: the command must wait."""
        return all(self.owner(row, w, recent=recent) is not None for w in range(2))

    def accept(self, row: int, way: int) -> None:
        """The command takes the next entry and writes it to ``way``; another way of its set that
        led to that entry (stale: the entry was free) is cleared."""
        s = set_of(row, self.set_bits)
        self.ways[s] = [None if e == self.tail else e for e in self.ways[s]]
        self.ways[s][way] = self.tail
        self.keys[self.tail] = row
        self.table.append((self.tail, row))
        self.recent = [self.tail, *self.recent][:LOOKUP_STAGES]
        self.tail = (self.tail + 1) % self.entries

    def check_sets(self) -> None:
        """Every row of the table is in its set (a way leads to its newest entry), and a way that
        leads into the table leads to its row's newest entry (never to an older one: the lookup
        would forward a stale row)."""
        for _, r in self.table:
            ways = self.ways[set_of(r, self.set_bits)]
            assert self.live(r) in ways, f"row {r} (entry {self.live(r)}) missing from its set {ways}"
        for s, ways in self.ways.items():
            for e in ways:
                if e is not None and self.in_table(e) and set_of(self.keys[e], self.set_bits) == s:
                    assert self.live(self.keys[e]) == e, \
                        f"set {s} {ways} leads to entry {e} of row {self.keys[e]}, not its newest {self.live(self.keys[e])}"


def run_random(*, entries: int, index_bits: int, commands: int, seed: int, rows: list[int] | None = None,
               p_cmd: float = 0.8, p_release: float = 0.3) -> tuple[Counter, int]:
    """Random commands (rows from ``rows``, default all 16) and releases of the oldest entry on
    the index, checked every cycle against :class:`Model`; returns what was exercised and the
    index's ``set_waits``."""
    dut = InflightIndex(CMD, entries=entries, index_bits=index_bits, row_bits=ROW_BITS)
    rng = random.Random(seed)
    model = Model(entries, dut.set_bits)
    rows = rows if rows is not None else list(range(1 << ADDRESS_BITS))
    seen: Counter = Counter()
    out: dict[str, int] = {}

    async def bench(ctx) -> None:
        stages: list[tuple[int, int] | None] = [None] * LOOKUP_STAGES  # L1, L2, L3, A: (row, tag)
        sent = 0
        prev_conflict = False  # the command in A had a conflict at the last cycle's start
        prev_strict = False  # ... with both owners in the table (not only in the recent window)
        freed_rows: set[int] = set()
        for _cycle in range(40 * commands + 100):  # a command a cycle, but for waits (a bound, no hang)
            if sent == commands and not any(stages):
                break
            valid = sent < commands and rng.random() < p_cmd
            row = rng.choice(rows)
            ctx.set(dut.cmd.valid, valid)
            ctx.set(dut.cmd.payload, {"row": row, "tag": sent})
            release = bool(model.table) and rng.random() < p_release
            ctx.set(dut.release, release)
            adv = ctx.get(dut.cmd.ready)
            a, l3 = stages[-1], stages[-2]
            acc = ctx.get(dut.accepted.valid)
            conflict_now = a is not None and model.conflict(a[0], recent=True)
            room = len(model.table) < entries
            if acc:
                assert a is not None, "accepted with no command in A"
                p = ctx.get(dut.accepted.payload)
                r, tag = a
                assert (p.cmd.row, p.cmd.tag) == (r, tag), f"accepted {p.cmd.tag}, A holds {tag}"
                assert room, "accepted into a full table"
                assert p.entry == model.tail, f"command {tag} took entry {p.entry}, want {model.tail}"
                want = model.live(r)
                assert (p.hit, p.src if p.hit else None) == (want is not None, want), \
                    f"command {tag} row {r}: hit {p.hit} src {p.src}, want live entry {want}"
                assert len(model.set_rows(r) - {r}) <= 1, f"command {tag} row {r}: a third row in its set"
                if want is not None:
                    seen["hit_recent" if want in model.recent else "hit_older"] += 1
                elif r in freed_rows:
                    seen["miss_after_free"] += 1
                s = model.ways[set_of(r, model.set_bits)]
                if any(e is not None and not model.in_table(e) for e in s):
                    seen["stale_pointer"] += 1
                if any(e is not None and set_of(model.keys[e], model.set_bits) != set_of(r, model.set_bits) for e in s):
                    seen["retaken_by_another_set"] += 1
                if model.set_rows(r) - {r}:
                    seen["shared_set"] += 1
                model.accept(r, p.way)
                model.check_sets()
            elif a is not None and room:
                # A waits with room only for a conflict (now, or at the last cycle's start: an
                # owner that left is noticed a cycle later)
                assert conflict_now or prev_conflict, \
                    f"command {a[1]} row {a[0]} waits without a conflict: ways {model.ways[set_of(a[0], model.set_bits)]}"
                seen["conflict_wait"] += 1
            if adv and a is not None:
                assert acc, "the lookup moved without accepting A's command"
            if a is not None and not acc:
                seen["a_stall"] += 1
                strict = model.conflict(a[0])
                if not room and strict and prev_strict:  # owners in the table since L3: a wait for the set too
                    seen["conflict_full"] += 1
            # L3's conflict: with A's command of this cycle, before this cycle's release
            l3_conflict = l3 is not None and model.conflict(l3[0], recent=True)
            if release:
                _, r = model.table.pop(0)
                if model.live(r) is None:
                    freed_rows.add(r)
            if adv:
                stages = [(row, sent) if valid else None, *stages[:-1]]
                sent += valid
            prev_conflict = l3_conflict if adv else conflict_now
            prev_strict = (l3 is not None and model.conflict(l3[0])) if adv else (a is not None and model.conflict(a[0]))
            await ctx.tick()
        else:
            raise AssertionError(f"stuck: {sent} of {commands} commands sent, stages {stages}, table {model.table}")
        out["set_waits"] = ctx.get(dut.set_waits)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if os.environ.get("VCD"):
        with sim.write_vcd(os.environ["VCD"]):
            sim.run()
    else:
        sim.run()
    return seen, out["set_waits"]


@pytest.mark.parametrize(("entries", "index_bits", "seed"), [
    (4, 1, 1), (8, 1, 2), (4, 2, 3), (8, 2, 4), (8, 4, 5), (8, 2, 6), (16, 2, 7), (16, 1, 8)])
def test_random_commands_and_releases(entries: int, index_bits: int, seed: int) -> None:
    """Every accepted command takes the next entry and finds its row's newest entry in the table
    (or none), never fills a set with a third row, and waits only for a conflict. The runs hit
    rows within the recent window and older, miss rows whose entries were freed, and (with 2 or
    4 sets for 16 rows) wait for conflicts."""
    seen, set_waits = run_random(entries=entries, index_bits=index_bits,
                                 commands=int(os.environ.get("IX_COMMANDS", 1000)),
                                 seed=seed + int(os.environ.get("IX_SEED", 0)))
    # set_waits: every wait with room was a conflict's, and so was every wait on a full table while
    # both owners stayed in it; it counts no cycle A did not wait
    assert seen["conflict_wait"] + seen["conflict_full"] <= set_waits <= seen["a_stall"], (set_waits, seen)
    cases = ["hit_recent", "miss_after_free", "stale_pointer"]
    cases += ["retaken_by_another_set"] if entries <= 8 else []  # 16 entries come round seldom
    cases += ["hit_older"] if entries > LOOKUP_STAGES else []  # else every entry is a recent one
    cases += ["shared_set"] if index_bits < 4 else []
    for case in cases:
        assert seen[case], (case, seen)
    if index_bits < 4:
        assert seen["conflict_wait"] and set_waits > 0, (set_waits, seen)
    else:  # a set per row: no conflict
        assert not seen["conflict_wait"] and set_waits == 0, (set_waits, seen)


def test_three_rows_of_one_set_take_turns() -> None:
    """Rows 0, 3 and 5 share set 0 of 2 (``index_bits`` 1): with all three in flight one waits."""
    assert len({set_of(r, 1) for r in (0, 3, 5)}) == 1
    seen, set_waits = run_random(entries=8, index_bits=1, commands=300, seed=7, rows=[0, 3, 5], p_release=0.2)
    assert seen["conflict_wait"] and seen["hit_recent"] and seen["miss_after_free"], seen
    assert seen["conflict_wait"] <= set_waits <= seen["a_stall"], (set_waits, seen)


def test_no_set_waits_without_conflicts() -> None:
    """Two rows of one set (``index_bits`` 1) never conflict: the index waits for no set, with
    every entry taken and freed back to back."""
    seen, set_waits = run_random(entries=4, index_bits=1, commands=400, seed=9, rows=[0, 3], p_release=0.5)
    assert seen["shared_set"] and seen["a_stall"] and set_waits == 0, (set_waits, seen)
