"""Unit tests of the stage parts of ``Reducer.elaborate`` built inline (issue 16 item 6, session
32; docs/reducer.md, "Parts built inline"): stage 1's registers, ... Each against a small cycle
model of what it stands for; the reducer calls them as functions so its RTLIL (pinned by
tests/test_default_rtl.py) is unchanged."""

from __future__ import annotations

import random

import pytest
from stream_helpers import run_testbench

from wanreduce.hdl.stage1_registers import StageOneRegisters

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
