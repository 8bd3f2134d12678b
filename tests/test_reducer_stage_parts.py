"""Unit tests of the stage parts of ``Reducer.elaborate`` built inline (issue 16 item 6, session
32; docs/reducer.md, "Parts built inline"): stage 1's registers, the tag memory's write path, the
decision's effect on the pending bits and the heads, pinning and stage 1's advance. Each against a
small cycle model of what it stands for; the reducer calls them as functions so its RTLIL (pinned
by tests/test_default_rtl.py) is unchanged."""

from __future__ import annotations

import random

import pytest
from stream_helpers import run_testbench

from wanreduce.hdl.decision_effect import DecisionEffect
from wanreduce.hdl.pin_registers import PinAdvance
from wanreduce.hdl.reducer_layouts import ACTIVE, DONE, FREE, slot_tag_layout
from wanreduce.hdl.stage1_registers import StageOneRegisters
from wanreduce.hdl.tag_memory import TagWrite

M32 = (1 << 32) - 1


@pytest.mark.parametrize(("width", "slots", "elements", "vectors", "run_table"),
                         [(64, 16, 24, True, True), (256, 4, 8, True, False), (64, 64, 16, False, False)])
def test_stage_one_registers(width: int, slots: int, elements: int, vectors: bool, run_table: bool) -> None:
    """``stage1_registers`` / ``load_stage1`` (hdl/stage1_registers.py) against a cycle model:
    stage 1 loads stage P's beat only while it moves (``adv``; ``v1`` is ``take``), holds it
    otherwise; the distance table is (i - start) mod window; ``delta1`` / ``deltaw1`` are the
    beat's chunk / chunk - window against the *previous* beat's chunk + 1 (the register being
    overwritten), and ``d_hz1`` / ``dw_hz1`` say their bits sb..30 are zero."""
    dut = StageOneRegisters(width, slots=slots, elements=elements, vectors=vectors, run_table=run_table)
    rng = random.Random(width + slots + vectors)
    sb = (slots - 1).bit_length()
    p_fields = ["idx", "slot", "start", "wmask", "members", "bit", "unconf", "nonmem", "cwrite", "chunk_p1", "cw",
                "nbm1", *(["region", "oh", "lm"] if vectors else [])]
    reg: dict[str, int] = {"v1": 0, "chunk_p1": 0}
    loads = holds = 0
    seen_hz: set[tuple[int, int]] = set()
    seen_d31: set[int] = set()  # delta1's bit 31 when its bits sb..30 are zero

    async def tb(ctx) -> None:
        nonlocal loads, holds, reg
        for _ in range(300):
            p = {k: rng.getrandbits(len(getattr(dut.p, k))) for k in p_fields}
            p["wmask"] = (1 << rng.randint(0, sb)) - 1
            chunk = rng.getrandbits(32)
            # chunks near the last one decided, so the deltas' high bits are zero now and then
            if rng.random() < 0.5:  # (also half the sequence space away: bit 31 alone set)
                chunk = (reg["chunk_p1"] + rng.choice([0, 1 << 31]) + rng.randint(-4, 2 * slots)) & M32
            cw = (chunk - rng.choice([1, 2, 4, 1 << sb])) & M32 if rng.random() < 0.5 else rng.getrandbits(32)
            p["cw"] = cw
            hdr_chunk, first, last = chunk, rng.getrandbits(1), rng.getrandbits(1)
            d = rng.getrandbits(width)
            take, adv = rng.getrandbits(1), int(rng.random() < 0.7)
            for k, v in p.items():
                ctx.set(getattr(dut.p, k), v)
            ctx.set(dut.p.beat.hdr.chunk, hdr_chunk)
            ctx.set(dut.p.beat.hdr.job_id, rng.getrandbits(8))
            ctx.set(dut.p.beat.first, first)
            ctx.set(dut.p.beat.last, last)
            ctx.set(dut.p.beat.data, d)
            ctx.set(dut.take, take)
            ctx.set(dut.adv, adv)
            await ctx.tick()
            if adv:
                loads += 1
                delta = (hdr_chunk - reg["chunk_p1"]) & M32
                deltaw = (cw - reg["chunk_p1"]) & M32
                hz = lambda v: int((v >> sb) & ((1 << (31 - sb)) - 1) == 0)  # noqa: E731
                reg = {"v1": take, "first1": first, "last1": last, "d1": d, "idx1": p["idx"], "slot1": p["slot"],
                       "start1": p["start"], "bit1": p["bit"], "unconf1": p["unconf"], "nonmem1": p["nonmem"],
                       "cwrite1": p["cwrite"], "wmask": p["wmask"], "chunk_p1": p["chunk_p1"], "cw1": cw,
                       "delta1": delta, "deltaw1": deltaw, "d_hz1": hz(delta), "dw_hz1": hz(deltaw),
                       "nbm1_1": p["nbm1"], "chunk": hdr_chunk}
                if vectors:
                    reg |= {"oh1": p["oh"], "lm1": p["lm"], "region1": p["region"]}
                if run_table:
                    reg["dist_tab"] = [(i - p["start"]) & p["wmask"] for i in range(slots)]
                seen_hz.add((reg["d_hz1"], reg["dw_hz1"]))
                if reg["d_hz1"]:
                    seen_d31.add(delta >> 31)
            else:
                holds += 1
            got = ctx.get(dut.stage1)
            if "first1" in reg:
                want = {k: v for k, v in reg.items() if k not in ("chunk", "dist_tab")}
                assert {k: getattr(got, k) for k in want} == want, (adv, take)
                assert got.h1.chunk == reg["chunk"]
                if run_table:
                    assert [got.dist_tab[i] for i in range(slots)] == reg["dist_tab"]
            else:
                assert got.v1 == 0

    run_testbench(dut, tb)
    assert loads > 100 and holds > 50
    assert {(0, 0), (1, 1)} <= seen_hz
    assert seen_d31 == {0, 1}


@pytest.mark.parametrize(("slots", "jobs"), [(16, 2), (4, 1), (512, 4)])
def test_tag_write(slots: int, jobs: int) -> None:
    """``tag_memory`` / ``tag_write_register`` / ``tag_write_select`` (hdl/tag_memory.py) against a
    cycle model: a reset writes FREE (the other fields of ``tag_c`` kept) at its slot, else a last
    beat leaving stage 1 with a data op writes ``tag_c`` at ``slot1``, nothing else writes;
    ``tw_hit0`` is the request at stage 0's slot; the request is registered (``tw_v``, ``tw_a``) and
    written into the memory a cycle later, ``tb_data`` holds the last tag written, and the memory
    read back (not transparent) has every write."""
    dut = TagWrite(slots=slots, jobs=jobs)
    rng = random.Random(slots + jobs)
    layout = slot_tag_layout(jobs)
    st = layout["state"]
    st_mask = ((1 << st.width) - 1) << st.offset
    tag_bits = layout.size
    mem = [0] * slots
    pend = {"v": 0, "a": 0, "d": 0}
    tb_data = 0
    kinds: set[str] = set()
    written: set[int] = set()  # the states written into the memory

    async def tb(ctx) -> None:
        nonlocal tb_data, pend
        for _ in range(500):
            slot1 = rng.randrange(slots)
            r = {"clear": int(rng.random() < 0.2), "clear_slot": rng.randrange(slots), "v1": int(rng.random() < 0.8),
                 "adv": int(rng.random() < 0.8), "last1": rng.getrandbits(1), "op_c_nz": rng.getrandbits(1),
                 "slot1": slot1, "slot0": rng.choice([slot1, rng.randrange(slots)])}
            tag = (rng.getrandbits(tag_bits) & ~st_mask) | (rng.choice([ACTIVE, DONE]) << st.offset)
            rd_addr = rng.choice([pend["a"], rng.randrange(slots)])
            ctx.set(dut.req, r)
            ctx.set(dut.tag_c.as_value(), tag)
            ctx.set(dut.rd_addr, rd_addr)
            leave = r["v1"] & r["adv"] & r["last1"] & r["op_c_nz"]
            en = r["clear"] | leave
            addr = r["clear_slot"] if r["clear"] else r["slot1"]
            data = (tag & ~st_mask) | (FREE << st.offset) if r["clear"] else tag
            await ctx.delay(1e-9)
            assert (ctx.get(dut.tw_en), ctx.get(dut.tw_addr)) == (en, addr), r
            assert ctx.get(dut.tw_hit0) == int(en and addr == r["slot0"]), r
            kinds.add("reset" if r["clear"] else "write" if leave else "none")
            await ctx.tick()
            rd = mem[rd_addr]
            if pend["v"]:
                mem[pend["a"]] = pend["d"]
                written.add((pend["d"] >> st.offset) & ((1 << st.width) - 1))
                tb_data = pend["d"]
            pend = {"v": en, "a": addr, "d": data}
            assert (ctx.get(dut.tw_v), ctx.get(dut.tw_a)) == (en, addr)
            assert ctx.get(dut.tb_data.as_value()) == tb_data
            assert ctx.get(dut.rd_data.as_value()) == rd, rd_addr

    run_testbench(dut, tb)
    assert kinds == {"reset", "write", "none"}
    assert written == {FREE, ACTIVE, DONE}


def _head_flags(chunk: int, cw: int, head: int) -> tuple[int, int, int]:
    """HeadChecks' (late, below_end, at_head) of a chunk against a head (mod 2**32 signs)."""
    return (int((chunk - head) & M32 >= 1 << 31), int((cw - head) & M32 >= 1 << 31), int(chunk == head))


@pytest.mark.parametrize(("slots", "jobs", "hold_copy", "dram"),
                         [(16, 2, False, False), (4, 1, False, False), (64, 4, False, False), (16, 2, True, False),
                          (4, 1, True, False), (16, 2, True, True), (4, 1, True, True), (64, 4, True, True)])
def test_decision_effect(slots: int, jobs: int, hold_copy: bool, dram: bool) -> None:
    """``effect_registers`` ... ``update_heads`` (hdl/decision_effect.py) against a cycle model:
    an in-order decision's effect is registered (``fx_c`` / ``fx_s``, their inverted copies, job,
    run, chunk + 1, the run's slots and its own) and applied a cycle later: ``pend_eff`` clears the
    run's bits or sets the slot's, the job's head (only its) becomes chunk + 1 + run; the head
    checks registered a cycle ahead (``hc``) equal the checks against the heads as they are in
    the cycle they are used, for the beat stage 1 then holds; ``run_lt`` / ``run_ltw`` /
    ``run_eq`` compare that beat's delta low bits with the run. ``hold_copy``: the head checks
    chosen by ``hold`` (driven ``~adv``, as the DRAM reducer's ``hold_t``) instead of ``adv``.
    ``dram``: the DRAM reducer's head checks (every job's compares, the equalities as carry
    chains, the forwarded one from ``fx_hi1`` and, since session 48, ``fx_lo``; with two jobs
    the own head's equality against the head the job selects) the same."""
    dut = DecisionEffect(slots=slots, jobs=jobs, hold_copy=hold_copy, dram=dram)
    rng = random.Random(slots * 3 + jobs)
    sb = (slots - 1).bit_length()
    heads = [0] * jobs
    fx: dict[str, int] | None = None
    hc_want: tuple[int, int, int] | None = None
    moved = forwarded = 0

    async def tb(ctx) -> None:
        nonlocal fx, hc_want, moved, forwarded
        for _ in range(400):
            i = {"decide": int(rng.random() < 0.6), "in_order": int(rng.random() < 0.8), "fxc_n": rng.getrandbits(1),
                 "fxs_n": rng.getrandbits(1), "job": rng.randrange(jobs), "run": rng.randrange(slots),
                 "chunk_p1": rng.choice([heads[rng.randrange(jobs)] + rng.randint(1, 3), rng.getrandbits(32)]) & M32,
                 "clr": rng.getrandbits(slots), "oh1": 1 << rng.randrange(slots), "adv": rng.getrandbits(1),
                 "delta_n": rng.getrandbits(32), "delta1": rng.getrandbits(32), "deltaw_n": rng.getrandbits(32),
                 "deltaw1": rng.getrandbits(32), "pending": rng.getrandbits(slots)}
            beats = []
            for _b in range(2):
                job = rng.randrange(jobs)
                base = heads[job] if fx is None or not fx["c"] or fx["job"] != job else fx["hn"]
                chunk = (base + rng.choice([-1, 0, 0, 1, 2, rng.getrandbits(32)])) & M32
                beats.append({"job": job, "chunk": chunk, "cw": (chunk - (1 << rng.randint(0, 4))) & M32})
            for k, v in i.items():
                ctx.set(getattr(dut, k), v)
            if hold_copy:
                ctx.set(dut.hold, 1 - i["adv"])
            ctx.set(dut.beat0, beats[0])
            ctx.set(dut.beat1, beats[1])
            await ctx.delay(1e-9)
            if fx is not None:  # the effect of the last cycle's decision, now
                want = i["pending"]
                if fx["c"]:
                    want &= ~fx["clr"]
                if fx["s"]:
                    want |= fx["oh1"]
                assert ctx.get(dut.pend_eff) == want & ((1 << slots) - 1)
                got = ctx.get(dut.fx)
                assert (got.fx_c, got.fx_s, got.fxw_cn, got.fxw_sn) == (fx["c"], fx["s"], 1 - fx["c"], 1 - fx["s"])
                assert (got.fx_job, got.fx_run, got.fx_hn) == (fx["job"], fx["run"], fx["hn"])
                d, dw, lo = fx["d"], fx["dw"], (1 << sb) - 1
                assert (got.run_lt, got.run_ltw, got.run_eq) == (int(d & lo < fx["run"]), int(dw & lo < fx["run"]),
                                                                 int(d & lo == fx["run"]))
            if hc_want is not None:  # checks registered last cycle, against the heads now
                hc = ctx.get(dut.hc)
                assert (hc.late, hc.below_end, hc.at_head) == hc_want
            # the heads move by the registered effect
            if fx is not None and fx["c"]:
                if heads[fx["job"]] != fx["hn"]:
                    moved += 1
                heads[fx["job"]] = fx["hn"]
            b = beats[0] if i["adv"] else beats[1]
            hc_want = _head_flags(b["chunk"], b["cw"], heads[b["job"]])
            if fx is not None and fx["c"] and fx["job"] == b["job"]:
                forwarded += 1
            go = i["decide"] & i["in_order"]
            fx = {"c": go & i["fxc_n"], "s": go & i["fxs_n"], "job": i["job"], "run": i["run"],
                  "hn": (i["chunk_p1"] + i["run"]) & M32, "clr": i["clr"], "oh1": i["oh1"],
                  "d": i["delta_n"] if i["adv"] else i["delta1"], "dw": i["deltaw_n"] if i["adv"] else i["deltaw1"]}
            await ctx.tick()
            assert [ctx.get(dut.heads[j]) for j in range(jobs)] == heads

    run_testbench(dut, tb)
    assert moved > 20 and forwarded > 20


def _entry_holds(b: dict, entry: dict, push_now: int, lo: int) -> int:
    """Stage 2's pushed entry holds beat ``b``'s slot: same job, its chunk 0..more ahead (mod the
    beat's window)."""
    return int(push_now and entry["job"] == b["job"] and ((b["chunk"] - entry["chunk"]) & lo & b["wm"]) <= entry["more"])


@pytest.mark.parametrize(("slots", "jobs", "masks", "gap"),
                         [(16, 2, True, False), (4, 1, True, False), (64, 2, True, False), (64, 4, False, False),
                          (8, 2, False, False), (16, 2, True, True), (4, 1, True, True), (8, 2, False, True)])
def test_pin_advance(slots: int, jobs: int, masks: bool, gap: bool) -> None:
    """``pin_sources`` / ``advance_next`` (hdl/pin_registers.py) on a coherent pipeline (stage P's
    beat moves into stage 1 when it advances, P loads its skid's or I's beat when ``p_load``),
    against a cycle model: ``pin_r`` loads stage 0's pin (masks: the union registered a cycle ago
    plus stage 2's; distances: stage 2's entry's run) or the beat the entry stage 1 pushes pins
    (another chunk on the same slot or one its run frees, on a first beat; the held entry's run
    later), holds stage 1's otherwise; ``adv`` is always ~(v1 & first1 & pin_r), ``hold_t`` its
    inverse. ``gap`` (the DRAM reducer's: ``room`` is 0 while stage 1 holds a last beat): no
    live term, and ``pin_r`` differs from the one with it only when stage 1 is empty (so
    ``v1 & first1 & pin_r`` and ``adv`` are the same); ``decide_c`` / ``move_c`` / ``hold_s`` /
    ``hold_hi`` are ``v1 & first1 & adv`` / ``v1 & adv`` / ``~adv`` / ``~adv`` every cycle, and
    ``adv_copies``' four (each selecting its own next value) ``adv``."""
    dut = PinAdvance(slots=slots, jobs=jobs, masks=masks, gap=gap)
    rng = random.Random(slots + jobs + masks + 100 * gap)
    sb = (slots - 1).bit_length()
    lo = (1 << sb) - 1
    S1 = (1 << slots) - 1

    def beat(near: dict | None = None) -> dict:
        chunk = rng.getrandbits(32) if near is None or rng.random() < 0.3 else (near["chunk"] + rng.randint(0, 3)) & M32
        job = rng.randrange(jobs) if near is None or rng.random() < 0.3 else near["job"]
        return {"job": job, "chunk": chunk, "wm": (1 << rng.randint(0, sb)) - 1, "slot": rng.randrange(slots),
                "first": rng.getrandbits(1)}

    b0 = b1 = {"job": 0, "chunk": 0, "wm": 0, "slot": 0, "first": 0}
    st = {"v1": 0, "first1": 0, "pin_r": 0, "pinvec": 0}
    seen: set[tuple[int, int]] = set()
    dropped = 0  # (gap) cycles the live term would have set pin_r

    async def tb(ctx) -> None:
        nonlocal b0, b1, dropped
        for n in range(600):
            skid, inb = beat(b1), beat(b0)
            pins = {"held_mask": rng.getrandbits(slots) & rng.getrandbits(slots), "mask_r": 1 << rng.randrange(slots),
                    "push_now": int(rng.random() < 0.3), "busy": rng.getrandbits(1), "cur_mask": 1 << rng.randrange(slots),
                    "rest_nz": rng.getrandbits(1), "rest_mask": rng.getrandbits(slots) & rng.getrandbits(slots)}
            entry = {"job": rng.choice([b0["job"], rng.randrange(jobs)]), "chunk": (b0["chunk"] - rng.randint(0, 3)) & M32,
                     "slot": 0, "resent": 0, "more": rng.randrange(slots)}
            i = {"p_load": rng.getrandbits(1), "skid_valid": rng.getrandbits(1), "last1": rng.getrandbits(1),
                 "push_r": rng.getrandbits(1), "p_v": int(n > 2 and rng.random() < 0.8), "room": int(rng.random() < 0.9),
                 "clr": rng.getrandbits(slots) & rng.getrandbits(slots), "oh0": 1 << b0["slot"]}
            if gap:  # (the reducer's room is gated by nlast1 == ~(v1 & last1))
                i["room"] &= 1 - (st["v1"] & i["last1"])
            ctx.set(dut.pins, pins)
            ctx.set(dut.entry_r, entry)
            ctx.set(dut.emit, {"busy": 0, "rest_left": 0})
            for k, v in i.items():
                ctx.set(getattr(dut, k), v)
            for port, b in ((dut.h0, b0), (dut.h1, b1), (dut.skid_hdr, skid), (dut.in_hdr, inb)):
                ctx.set(port.job_id, b["job"])
                ctx.set(port.chunk, b["chunk"])
            ctx.set(dut.wmask0, b0["wm"])
            ctx.set(dut.wmask, b1["wm"])
            ctx.set(dut.slot0, b0["slot"])
            ctx.set(dut.slot1, b1["slot"])
            ctx.set(dut.first, b0["first"])
            ctx.set(dut.v1, st["v1"])
            ctx.set(dut.first1, st["first1"])
            await ctx.delay(1e-9)
            adv = ctx.get(dut.adv)
            assert adv == 1 - (st["v1"] & st["first1"] & st["pin_r"]), (n, st)
            assert ctx.get(dut.hold_t) == 1 - adv
            assert ctx.get(dut.pin_r) == st["pin_r"], n
            if gap:
                assert ctx.get(dut.decide_c) == st["v1"] & st["first1"] & adv, n
                assert ctx.get(dut.move_c) == st["v1"] & adv, n
                assert ctx.get(dut.hold_s) == 1 - adv, n
                assert ctx.get(dut.hold_hi) == 1 - adv, n
                assert ctx.get(dut.copies) == (0b1111 if adv else 0), n  # adv_copies(): loop, dec, room, thit
            seen.add((adv, st["pin_r"]))
            # the model: pins now, the entry stage 1 may push, the registers' next values
            if masks:
                now = st["pinvec"] | (pins["mask_r"] if pins["push_now"] else 0)
                pin_load, pin_hold = now >> b0["slot"] & 1, now >> b1["slot"] & 1
            else:
                pin_load, pin_hold = (_entry_holds(b, entry, pins["push_now"], lo) for b in (b0, b1))
            same_key = b0["job"] == b1["job"] and b0["chunk"] == b1["chunk"]
            pdc = (b0["chunk"] - b1["chunk"]) & lo & b1["wm"]
            if st["first1"]:
                hit = (b0["slot"] == b1["slot"] and not same_key) or (i["clr"] & i["oh0"]) != 0
            else:
                hit = i["push_r"] and b0["job"] == b1["job"] and pdc <= entry["more"]
            live_n = st["v1"] & i["last1"] & int(hit)
            if gap:  # not built: it could only pin a beat not taken (room 0), stage 1 empty next
                assert not (live_n and adv and i["p_v"] & i["room"]), n
                dropped += live_n & adv & (1 - pin_load)
                live_n = 0
            st["pinvec"] = (pins["held_mask"] | (pins["mask_r"] if pins["push_now"] else 0)
                            | (pins["cur_mask"] if pins["busy"] else 0) | (pins["rest_mask"] if pins["rest_nz"] else 0)) & S1
            st["pin_r"] = (pin_load | live_n) if adv else pin_hold
            if adv:
                st["v1"], st["first1"] = i["p_v"] & i["room"], b0["first"]
            await ctx.tick()
            # the pipeline moves: stage 1 takes P's beat, P loads its skid's or I's
            b1 = b0 if adv else b1
            b0 = (skid if i["skid_valid"] else inb) if i["p_load"] else b0

    run_testbench(dut, tb)
    assert seen == {(1, 0), (1, 1), (0, 1)}
    assert dropped > 5 or not gap, dropped
