"""``RecordRequest`` (hdl/record_request.py; docs/large_slots.md, "The core wiring", step 2) behind
the reducer's configuration registers and input stages (``InputStages(vectors=False,
records=True)``): random configurations, headers and jobs, random ``valid`` on ``s_msg`` and random
``ready`` on both outputs. Every beat leaves once, in order; one request per message, offered only
while its first beat is next or just left (the two outputs are forked, each transfers on its own); each request's ``DecisionConfig`` is the golden model's adapter's
(sim/decision_record_model.py ``decision_config``, as tests/test_record_decision.py feeds the
record decision), its row the model's slot. Mutations (a request on every beat, P moving
without the request, a request taken before its beat offered again, the next job's window) fail
the same check."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from stream_helpers import HoldingSink, pack, run_testbench, unpack

from wanreduce import wire
from wanreduce.hdl.layouts import AggHeaderLayout, message_beat_layout, payload_beats
from wanreduce.hdl.record_request import RecordRequest
from wanreduce.hdl.reducer_config import ReducerConfig, select_job_entry
from wanreduce.hdl.reducer_input import InputStages
from wanreduce.model import AggregatorModel, Message, ReleaseMode
from wanreduce.sim.decision_record_model import decision_config

# DecisionConfig's fields that do not depend on the job and group tables (all a request of an
# unknown job or group is checked on: ``unconf`` rejects it first, the rest are don't-cares)
TABLE_FREE = ("bit", "unconf", "in_order", "nbm1")


class _Path(Elaboratable):
    """``ReducerConfig`` -> ``InputStages`` -> ``request`` (a ``RecordRequest`` class); with
    ``wrong_window`` P's ``log2_window`` is replaced by the next job's (a mutation)."""

    def __init__(self, width: int, *, slots: int, elements: int, groups: int, jobs: int, row_bits: int,
                 request: type = RecordRequest, wrong_window: bool = False) -> None:
        self.jobs, self.wrong_window = jobs, wrong_window
        self.config = ReducerConfig(slots=slots, groups=groups, jobs=jobs)
        self.inputs = InputStages(width, slots=slots, elements=elements, groups=groups, jobs=jobs,
                                  vectors=False, records=True)
        self.request = request(width, slots=slots, elements=elements, row_bits=row_bits)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.config, m.submodules.inputs = cfg, inp = self.config, self.inputs
        m.submodules.request = rr = self.request
        wiring.connect(m, cfg.cfg, inp.cfg)
        m.d.comb += [inp.open.eq(1), rr.p.eq(inp.p), rr.p_valid.eq(inp.p_valid), inp.take.eq(rr.take)]
        if self.wrong_window:
            nxt = (inp.p.beat.hdr.job_id + 1) % self.jobs
            m.d.comb += rr.p.log2_window.eq(select_job_entry(m, cfg.cfg.log2_window, self.jobs, nxt, "nxt_lw"))
        return m


class _ReqOnEveryBeat(RecordRequest):
    def elaborate(self, platform: object) -> Module:
        m = super().elaborate(platform)
        m.d.comb += self.req.valid.eq(self.p_valid)
        return m


class _TakeWithoutReq(RecordRequest):
    def elaborate(self, platform: object) -> Module:
        m = super().elaborate(platform)
        m.d.comb += self.take.eq(self.p_valid & self.beats.ready)
        return m


class _OfferAgain(RecordRequest):  # a request taken before its beat is offered again (the bug the fork fixes)
    def elaborate(self, platform: object) -> Module:
        m = super().elaborate(platform)
        p = self.p
        m.d.comb += [self.req.valid.eq(self.p_valid & p.beat.first), self.beats.valid.eq(self.p_valid),
                     self.take.eq(self.p_valid & self.beats.ready & (~p.beat.first | self.req.ready))]
        return m


def _configure(rng: random.Random, am: AggregatorModel, sb: int) -> list[tuple[int, int, int]]:
    """Random job and group tables in the model (job 0 enabled, group 0 with members); the
    hardware's (enable, base, log2_window) per job (a window beyond S there, clamped by
    ``ReducerConfig``, is S in the model)."""
    jobs = []
    for j in range(am.n_jobs):
        lw = rng.randint(0, sb)
        if j == 1 and lw == am.job_table[0].log2_window:  # two jobs' windows differ
            lw = (lw + 1) % (sb + 1)
        en, base = j == 0 or rng.random() < 0.8, rng.randrange(am.slots)  # job 0 enabled
        am.set_job(j, enabled=en, base=base, log2_window=lw)
        jobs.append((int(en), base, rng.randint(sb, 31) if lw == sb else lw))
    for g in range(am.n_groups):
        am.set_group(g, rng.choice([0, 1 << rng.randrange(32), rng.getrandbits(32), rng.getrandbits(6)]) or int(g == 0))
    return jobs


def _messages(rng: random.Random, am: AggregatorModel, n: int) -> list[Message]:
    """Random headers: jobs and groups in and one beyond the tables, senders mostly members."""
    out = []
    for _ in range(n):
        job, group = rng.randrange(am.n_jobs + 1), rng.randrange(am.n_groups + 1)
        members = am.group_table[group] if group < am.n_groups else 0
        bits = [k for k in range(32) if members >> k & 1]
        sender = rng.choice(bits) if bits and rng.random() < 0.7 else rng.randrange(wire.MAX_SENDERS + 2)
        count = rng.randint(1, am.elements)
        out.append(Message(msg_type=rng.getrandbits(8), flags=rng.getrandbits(8), group_id=group, job_id=job,
                           round_id=rng.getrandbits(32), chunk=rng.getrandbits(32), sender_id=sender,
                           scale_exp=rng.randint(-8, 7), element_count=count,
                           payload=np.zeros(count, np.int32), session=rng.getrandbits(16)))
    return out


def _run(width: int, slots: int, elements: int, groups: int, jobs: int, row_bits: int, seed: int, **mutant) -> int:
    """Stream random messages through; check every beat and request (AssertionError on the first
    wrong one); returns the requests checked against the whole model config."""
    rng = random.Random(seed)
    sb = (slots - 1).bit_length()
    mode = ReleaseMode(seed % 2)
    am = AggregatorModel(slots=slots, elements=elements, groups=groups, jobs=jobs, release=mode)
    hw_jobs = _configure(rng, am, sb)
    msgs = _messages(rng, am, 50)
    dut = _Path(width, slots=slots, elements=elements, groups=groups, jobs=jobs, row_bits=row_bits, **mutant)
    rr, inp, layout = dut.request, dut.inputs, message_beat_layout(width)
    beats = []  # (message index, first, beat bits on s_msg, (data, last) expected on ``beats``)
    for k, msg in enumerate(msgs):
        hdr = {name: getattr(msg, name) for name, _ in AggHeaderLayout}
        n = payload_beats(msg.element_count, width)
        for b in range(n):
            d, last = rng.getrandbits(width), int(b == n - 1)
            beats.append((k, b == 0, pack(layout, {"data": d, "hdr": hdr, "first": int(b == 0), "last": last}),
                          (d, last)))
    got_beats, got_reqs = HoldingSink("beats"), HoldingSink("req")
    full = 0

    async def tb(ctx) -> None:
        nonlocal full
        for j, (en, base, lw) in enumerate(hw_jobs):
            ctx.set(dut.config.job_cfg_in[j].enable, en)
            ctx.set(dut.config.job_cfg_in[j].base, base)
            ctx.set(dut.config.job_cfg_in[j].log2_window, lw)
        for g in range(groups):
            ctx.set(dut.config.group_bitmap_in[g], am.group_table[g])
        ctx.set(dut.config.release_on_completion, int(mode == ReleaseMode.ON_COMPLETION))
        await ctx.tick().repeat(2)  # the configuration registered
        sent, valid = 0, False
        for cycle in range(len(beats) * 12 + 100):
            if not valid and sent < len(beats):
                valid = rng.random() < 0.7
            ctx.set(inp.s_msg.valid, valid)
            ctx.set(inp.s_msg.payload.as_value(), beats[sent][2] if valid else 0)
            b_ready, r_ready = rng.random() < 0.6, rng.random() < 0.6
            ctx.set(rr.beats.ready, b_ready)
            ctx.set(rr.req.ready, r_ready)
            b_valid, r_valid = ctx.get(rr.beats.valid), ctx.get(rr.req.valid)
            # a request is offered only for the message whose first beat is next or just left
            if r_valid:
                k = len(got_reqs.received)
                nxt = len(got_beats.received)
                assert any(i < len(beats) and beats[i][0] == k and beats[i][1] for i in (nxt, nxt - 1)), \
                    f"cycle {cycle}: request {k} offered at beat {nxt}"
            bp = ctx.get(rr.beats.payload)
            got_beats.step(cycle, b_valid, (bp.data, bp.last), b_valid and b_ready)
            got_reqs.step(cycle, r_valid, ctx.get(rr.req.payload.as_value()), r_valid and r_ready)
            if valid and ctx.get(inp.s_msg.ready):
                sent, valid = sent + 1, False
            await ctx.tick()
            if len(got_beats.received) == len(beats) and len(got_reqs.received) == len(msgs):
                break
        assert [e for *_, e in beats] == got_beats.received, "beats lost, repeated or out of order"
        assert len(got_reqs.received) == len(msgs)
        for msg, v in zip(msgs, got_reqs.received, strict=True):
            q = unpack(rr.req_layout, v)
            assert (q.msg.elements, q.msg.tag) == (msg.element_count, 0), msg
            assert q.side.hdr.as_value().value == pack(AggHeaderLayout, {n: getattr(msg, n) for n, _ in AggHeaderLayout})
            want = decision_config(am, msg, width)
            known = msg.job_id < jobs and msg.group_id < groups
            if known:
                assert q.msg.row == am.slot_index(am.job_table[msg.job_id], msg.chunk) << row_bits, msg
            keys = [k for k in want if known or k in TABLE_FREE]
            if known and am.group_table[msg.group_id] == 0:
                keys.remove("cwrite")  # the model's members == bit with no members: unconf anyway
            assert {k: getattr(q.side.cfg, k) for k in keys} == {k: want[k] for k in keys}, msg
            full += known and not want["unconf"]

    run_testbench(dut, tb)
    return full


@pytest.mark.parametrize(("width", "slots", "elements", "groups", "jobs", "row_bits", "seed"), [
    (64, 16, 9, 3, 3, 1, 1), (256, 8, 20, 2, 2, 0, 2), (128, 64, 33, 4, 4, 2, 3), (64, 2, 3, 1, 1, 0, 4),
])
def test_requests_are_the_models_and_every_beat_leaves_once(width, slots, elements, groups, jobs, row_bits, seed):
    assert _run(width, slots, elements, groups, jobs, row_bits, seed) >= 5  # configured ones among them


@pytest.mark.parametrize("mutant", [{"request": _ReqOnEveryBeat}, {"request": _TakeWithoutReq},
                                    {"request": _OfferAgain}, {"wrong_window": True}],
                         ids=["req-every-beat", "take-without-req", "offer-again", "next-jobs-window"])
def test_a_mutation_fails_the_check(mutant):
    with pytest.raises(AssertionError):
        _run(64, 16, 9, 3, 3, 1, 1, **mutant)


@pytest.mark.parametrize(("width", "slots", "elements", "row_bits"), [(64, 16, 9, 3), (256, 64, 20, 0)])
def test_its_outputs_are_decision_on_records_inputs(width, slots, elements, row_bits):
    """``beats`` and ``req`` have the shapes of ``DecisionOnRecords``' ports of the same name (its
    gate taking messages of up to E elements), so the core connects them as they are."""
    from wanreduce.hdl.decision_record_harness import DecisionOnRecords

    rr = RecordRequest(width, slots=slots, elements=elements, row_bits=row_bits)
    dor = DecisionOnRecords(width, address_width=24, jobs=2, depth=64, max_elements=elements,
                            sums={"slots": slots, "row_bits": row_bits}, records={})
    for name in ("beats", "req"):
        assert rr.signature.members[name] == dor.signature.members[name].flip(), name
    rr._MustUse__silence = dor._MustUse__silence = True
