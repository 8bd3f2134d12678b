"""Unit tests of the later parts of ``Reducer.elaborate`` built inline (issue 16 item 6, session
31; docs/reducer.md, "Parts built inline"): the window reset's effect, the result path's wiring,
stage 2's control. Each against a small reference of what it stands for; the reducer calls them
as functions so its RTLIL (pinned by tests/test_default_rtl.py) is unchanged."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Cat, Module, Signal
from amaranth.sim import Simulator
from stream_helpers import (
    _yosys_on,
    comb_cells_before,
    comb_cells_table,
    comb_cone,
    min_flops_between,
    run_testbench,
)
from test_reducer import Packer, _msg

from wanreduce.hdl.held_decision import HeldDecision
from wanreduce.hdl.layouts import JobCfgLayout, payload_beats
from wanreduce.hdl.reducer import Reducer
from wanreduce.hdl.reducer_config import slot_ahead, slot_of
from wanreduce.hdl.reducer_layouts import ACTIVE, DONE, store_tag_layout
from wanreduce.hdl.result_gate import ResultGate
from wanreduce.hdl.result_path import EmitterLink
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.hdl.stage2_control import StageTwoControl
from wanreduce.hdl.stage2_push import StageTwoPush
from wanreduce.hdl.window_reset_effect import WindowResetEffect
from wanreduce.model import Outcome


@pytest.mark.parametrize(("slots", "jobs", "apart"), [(16, 2, False), (4, 1, False), (64, 4, False), (64, 4, True),
                                                     (4, 1, True)])
def test_window_reset_effect(slots: int, jobs: int, apart: bool) -> None:
    """``reset_drained`` is true only with every stage, the queue, the emitter and the store
    empty; a reset request loads its job's head and no other; the pending bits a cycle later are
    ``pend_eff`` without the slot a reset clears, and stage 1's inputs are that bit, the run's
    bit and "stage 1's own slot" at the slot stage 1 holds next (slot0 if it advances); also with
    the reset's slot dropped after the select (``clear_apart``), often at that very slot."""
    dut = WindowResetEffect(slots=slots, jobs=jobs, clear_apart=apart)
    rng = random.Random(slots * 7 + jobs)
    heads = [0] * jobs
    seen_drained, seen_bits = set(), set()

    async def tb(ctx) -> None:
        for _ in range(500):
            drain = {"empty": rng.random() < 0.8, "v1": rng.random() < 0.2, "v2": rng.random() < 0.2,
                     "q_count": rng.choice([0, 0, 0, rng.randint(0, 15)]), "emit_busy": rng.random() < 0.2,
                     "rest_left": rng.choice([0, 0, 0, rng.randint(0, slots - 1)]),
                     "store_idle": rng.random() < 0.8}
            ins = {"reset_valid": rng.getrandbits(1), "reset_job": rng.randrange(jobs),
                   "reset_head": rng.getrandbits(32), "pend_eff": rng.getrandbits(slots),
                   "clear": rng.getrandbits(1), "clear_slot": rng.randrange(slots), "clr": rng.getrandbits(slots),
                   "adv": rng.getrandbits(1), "slot0": rng.randrange(slots),
                   "slot1": rng.choice([rng.randrange(slots), None])}
            if ins["slot1"] is None:
                ins["slot1"] = ins["slot0"]
            if rng.random() < 0.3:  # the reset's slot is the one stage 1 holds next
                ins["clear_slot"] = ins["slot0"] if ins["adv"] else ins["slot1"]
            ctx.set(dut.drain, drain)
            for k, v in ins.items():
                ctx.set(getattr(dut, k), v)
            want_drained = int(drain["empty"] and not drain["v1"] and not drain["v2"] and drain["q_count"] == 0
                               and not drain["emit_busy"] and drain["rest_left"] == 0 and drain["store_idle"])
            assert ctx.get(dut.drained) == want_drained, drain
            seen_drained.add(want_drained)
            await ctx.tick()
            if ins["reset_valid"]:
                heads[ins["reset_job"]] = ins["reset_head"]
            assert [ctx.get(dut.heads[j]) for j in range(jobs)] == heads
            want = ins["pend_eff"] & ~((1 << ins["clear_slot"]) if ins["clear"] else 0) & ((1 << slots) - 1)
            assert ctx.get(dut.pending) == want, ins
            n1 = ins["slot0"] if ins["adv"] else ins["slot1"]
            got = ctx.get(dut.stage1)
            bits = (want >> n1 & 1, ins["clr"] >> n1 & 1, int(n1 == ins["slot1"]))
            assert (got.pre, got.cclr, got.sset) == bits, ins
            seen_bits.add(bits)

    run_testbench(dut, tb)
    assert seen_drained == {0, 1}
    assert len(seen_bits) == 8


@pytest.mark.parametrize("apart", [False, True])
def test_reset_slot_dropped_after_the_pending_select(apart: bool) -> None:
    """The logic from the reset's slot (``clear_slot``) to stage 1's pending bit (``pre_p``):
    the S-bit clear mask (``$shl``) in front of the S:1 select (``$shift``) as the default core
    has it (pinned), or with ``clear_apart`` (the reducer above ``SLOT_REGISTER_MAX_SLOTS``) a
    compare with the selected slot after the select, neither on the path."""
    cells = comb_cells_table(WindowResetEffect(slots=64, jobs=2, clear_apart=apart), ["clear_slot"], ["pre_p"])
    cells = cells["clear_slot", "pre_p"]
    if apart:
        assert cells["$eq"] and not cells["$shl"] and not cells["$shift"] and not cells["$shiftx"], dict(cells)
    else:
        assert cells["$shl"] and cells["$shift"] + cells["$shiftx"], dict(cells)


def test_window_reset_effect_rejects_bad_sizes() -> None:
    """One-line errors naming the parameter and its range."""
    with pytest.raises(ValueError, match=r"^count_bits must be 1\.\.16, got 0$"):
        WindowResetEffect(slots=16, jobs=2, count_bits=0)


@pytest.mark.parametrize(("slots", "shared"), [(16, False), (16, True), (512, True)])
def test_emitter_link(slots: int, shared: bool) -> None:
    """``connect_emitter`` / ``share_tag_port`` (hdl/result_path.py): the emitter's READ is a
    READ of its row tagged with its slot, ``read`` and its last row; the multi bits say the tag
    written leaves more than one / two beats; ``rw_hazard`` is a used tag read of the address
    written, or a missing header; a shared tag port is the emitter's whenever it may read (busy,
    a rest, an entry queued: the probe's read is lost), else the probe's, enabled."""
    dut = EmitterLink(slots=slots, jobs=2, shared=shared)
    rng = random.Random(slots + shared)
    st_layout = store_tag_layout(slots)
    seen: set[tuple[int, int]] = set()

    async def tb(ctx) -> None:
        for _ in range(400):
            st = {"busy": rng.random() < 0.3, "rest_nz": rng.random() < 0.3, "q_count": rng.choice([0, 0, 3]),
                  "tag_addr": rng.randrange(slots), "tag_en": rng.getrandbits(1), "tag_read": rng.getrandbits(1),
                  "slot": rng.randrange(slots), "last": rng.getrandbits(1), "row_addr": rng.getrandbits(8),
                  "issue": rng.getrandbits(1)}
            nbm1 = rng.choice([0, 1, 2, rng.getrandbits(17)])
            ins = {"probe_addr": rng.randrange(slots), "wr_en": rng.getrandbits(1), "hdr_missing": rng.random() < 0.1}
            ctx.set(dut.state, st)
            ctx.set(dut.tw_d.nbm1, nbm1)
            for k, v in ins.items():
                ctx.set(getattr(dut, k), v)
            may = st["busy"] or st["rest_nz"] or st["q_count"] != 0
            addr = st["tag_addr"] if (may or not shared) else ins["probe_addr"]
            ctx.set(dut.wr_addr, addr if rng.random() < 0.5 else rng.randrange(slots))
            await ctx.delay(1e-9)
            assert ctx.get(dut.rd_addr) == addr, (st, ins)
            assert ctx.get(dut.rd_en) == (int(not may or st["tag_en"]) if shared else st["tag_en"])
            if shared:
                assert ctx.get(dut.rd_lost) == int(may)
                seen.add((int(may), ctx.get(dut.rd_en)))
            cmd = ctx.get(dut.e_cmd)
            assert ctx.get(dut.e_valid) == st["issue"]
            assert (cmd.op, cmd.row) == (Op.READ, st["row_addr"])
            want_tag = st_layout.const({"slot": st["slot"], "read": 1, "last": st["last"]}).as_value().value
            assert cmd.tag == want_tag
            assert (ctx.get(dut.wmulti), ctx.get(dut.wmulti2)) == (int(nbm1 != 0), int(nbm1 >> 1 != 0))
            hazard = (st["tag_read"] and ins["wr_en"] and ctx.get(dut.wr_addr) == addr) or ins["hdr_missing"]
            assert ctx.get(dut.rw_hazard) == int(hazard)

    run_testbench(dut, tb)
    if shared:
        assert seen == {(0, 1), (1, 0), (1, 1)}


@pytest.mark.parametrize(("width", "slots", "row_bits"), [(64, 16, 3), (256, 4, 0), (512, 64, 1)])
def test_stage_two_control(width: int, slots: int, row_bits: int) -> None:
    """``stage2_registers`` / ``release_push`` (hdl/stage2_control.py) against a cycle model:
    stage 2 loads the beat leaving stage 1 (its op the decision's on a first beat, else the held
    one; its lanes those of its row holding elements), holds it otherwise; ``has_cmd`` says its op
    is not OP_NONE; the entry is pushed with the last beat, to the emitter if ``queued_r``; the
    tag written is the decision's on a first beat; ``runs_now`` is ``fx_c`` the cycle after a
    decision, held; ``queued_x`` is a push that is a resend or an emission with a run."""
    dut = StageTwoControl(width, slots=slots, jobs=2, row_bits=row_bits)
    rng = random.Random(width + slots)
    n_lanes = width // 32
    tag_bits = len(dut.tag_d.as_value())
    reg = {"v2": 0, "last2": 0, "has_cmd": 0, "push_c": 0, "op2": 0, "row2": 0, "d2": 0, "lanes2": 0, "slot2": 0}
    runs_r = 0
    seen: set[tuple[int, int]] = set()

    async def tb(ctx) -> None:
        nonlocal runs_r
        for _ in range(400):
            i = {"v1": rng.random() < 0.8, "adv": rng.random() < 0.8, "first1": rng.getrandbits(1),
                 "last1": rng.getrandbits(1), "op": rng.randrange(4), "op_r": rng.randrange(4),
                 "push_c_n": rng.getrandbits(1), "idx": rng.getrandbits(row_bits) if row_bits else 0,
                 "slot1": rng.randrange(slots),
                 "d1": rng.getrandbits(width), "push_r": rng.getrandbits(1), "tag_d": rng.getrandbits(tag_bits),
                 "tag_r": rng.getrandbits(tag_bits), "queued_r": rng.getrandbits(1), "emit_r": rng.getrandbits(1),
                 "more_nz_r": rng.getrandbits(1), "decide_r": rng.getrandbits(1), "fx_c": rng.getrandbits(1)}
            # a row of the message holds an element: count > idx * lanes
            i["count"] = i["idx"] * n_lanes + rng.randint(1, 2 * n_lanes)
            for k, v in i.items():
                if k in ("tag_d", "tag_r"):
                    ctx.set(getattr(dut, k).as_value(), v)
                else:
                    ctx.set(getattr(dut, k), v)
            await ctx.delay(1e-9)
            # combinational, from this cycle's registers
            push_now = reg["last2"] & i["push_r"]
            runs_now = i["fx_c"] if i["decide_r"] else runs_r
            assert ctx.get(dut.push_now) == push_now
            assert ctx.get(dut.queued) == reg["last2"] & i["queued_r"]
            assert ctx.get(dut.runs_now) == runs_now
            want_x = push_now & (1 - (i["emit_r"] & (1 - (runs_now & i["more_nz_r"]))))
            assert ctx.get(dut.queued_x) == want_x
            assert ctx.get(dut.tag_c.as_value()) == (i["tag_d"] if i["first1"] else i["tag_r"])
            seen.add((push_now, want_x))
            await ctx.tick()
            go = int(i["v1"] and i["adv"])
            op_c = i["op"] if i["first1"] else i["op_r"]
            reg.update(v2=go, last2=go & i["last1"], has_cmd=go & int(op_c != 0), push_c=i["push_c_n"])
            if go:
                rem = i["count"] - i["idx"] * n_lanes
                row = (i["slot1"] << row_bits) | (i["idx"] & ((1 << row_bits) - 1))
                reg.update(op2=op_c, row2=row, d2=i["d1"], slot2=i["slot1"],
                           lanes2=sum(1 << k for k in range(n_lanes) if rem > k))
            if i["decide_r"]:
                runs_r = i["fx_c"]
            got = ctx.get(dut.stage2)
            assert {k: getattr(got, k) for k in reg} == reg, i

    run_testbench(dut, tb)
    assert seen >= {(0, 0), (1, 0), (1, 1)}


@pytest.mark.parametrize(("slots", "jobs"), [(16, 2), (4, 1), (512, 4)])
def test_held_decision(slots: int, jobs: int) -> None:
    """``decided_entry`` / ``hold_decision`` (hdl/held_decision.py) against a cycle model: the
    entry is stage 1's job, chunk and slot, the run and the resend; the tag DONE or ACTIVE with
    the header's fields; a decision loads both and the flags (emit = push and not a resend,
    more_nz = the run's), the slot mask (its slot and the run's), and nothing else does; the
    outcome strobe follows the decision by two cycles, the code by one."""
    dut = HeldDecision(slots=slots, jobs=jobs)
    rng = random.Random(slots + jobs)
    jb = max(1, (jobs - 1).bit_length())
    hdr_bits = len(dut.h1.as_value())
    held = {"entry": 0, "tag": 0, "mask": 0, "op": 0, "push": 0, "emit": 0, "more_nz": 0, "queued": 0}
    decide_r = outcome = code_r = 0
    loads = 0

    async def tb(ctx) -> None:
        nonlocal decide_r, outcome, code_r, loads
        for _ in range(300):
            i = {"slot1": rng.randrange(slots), "decide": rng.random() < 0.4, "op": rng.randrange(4),
                 "push_d": rng.getrandbits(1), "resend": rng.getrandbits(1), "done_new": rng.getrandbits(1),
                 "queued_d": rng.getrandbits(1), "run": rng.randrange(slots), "run_nz": rng.getrandbits(1),
                 "nbm1": rng.getrandbits(17), "new_bm": rng.getrandbits(32), "oh1": 1 << rng.randrange(slots),
                 "clr": rng.getrandbits(slots), "code": rng.randrange(16)}
            ctx.set(dut.h1.as_value(), rng.getrandbits(hdr_bits))
            for k, v in i.items():
                ctx.set(getattr(dut, k), v)
            await ctx.delay(1e-9)
            h = ctx.get(dut.h1)
            e, t = ctx.get(dut.entry_d), ctx.get(dut.tag_d)
            assert (e.job, e.chunk, e.slot, e.more, e.resent) == (
                h.job_id & ((1 << jb) - 1), h.chunk, i["slot1"], i["run"], i["resend"])
            assert (t.state, t.job, t.chunk, t.round, t.nbm1, t.bitmap) == (
                DONE if i["done_new"] else ACTIVE, e.job, h.chunk, h.round_id, i["nbm1"], i["new_bm"])
            entry_v, tag_v = ctx.get(dut.entry_d.as_value()), ctx.get(dut.tag_d.as_value())
            await ctx.tick()
            outcome, decide_r, code_r = decide_r, int(i["decide"]), i["code"]
            if i["decide"]:
                loads += 1
                held.update(entry=entry_v, tag=tag_v, mask=i["oh1"] | i["clr"], op=i["op"], push=i["push_d"],
                            emit=i["push_d"] & (1 - i["resend"]), more_nz=i["run_nz"], queued=i["queued_d"])
            f = ctx.get(dut.flags)
            got = {"entry": ctx.get(dut.entry_r.as_value()), "tag": ctx.get(dut.tag_r.as_value()),
                   "mask": ctx.get(dut.mask_r), **{k: getattr(f, k) for k in ("op", "push", "emit", "more_nz", "queued")}}
            assert got == held, i
            assert (f.decide_r, f.outcome, ctx.get(dut.outcome_code)) == (decide_r, outcome, code_r)
        assert loads > 50

    run_testbench(dut, tb)


@pytest.mark.parametrize(("slots", "jobs", "dram", "held", "ahead"),
                         [(16, 2, False, False, False), (16, 3, True, False, False), (4, 1, True, False, False),
                          (16, 3, True, True, False), (16, 3, True, True, True), (4, 1, True, True, True)])
def test_stage_two_push(slots: int, jobs: int, dram: bool, held: bool, ahead: bool) -> None:
    """``stage2_push`` (hdl/stage2_push.py), the wiring around hdl/stage2_issue.py's functions
    (tested on their own in tests/test_reducer_inline_parts.py): the command pushed with
    ``push_c``, a marker without a data op, then to the emitter if queued, with stage 2's beat;
    the header pushed when the entry is pushed by an emitting message; the entry queued with its
    mask when queued, the run behind an emitting message at its own job's slot base (another
    job's configuration differs); with the DRAM store ``more`` = not the last row. ``held``: the
    run's slot is ``run_slot`` (the reducer's DRAM configuration holds it from the decision) and
    ``run_err`` is 1 exactly when a queued run's ``run_slot`` is not the job's slot of chunk + 1.
    ``ahead``: the queue's next slots are the held ``run_slot`` / ``ahead2`` / ``ahead3`` (the
    DRAM reducer's), and ``run_err`` is 1 also exactly when they are not the job's."""
    dut = StageTwoPush(64, slots=slots, jobs=jobs, row_bits=2, dram=dram, held_run_slot=held, held_ahead=ahead)
    rng = random.Random(slots + jobs + dram)
    sb = (slots - 1).bit_length()
    seen: set[int] = set()

    async def tb(ctx) -> None:
        for _ in range(300):
            i = {k: rng.getrandbits(1) for k in ("push_c", "has_cmd", "queued", "emit2", "last2", "push_now",
                                                 "emit_last")}
            s2 = {"op2": rng.choice([1, 2]), "row2": rng.getrandbits(sb + 2), "d2": rng.getrandbits(64),
                  "lanes2": rng.getrandbits(2), "slot2": rng.getrandbits(sb)}
            entry = {"job": rng.randrange(jobs), "chunk": rng.getrandbits(32), "slot": rng.getrandbits(sb),
                     "more": rng.randrange(1, slots), "resent": 1 - i["emit2"]}
            cfgs = [{"enable": 1, "log2_window": rng.randint(0, 8), "base": rng.getrandbits(16)} for _ in range(jobs)]
            mask = rng.getrandbits(slots)
            for k, v in i.items():
                ctx.set(getattr(dut, k), v)
            ctx.set(dut.s2, s2)
            ctx.set(dut.entry_r, entry)
            ctx.set(dut.mask_r, mask)
            for j in range(jobs):
                ctx.set(dut.job_cfg[j], cfgs[j])
            ctx.set(dut.tag_r, {"state": 2, "job": entry["job"], "chunk": entry["chunk"]})
            c = cfgs[entry["job"]]

            def at(k: int, c: dict = c, chunk: int = entry["chunk"]) -> int:  # the job's slot of entry_r's chunk + k
                return (c["base"] + ((chunk + k) & ((1 << min(c["log2_window"], sb)) - 1))) % slots

            nxt = (entry["chunk"] + 1) & 0xFFFFFFFF
            run_slot = at(1)
            if held:
                wrong = rng.random() < 0.3
                run_slot = (run_slot + wrong) % slots
                ctx.set(dut.run_slot, run_slot)
            if ahead:  # the held slots of chunk + 2 / + 3, each wrong at times
                given = [(at(k) + (rng.random() < 0.15)) % slots for k in (2, 3)]
                ctx.set(dut.ahead2, given[0])
                ctx.set(dut.ahead3, given[1])
            await ctx.delay(1e-9)
            if held:
                # the pushed entry's next two slots (its chunk + 1 / + 2's), for the queue
                want_ns = (at(2), at(3)) if i["emit2"] else (at(1), at(2))
                got_ns = (ctx.get(dut.q_nslot), ctx.get(dut.q_nslot2))
                bad = i["emit2"] & wrong
                if ahead:
                    assert got_ns == ((given[0], given[1]) if i["emit2"] else (run_slot, given[0])), (i, entry, c)
                    bad = bad | (got_ns != want_ns)
                else:
                    assert got_ns == want_ns, (i, entry, c)
                assert ctx.get(dut.run_err) == (i["queued"] & bad), (i, wrong)
                seen.add(2 + (i["queued"] & bad))
            assert [ctx.get(getattr(dut, n)) for n in ("push", "push_marker", "push_then_emit")] == \
                [i["push_c"], 1 - i["has_cmd"], i["queued"]]
            cmd = ctx.get(dut.push_cmd)
            assert (cmd.row, cmd.data, cmd.lanes) == (s2["row2"], s2["d2"], s2["lanes2"])
            assert cmd.tag & ((1 << sb) - 1) == s2["slot2"]
            assert ctx.get(dut.hdr_valid) == i["push_now"] & i["emit2"]
            assert ctx.get(dut.hdr).chunk == entry["chunk"]
            assert (ctx.get(dut.q_push), ctx.get(dut.q_mask)) == (i["queued"], mask)
            q = ctx.get(dut.q_entry)
            if i["emit2"]:
                want = (nxt, run_slot, entry["more"] - 1)
            else:
                want = (entry["chunk"], entry["slot"], 0)
            assert (q.chunk, q.slot, q.more) == want, (i, entry, cfgs)
            more = (1 - i["last2"], 1 - i["emit_last"]) if dram else (0, 0)
            assert (cmd.more, ctx.get(dut.e_more)) == more
            seen.add(i["emit2"])

    run_testbench(dut, tb)
    assert seen == ({0, 1, 2, 3} if held else {0, 1})


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_queued_run_reads_no_job_table_with_dram(slot_memory: str) -> None:
    """With the DRAM store the run's slot is held from the decision (``run_slot_r``): from the
    held entry ``entry_r`` to the release queue's rest masks no job-table select, window compare
    or adder within a cycle (`entry_r.job` -> the job table -> `slot_of` -> `q_rest` / the
    emitter's `q_head_rest` was the Versa DRAM build's core path, 9.74 ns at main 96d8c95's seed
    1). The on-chip reducer (its RTL pinned, tests/test_default_rtl.py) keeps them: the check's
    before-case."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if slot_memory == "dram" else {}))
    regs = ["queue.q_rest0", "queue.head_rest"]
    table = comb_cells_table(dut, ["entry_r"], regs)
    for reg in regs:
        cells = table["entry_r", reg]
        table_logic = cells["$pmux"] + cells["$gt"] + cells["$add"]
        assert cells["$shl"] and (table_logic == 0) == (slot_memory == "dram"), (reg, cells)


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_queue_push_reads_no_job_table_with_dram(slot_memory: str) -> None:
    """With the DRAM store the queue's next slots (``q_nslot*``, its head's ``head_nslot*``) come
    from ``run_slot_r`` / ``run_slot2_r`` / ``run_slot3_r``, held from the decision: from the
    held entry ``entry_r`` to them no job-table select, window compare or adder within a cycle
    (`entry.job` -> the job table -> `slot_of` -> `q_nslot*` was the Versa DRAM build's push-side
    path, 8.73 ns at session 37's seed 1). The on-chip reducer above S 16 (``rest_ahead``: the
    queue's next slots, not held) keeps them: the check's before-case."""
    slots = 8 if slot_memory == "dram" else 32
    dut = Reducer(64, slots=slots, elements=32 * slots // 8, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if slot_memory == "dram" else {}))
    regs = ["queue.q_nslot0", "queue.q_nslot21", "queue.head_nslot", "queue.head_nslot2"]
    table = comb_cells_table(dut, ["entry_r"], regs)
    for reg in regs:
        cells = table["entry_r", reg]
        table_logic = cells["$pmux"] + cells["$gt"] + cells["$add"]
        assert (table_logic == 0) == (slot_memory == "dram"), (reg, cells)


@pytest.mark.parametrize("sb", [1, 2, 3, 4])
def test_slot_ahead_is_slot_of_chunk_plus_k(sb: int) -> None:
    """``slot_ahead`` (the slot of chunk + k from chunk's slot and the window mask) equals
    ``slot_of`` of chunk + k for every base, window and chunk's low bits, k = 1..3."""
    m = Module()
    base, lw, chunk = Signal(16), Signal(5), Signal(32)
    cfg = Signal(JobCfgLayout)
    m.d.comb += [cfg.base.eq(base), cfg.log2_window.eq(lw)]
    wmask = Signal(sb)
    m.d.comb += wmask.eq(Cat(*[lw > i for i in range(sb)]))
    slot = slot_of(cfg, chunk, sb)
    pairs = [(slot_ahead(slot, chunk, wmask, k), slot_of(cfg, chunk + k, sb)) for k in (1, 2, 3)]

    async def tb(ctx) -> None:
        for b in range(1 << sb):
            for w in range(sb + 2):
                for c in list(range(1 << (sb + 1))) + [0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD]:
                    ctx.set(base, b | 0x40)
                    ctx.set(lw, w)
                    ctx.set(chunk, c)
                    for got, want in pairs:
                        assert ctx.get(got) == ctx.get(want), (b, w, c)

    run_testbench(m, tb)


@pytest.mark.parametrize("strobe", ["result_withheld", "result_out"])
def test_the_result_strobes_are_flip_flops_with_dram(strobe: str) -> None:
    """With the DRAM store the result gate's strobes (the control block's RESULTS_WITHHELD /
    RESULTS_OUT counters count them) are flip-flops: `mem_error` -> the gate's drop -> the
    egress merger's select -> its ready -> the take -> the 32-bit counter was the Versa DRAM
    build's core path (9.91 ns at session 36's seed 2). Before the cut the cone held the gate's
    logic and the output's ready (``m_msg__ready``)."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory="dram", outstanding=8, index_bits=3)
    sources, cells = comb_cone(dut, strobe)
    # the flip-flop's output wire is named after the port it drives
    assert sources <= {strobe, "sent_r", "withheld_r"} and not cells, (sorted(sources), cells)


@pytest.mark.parametrize(("slot_memory", "slots", "held"), [("dram", 8, True), ("onchip", 8, False),
                                                            ("onchip", 32, True)])
def test_the_emitter_start_reads_no_job_table_with_dram(slot_memory: str, slots: int, held: bool) -> None:
    """With the DRAM store, and on chip above S 16, the queue holds each entry's next two slots
    (pushed with it): from the queue's head to the emitter's start registers (``rm_rest``,
    ``rest_slot``, ``rest_nslot``) no job-table select, window compare or adder (`q_head.job`
    -> its job-table select -> `slot_of` -> `rm_rest` / the `multi` read address was the Versa
    DRAM build's core path, 10.00 ns at session 36's seed 1, and S x E = 128 x 256's second
    family, 12.46 ns at session 37's seed 1). The default on-chip reducer (S <= 16, its RTL
    pinned) keeps them: the check's before-case."""
    dut = Reducer(64, slots=slots, elements=32 * slots // 8, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if slot_memory == "dram" else {}))
    regs = ["emitter.rm_rest", "emitter.rest_slot", "emitter.rest_nslot"]
    table = comb_cells_table(dut, ["queue.head"], regs)
    for reg in regs:
        cells = table["queue.head", reg]
        table_logic = cells["$pmux"] + cells["$gt"] + cells["$add"]
        assert (table_logic == 0) == held, (reg, cells)


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_emitter_start_is_go_and_a_flip_flop_with_dram(slot_memory: str) -> None:
    """With the DRAM store the emitter's two kinds of start and the queue's pop are each the
    port's ``go`` and a flip-flop of their own (``sq_ok`` / ``sr_ok`` / ``sq_pn``,
    ``ResultEmitter(split_start=True)``): the start flag ``s_ok`` and ``rest_nz`` reach neither
    the pop nor the registers a start loads (the queue's head, the rest) within a cycle (the
    store's `cmd_in.s__ready` -> go -> start_new -> start_q -> the pop -> `q_head_nslot2` was the
    Versa DRAM build's worst core path at session 42's landing seed 3, 10.12 ns). The on-chip
    reducer keeps start_new & ~rest_nz (its RTL pinned): the check's before-case. copy_error
    checks the flip-flops every cycle (test_result_emitter_start_is_decided_a_cycle_ahead)."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if slot_memory == "dram" else {}))
    split = slot_memory == "dram"
    sources, _ = comb_cone(dut, "emitter.q_pop")
    assert ("emitter.s_ok" in sources) != split and ("emitter.rest_nz" in sources) != split, sources
    assert ("emitter.sq_pn" in sources) == split, sources
    regs = ["queue.head", "emitter.rest_chunk", "emitter.rest_left", *(["queue.head_nslot2"] if split else [])]
    table = comb_cells_table(dut, ["emitter.s_ok"], regs)
    for reg in regs:
        assert (not table["emitter.s_ok", reg]) == split, (reg, table["emitter.s_ok", reg])


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_stage_p_loads_from_a_take_of_its_own_with_dram(slot_memory: str) -> None:
    """With the DRAM store stage P's output register (``inputs.stage_p.m__payload``) loads from a
    take of its own (``hold_t``, the inverted room copies ``room_qn`` / ``room_cn`` and P's valid):
    neither ``adv`` (hundreds of loads) nor ``room_c`` / the unnamed ``room_q`` reach its enable
    (`adv` -> two LUTs -> P's enable net was the Versa DRAM build's core path, 10.14 ns at session
    38's seed 2). The on-chip reducer keeps take (its RTL pinned): the check's before-case. The
    copies equal what they stand for in every cycle (``copy_error``, checked by the benches)."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if slot_memory == "dram" else {}))
    srcs, reg = ["adv", "room_c", "hold_t", "room_qn", "room_cn"], "inputs.stage_p.m__payload"
    table = comb_cells_table(dut, srcs if slot_memory == "dram" else srcs[:3], [reg])
    own = slot_memory == "dram"
    assert (not table["adv", reg]) == own and (not table["room_c", reg]) == own, table
    if own:
        assert all(table[s, reg] for s in ("hold_t", "room_qn", "room_cn")), table
    else:
        assert not table["hold_t", reg], table


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_probe_slot_reads_a_registered_key_with_dram(slot_memory: str) -> None:
    """With the DRAM store the probe (JOBj_PROBE_BITMAP) registers its key (``probe.k_job`` /
    ``probe.k_chunk``) before the job-table select and ``slot_of``: from the reducer's
    ``probe_job`` / ``probe_chunk`` inputs to the probed slot (``probe.rd_addr``, its register) no cell
    (`control.probe_job` -> the key's select -> the job table -> `slot_of` -> `probe.rd_addr` was
    9.10 ns at session 38's seed 2). The on-chip reducer keeps the direct path: the before-case.
    test_tag_probe_on_a_shared_port_uses_only_its_own_reads checks the answers with the key registered."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if slot_memory == "dram" else {}))
    table = comb_cells_table(dut, ["probe_job", "probe_chunk"], ["probe.rd_addr"])
    for src in ("probe_job", "probe_chunk"):
        assert (not table[src, "probe.rd_addr"]) == (slot_memory == "dram"), (src, table)


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_tag_read_address_reads_no_take_with_dram(slot_memory: str) -> None:
    """With the DRAM store the decision's tag read runs on two ports, the beat stage P would load
    (``tag_rd_l``: P's skid or I's output, by ``skid_valid``) and the beat it holds (``tag_rd``:
    P's slot), chosen after the read by P's load a cycle ago (``tag_ld_r``): neither address
    reads P's load (``hold_t``, the room flags, P's valid), which chose the address before the
    LUT RAM (`stage_p.skid_valid` -> `hold_t` -> the tag memory -> `tag_rd__data`, 9.93 ns at
    session 38's seed 2, 9.67 at main's seed 2 in session 39). The on-chip reducer keeps the
    one port and its address multiplexer (its RTL pinned): the check's before-case."""
    dram = slot_memory == "dram"
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if dram else {}))
    for wire in ("tag_rd__addr", "tag_rd_l__addr") if dram else ("tag_rd__addr",):
        sources, _ = comb_cone(dut, wire)
        assert sources, wire
        late = sources & {"hold_t", "adv", "room_c", "room_t", "inputs.stage_p.out_valid"}
        assert (not late) == dram, (wire, sorted(sources))


def test_the_tag_read_select_chooses_the_checks_not_the_data_with_dram() -> None:
    """With the DRAM store both tag ports' data are checked against stage 0's beat and P's load
    a cycle ago (``tag_ld_r``) chooses the checks' results: from ``tag_ld_r`` to the registered
    checks (``ck_pre``) and bitmap (``bm_pre``) multiplexers only, no compare (`tag_ld_r` -> the
    read-data multiplexer -> the tag checks -> `ck_pre.mismatch` was the Versa DRAM build's core
    path, 9.59 ns at session 39's seed 2; before, the cone held the checks' `$eq` / `$ne` /
    `$sub` and reductions). The two ports' checks are test_core's benches (every outcome against
    the golden model)."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory="dram", outstanding=8, index_bits=3)
    table = comb_cells_table(dut, ["tag_ld_r"], ["ck_pre", "bm_pre"])
    for reg in ("ck_pre", "bm_pre"):
        cells = table["tag_ld_r", reg]
        assert cells["$mux"] and set(+cells) <= {"$mux"}, (reg, cells)


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_head_checks_choose_the_job_after_the_compares_with_dram(slot_memory: str) -> None:
    """With the DRAM store the head checks (``hc_r``) compare the beat's chunk with every job's
    head and the job chooses the results (``head_checks(per_job=True)``): the head registers
    reach the subtractors with no cell between (P's payload -> the head's job select -> chunk -
    head -> `hc_r.late` was 9.20 ns at session 39's seed 2). The on-chip reducer keeps the head
    select before them (its RTL pinned): the check's before-case.
    tests/test_decision.py::test_head_check_against_the_twin checks both forms' flags."""
    dram = slot_memory == "dram"
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if dram else {}))
    for head in ("head0", "head1"):
        subs, cells = comb_cells_before(dut, head, "hc_r", "$sub")
        assert subs, head
        assert (not cells) == dram, (head, cells)


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_head_checks_choose_by_a_copy_of_adv_with_dram(slot_memory: str) -> None:
    """With the DRAM store the head checks registered a cycle ahead (``hc_r``: stage 0's beat's
    if stage 1 advances, else its own) choose by ``hold_t`` (== ~adv, a flip-flop with a few
    loads), not by ``adv`` (hundreds of loads; `hc_r.at_head` 8.6-9.2 ns at session 43's
    placements): from ``adv`` to ``hc_r`` no cell (``head_check_registers(hold=...)``). The
    on-chip reducer keeps ``adv`` (its RTL pinned): the check's before-case, which the DRAM
    reducer had at 65ac2ac. The copy equals ~adv every cycle (``copy_error``, checked by the
    benches); tests/test_reducer_stage_parts.py::test_decision_effect checks the checks with
    ``hold`` against the model."""
    dram = slot_memory == "dram"
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if dram else {}))
    table = comb_cells_table(dut, ["adv", "hold_t"], ["hc_r"])
    assert (not table["adv", "hc_r"]) == dram and bool(table["hold_t", "hc_r"]) == dram, table


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_wide_equalities_are_carry_chains_with_dram(slot_memory: str) -> None:
    """With the DRAM store the head checks' equalities (``hc_r.at_head``: chunk == each job's head,
    chunk == the forwarded head) and the tag checks' ``cadd`` ((bitmap | bit) == members, per
    tag source) are carry chains (``all_ones``: the carry out of v + 1, an ``$add`` in the cone),
    not AND trees, which abc9 mapped as LUT4 chains (`hc_r.at_head` 9.1-9.2 ns, `ck_pre.cadd`
    9.25 ns at session 44's seeds 2 / 5). The on-chip reducer keeps the compares (its RTL
    pinned): the check's before-case, which the DRAM reducer had at 65ac2ac (no ``$add`` in
    either cone). tests/test_decision.py checks ``all_ones`` and the head checks with it."""
    dram = slot_memory == "dram"
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if dram else {}))
    for src, reg in (("head0", "hc_r"), ("tag_rd__data", "ck_pre")):
        adds, _ = comb_cells_before(dut, src, reg, "$add")
        assert (adds > 0) == dram, (src, reg, adds)


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_gap_builds_no_pair_checks_with_dram(slot_memory: str) -> None:
    """With the DRAM store (the gap) the pin registers' live term is 0 and the pair checks of
    P's next beat against stage 1's (``same_key``, ``pdc_r``, ``pjob_r``: hdl/pin_terms.py) are
    not built (hdl/pin_registers.py ``advance_next(gap=...)``): the term pins the beat taken
    while stage 1 holds a last beat, and with the gap none is (`inputs.m__payload` ->
    `same_key` 8.95 ns, -> `same_key` -> `adv` 8.61 ns at main's seed 5, session 44). Until
    session 44 the DRAM reducer built them, choosing by ``hold_t`` (== ~adv) and the room
    copies (`adv` -> `same_key` was 10.12 ns at main's seed 1 in session 40). The on-chip
    reducer keeps them, ``same_key`` / ``pdc_r`` -> ``adv`` (its RTL pinned): the check's
    before-case. test_pin_advance (gap) checks the term is never needed."""
    dram = slot_memory == "dram"
    dut = _small_reducer(slot_memory)
    wires = set(re.findall(r"^\s*wire .*\\(\S+)$", rtlil.convert(dut), re.M))
    assert (not {"same_key", "pdc_r"} & wires) == dram, sorted(wires & {"same_key", "pdc_r"})
    if not dram:
        table = comb_cells_table(dut, ["same_key", "pdc_r"], ["adv"])
        assert all(table.values()), table


# the held decision's registers (loaded on a decision) and stage 2's (loaded as a beat leaves
# stage 1; ``push``: the command FIFO's registered push, after flattening)
DECIDED_REGS = ("tag_r", "entry_r", "op_r", "push_r", "queued_r", "decide_r")
STAGE2_REGS = ("v2", "last2", "has_cmd", "push")


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_decision_and_stage_two_load_on_copies_of_adv_with_dram(slot_memory: str) -> None:
    """With the DRAM store the held decision's registers (and ``run_slot*_r``) load on
    ``decide_c``, stage 2's on ``move_c`` and the release scans (``clr``: the DRAM reducer's
    register) choose stage 0's or stage 1's beat by ``scan_hold``: flip-flops equal to
    ``v1 & first1 & adv`` / ``v1 & adv`` / ``~adv`` (hdl/pin_registers.py, loaded with ``adv``
    a cycle ahead; ``copy_error`` compares them every cycle), so no cell lies between ``adv``
    and those registers (`adv`, 443 loads, -> ``v1 & adv`` -> ``decide`` -> `tag_r.bitmap` /
    `hdr_c__payload` was 9.35 / 9.00 ns at main's seed 4 in session 43 / seed 2 in session 44).
    The on-chip reducer keeps ``adv`` there (its RTL pinned): the check's before-case (and the
    DRAM reducer's until session 44). test_pin_advance (gap) checks the copies."""
    dram = slot_memory == "dram"
    regs = [*DECIDED_REGS, *STAGE2_REGS, *(["run_slot_r", "run_slot2_r", "clr"] if dram else [])]
    srcs = ["adv", "decide_c", "move_c", "scan_hold"] if dram else ["adv"]
    table = comb_cells_table(_small_reducer(slot_memory), srcs, regs)
    for reg in regs:
        assert (not table["adv", reg]) == dram, (reg, table["adv", reg])
    if dram:
        for reg in regs:
            copy = "move_c" if reg in STAGE2_REGS else "scan_hold" if reg == "clr" else "decide_c"
            assert table[copy, reg] or reg in ("v2", "decide_r"), (reg, copy)


def _select_bits_by(dut: Reducer, wires: list[str]) -> dict[str, int]:
    """For each wire, the bits of the ``$mux`` cells it selects directly (their ``S`` input), summed
    (yosys ``proc; flatten``)."""
    script = "".join(f"select -set m{i} w:{w} %co1 t:$mux %i; tee -q -o m{i}.txt dump @m{i}; "
                     for i, w in enumerate(wires))
    dumps = _yosys_on(dut, script, *[f"m{i}.txt" for i in range(len(wires))])
    got = {}
    for w, dump in zip(wires, dumps, strict=True):
        cells = re.findall(r"cell \$mux \S+\n(.*?)\n\s*end", dump, re.S)
        got[w] = sum(int(re.search(r"parameter \\WIDTH (\d+)", c).group(1)) for c in cells
                     if re.search(rf"connect \\S \\{re.escape(w)}$", c, re.M))
    return got


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_release_scans_select_by_two_copies_with_dram(slot_memory: str) -> None:
    """With the DRAM store the release scans' vectors (the beat's own slot, the slots below its
    start, its region: P's or stage 1's) select by two flip-flop copies of ``~adv``, ``scan_hold``
    for the lower half of the slots and ``scan_hold_hi`` for the upper half
    (hdl/pin_registers.py ``advance_next``, hdl/release_run.py ``release_scans(adv_hi=...)``), so
    neither drives every select: `scan_hold` (49 loads) -> `clr` was 8.76 ns at main db90a43's
    seed 5, 2.7 ns of it its net. Until session 45 (db90a43) ``scan_hold`` selected every bit and
    ``scan_hold_hi`` did not exist: the check's before-case. The on-chip reducer has neither (its
    RTL pinned). test_pin_advance (gap) checks the copy, test_release_scans_... (split) the
    scans with it."""
    dram = slot_memory == "dram"
    got = _select_bits_by(_small_reducer(slot_memory), ["scan_hold", "scan_hold_hi"])
    if dram:
        assert got["scan_hold"] > 0 and got["scan_hold"] == got["scan_hold_hi"], got
    else:
        assert got == {"scan_hold": 0, "scan_hold_hi": 0}, got


@pytest.mark.parametrize("slots", [16, 32])
def test_the_release_scans_select_by_two_copies_above_s16_on_chip(slots: int) -> None:
    """Above ``Reducer.ONCHIP_CUTS_MAX_SLOTS`` (16) the on-chip reducer's release scans select
    their vectors (the beat's own slot, the slots below its start, its region: P's or stage 1's)
    by two flip-flop copies of ``~adv`` as the DRAM reducer's do (session 47, s47e): ``scan_hold``
    for the lower half of the slots, ``scan_hold_hi`` (``load_adv_copy``, selected by itself) for
    the upper half; at the 64 x 256 core's seed 1 `scan_hold` -> the scans -> ``scan_fz2_b_r``
    was 9.29 ns (192 selects on one flip-flop). Until session 47 (3a66ba7) ``scan_hold`` selected
    every bit and ``scan_hold_hi`` did not exist above S 16 on chip: the check's before-case. S 16
    has neither (its RTL pinned, tests/test_default_rtl.py). copy_error compares both with
    ``adv`` every cycle (the random model tests at S 32 / 64, tests/test_reducer.py)."""
    cuts = slots > Reducer.ONCHIP_CUTS_MAX_SLOTS
    got = _select_bits_by(Reducer(64, slots=slots, elements=32, groups=2, jobs=2), ["scan_hold", "scan_hold_hi"])
    if cuts:  # (+ 1: scan_hold_hi also selects its own next value)
        assert got["scan_hold"] > 0 and got["scan_hold"] + 1 == got["scan_hold_hi"], got
    else:
        assert got == {"scan_hold": 0, "scan_hold_hi": 0}, got


def _reg_cone_bits(dut: Reducer, reg: str) -> set[str]:
    """The wires (bit by bit: yosys ``simplemap; splitnets``, e.g. ``hc_r[2]``) in the input cone
    of the 1-bit flip-flop ``reg``'s next value within a cycle."""
    stop = "-$_DFF_P_,$memrd,$memrd_v2"
    (sel,) = _yosys_on(dut, (
        "simplemap; opt_clean; splitnets; "
        f"select -set ff w:{reg} %ci1 t:$_DFF_P_ %i; select -set cone @ff %ci1:+$_DFF_P_[D] %ci*:{stop}; "
        "select -write cone.txt @cone w:* %i"), "cone.txt")
    return {ln.split("/", 1)[1] for ln in sel.split()}


def _reg_cones_bits(dut: Reducer, regs: list[str]) -> list[set[str]]:
    """``_reg_cone_bits`` of each of ``regs``, from one yosys run."""
    stop = "-$_DFF_P_,$memrd,$memrd_v2"
    script = "simplemap; opt_clean; splitnets; " + "".join(
        f"select -set ff{i} w:{reg} %ci1 t:$_DFF_P_ %i; select -set cone{i} @ff{i} %ci1:+$_DFF_P_[D] %ci*:{stop}; "
        f"select -write cone{i}.txt @cone{i} w:* %i; " for i, reg in enumerate(regs))
    sels = _yosys_on(dut, script, *[f"cone{i}.txt" for i in range(len(regs))])
    return [{ln.split("/", 1)[1] for ln in sel.split()} for sel in sels]


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_command_push_reads_no_queued_cone_with_dram(slot_memory: str) -> None:
    """With the DRAM store stage 2's command-FIFO push (``push``, the decision table's ``push_c``)
    takes a first beat's marker term as ``last & resend``, not ``last & queued`` (the same
    function: hdl/decision.py ``push_c_short``), so its input cone holds no ``hc_r.at_head``
    (``hc_r[2]``), ``ck_pre.cadd`` (``ck_pre[6]``), ``cwrite1`` (the chunk completes) or run:
    `hc_r` / `ck_pre` -> the decision -> `queued_r` -> `push` was 8.42-8.60 ns at main db90a43's
    seeds 1 / 4 / 5 (its cone there: 161 wires, now 69). db90a43's DRAM reducer had them: the
    check's before-case, as the on-chip reducer keeps them (its RTL pinned).
    tests/test_decision.py::test_short_push_c_is_the_same_function checks the identity."""
    dram = slot_memory == "dram"
    cone = _reg_cone_bits(_small_reducer(slot_memory), "push")
    queued_only = {"hc_r[2]", "cwrite1"} | ({"ck_pre[6]"} if dram else set())
    assert (not cone & queued_only) == dram, sorted(cone & queued_only)
    assert {"hc_r[0]", "hc_r[1]"} <= cone, sorted(cone)  # (the decision's other inputs are there)


# the registers whose next values read ``adv`` until main 193bd2d (the DRAM reducer), and the copy
# of ``adv`` (hdl/pin_registers.py ``adv_copies``) each selects by since
ADV_READERS = {"adv": "adv_loop", "hold_t": "adv_loop", "decide_c": "adv_dec",
               "move_c": "adv_dec", "scan_hold": "scan_hold", "scan_hold_hi": "scan_hold_hi", "room_c": "adv_room",
               "room_cn": "adv_room", "nlast1": "adv_room", "thit_b0": "adv_thit"}


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_no_next_value_reads_adv_with_dram(slot_memory: str) -> None:
    """With the DRAM store no register of stage 1's advance loop reads ``adv``'s own net (its
    hundreds of clock enables): ``adv``, ``hold_t`` (and ``pin_r``) select by ``adv_loop``,
    ``decide_c`` / ``move_c`` by ``adv_dec``, ``scan_hold`` / ``scan_hold_hi`` by themselves,
    the room registers and ``nlast1`` (through ``take``) by ``adv_room``, the tag checks'
    ``thit_w0`` / ``thit_b0`` (through P's load) by ``adv_thit``: flip-flops equal to ``adv``
    every cycle, each selecting its own next value (hdl/pin_registers.py ``load_adv_copy``;
    ``copy_error`` compares them). `adv` -> a 4.89 ns route -> `room_c`'s LUT -> ... -> `adv`
    was 9.57 ns at main 193bd2d's seed 3 (`decide_c` 9.51, `room_cn` 9.37, `scan_hold` 9.32,
    `scan_hold_hi` 9.31, `thit_b0` 8.88, `room_c` 8.81 from `adv` the same way). At 193bd2d
    ``adv`` was in every one of these cones: the check's before-case, as on chip (RTL pinned).
    test_pin_advance (gap) checks the copies' values."""
    dram = slot_memory == "dram"
    regs = list(ADV_READERS) if dram else ["adv", "hold_t", "room_c", "thit_b0"]
    for reg, cone in zip(regs, _reg_cones_bits(_small_reducer(slot_memory), regs), strict=True):
        assert cone and ("adv" in cone) != dram, (reg, sorted(cone))
        if dram:
            assert ADV_READERS[reg] in cone, (reg, sorted(cone))


def test_the_result_gate_reads_no_error_within_a_cycle_with_dram() -> None:
    """With the DRAM store the result gate's drop is a flip-flop (``drop_r``): `mem_error` -> the
    gate's drop -> the egress merger's select -> `core.s_msg__payload` / `egress.header` was the
    Versa DRAM build's core path (9.22 ns at session 37's seed 3). Neither the gate's output
    valid nor its input ready reads the error, the message's state or the decision's mux within
    a cycle (before: `error`, `inside`, `held`). Exact as the gate's docstring says: the flag
    rises a cycle after an R beat, and no R beat reaches the gate's input in fewer than two
    cycles (so a message depending on it is decided on the flag already up). Since session 45
    the gate's output valid is one flip-flop (``valid_r``, ``ResultGate(valid_reg=True)``): not
    the AND of the assembler's output valid and ``drop_r`` (`gate.drop_r` -> `out.m__valid` ->
    the egress merger's select -> the assembler's output register enables, 8.82 ns at session
    44's seed 4); ``copy_error`` compares it with that AND every cycle."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory="dram", outstanding=8, index_bits=3)
    sources, _ = comb_cone(dut, "m_msg__valid")
    assert sources == {"gate.valid_r"}, sorted(sources)
    for wire, allowed in (("gate.s__ready", {"drop_r", "m_msg__ready"}),):
        sources, _ = comb_cone(dut, wire)
        gate_srcs = {s for s in sources if s.startswith("gate.")} | (sources & {"drop_r", "m_msg__ready"})
        assert not sources & {"gate.error", "gate.inside", "gate.held", "store.mem_error"}, (wire, sorted(sources))
        assert "gate.drop_r" in sources and gate_srcs <= {f"gate.{a}" for a in allowed} | allowed, (wire, gate_srcs)
    r_beat = [f"m_axi_mem_r{x}" for x in ("valid", "data", "resp", "last", "id")]
    assert min_flops_between(dut, r_beat, ["mem_error"]) == 1
    assert min_flops_between(dut, r_beat, ["gate.s__valid", "gate.s__payload", "m_msg__valid"]) >= 2


@pytest.mark.parametrize(("late_error", "valid_reg"), [(False, False), (True, False), (True, True)])
def test_result_gate_drops_whole_messages_on_the_error_at_their_first_beat(late_error: bool,
                                                                            valid_reg: bool) -> None:
    """``ResultGate`` against a reference, random messages, valid, ready and ``error`` (not
    sticky, to reach every case): a message is dropped whole iff ``error`` was set at its first
    beat's take (``late_error``: in the cycle before it), its beats passed untouched otherwise;
    ``sent`` / ``withheld`` strobe once per message, at its first beat. ``valid_reg``: the same,
    ``m.valid`` a flip-flop from ``s_valid_next`` (the next cycle's offer), ``copy_error`` never."""
    dut = ResultGate(64, late_error=late_error, valid_reg=valid_reg)
    rng = random.Random(16 + late_error)
    msgs = [[(rng.getrandbits(64), b == 0, b == n - 1) for b in range(n)]
            for n in (rng.randint(1, 4) for _ in range(150))]
    beats = [b for msg in msgs for b in msg]

    async def tb(ctx) -> None:
        i, err_before, drop, out, want, strobes = 0, 0, 0, [], [], []
        offer = False  # (after reset nothing is offered: s.valid is a flip-flop's with valid_reg)
        while i < len(beats):
            offer_next, ready, err = rng.random() < 0.7, rng.random() < 0.6, int(rng.random() < 0.3)
            if not valid_reg:
                offer = offer_next
            data, first, last = beats[i]
            if valid_reg:
                ctx.set(dut.s_valid_next, offer_next)
            ctx.set(dut.s.valid, offer)
            ctx.set(dut.s.payload.data, data)
            ctx.set(dut.s.payload.first, first)
            ctx.set(dut.s.payload.last, last)
            ctx.set(dut.m.ready, ready)
            ctx.set(dut.error, err)
            if first:
                drop = err_before if late_error else err
            assert ctx.get(dut.m.valid) == (offer and not drop)
            assert ctx.get(dut.s.ready) == (ready or drop)
            take = offer and (ready or drop)
            strobes.append((ctx.get(dut.sent), ctx.get(dut.withheld)))
            assert strobes[-1] == ((take and first and not drop), (take and first and drop))
            if take:
                if not drop:
                    want.append(data)
                i += 1
            if ctx.get(dut.m.valid) and ready:
                out.append(ctx.get(dut.m.payload.data))
            if valid_reg:
                assert not ctx.get(dut.copy_error)
                offer = offer_next
            err_before = err
            await ctx.tick()
        assert out == want and sum(s for s, _ in strobes) + sum(w for _, w in strobes) == len(msgs)
        assert 0 < sum(w for _, w in strobes) < len(msgs)

    run_testbench(dut, tb)


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_live_checks_are_one_register_with_dram(slot_memory: str) -> None:
    """With the DRAM store the decision's live case reads ``ck_live`` as a register (loaded on
    ``adv`` with the checks of what ``hcw1`` / ``bmck1`` / ``sel_a1`` / the live tag's state load:
    hdl/stage1_tag_checks.py ``live_reg``), so no cell stands between the header compares'
    register ``hcw1`` and the decision's registers (`hcw1.job_eq` -> ``same`` -> the decision
    -> `push` was 10.05 ns at session 40's seed 3). The on-chip reducer (its RTL pinned) keeps the
    AND of ``hcw1``'s flags in front of the decision: the check's before-case. ``copy_error``
    compares the decision's checks with ``ck_x`` (built from ``hcw1``) at every decision."""
    dram = slot_memory == "dram"
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                  **({"outstanding": 8, "index_bits": 3} if dram else {}))
    regs = ["queued_r", "op_r", "push_r"]
    table = comb_cells_table(dut, ["hcw1", "sel_a1"], regs)
    for reg in regs:
        for src in ("hcw1", "sel_a1"):
            assert (not table[src, reg]) == dram, (src, reg, table)


# the flip-flops that carry the decision in between into stage 1's decision (the live checks'
# select, the previous decision's effect and its inverted copy, which picks the release run)
IN_BETWEEN = ("thit_h", "fx_c", "fx_s", "fxw_sn")
# the decision loop's registers: the command FIFO's registered push (``push`` after flattening),
# the release entry and whether it goes to the emitter, the data op, fx_c / fx_s and their
# copies, the tag write's copy (tw_vn_l), stage 1's advance
LOOP_ENDS = ("push", "queued_r", "push_r", "op_r", "fx_c", "fxw_cn", "fx_s", "fxw_sn", "tw_vn_l", "adv")


def _small_reducer(slot_memory: str) -> Reducer:
    dram = slot_memory == "dram"
    return Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                   **({"outstanding": 8, "index_bits": 3} if dram else {}))


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
def test_no_decision_in_between_with_dram(slot_memory: str) -> None:
    """With the DRAM store no first beat enters stage 1 the cycle after a last beat left it (the
    gap, docs/reducer.md "No decision in between"), so stage 1 corrects for no decision or tag
    write in between: no cell lies between ``thit_h`` / ``fx_c`` / ``fx_s`` / ``fxw_sn`` and
    the decision loop's registers or ``adv`` (the loop `ck_pre` / `thit_*` -> the decision ->
    `push` / `queued_r` / `fxw_sn` / `adv` was the Versa DRAM build's worst family, 8.5-10.2 ns,
    sessions 38-41). The on-chip reducer (its RTL pinned) keeps them: the before-case, which the
    DRAM reducer had before the cut."""
    table = comb_cells_table(_small_reducer(slot_memory), list(IN_BETWEEN), list(LOOP_ENDS))
    if slot_memory == "dram":
        assert not any(table.values()), {k: v for k, v in table.items() if v}
    else:
        for src, reg in (("thit_h", "push"), ("fx_c", "push_r"), ("fx_s", "queued_r"), ("fxw_sn", "queued_r"),
                         ("fxw_sn", "adv")):
            assert table[src, reg], (src, reg, table)


def _decision_cycles(slot_memory: str, counts: list[int], idle: list[int]) -> tuple[list[int], list[int]]:
    """The cycles each message's first beat was accepted on ``s_msg`` and of the reducer's
    outcome strobes (each two cycles after its message's first beat was decided in stage 1),
    for messages of ``counts`` elements (W 64: two per beat), each offered ``idle`` cycles
    after the last beat before it was accepted. Every message is unconfigured (group 0 has no
    members; all for chunk 0, sender k: no other chunk on the slot to pin), so none reaches the
    slot store (the DRAM port idles) and nothing pins; ``copy_error`` (with the gap: no
    decision in between at a first beat) and ``adv`` are checked every cycle."""
    dut = _small_reducer(slot_memory)
    pk = Packer(64)
    seq = []
    for k, (count, gap) in enumerate(zip(counts, idle, strict=True)):
        nb = payload_beats(count, 64)
        seq += [None] * gap + [pk.pack(_msg(0, 0, 0, 0, k, 0, count, range(count)), b, nb) for b in range(nb)]
    accepts: list[int] = []
    cycles: list[int] = []
    pinned: list[int] = []

    async def tb(ctx):
        await ctx.tick().repeat(2)
        pos = cyc = 0
        while pos < len(seq) or cyc < 40 + len(seq):
            item = seq[pos] if pos < len(seq) else None
            ctx.set(dut.s_msg.valid, item is not None)
            if item is not None:
                ctx.set(dut.s_msg.payload.as_value(), item)
            ctx.set(dut.m_msg.ready, 1)
            if item is not None and ctx.get(dut.s_msg.ready) and ctx.get(dut.s_msg.payload.first):
                accepts.append(cyc)
            if pos < len(seq) and (item is None or ctx.get(dut.s_msg.ready)):
                pos += 1
            assert not ctx.get(dut.copy_error)
            assert ctx.get(dut.advance) == 1 - ctx.get(dut.stall_pinned)
            if ctx.get(dut.stall_pinned):
                pinned.append(cyc)
            if ctx.get(dut.outcome):
                assert Outcome(ctx.get(dut.outcome_code)) == Outcome.REJECT_UNCONFIGURED
                cycles.append(cyc)
            await ctx.tick()
            cyc += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    assert len(cycles) == len(accepts) == len(counts)
    assert not pinned
    return accepts, cycles


def test_the_gap_follows_each_last_beat_with_dram() -> None:
    """With the DRAM store a message's first beat is decided at the earliest two cycles after
    the last beat of the message before it entered stage 1 (one cycle, a bubble, later than on
    chip), and only then: a first beat that reaches stage P later anyway (idle input cycles)
    costs nothing, and a message's own beats follow one per cycle (docs/reducer.md, "No
    decision in between"). The on-chip reducer decides back to back (the before-case, which
    the DRAM reducer had before the cut): each first beat a fixed latency after it was
    accepted; the DRAM reducer then or one cycle after the previous message's beats, whichever
    is later."""
    # one-beat messages back to back (a decision in every cycle on chip), then 3- and 2-beat
    # ones, then idle input cycles between messages (1, 2, 0, 3)
    counts = [2, 1, 2, 5, 6, 3, 1, 2, 4, 2, 1, 8, 2, 2]
    idle = [0, 0, 0, 0, 0, 0, 1, 2, 0, 3, 1, 0, 4, 0]
    beats = [payload_beats(c, 64) for c in counts]
    (acc_c, on_chip), (acc_d, dram) = (_decision_cycles(sm, counts, idle) for sm in ("onchip", "dram"))
    lat = on_chip[0] - acc_c[0]
    assert [d - a for a, d in zip(acc_c, on_chip, strict=True)] == [lat] * len(counts)
    assert [b - a for a, b in zip(on_chip, on_chip[1:], strict=False)] == [
        n + i for n, i in zip(beats, idle[1:], strict=False)]  # the input's pace
    expect = [acc_d[0] + lat]
    for k in range(1, len(counts)):
        expect.append(max(expect[-1] + beats[k - 1] + 1, acc_d[k] + lat))
    assert dram == expect
    # the gap cost a cycle after some messages and none after others (idle input cycles)
    steps = [b - a - n for a, b, n in zip(dram, dram[1:], beats, strict=False)]
    assert 1 in steps and any(x > 1 for x in steps), steps


@pytest.mark.parametrize("slots", [16, 32])
def test_the_dram_cuts_apart_from_the_store_above_s16_on_chip(slots: int) -> None:
    """Above ``Reducer.ONCHIP_CUTS_MAX_SLOTS`` (16) the on-chip reducer (vector pending) takes
    three of the DRAM reducer's cuts that do not depend on the DRAM store (session 45, s45e; at
    S x E = 64 x 256, seed 1: `tag_mem` -> ``ck_pre.mismatch`` / ``cadd`` 9.83-9.94 ns, `adv` ->
    ``scan_fz2_b_r`` / ``scan_clr2_b_r`` 9.61-9.62 ns, `hcw1.back` -> ``ck_live`` -> ``fxw_cn``
    8.52 ns): the tag checks' wide compares as carry chains (an ``$add`` between the tag read
    and ``ck_pre``), the live checks one register (no cell between ``hcw1`` / ``sel_a1`` and the
    decision's registers) and the release scans' select from ``scan_hold``, a copy of ~adv (no
    cell between ``adv`` and the scan registers; copy_error checks the copy every cycle). S 16
    keeps its RTL (pinned, tests/test_default_rtl.py): the check's before-case, and db90a43's
    at S 32."""
    cuts = slots > Reducer.ONCHIP_CUTS_MAX_SLOTS
    dut = Reducer(64, slots=slots, elements=32, groups=2, jobs=2)
    adds, _ = comb_cells_before(dut, "tag_rd__data", "ck_pre", "$add")
    assert (adds > 0) == cuts, adds
    scans = ["scan_fz2_a_r", "scan_clr2_a_r", "scan_fz2_b_r", "scan_clr2_b_r"] if cuts else ["fz_b", "clr_b"]
    dec = ["queued_r", "op_r", "push_r"]
    table = comb_cells_table(dut, ["adv", "hcw1", "sel_a1", *(["scan_hold"] if cuts else [])], [*scans, *dec])
    for reg in scans:
        assert (not table["adv", reg]) == cuts, (reg, table["adv", reg])
        assert not cuts or table["scan_hold", reg], reg
    for reg in dec:
        for src in ("hcw1", "sel_a1"):
            assert (not table[src, reg]) == cuts, (src, reg, table[src, reg])


def _wide_cells(dut: Reducer) -> tuple[list[str], list[str]]:
    """(the ``$add`` cells of 16+ bits on paths from ``fx_run`` to ``hc_r``'s next value; the
    ``$eq`` / ``$ne`` / ``$reduce_bool`` / ``$reduce_or`` cells of 32+ input bits in ``ck_pre``'s
    input cone), within a cycle (yosys ``proc; flatten``)."""
    stop = "-$dff,$memrd,$memrd_v2"
    add_t, eq_t = _yosys_on(dut, (
        f"select -set fwd w:fx_run %co*:{stop}; "
        f"select -set bwd w:hc_r %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:{stop}; "
        "select -write add.txt @fwd @bwd %i t:$add %i r:Y_WIDTH>=16 %i; "
        f"select -set bk w:ck_pre %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:{stop}; "
        "select -write eq.txt @bk t:$eq t:$ne %u t:$reduce_bool %u t:$reduce_or %u %i r:A_WIDTH>=32 %i"),
        "add.txt", "eq.txt")
    return add_t.split(), eq_t.split()


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_forwarded_head_and_the_tag_chunk_compares_leave_the_run_and_the_trees_with_dram(slot_memory: str) -> None:
    """Session 46, DRAM: (1) the head checks' forwarded equality (``hc_r.at_head``: chunk ==
    fx_cp1 + fx_run) is ``eq_hn_split`` (hdl/head_check.py): the run only in a sum of the low
    bits, the upper bits compared with fx_cp1's and ``fx_hi1`` (== fx_cp1[sb:] + 1, a register;
    copy_error checks it) by carry chains off flip-flops, so no wide ``$add`` lies between
    ``fx_run`` and ``hc_r`` (193bd2d's ``eq_hn(carry=True)``: the run's bits in front of a 33-bit
    chain, `fx_run` -> `hc_r.at_head` 8.0-9.0 ns at 27983de's seeds 1-5); (2) the tag checks'
    chunk equality (``same``, ``older``) and ``dup`` are carry chains (``tag_checks_carry``), no
    32-bit ``$eq`` / ``$ne`` in ``ck_pre``'s cone (abc9's LUT4 chains: P's payload ->
    `ck_pre.older` 8.31 ns at seed 5). The on-chip reducer has neither chain (its RTL pinned):
    no ``$add`` there either way, the compares kept (the before-case of (2)); 193bd2d's DRAM
    reducer had both. tests/test_decision.py::test_head_check_against_the_twin (split_eq) and
    tests/test_reducer_stage_parts.py check the values."""
    dram = slot_memory == "dram"
    adds, eqs = _wide_cells(_small_reducer(slot_memory))
    assert not adds, adds
    assert (not eqs) == dram, eqs
    if dram:
        wires = set(re.findall(r"^\s*wire .*\\(\S+)$", rtlil.convert(_small_reducer(slot_memory)), re.M))
        assert "fx_hi1" in wires


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_emitter_start_flags_read_no_header_fifo_pointer_with_dram(slot_memory: str) -> None:
    """With the DRAM store the header room the emitter's start flags read a cycle ahead
    (``hdr_e_room_next``) comes from the assembler's own count of ``hdr_e`` (``hdr_e_room2`` /
    ``hdr_e_room1``, hdl/result_assembler.py): no cell between ``hdr_e``'s pointers and
    ``s_ok`` / ``i_ok`` / ``sq_ok`` / ``sq_pn`` / ``sr_ok`` (`assembler.hdr_e.consume` -> the
    level compare's carry chain -> `emitter.s_ok` -> ... -> `emitter.sq_pn`, 8.24 ns at session
    47's landing seed 2). c0aeba1's DRAM reducer read the pointers there: the check's
    before-case, as the on-chip reducer (its RTL pinned) reads ``hdr_e.level`` (a SyncFIFO's).
    And a start from the rest loads ``rest_nslot`` with each job's slot of the rest's chunk + 2,
    ``rest_job`` choosing after the adders (``ResultEmitter(nslot_per_job)``): no window compare
    or adder between ``rest_job`` and ``rest_nslot`` (7.91-8.00 ns at cbcf8ab's seed 4 and the
    landing's seed 2); c0aeba1 and the on-chip reducer select the job's configuration first."""
    dram = slot_memory == "dram"
    srcs = ["assembler.hdr_e.produce", "assembler.hdr_e.consume"] if dram else ["assembler.hdr_e.level"]
    flags = ["emitter.s_ok", "emitter.i_ok", *(["emitter.sq_ok", "emitter.sq_pn", "emitter.sr_ok"] if dram else [])]
    table = comb_cells_table(_small_reducer(slot_memory), [*srcs, "emitter.rest_job"], [*flags, "emitter.rest_nslot"])
    for src in srcs:
        for reg in flags:
            assert (not table[src, reg]) == dram, (src, reg, table[src, reg])
    cells = table["emitter.rest_job", "emitter.rest_nslot"]
    assert cells and (not (cells["$add"] + cells["$gt"])) == dram, cells


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_head_equalities_are_two_chains_a_beat_off_registered_operands_with_dram(slot_memory: str) -> None:
    """Session 48, DRAM (s48d): ``hc_r.at_head`` (chunk == the head as it will be) is two carry
    chains per beat (``all_ones``: 32-bit ``$add`` cells of ``v + 1``), not four: the own head's
    one chain against the head the job selects (two jobs: the job bit and both heads' bits in
    each bit's XNOR LUT4), the forwarded head's one chain against Cat(fx_lo[:sb], fx_lo[sb] ?
    fx_hi1 : fx_cp1[sb:]) (``eq_hn_reg``: ``fx_lo`` == fx_cp1[:sb] + fx_run, a register loaded
    with them, copy_error checks it), so no ``$add`` at all lies between ``fx_run`` and ``hc_r``
    (c0aeba1: one chain per job chosen after the chains, `head` -> `hc_r.at_head` 8.23 ns at main's
    seed 2, and ``eq_hn_split``'s two upper chains behind its low sum of the run: 8 chains of 16+
    bits, a 3-bit ``$add`` from ``fx_run``; this test fails there). The on-chip reducer (its RTL
    pinned) has no chain there (its compares are ``$eq``) either way.
    tests/test_decision.py::test_head_check_against_the_twin (reg_lo) checks the values."""
    dram = slot_memory == "dram"
    stop = "-$dff,$memrd,$memrd_v2"
    wide_t, run_t = _yosys_on(_small_reducer(slot_memory), (
        f"select -set bwd w:hc_r %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:{stop}; "
        "select -write wide.txt @bwd t:$add %i r:Y_WIDTH>=16 %i; "
        f"select -set fwd w:fx_run %co*:{stop}; "
        "select -write run.txt @fwd @bwd %i t:$add %i"), "wide.txt", "run.txt")
    assert len(wide_t.split()) == (4 if dram else 0), wide_t
    assert not run_t.split(), run_t
