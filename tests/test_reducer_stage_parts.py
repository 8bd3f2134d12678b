"""Unit tests of the stage parts of ``Reducer.elaborate`` built inline (issue 16 item 6, session
32; docs/reducer.md, "Parts built inline"): stage 1's registers, ... Each against a small cycle
model of what it stands for; the reducer calls them as functions so its RTLIL (pinned by
tests/test_default_rtl.py) is unchanged."""

from __future__ import annotations

import random

import pytest
from stream_helpers import run_testbench

from wanreduce.hdl.decision_effect import DecisionEffect
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


@pytest.mark.parametrize(("slots", "jobs"), [(16, 2), (4, 1), (64, 4)])
def test_decision_effect(slots: int, jobs: int) -> None:
    """``effect_registers`` ... ``update_heads`` (hdl/decision_effect.py) against a cycle model:
    an in-order decision's effect is registered (``fx_c`` / ``fx_s``, their inverted copies, job,
    run, chunk + 1, the run's slots and its own) and applied a cycle later: ``pend_eff`` clears the
    run's bits or sets the slot's, the job's head (only its) becomes chunk + 1 + run; the head
    checks registered a cycle ahead (``hc``) equal the checks against the heads as they are in
    the cycle they are used, for the beat stage 1 then holds; ``run_lt`` / ``run_ltw`` /
    ``run_eq`` compare that beat's delta low bits with the run."""
    dut = DecisionEffect(slots=slots, jobs=jobs)
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

