"""Unit tests of the parts ``Reducer.elaborate`` builds inline (issue 16 item 6; docs/reducer.md,
"Parts built inline"): each on its own against a small reference of what it stands for. The
reducer calls them as functions so its RTLIL (pinned by tests/test_default_rtl.py) is unchanged;
each file wraps its function in a component for these tests."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator
from stream_helpers import (
    _cell_counts,
    _yosys_on,
    comb_cells_between,
    comb_cells_table,
    comb_cone,
    run_testbench,
)

from wanreduce import wire
from wanreduce.hdl.decision import tag_checks
from wanreduce.hdl.layouts import AggHeaderLayout
from wanreduce.hdl.pin_registers import PUSH_IN_PINS_MAX_SLOTS
from wanreduce.hdl.pin_terms import PairCheck, PinCheck
from wanreduce.hdl.reducer import Reducer
from wanreduce.hdl.reducer_config import REGION_AT_CONFIG_MAX_SLOTS
from wanreduce.hdl.reducer_input import START_AT_P_MAX_SLOTS
from wanreduce.hdl.reducer_layouts import TagChecks, bits_for, slot_tag_layout
from wanreduce.hdl.release_run import (
    REST_AT_PUSH_MAX_SLOTS,
    RUN_NZ_OF_RUN_MAX_SLOTS,
    SCAN_CHAIN_BITS,
    SCAN_FOLD_AT_SCAN_MAX_SLOTS,
    SCAN_ONE_CHAIN_MAX_SLOTS,
    ReleaseRun,
    ReleaseScans,
)
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.hdl.stage1_tag_checks import LiveTagCheck, tag_checks_carry
from wanreduce.hdl.stage2_issue import StageTwoIssue
from wanreduce.hdl.stage_room import StageRoom
from wanreduce.hdl.window_reset import SLOT_REGISTER_MAX_SLOTS


def _comb_sim(dut, tb) -> None:
    """Run the testbench ``tb(ctx)`` on the combinational ``dut``."""
    top = Module()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_testbench(tb)
    sim.run()


def _release_run_reference(slots: int, base: int, lw: int, chunk: int, pending: set[int]):
    """The model's release run (``AggregatorModel._maybe_complete``) in slots: chunk ``chunk``
    completes at the head; the chunks after it whose slots are pending (COMPLETE) are released
    with it, up to the first that is not. Slot of chunk c: base + (c mod window) (mod S)."""
    w = 1 << lw
    slot = lambda c: (base + (c & (w - 1))) % slots  # noqa: E731
    run, cleared = 0, set()
    while run < w - 1 and slot(chunk + 1 + run) in pending:
        cleared.add(slot(chunk + 1 + run))
        run += 1
    return slot(chunk + 1 + run), cleared, run


@pytest.mark.parametrize(("slots", "table"), [(8, True), (8, False), (32, True), (32, False)])
def test_release_run_is_the_models_run(slots: int, table: bool) -> None:
    """``scan_slots`` + ``run_of`` (hdl/release_run.py), both forms of ``run_of``: for a chunk
    completing at its job's head, the pending slots of its region right behind it are cleared,
    the scan stops at the first slot that is not pending (its own slot at the latest: the run
    wraps the whole window), and the run length is the model's; slots outside the region are
    transparent and never cleared."""
    dut = ReleaseRun(slots, table=table)
    rng = random.Random(slots * 2 + table)
    sb = (slots - 1).bit_length()
    runs: set[int] = set()

    async def tb(ctx) -> None:
        for _ in range(400):
            lw = rng.randint(0, sb)
            w = 1 << lw
            base = rng.randrange(slots)
            chunk = rng.getrandbits(32)
            region = {(base + k) % slots for k in range(w)}
            own = (base + (chunk & (w - 1))) % slots
            # pending: a random subset, often a long run, never the completing slot itself
            fill = rng.choice([0.0, 0.5, 0.9, 1.0])
            pending = {s for s in region if s != own and rng.random() < fill}
            outside = {s for s in range(slots) if s not in region and rng.random() < 0.5}
            first, cleared, run = _release_run_reference(slots, base, lw, chunk, pending)
            start = (base + ((chunk + 1) & (w - 1))) % slots
            x = sum(1 << s for s in range(slots) if s in pending | outside or s not in region)
            ctx.set(dut.x, x)
            ctx.set(dut.below, (1 << start) - 1)
            ctx.set(dut.region, sum(1 << s for s in region))
            ctx.set(dut.start, start)
            ctx.set(dut.wmask, w - 1)
            got = ctx.get(dut.out)
            assert got.first_zero == 1 << first, (lw, base, chunk, pending)
            assert got.clr == sum(1 << s for s in cleared), (lw, base, chunk, pending)
            assert got.run == run, (lw, base, chunk, pending)
            runs.add(run)

    _comb_sim(dut, tb)
    assert {0, 1, slots - 1} <= runs, runs  # none, one, the whole window but its own slot


def _pin_case(rng: random.Random, jobs: int, sb: int, depth: int) -> tuple[dict, int]:
    """A random chunk and holders near it (``PinCheck``'s inputs), and whether the chunk's slot
    is held: the set of held slots of its job, as chunk residues modulo the window."""
    w = 1 << rng.randint(0, sb)
    job, head = rng.randrange(jobs), rng.getrandbits(32)

    def near() -> int:
        return (head + rng.randrange(2 * w)) & 0xFFFFFFFF

    def entry() -> dict:
        return {"job": rng.randrange(jobs), "chunk": near(), "slot": 0, "more": rng.randrange(w), "resent": 0}

    held: set[int] = set()

    def hold(hjob: int, first: int, n: int) -> None:
        if hjob == job:
            held.update((first + k) % w for k in range(n))

    entries, occupied = [entry() for _ in range(depth)], [rng.getrandbits(1) for _ in range(depth)]
    for e, occ in zip(entries, occupied, strict=True):
        if occ:
            hold(e["job"], e["chunk"], e["more"] + 1)
    staged, push = entry(), int(rng.random() < 0.3)
    if push:
        hold(staged["job"], staged["chunk"], staged["more"] + 1)
    em = {"busy": rng.getrandbits(1), "job": rng.randrange(jobs), "chunk": near(),
          "rest_job": rng.randrange(jobs), "rest_chunk": near(), "rest_left": rng.randrange(w + 1)}
    if em["busy"]:
        hold(em["job"], em["chunk"], 1)
    hold(em["rest_job"], em["rest_chunk"], em["rest_left"])
    chunk = near()
    ins = {"job": job, "chunk": chunk, "wmask": w - 1, "entries": entries, "occupied": occupied,
           "push_now": push, "entry": staged, "emit": em}
    return ins, int(chunk % w in held)


@pytest.mark.parametrize(("slots", "jobs"), [(8, 2), (64, 3)])
def test_pin_check_is_the_held_slots(slots: int, jobs: int) -> None:
    """``pin_terms`` (hdl/pin_terms.py) against the slots the holders hold: chunk c of a job is
    pinned exactly when its slot (base + c mod window) is the slot of a chunk a holder of the same
    job still needs: an occupied queue entry or stage 2's pushed entry (its chunk and the ``more``
    chunks of its run), the emitter's result while busy, the ``rest_left`` chunks of its rest."""
    depth = 4
    dut = PinCheck(slots=slots, jobs=jobs, depth=depth)
    rng = random.Random(slots + jobs)
    sb = (slots - 1).bit_length()
    seen: set[int] = set()

    async def tb(ctx) -> None:
        for _ in range(500):
            ins, want = _pin_case(rng, jobs, sb, depth)
            for name in ("job", "chunk", "wmask", "push_now", "entry", "emit"):
                ctx.set(getattr(dut, name), ins[name])
            for i in range(depth):
                ctx.set(dut.entries[i], ins["entries"][i])
                ctx.set(dut.occupied[i], ins["occupied"][i])
            assert ctx.get(dut.pinned) == want, ins
            seen.add(want)

    _comb_sim(dut, tb)
    assert seen == {0, 1}


@pytest.mark.parametrize(("queue_depth", "depth_a", "depth_b"), [(4, 32, 16), (2, 3, 5)])
def test_stage_room_counts_what_may_still_be_pushed(queue_depth: int, depth_a: int, depth_b: int) -> None:
    """``queue_room_next`` / ``fifo_room_next`` (hdl/stage_room.py), registered: a cycle later,
    room in the queue says the entries after this cycle's push and pop, plus the message leaving
    stage 1 and one more, fit (count + push - pop + leave + 2 <= depth); room in the FIFOs says
    each has a place for the beats in stages 1 and 2, the beat taken and one more."""
    dut = StageRoom(queue_depth=queue_depth, depth_a=depth_a, depth_b=depth_b)
    rng = random.Random(queue_depth + depth_a)
    seen: set[tuple[int, int]] = set()

    async def tb(ctx) -> None:
        for _ in range(600):
            i = {"count": rng.randint(0, queue_depth), "push": rng.getrandbits(1), "leave": rng.getrandbits(1),
                 "pop": rng.getrandbits(1), "level_a": rng.randint(max(0, depth_a - 5), depth_a),
                 "level_b": rng.randint(max(0, depth_b - 5), depth_b), "v1": rng.getrandbits(1),
                 "v2": rng.getrandbits(1), "take": rng.getrandbits(1)}
            for k, v in i.items():
                ctx.set(getattr(dut, k), v)
            await ctx.tick()
            want_q = int(i["count"] + i["push"] - i["pop"] + i["leave"] + 2 <= queue_depth)
            ahead = i["v1"] + i["v2"] + i["take"] + 1
            want_f = int(i["level_a"] + ahead <= depth_a and i["level_b"] + ahead <= depth_b)
            got = ctx.get(dut.room)
            assert (got.queue, got.fifos, got.room) == (want_q, want_f, want_q & want_f), i
            seen.add((want_q, want_f))

    run_testbench(dut, tb)
    assert seen == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_stage_room_rejects_bad_depths() -> None:
    """One-line errors naming the depth and its range."""
    with pytest.raises(ValueError, match=r"^depth_b must be 1\.\.1024, got 0$"):
        StageRoom(queue_depth=4, depth_a=8, depth_b=0)


def _header(rng: random.Random, like: dict | None, jobs: int) -> dict:
    """A header's tag-relevant fields, at random or (mostly) like ``like``'s, one field moved."""
    fresh = {"job_id": rng.randrange(jobs), "chunk": rng.getrandbits(32), "round_id": rng.getrandbits(32),
             "group_id": rng.getrandbits(8), "scale_exp": rng.randrange(4), "element_count": rng.randrange(1, 64),
             "session": rng.randrange(4)}
    if like is None or rng.random() < 0.2:
        return fresh
    h = dict(like)
    name = rng.choice([*fresh, None, None, None])
    if name == "chunk":
        h["chunk"] = (h["chunk"] + rng.choice([-1, 1, 0x80000000])) & 0xFFFFFFFF
    elif name is not None:
        h[name] = fresh[name]
    return h


@pytest.mark.parametrize("jobs", [1, 3])
def test_live_tag_checks_are_the_direct_checks_of_the_tag_written(jobs: int) -> None:
    """``live_checks`` (hdl/stage1_tag_checks.py: the next beat's checks against the tag stage 1
    requests, from stage 1's header compares, both bitmap candidates' checks and the state,
    registered apart in the reducer) equal the direct checks of that tag (the reference: a
    tag against a header, as ``AggregatorModel`` checks a slot): state, same chunk, mismatch of
    round / group / scale / count / session, duplicate sender, completes, older chunk."""
    dut = LiveTagCheck(jobs)
    rng = random.Random(jobs)
    seen: set[str] = set()

    async def tb(ctx) -> None:
        for _ in range(800):
            h1 = _header(rng, None, jobs)
            h0 = _header(rng, h1, jobs)
            members = rng.choice([0b1, 0b11, 0b1011, 0xF0F0, 0xFFFFFFFF])
            mb = [i for i in range(32) if members >> i & 1]
            pbit = 1 << rng.choice(mb + [31])
            bits = {"bm": rng.getrandbits(32) & members, "tag_bitmap": rng.getrandbits(32) & members,
                    "bit": 1 << rng.choice(mb)}
            first, same, done = rng.getrandbits(1), rng.getrandbits(1), rng.getrandbits(1)
            for name, v in h1.items():
                ctx.set(getattr(dut.h1, name), v)
            for name, v in h0.items():
                ctx.set(getattr(dut.h0, name), v)
            for name, v in {**bits, "pbit": pbit, "members": members, "first": first, "same": same,
                            "done": done, "nbm1": 0}.items():
                ctx.set(getattr(dut, name), v)
            t = ctx.get(dut.tag)
            want_bitmap = (bits["bm"] | bits["bit"] if same else bits["bit"]) if first else bits["tag_bitmap"]
            assert t.bitmap == want_bitmap
            state = 2 if done else 1  # DONE / ACTIVE (a decision never requests FREE)
            assert t.state == state
            job_eq, chunk_eq = h1["job_id"] == h0["job_id"], h1["chunk"] == h0["chunk"]
            back = (h1["chunk"] - h0["chunk"]) >> 31 & 1
            want = {"done": int(state == 2), "active": int(state == 1), "same": int(job_eq and chunk_eq),
                    "mismatch": int(any(h1[f] != h0[f] for f in ("round_id", "group_id", "scale_exp",
                                                                  "element_count", "session"))),
                    "dup": int(want_bitmap & pbit != 0), "cadd": int(want_bitmap | pbit == members),
                    "older": int(job_eq and not chunk_eq and not back), "mismatch_round": 0}
            got = ctx.get(dut.checks)
            assert {k: getattr(got, k) for k in want} == want, (h1, h0, bits, first, same)
            seen.update(k for k, v in want.items() if v)

    _comb_sim(dut, tb)
    assert {"done", "active", "same", "mismatch", "dup", "cadd", "older"} <= seen, seen


@pytest.mark.parametrize("jobs", [1, 3])
def test_tag_checks_as_carry_chains_are_the_direct_checks(jobs: int) -> None:
    """``tag_checks_carry`` (hdl/stage1_tag_checks.py, the DRAM reducer's: ``cadd``,
    ``mismatch_round``, ``mismatch``, and since session 46 the chunk equality in ``same`` /
    ``older`` and ``dup``, as carry chains) equals ``tag_checks`` (hdl/decision.py) on every
    field: tags whose header fields are a header's with one moved (or all fresh), negative
    scales, bitmaps completing the group or not, the sender's bit in it or not; each flag seen
    both ways."""
    jb = bits_for(jobs)
    m = Module()
    t, h = Signal(slot_tag_layout(jobs)), Signal(AggHeaderLayout)
    bit, members = Signal(32), Signal(32)
    got, want = Signal(TagChecks), Signal(TagChecks)
    m.d.comb += [got.eq(tag_checks_carry(m, t, h, bit, members, jb)), want.eq(tag_checks(t, h, bit, members, jb))]
    rng = random.Random(40 + jobs)
    seen: set[str] = set()

    async def tb(ctx) -> None:
        for _ in range(1500):
            hd = _header(rng, None, jobs)
            hd["scale_exp"] = rng.randint(-4, 3)
            th = _header(rng, hd, jobs)
            mem = rng.choice([0b1, 0b11, 0b1011, 0xF0F0, 0xFFFFFFFF, rng.getrandbits(32)])
            pbit = rng.choice([0, 1 << rng.randrange(32), mem & -mem])
            bitmap = rng.choice([mem, mem & ~pbit, rng.getrandbits(32) & mem, rng.getrandbits(32)])
            tag = {"state": rng.randrange(4), "job": th["job_id"], "round": th["round_id"], "chunk": th["chunk"],
                   "group": th["group_id"], "scale": th["scale_exp"], "count": th["element_count"] & 0xFFFF,
                   "bitmap": bitmap, "session": th["session"], "nbm1": 0}
            ctx.set(t, tag)
            for name, v in hd.items():
                ctx.set(getattr(h, name), v)
            ctx.set(bit, pbit)
            ctx.set(members, mem)
            g, w = ctx.get(got), ctx.get(want)
            assert {k: getattr(g, k) for k in TagChecks.members} == \
                {k: getattr(w, k) for k in TagChecks.members}, (tag, hd, pbit, mem)
            flags = ("cadd", "dup", "mismatch_round", "mismatch", "same", "older")
            seen.update(k for k in flags if getattr(w, k))
            seen.update(f"no_{k}" for k in flags if not getattr(w, k))

    _comb_sim(m, tb)
    assert len(seen) == 12, seen


@pytest.mark.parametrize(("width", "slots", "row_bits"), [(64, 16, 2), (256, 8, 0)])
def test_stage_two_issue_command_header_and_entry(width: int, slots: int, row_bits: int) -> None:
    """``row_lanes`` / ``store_command`` / ``result_header`` / ``run_behind``
    (hdl/stage2_issue.py) against a small reference: the lanes holding elements (min(L, count -
    idx * L)), WRITE for a first contribution and ADD otherwise with the row, data and tag bits,
    the push side passed through, the RESULT header of the tag's chunk (the model's result
    header), and the entry queued: the run behind an emitting message (from chunk + 1, at its
    slot base + (chunk + 1 mod window), more - 1) or the entry without a run."""
    jobs = 2
    dut = StageTwoIssue(width, slots=slots, jobs=jobs, row_bits=row_bits)
    n_lanes, sb = width // 32, (slots - 1).bit_length()
    rng = random.Random(width + slots)

    async def tb(ctx) -> None:
        for _ in range(300):
            beat = {"op": rng.choice([1, 2]), "row": rng.getrandbits(sb + row_bits), "data": rng.getrandbits(width),
                    "count": rng.randint(1, n_lanes << row_bits), "idx": 0,
                    "slot": rng.getrandbits(sb), "emit": rng.getrandbits(1), "last": rng.getrandbits(1),
                    "push": rng.getrandbits(1), "marker": rng.getrandbits(1), "then_emit": rng.getrandbits(1)}
            beat["idx"] = rng.randrange(-(-beat["count"] // n_lanes))  # a row of the message
            tag = {"state": 2, "job": rng.randrange(jobs), "round": rng.getrandbits(32), "chunk": rng.getrandbits(32),
                   "group": rng.getrandbits(8), "scale": rng.randrange(4), "count": beat["count"],
                   "bitmap": rng.getrandbits(32), "session": rng.randrange(4), "nbm1": 0}
            entry = {"job": tag["job"], "chunk": tag["chunk"], "slot": rng.getrandbits(sb),
                     "more": rng.randrange(1, slots), "resent": 1 - beat["emit"]}
            lw, base = rng.randint(0, 8), rng.getrandbits(16)
            for k, v in beat.items():
                ctx.set(getattr(dut, k), v)
            ctx.set(dut.tag, tag)
            ctx.set(dut.entry, entry)
            ctx.set(dut.cfg, {"enable": 1, "log2_window": lw, "base": base})
            cmd = ctx.get(dut.push_cmd)
            held = min(n_lanes, beat["count"] - beat["idx"] * n_lanes)
            assert cmd.lanes == (1 << held) - 1, beat
            assert cmd.op == (Op.WRITE if beat["op"] == 1 else Op.ADD)
            assert (cmd.row, cmd.data) == (beat["row"], beat["data"])
            st = cmd.tag  # store_tag_layout packed into the command's tag bits
            assert st == beat["slot"] | (beat["op"] == 1) << sb | beat["emit"] << (sb + 1) | beat["last"] << (sb + 3)
            assert [ctx.get(getattr(dut, n)) for n in ("push_out", "push_marker", "push_then_emit")] == \
                [beat["push"], beat["marker"], beat["then_emit"]]
            hdr = ctx.get(dut.hdr)
            assert hdr.msg_type == wire.MsgType.RESULT and hdr.sender_id == 0 and hdr.flags == 0
            assert (hdr.job_id, hdr.round_id, hdr.chunk, hdr.group_id, hdr.scale_exp, hdr.element_count,
                    hdr.session) == tuple(tag[k] for k in ("job", "round", "chunk", "group", "scale", "count",
                                                           "session"))
            q = ctx.get(dut.q_in)
            w = 1 << min(lw, sb)
            if beat["emit"]:
                nxt = (tag["chunk"] + 1) & 0xFFFFFFFF
                want = (nxt, (base + (nxt & (w - 1))) % slots, entry["more"] - 1)
            else:
                want = (entry["chunk"], entry["slot"], 0)
            assert (q.chunk, q.slot, q.more) == want, (beat["emit"], lw, base, entry)
            assert (q.job, q.resent) == (entry["job"], entry["resent"])

    _comb_sim(dut, tb)


@pytest.mark.parametrize(("slots", "jobs"), [(16, 2), (64, 1)])
def test_pair_checks_compare_the_next_beats(slots: int, jobs: int) -> None:
    """``next_pair_checks`` (hdl/pin_terms.py), registered: a cycle later, the beat that was to
    be at P's output (the skid's if valid, else I's, when P loads; else P's own, ``h0``) against
    the one that was to be in stage 1 (``h0`` if it advanced, else ``h1``): same job, the chunk
    distance's low bits in stage 1's window, same job and chunk."""
    dut = PairCheck(slots=slots, jobs=jobs)
    rng = random.Random(slots + jobs)
    sb = (slots - 1).bit_length()
    seen: set[tuple[int, int]] = set()

    def hdr(base: int) -> dict:
        return {"job_id": rng.randrange(jobs), "chunk": (base + rng.choice([0, 0, 1, -1, slots, rng.getrandbits(32)]))
                & 0xFFFFFFFF}

    async def tb(ctx) -> None:
        for _ in range(500):
            base = rng.getrandbits(32)
            hs = {n: hdr(base) for n in ("skid_hdr", "in_hdr", "h0", "h1")}
            ctl = {"p_load": rng.getrandbits(1), "skid_valid": rng.getrandbits(1), "adv": rng.getrandbits(1),
                   "wm0": (1 << rng.randint(0, sb)) - 1, "wm1": (1 << rng.randint(0, sb)) - 1}
            for n, h in hs.items():
                for f, v in h.items():
                    ctx.set(getattr(getattr(dut, n), f), v)
            for n, v in ctl.items():
                ctx.set(getattr(dut, n), v)
            await ctx.tick()
            pn = hs["h0"] if not ctl["p_load"] else hs["skid_hdr"] if ctl["skid_valid"] else hs["in_hdr"]
            n1, wm = (hs["h0"], ctl["wm0"]) if ctl["adv"] else (hs["h1"], ctl["wm1"])
            got = ctx.get(dut.out)
            same_job = int(pn["job_id"] == n1["job_id"])
            assert got.pjob_r == same_job, (hs, ctl)
            assert got.pdc_r == (pn["chunk"] - n1["chunk"]) & wm, (hs, ctl)
            assert got.same_key == int(same_job and pn["chunk"] == n1["chunk"]), (hs, ctl)
            seen.add((same_job, got.same_key))

    run_testbench(dut, tb)
    assert {(1, 1), (1, 0)} <= seen and (jobs == 1 or (0, 0) in seen), seen


def _scan_beat(rng: random.Random, slots: int, base: int, lw: int) -> dict:
    """A beat of a job (region base .. base + 2**lw - 1): its chunk, slot, start slot, vectors."""
    w = 1 << lw
    chunk = rng.getrandbits(32)
    own = (base + (chunk & (w - 1))) % slots
    start = (base + ((chunk + 1) & (w - 1))) % slots
    region = {(base + k) % slots for k in range(w)}
    return {"chunk": chunk, "own": own, "region": region, "oh": 1 << own, "lm": (1 << start) - 1,
            "reg": sum(1 << s for s in region)}


@pytest.mark.parametrize(("slots", "split"), [(8, False), (32, False), (128, False), (8, True), (16, True),
                                             (32, True)])
def test_release_scans_without_and_with_stage_1s_bit(slots: int, split: bool) -> None:
    """``release_scans`` (hdl/release_run.py), registered: a cycle later, for the beat that was to
    be in stage 1 (P's if stage 1 advanced, else stage 1's own), scan ``a`` is the model's release
    run over the pending slots and scan ``b`` the run as if stage 1's slot had become pending too
    (its decision completing behind the head); the beat's own slot is never pending in its scan;
    each scan's ``run_nz`` (the start slot's bit, registered) is the model's run != 0. ``split``
    (the DRAM reducer's): the upper half of the slots selected by ``adv_hi``, driven as ``adv``."""
    dut = ReleaseScans(slots, split=split)
    rng = random.Random(slots + 1000 * split)
    sb = (slots - 1).bit_length()
    differ, nz_seen = 0, set()

    async def tb(ctx) -> None:
        nonlocal differ
        for _ in range(300):
            lw, base = rng.randint(0, sb), rng.randrange(slots)
            b0, b1 = _scan_beat(rng, slots, base, lw), _scan_beat(rng, slots, base, lw)
            adv = rng.getrandbits(1)
            beat = b0 if adv else b1
            fill = rng.choice([0.5, 0.9, 1.0])
            pending = {s for s in range(slots) if rng.random() < fill}
            for n, v in {"pend": sum(1 << s for s in pending), "adv": adv, "oh0": b0["oh"], "oh1": b1["oh"],
                         "lm0": b0["lm"], "lm1": b1["lm"], "region0": b0["reg"], "region1": b1["reg"],
                         **({"adv_hi": adv} if split else {})}.items():
                ctx.set(getattr(dut, n), v)
            await ctx.tick()
            for port, pend in (("a", pending), ("b", pending | {b1["own"]})):
                in_region = (pend & beat["region"]) - {beat["own"]}
                first, cleared, run = _release_run_reference(slots, base, lw, beat["chunk"], in_region)
                got = ctx.get(getattr(dut, port))
                assert (got.first_zero, got.clr) == (1 << first, sum(1 << s for s in cleared)), (port, adv, lw)
                assert got.run_nz == (run != 0), (port, adv, lw, run)
                nz_seen.add(run != 0)
            differ += ctx.get(dut.a).clr != ctx.get(dut.b).clr

    run_testbench(dut, tb)
    assert differ, "scan b never differed from scan a"
    assert nz_seen == {True, False}, nz_seen


@pytest.mark.parametrize("slots", [16, 64, 128])
def test_release_scan_chains_in_the_cone(slots: int) -> None:
    """The adders (carry chains) in the input cone of ``fz_b`` (scan b's first zero, registered):
    up to ``SCAN_ONE_CHAIN_MAX_SLOTS`` (the default core's 16) one chain over the 2S bits, above
    it 2S / ``SCAN_CHAIN_BITS`` chains of 32 bits side by side (at S 128 the one 256-bit chain
    took 6.5 ns of the placed worst path, two 128-bit chains 3.0: docs/benchmarks.md, "The
    largest on-chip configuration traced (session 36)"). Above ``SCAN_FOLD_AT_SCAN_MAX_SLOTS`` the
    chains feed the 2S-bit registers ``scan_fz2_b_r`` (``fz_b`` is their fold)."""
    reg = "scan_fz2_b_r" if slots > SCAN_FOLD_AT_SCAN_MAX_SLOTS else "fz_b"  # folded after the register above
    cone = f"w:{reg} %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:-$dff,$memrd,$memrd_v2"
    (dump,) = _yosys_on(ReleaseScans(slots), f"select -set c {cone}; tee -q -o adds.txt dump @c t:$add %i", "adds.txt")
    widths = sorted(int(w) for w in re.findall(r"parameter \\Y_WIDTH (\d+)", dump))
    want = [2 * slots + 1] if slots <= SCAN_ONE_CHAIN_MAX_SLOTS else [SCAN_CHAIN_BITS + 1] * (2 * slots // SCAN_CHAIN_BITS)
    assert widths == want, f"S {slots}: adders of {widths} bits in fz_b's cone, want {want}"


@pytest.mark.parametrize("slots", [16, 64])
def test_release_scan_folded_after_the_register(slots: int) -> None:
    """Stage 1's ``clr`` (the cleared slots of the scan it picks with ``fxw_sn``) in the reducer:
    up to ``SCAN_FOLD_AT_SCAN_MAX_SLOTS`` (the default core's 16, pinned) the scans' folded
    registers (``clr_a``, ``clr_b``) and ``fxw_sn`` its only sources; above it the fold of the 2S
    halves and the region mask come after the register (at S 128 the hop from the chains to the
    fold, and the fold's region select by ``adv``, ~3 ns of the placed scan's 12.18 ns;
    docs/benchmarks.md, session 38): its sources the chains' registers and stage 1's
    ``region1``, no adder (the chains stay before the register)."""
    sources, cells = comb_cone(Reducer(64, slots=slots, elements=64, groups=2, jobs=1), "clr")
    if slots <= SCAN_FOLD_AT_SCAN_MAX_SLOTS:  # (clr_a's register keeps no name in the RTLIL)
        assert len(sources) == 3 and {"clr_b", "fxw_sn"} <= sources, f"S {slots}: clr's sources {sorted(sources)}"
    else:
        assert sources == {"scan_clr2_a_r", "scan_clr2_b_r", "region1", "fxw_sn"}, \
            f"S {slots}: clr's sources {sorted(sources)}"
    assert not cells["$add"], f"S {slots}: clr's cone {dict(cells)}"


@pytest.mark.parametrize("slots", [16, 64])
def test_stage_p_start_slot_from_stage_i(slots: int) -> None:
    """Stage P's start slot (``inputs.start_i``, into its 128 compares for ``lm`` at S 128): up
    to ``START_AT_P_MAX_SLOTS`` (the default core's 16, pinned) added in P from I's output (the
    job's base, chunk + 1: ``$add``s in its cone); above it stage I's register (no logic: at
    S 128 the two adders, a 3.2 ns hop and the compares into P were 10.9-12.1 ns placed)."""
    sources, cells = comb_cone(Reducer(64, slots=slots, elements=64, groups=2, jobs=1), "inputs.start_i")
    if slots <= START_AT_P_MAX_SLOTS:
        assert cells["$add"], f"S {slots}: start_i's cone {dict(cells)}"
    else:
        assert not cells["$add"] and sources == {"inputs.stage_i.m__payload"}, \
            f"S {slots}: start_i's cone {dict(cells)}, sources {sorted(sources)}"


@pytest.mark.parametrize("slots", [16, 64])
def test_reset_slot_and_region_from_registers(slots: int) -> None:
    """Two of the largest core's paths (docs/benchmarks.md, session 38), in one yosys run: from
    the window reset's counter (``window_reset.idx``) to the pending bits (its slot's clear mask),
    and from the job table's register (``config.cfg__job_cfg``) to stage P's register (the job's
    region). Up to ``SLOT_REGISTER_MAX_SLOTS`` / ``REGION_AT_CONFIG_MAX_SLOTS`` (the default
    core's 16, pinned) the base adder and the S region compares (``$add``, ``$sub``) are on them;
    above, the counter has no path to the pending bits (the clear mask is decoded from the slot's
    own register, ``window_reset.slot_r``) and the job table reaches P only through the job's
    enable (each job's region is registered with the configuration). At S 128: 12.15 ns into
    ``pre_p``, 10.21 ns into ``p.region`` placed."""
    reduce = Reducer(64, slots=slots, elements=64, groups=2, jobs=1)
    big = slots > SLOT_REGISTER_MAX_SLOTS
    srcs = ["window_reset.idx", "config.cfg__job_cfg", *(["window_reset.slot_r"] if big else [])]
    table = comb_cells_table(reduce, srcs, ["pending", "inputs.stage_p.m__payload"])
    rst, region = table["window_reset.idx", "pending"], table["config.cfg__job_cfg", "inputs.stage_p.m__payload"]
    if not big:
        assert rst["$add"] and rst["$shl"], f"S {slots}: idx -> pending {dict(rst)}"
    else:
        slot_r = table["window_reset.slot_r", "pending"]
        assert not rst and slot_r["$shl"] and not slot_r["$add"], \
            f"S {slots}: idx -> pending {dict(rst)}, slot_r -> pending {dict(slot_r)}"
    if slots <= REGION_AT_CONFIG_MAX_SLOTS:
        assert region["$sub"] >= slots and region["$shr"] >= slots, f"S {slots}: job_cfg -> P {dict(region)}"
    else:
        assert region["$and"] and not region["$sub"] and not region["$shr"] and not region["$add"], \
            f"S {slots}: job_cfg -> P {dict(region)}"


@pytest.mark.parametrize("slots", [16, 64])
def test_push_after_the_pin_selects(slots: int) -> None:
    """The logic on paths from ``push_r`` (a decision pushed an entry) to ``adv``'s next value:
    up to ``PUSH_IN_PINS_MAX_SLOTS`` (the default core's 16, pinned) stage 2's mask ORed into
    the held slots before the S:1 selects by stage 0's and stage 1's slot (``$shift``s on the
    path); above it no select (``push_now`` ANDed after them: at S 128 this path was 11.87 ns
    placed, docs/benchmarks.md, session 38)."""
    cells = comb_cells_between(Reducer(64, slots=slots, elements=64, groups=2, jobs=1), "push_r", "adv")
    if slots <= PUSH_IN_PINS_MAX_SLOTS:
        assert cells["$shift"], f"S {slots}: push_r -> adv {dict(cells)}"
    else:
        assert not cells["$shift"] and not cells["$shiftx"], f"S {slots}: push_r -> adv {dict(cells)}"


@pytest.mark.parametrize("slots", [16, 64])
def test_run_nz_off_the_distance_table(slots: int) -> None:
    """The distance-table flip-flops (``dist_tab*``, ``run_of``'s AND-OR over S) in the input cone
    of the decision's ``queued_r`` (its run != 0): up to ``RUN_NZ_OF_RUN_MAX_SLOTS`` (the default
    core's 16, pinned) all S of them, above it none (``run_nz`` registered beside the scans: at
    S 128 the table's OR, then the decision, was 12.3 ns placed; docs/benchmarks.md)."""
    cone = "w:queued_r %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:-$dff,$memrd,$memrd_v2"
    (dump,) = _yosys_on(Reducer(64, slots=slots, elements=64, groups=2, jobs=1),
                        f"select -set c {cone}; tee -q -o w.txt select -list @c w:dist_tab* %i", "w.txt")
    n = len(dump.split())
    want = slots if slots <= RUN_NZ_OF_RUN_MAX_SLOTS else 0
    assert n == want, f"S {slots}: {n} distance-table wires in queued_r's cone, want {want}"


@pytest.mark.parametrize("slots", [16, 64])
def test_queue_rest_masks_off_the_slot_decode(slots: int) -> None:
    """The cells in the input cones of the release queue's rest masks (``q_rest0``, ``head_rest``):
    up to ``REST_AT_PUSH_MAX_SLOTS`` (the default core's 16, pinned) the pushed entry's slot
    (``slot_of``: the window's ``$gt``s) decoded there (``$shl``), above it none of
    those (``rest_masks``: both candidates registered at the decision; at S 128 that decode into
    the queue was 13.0 ns placed, docs/benchmarks.md)."""
    cone = "%ci1:+$dff[Q] %ci1:+$dff[D] %ci*:-$dff,$memrd,$memrd_v2"
    dumps = _yosys_on(Reducer(64, slots=slots, elements=64, groups=2, jobs=1),
                      f"select -set c w:queue.q_rest0 {cone}; tee -q -o q.txt stat @c; "
                      f"select -set h w:queue.head_rest {cone}; tee -q -o h.txt stat @h", "q.txt", "h.txt")
    for name, dump in zip(("q_rest0", "head_rest"), dumps, strict=True):
        cells = _cell_counts(dump)
        decode = {t: cells[t] for t in ("$shl", "$gt") if cells[t]}  # ($add: also the queue's pointers)
        if slots <= REST_AT_PUSH_MAX_SLOTS:
            assert cells["$shl"] and cells["$gt"], f"S {slots}: {name}'s cone {dict(cells)}"
        else:
            assert not decode, f"S {slots}: {name}'s cone has {decode}"
