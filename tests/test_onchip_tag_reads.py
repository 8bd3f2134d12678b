"""The on-chip reducer's tag reads above S 16 (session 46, s46f; docs/benchmarks.md): the decision's
tag read from a LUT RAM copy of the tag memory (hdl/tag_memory.py ``decision_lut``), addressed
through P's copy of skid_valid (``InputStages(slot_copy=True)``), and the probe's read data
registered before its compares (hdl/tag_probe.py ``registered_data``)."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Elaboratable, Module
from amaranth.lib.memory import Memory
from test_reducer import assert_same_run, check, make_config, run, traffic
from test_reducer_parts import probe_latencies

from wanreduce.hdl.reducer import Reducer
from wanreduce.hdl.reducer_layouts import ACTIVE, DONE, FREE, slot_tag_layout
from wanreduce.hdl.tag_probe import TagProbe
from wanreduce.model import ReleaseMode


def _memories(dut: Reducer) -> tuple[dict[str, str], str]:
    """The reducer's memories (name -> the attribute lines before them) and its RTLIL."""
    text = rtlil.convert(dut)
    mems = {}
    for attrs, name in re.findall(r"((?:\s*attribute [^\n]*\n)*)\s*memory width \d+ size \d+ \\(\S+)", text):
        mems[name] = attrs
    return mems, text


@pytest.mark.parametrize(("slots", "slot_memory", "lut"), [(64, "onchip", True), (16, "onchip", False),
                                                           (8, "dram", False)])
def test_decision_tag_read_from_a_lut_ram_copy_above_s16_on_chip(slots, slot_memory, lut) -> None:
    """On chip above ``ONCHIP_CUTS_MAX_SLOTS`` the decision's tag port (``tag_rd``) reads
    ``tag_mem_d``, a copy of the tag memory built as LUT RAM (``ram_style`` "distributed"; yosys
    puts the synchronous read's flip-flops at its output), not the block RAM ``tag_mem``
    (`tag_mem` -> `ck_pre.same` was 11.13 ns in the on-chip S 64 core's placement, session 45), and
    P's copy of skid_valid (``p_skid_valid_c``) selects its address. Not at S 16 on chip (the pinned
    default core) nor with DRAM. Fails on 193bd2d (no ``tag_mem_d``)."""
    dram = {"outstanding": 8, "index_bits": 3} if slot_memory == "dram" else {}
    dut = Reducer(64, slots=slots, elements=32, groups=2, jobs=2, slot_memory=slot_memory, **dram)
    mems, text = _memories(dut)
    assert ("tag_mem_d" in mems) == lut, sorted(mems)
    if lut:
        assert 'ram_style "distributed"' in mems["tag_mem_d"], mems["tag_mem_d"]
        assert "ram_style" not in mems["tag_mem"], mems["tag_mem"]
        rd = [c for c in re.findall(r"cell \$memrd_v2 .*?\n\s*end", text, re.S) if "tag_rd__data" in c]
        assert len(rd) == 1 and re.search(r'parameter \\MEMID "\\\\tag_mem_d"', rd[0]), rd
        assert "p_skid_valid_c" in text
    elif slot_memory == "onchip":
        assert "p_skid_valid_c" not in text


@pytest.mark.parametrize("mode", [ReleaseMode.IN_ORDER, ReleaseMode.ON_COMPLETION])
def test_s64_tag_reads_cycle_exact_against_the_block_ram_reads(monkeypatch, mode) -> None:
    """At S 64 on chip, on traffic with resets, random input gaps and output backpressure (tag
    writes back to back with the reads they bypass): the same outcomes, results, accept and
    result cycles, heads and probe answers with the cut (the decision's tags from the LUT RAM
    copy, the probe's read registered) as with the block RAM reads (``ONCHIP_TAG_LUT`` off), and
    both match the golden model."""
    rng = random.Random(64 + int(mode))
    cfg = make_config(rng, 64, 64, 9, groups=2, jobs=2, mode=mode, members=(2, 8))
    ops = traffic(rng, cfg, 250, saturate=0.2, resets=1)
    probes = [(j, c) for j in range(2) for c in range(0, 40, 3)]
    cut = run(cfg, ops, p_valid=0.8, p_ready=0.6, seed=7, probes=probes)
    _, res, _ = check(cfg, ops, cut)
    monkeypatch.setattr(Reducer, "ONCHIP_TAG_LUT", False)
    before = run(cfg, ops, p_valid=0.8, p_ready=0.6, seed=7, probes=probes)
    check(cfg, ops, before)
    assert len(res) > 5
    assert_same_run(cut, before)
    assert cut.probes == before.probes and any(cut.probes), cut.probes


class _Probe(Elaboratable):
    """``TagProbe`` on a tag memory's read port."""

    def __init__(self, tags: list[int], slots: int, registered_data: bool) -> None:
        self.probe = TagProbe(slots=slots, jobs=1, pending_bit=True, registered_data=registered_data)
        self.tags, self.slots = tags, slots

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.probe = pr = self.probe
        m.submodules.tags = mem = Memory(shape=slot_tag_layout(1), depth=self.slots, init=self.tags)
        rd = mem.read_port(transparent_for=())
        m.d.comb += [rd.addr.eq(pr.rd_addr), rd.en.eq(1), pr.rd_data.eq(rd.data), pr.pending.eq(1)]
        return m


def test_tag_probe_registered_data_same_answers_one_cycle_later() -> None:
    """``registered_data``: a new key's first ``probe_ok`` comes exactly one cycle later than
    without it, with the same answer (the probed chunk's bitmap while held, else 0), for keys held
    and not. Fails on 193bd2d (no ``registered_data``). The unused reads (a read meeting a tag
    write, a lost read on a shared port) with it: tests/test_reducer_parts.py."""
    slots, lay = 16, slot_tag_layout(1)
    rng = random.Random(46)
    tags = [dict(state=rng.choice((FREE, ACTIVE, DONE)), job=0, chunk=i + slots * rng.randrange(3),
                 bitmap=rng.getrandbits(31) << 1 | 1) for i in range(slots)]
    keys = [rng.choice([t["chunk"] for t in tags] + [rng.randrange(4 * slots)]) for _ in range(24)]
    keys = [k for i, k in enumerate(keys) if i == 0 or k != keys[i - 1]]  # each a new key

    def want(chunk: int) -> int:
        t = tags[chunk % slots]
        return t["bitmap"] if t["state"] != FREE and t["chunk"] == chunk else 0

    def latencies(registered_data: bool) -> list[int]:
        top = _Probe([lay.const(t) for t in tags], slots, registered_data)
        return probe_latencies(top, top.probe, keys, want)

    base = latencies(False)
    assert latencies(True) == [n + 1 for n in base], base
    assert any(want(c) for c in keys) and not all(want(c) for c in keys)
