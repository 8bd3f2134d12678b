"""``PendingWords`` (hdl/pending_words.py): pending bits as block-RAM words with the two-word
release scan, against a Python model of in-order release (docs/large_slots.md)."""

from __future__ import annotations

import random

import pytest
from amaranth.back import rtlil
from stream_helpers import comb_cells_table, most_cells_on_a_path, run_testbench

from wanreduce.commands.report import rtlil_bits
from wanreduce.hdl.pending_words import PendingOp, PendingWords


class PendingModel:
    """In-order release on S pending bits: a job's region is ``base .. base + 2**lw - 1`` (mod S),
    its slots in region order; a release at ``slot`` clears the pending slots right behind it."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.bits = [0] * slots

    def region(self, base: int, lw: int) -> list[int]:
        return [(base + i) % self.slots for i in range(1 << lw)]

    def set(self, slot: int) -> None:
        self.bits[slot] = 1

    def peek(self, slot: int, base: int, lw: int) -> int:
        """The run ``release`` would find, nothing cleared."""
        saved = list(self.bits)
        run = self.release(slot, base, lw)
        self.bits = saved
        return run

    def release(self, slot: int, base: int, lw: int) -> int:
        reg = self.region(base, lw)
        k = reg.index(slot)
        run = 0
        for i in range(1, len(reg)):
            s = reg[(k + i) % len(reg)]
            if not self.bits[s]:
                break
            self.bits[s] = 0
            run += 1
        return run

    def clear(self, base: int, lw: int) -> None:
        for s in self.region(base, lw):
            self.bits[s] = 0


def _word_aligned(slots: int, base: int, lw: int) -> bool:
    """The region's words pair up without a bank clash: aligned to a word, within one word, or
    the whole ring."""
    wb = min(64, slots)
    return base % wb == 0 or (base % wb) + (1 << lw) <= wb or (1 << lw) == slots


def run_ops(slots: int, ops: list, *, gap: float = 0.0, seed: int = 0, check_every: int = 50,
            scan_stages: int = 1, bit_stage: bool = False) -> dict:
    """Drive ``ops`` ((kind, slot, base, lw); ``("check",)`` compares the memory with the model)
    into a ``PendingWords(scan_stages=...)``, one per cycle whenever ``op.ready`` (random idle
    cycles with probability ``gap``); checks every RELEASE's run and latency (``scan_stages``
    cycles per scan step) against the model. Returns
    counts (releases, multi-cycle releases, longest run). Every cycle the one-bit read port
    reads a random slot; whenever no scan or clear is under way its bit is checked against the
    model (the port is transparent to the cycle's write; with ``bit_stage`` the same bit two
    cycles after the read, not one)."""
    dut = PendingWords(slots=slots, bit_ports=1, scan_stages=scan_stages, bit_stage=bit_stage)
    delay = 2 if bit_stage else 1
    model = PendingModel(slots)
    rng = random.Random(seed)
    wb = dut.word_bits
    stats = {"releases": 0, "multi": 0, "longest": 0, "checks": 0, "bits": 0}

    def mem_bits(ctx) -> list[int]:
        nb = len(dut.banks)
        out = []
        for w in range(dut.words):
            v = ctx.get(dut.banks[w % nb].data[w // nb])
            out += [(v >> i) & 1 for i in range(wb)]
        return out

    async def tb(ctx):
        cycle = 0
        waiting = None  # (accept cycle, expected run, latency bound, exact) of the release in flight
        i = 0
        bit_exps = []  # (cycle, slot, bit): the read port must answer ``bit`` in that cycle
        while i < len(ops) or waiting is not None:
            for _due, slot, bit in [e for e in bit_exps if e[0] == cycle]:
                assert ctx.get(dut.rd_bit[0]) == bit, f"cycle {cycle}: slot {slot}'s bit"
                stats["bits"] += 1
            bit_exps = [e for e in bit_exps if e[0] > cycle]
            if ctx.get(dut.done):
                assert waiting is not None, f"cycle {cycle}: done without a release"
                acc, exp, lat, exact = waiting
                got = ctx.get(dut.run)
                assert got == exp, f"cycle {cycle}: run {got}, model {exp}"
                took = cycle - acc
                assert (took == lat) if exact else (1 <= took <= lat), \
                    f"cycle {cycle}: run {exp} answered after {took} cycles, expected {'' if exact else '<= '}{lat}"
                stats["multi"] += took > scan_stages
                waiting = None
            else:
                assert waiting is None or cycle - waiting[0] <= waiting[2], f"cycle {cycle}: release not answered"
            ready = ctx.get(dut.op.ready)
            rs = rng.randrange(slots)
            ctx.set(dut.rd_slot[0], rs)
            if ready:  # the last write of the operations taken so far lands now
                bit_exps.append((cycle + delay, rs, model.bits[rs]))
            op = ops[i] if i < len(ops) else None
            ctx.set(dut.op.valid, 0)
            if op is not None and op[0] == "check":
                if ready and waiting is None:  # drained: the last write lands at this tick
                    bit_exps = [e for e in bit_exps if e[0] != cycle + delay]
                    await ctx.tick()
                    cycle += 1
                    assert mem_bits(ctx) == model.bits, f"op {i}: memory differs from the model"
                    stats["checks"] += 1
                    i += 1
                    continue
            elif op is not None and ready and rng.random() >= gap:
                kind, slot, base, lw = op
                assert waiting is None
                ctx.set(dut.op.valid, 1)
                ctx.set(dut.op.payload.kind, kind)
                ctx.set(dut.op.payload.slot, slot)
                ctx.set(dut.op.payload.base, base)
                ctx.set(dut.op.payload.log2_window, lw)
                if kind == PendingOp.SET:
                    model.set(slot)
                elif kind == PendingOp.CLEAR:
                    model.clear(base, lw)
                else:
                    run = (model.peek if kind == PendingOp.PEEK else model.release)(slot, base, lw)
                    off = model.region(base, lw)[(model.region(base, lw).index(slot) + 1) % (1 << lw)] % wb
                    exact = _word_aligned(slots, base, lw)
                    per = min(scan_stages, 3)  # five: two address cycles, then three per step
                    lat = scan_stages - per + per * (1 + (off + run) // 128 if exact else 2 + (off + run) // 64 + 1)
                    waiting = (cycle, run, lat, exact)
                    stats["releases"] += 1
                    stats["longest"] = max(stats["longest"], run)
                i += 1
            await ctx.tick()
            cycle += 1
        # the last operation's write, then the whole memory against the model
        await ctx.tick()
        assert mem_bits(ctx) == model.bits, "memory differs from the model at the end"

    run_testbench(dut, tb)
    return stats


def random_ops(slots: int, regions: list[tuple[int, int]], n: int, seed: int) -> list:
    """``n`` random actions (SET / RELEASE / CLEAR operations) on disjoint ``regions`` (base, lw),
    interleaved: each job keeps a head (region index) and releases there, so runs form as in
    the reducer; a few actions set a long stretch behind the head first (multi-cycle runs)."""
    rng = random.Random(seed)
    heads = [rng.randrange(1 << lw) for _, lw in regions]
    ops: list = []
    for _ in range(n):
        j = rng.randrange(len(regions))
        base, lw = regions[j]
        size = 1 << lw

        def at(k: int, base=base, size=size) -> int:
            return (base + k % size) % slots

        r = rng.random()
        if r < 0.5 and size > 1:
            d = 1 + min(int(rng.expovariate(1 / 6)), size - 2) if rng.random() < 0.8 else rng.randrange(1, size)
            ops.append((PendingOp.SET, at(heads[j] + d), base, lw))
        elif r < 0.53 and size > 2:  # a stretch behind the head, then the release at the head
            length = rng.randrange(1, min(size - 1, 300))
            ops += [(PendingOp.SET, at(heads[j] + d), base, lw) for d in range(1, length + 1)]
            ops.append((PendingOp.RELEASE, at(heads[j]), base, lw))
            heads[j] = (heads[j] + 1 + length) % size  # at least that far (maybe further)
        elif r < 0.97:
            ops.append((PendingOp.RELEASE, at(heads[j]), base, lw))
            heads[j] = (heads[j] + 1) % size  # the model knows the run; the head is a guess
        elif r < 0.985:
            ops.append((PendingOp.CLEAR, 0, base, lw))
        else:  # a release away from the head (the component does not care where it is)
            ops.append((PendingOp.RELEASE, at(rng.randrange(size)), base, lw))
        if rng.random() < 0.05:
            ops.append(("check",))
    return ops


# disjoint regions per S: smaller than a word, a word, larger, unaligned (sharing words with
# other regions, straddling words), wrapping at S, and at S = 256 a region whose wrap puts both
# words of a step in one bank (words 3 -> 0 -> 1 -> 3)
REGIONS = {
    64: [(60, 3), (4, 4), (20, 2), (28, 5)],
    256: [(200, 7), (72, 3), (80, 6), (144, 4), (160, 5)],
    4096: [(0, 10), (1029, 9), (2048, 6), (2122, 5), (2200, 3), (3000, 10), (4064, 5)],
}


@pytest.mark.parametrize(("scan_stages", "bit_stage"), [(1, False), (3, False), (5, False), (5, True)])
@pytest.mark.parametrize("slots", sorted(REGIONS))
def test_random_operations_against_the_model(slots: int, scan_stages: int, bit_stage: bool) -> None:
    """Random interleaved SET / RELEASE / CLEAR on several jobs' regions, back to back and with
    gaps: every run and the memory (at random points and at the end) as the model says, every
    release answered one step after it is taken plus one step per further 128 slots (a step:
    one cycle, three with ``scan_stages=3``). With three stages this fails if ``op.ready`` rises
    in a scan's R or S1 (an operation taken there is lost to the scan's write-back, or answered
    out of order) or if the write-back is not in S2. ``bit_stage``: the bit port's answers two
    cycles after the read (round 6), checked every cycle as with one."""
    multi, longest = 0, 0
    for seed, gap in ((1, 0.0), (2, 0.3)):
        stats = run_ops(slots, random_ops(slots, REGIONS[slots], 600, seed), gap=gap, seed=seed,
                        scan_stages=scan_stages, bit_stage=bit_stage)
        assert stats["releases"] > 150 and stats["checks"] > 10 and stats["bits"] > 500
        multi, longest = multi + stats["multi"], max(longest, stats["longest"])
    if slots >= 256:  # the multi-cycle path was taken (at 4096 with runs over 128 slots)
        assert multi > 0 and longest > (128 if slots > 256 else 32)


@pytest.mark.parametrize("scan_stages", [1, 3, 5])
@pytest.mark.parametrize("slots,base", [(64, 10), (256, 37), (4096, 1000)])
def test_whole_ring_region(slots: int, base: int, scan_stages: int) -> None:
    """One job owning every slot from an unaligned base (its first and last slots share a word)."""
    lw = (slots - 1).bit_length()
    stats = run_ops(slots, random_ops(slots, [(base, lw)], 400, 7), gap=0.1, seed=7, scan_stages=scan_stages)
    assert stats["releases"] > 100


@pytest.mark.parametrize("scan_stages", [1, 3, 5])
def test_small_slot_counts(scan_stages: int) -> None:
    """S below one word (the word is S bits): regions of 1, 2 and 4 slots, one wrapping at S."""
    for seed in range(3):
        run_ops(8, random_ops(8, [(7, 1), (1, 0), (2, 2), (6, 0)], 600, seed), gap=0.2, seed=seed,
                scan_stages=scan_stages)


@pytest.mark.parametrize("scan_stages", [1, 3, 5])
def test_long_run_is_released_whole_and_once(scan_stages: int) -> None:
    """1000 pending slots behind the head (S = 4096, a 2048-slot region): the release answers
    after 1 + (offset + 1000) // 128 steps (``scan_stages`` cycles each) with run 1000 and clears every one of them; the
    releases right after it (back to back) find nothing of it again. Fails if a step of the
    multi-cycle scan is skipped or repeated (run too short or too long, bits left pending)."""
    slots, base, lw = 4096, 1024, 11
    head = 37
    ops: list = [(PendingOp.SET, base + head + d, base, lw) for d in range(1, 1001)]
    ops += [(PendingOp.SET, base + head + 1002, base, lw), ("check",)]
    ops += [(PendingOp.RELEASE, base + head, base, lw),  # run 1000: slots head+1 .. head+1000
            (PendingOp.RELEASE, base + head + 1001, base, lw),  # then head+1002 (run 1)
            (PendingOp.RELEASE, base + head + 1003, base, lw), ("check",)]  # nothing behind it
    stats = run_ops(slots, ops, scan_stages=scan_stages)
    assert stats["longest"] == 1000 and stats["multi"] == 1 and stats["checks"] == 2


def test_slots_32768_elaborate_with_state_in_memory() -> None:
    """S = 32768 (the Versa's DRAM slot count; the reducer's S-wide scan cannot be elaborated
    there: docs/large_slots.md) elaborates, with its S bits in memory and as many flip-flops as
    at S = 4096 but for the wider slot and word indices; and a long run wrapping at the end of a
    16 K region is released whole at that size."""
    small, large = (rtlil_bits(rtlil.convert(PendingWords(slots=s))) for s in (4096, 32768))
    assert large[1] == 32768 and small[1] == 4096
    assert large[0] - small[0] <= 3 * 8  # three slot registers, each 3 bits wider; no S-wide vector
    slots, base, lw = 32768, 16384, 14
    head = (1 << lw) - 300  # the run wraps at the region's end
    ops: list = [(PendingOp.SET, base + (head + d) % (1 << lw), base, lw) for d in range(1, 600)]
    ops += [(PendingOp.RELEASE, base + head, base, lw), ("check",)]
    stats = run_ops(slots, ops)
    assert stats["longest"] == 599


def test_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^slots must be a power of two from 2 to 1048576"):
        PendingWords(slots=3000)
    with pytest.raises(ValueError, match=r"^PendingWords: scan_stages must be 1, 3 or 5, got 2$"):
        PendingWords(slots=64, scan_stages=2)


@pytest.mark.parametrize("scan_stages", [1, 3, 5])
@pytest.mark.parametrize("slots", [64, 4096])
def test_peek_finds_the_release_run_and_writes_nothing(slots: int, scan_stages: int) -> None:
    """PEEK (the reducer's look-ahead for the message it decides next) before most RELEASEs of
    the random operations, and alone at random: the same run and latency as the RELEASE would
    have, and the memory (checked against the model, which a PEEK does not change) untouched.
    Fails if a PEEK writes its cleared bits back."""
    rng = random.Random(slots)
    ops: list = []
    for op in random_ops(slots, REGIONS[slots], 500, 11):
        if op[0] != "check" and op[0] in (PendingOp.RELEASE, PendingOp.SET) and rng.random() < 0.6:
            ops.append((PendingOp.PEEK, *op[1:]) if op[0] == PendingOp.RELEASE else
                       (PendingOp.PEEK, op[1], *op[2:]))
        ops.append(op)
    stats = run_ops(slots, ops, gap=0.2, seed=5, scan_stages=scan_stages)
    assert stats["releases"] > 300 and stats["checks"] > 10 and stats["bits"] > 500


# round 8 (issue 16; docs/large_slots.md, "(session 39, round 8)"): the scan's S1 index came from
# each half's 64-bit ``+ 1`` chain, its one-hot and six OR trees in series (``PendingWords``
# alone, placed: ~6.6 ns of its worst path); on main 0ac7d52 ``scan_xa_r`` / ``scan_xb_r``
# reached ``scan_ix_lo_w_r`` / ``scan_ix_hi_w_r`` through the ``$add``
def test_the_scans_index_is_no_carry_chain() -> None:
    """Five stages: each half's index register is reached from its scan input within a cycle
    through no adder (``first_zero_index`` beside the chain), while the bits before the first
    zero (``scan_run_*``) still come from the chain."""
    pw = PendingWords(slots=32768, scan_stages=5, bit_ports=1, bit_stage=True)
    ends = {"lo": ("scan_xa_r", "scan_ix_lo_w_r", "scan_run_lo_w_r"),
            "hi": ("scan_xb_r", "scan_ix_hi_w_r", "scan_run_hi_w_r")}
    table = comb_cells_table(pw, ["scan_xa_r", "scan_xb_r"], [r for _, *rs in ends.values() for r in rs])
    for src, ix, run in ends.values():
        assert table[src, ix] and not {"$add", "$sub", "$alu"} & set(table[src, ix]), (ix, table[src, ix])
        assert "$add" in table[src, run], (run, table[src, run])


# round 8: the banks' read addresses (``PendingWords`` alone, placed: 11.05 ns) went through
# ``next_word``'s ``+ 1`` of a step register, the step's choice, then ``next_word(na)``'s ``+ 1``
# and ``== w_last``: on main 0ac7d52 two of them in series into ``rd_b``
ARITH = {"$add", "$sub", "$eq", "$ne", "$lt", "$le", "$gt", "$ge"}


@pytest.mark.parametrize("port", ["rd_a", "rd_b"])
def test_the_banks_addresses_see_one_add_or_compare(port: str) -> None:
    """Five stages: the words read now (``rd_a`` / ``rd_b``, the banks' addresses) are, within a
    cycle, at most one adder or compare from a flip-flop or input: the next step's second word is
    chosen among candidates made from the registers side by side, not ``next_word`` of the first."""
    pw = PendingWords(slots=32768, scan_stages=5, bit_ports=1, bit_stage=True)
    assert most_cells_on_a_path(pw, port, ARITH) == 1


# round 8: P1's start slot was ``base + ((slot - base + 1) & wmask)``: three carry chains in series
# from ``op_r`` into ``wa_c`` (P1's first word) on main 0ac7d52
def test_p1s_first_word_is_two_carry_chains_from_the_operation() -> None:
    """Five stages: P1's first word (``wa_c``) is at most two adders / subtracters in series from
    the registered operation: ``slot - base``, then ``base + (d & wmask) + 1`` as one chain with a
    carry in (0 where ``d``'s window bits are all ones)."""
    pw = PendingWords(slots=32768, scan_stages=5, bit_ports=1, bit_stage=True)
    assert most_cells_on_a_path(pw, "wa_c", {"$add", "$sub"}) == 2


# round 9: a one-slot CLEAR's bit was loaded into ``clr_m`` as the operation was taken (``op.valid &
# op.ready``), so the records core's sweep state (its reset's valid) and ``left`` (``op.ready``)
# reached the mask's 64 flip-flops (11.26 ns in session 39's placement of the records core)
def test_a_clears_mask_loads_without_the_handshake() -> None:
    """Five stages: the operation's valid reaches ``clr_m`` through no logic within a cycle (it
    loads a SET / one-slot CLEAR's bit whether or not the operation is taken); on main 64d3389 it
    did (the taking's AND and the load's choice). ``left`` reaches ``op.ready`` through nothing."""
    pw = PendingWords(slots=32768, scan_stages=5, bit_ports=1, bit_stage=True)
    table = comb_cells_table(pw, ["op__valid", "op__payload", "pre2", "left", "left_nz"], ["clr_m", "op__ready"])
    assert not table["op__valid", "clr_m"], table
    assert table["op__payload", "clr_m"] and table["pre2", "clr_m"], table
    # ``left != 0`` is a flag (``left_nz``): ``left``'s bits reach ``op.ready`` through nothing
    # (on main 64d3389 through an OR of its bits)
    assert not table["left", "op__ready"] and table["left_nz", "op__ready"], table

