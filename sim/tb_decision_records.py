"""cocotb bench of the payload gate deciding with the record decision
(``hdl/decision_record_harness.py``: each message's request is a record ADD on the
``RecordDecision`` engine, AXI ID 1, its late operand a ``DecisionState`` with the jobs'
regions; the record's response, in order, is the gate's decision; the gate's commands go through
the CommandArbiter to the DRAM slot store, AXI ID 0; both through ``AxiIdArbiter`` onto one
cocotbext-axi ``AxiRam``), run by tests/test_decision_records.py.

``decisions_on_records``: contributions from several senders to several chunks of three jobs
(two enabled with regions of 8 and 4 slots, one disabled) and groups of three members, one
member, two members and none, made against the golden model as it goes (so they follow its
heads): mostly a missing member to a chunk in the window, with duplicates, chunks behind the
head (stale, or resent) and beyond the window, non-members and senders beyond the bitmap,
another group or element count than the chunk's (mismatch). The records start as random
garbage; each job's first window reset (to a random chunk, some near 2**32) sweeps its region
FREE (``FreeSweep``) and sets its head; window resets of random jobs come mid-run (``p_reset``
per message, offered right after a message is taken, the other jobs' messages in flight),
applied to the model there (``DecisionRecordModel.reset_window``). Random valid on ``beats`` / ``req`` and ready on
``rsp`` (re-drawn every 200 cycles), random pauses on every AXI channel (``p_axi``), latency
re-drawn from ``latency_range``. The reference is the golden model
(``AggregatorModel.contribute`` through ``sim/decision_record_model.py``: the outcome, the
decision, the record after, the results), the gate's twin (``sim/payload_gate_model.py``) and the
slot-store reference (``sim/slot_store_model.py``) for the sums. Checked: every outcome code in
order (``outcome``); every store response (data, overflow, tag) in order, and the rows of every
result the model releases (the completing message's responses) are the result's payload; every
chunk the ``DecisionState`` releases, per job in order, is the model's; then every record and
sums row in memory (every other byte as it started), every burst in its engine's region with its
ID, the gate's counters, the sweep's (``sweeps``, ``records_freed``), every error flag 0.
The results (``RecordEmitter`` in the harness): the rows on ``results``, taken at random with
pauses of ``PAUSE`` cycles (probability ``p_pause`` / 3 per cycle), are every result the model
releases, the resent ones (RESULT_RESENT, RESENT set) included, in the model's order, each row
with the result's header (OVERFLOW and RESENT included) and its elements, on completion as in
order (each completion's result, and resent ones, in decision order). ``beats`` also pause
``PAUSE`` cycles in the middle of a message (probability ``p_pause`` per cycle there), so a
completing message is decided, and its chunk released and read back, long before its last beat.
Parameters (tb_params): the harness's (data_width, address_width, jobs, depth, max_elements,
sums, records), regions ((base, log2 window) per job), in_order, messages, seed, latency_range,
p_axi, p_stream, p_reset, p_pause; ``scenario="mode_changes"``: instead of the random
contributions, job 0's chunks across release-mode changes (``_mode_changes``), probed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from wanreduce import wire
from wanreduce.hdl.decision_record_harness import decision_records_with_latency
from wanreduce.hdl.decision_state import head_layout, region_layout, released_layout
from wanreduce.hdl.layouts import AggHeaderLayout, ResetLayout, lanes, payload_beats
from wanreduce.hdl.payload_gate import Decision, beat_layout, request_layout
from wanreduce.hdl.record_emitter import result_row_layout
from wanreduce.hdl.reducer_layouts import RECORD_BITS, RecordSide
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.model import AggregatorModel, Message, Outcome, ReleaseMode, SlotState, Tag
from wanreduce.sim.axi_memory import attach_ram, random_axi_pauses, steady_rate, vary_latency
from wanreduce.sim.decision_record_model import DecisionRecordModel, emits, pack
from wanreduce.sim.payload_gate_model import EMIT, GateMessage, expected_commands
from wanreduce.sim.simulator import generate_verilog, run_cocotb, tb_params
from wanreduce.sim.slot_store_model import SlotStoreModel, lanes_of
from wanreduce.sim.tb_engines_on_arbiter import bursts_by_id
from wanreduce.sim.tb_gate_record import harness_params
from wanreduce.sim.tb_payload_gate import Inputs, check_counters, drive_to_store
from wanreduce.sim.tb_slot_store import (
    CLOCK_NS,
    Bench,
    _unpack,
    _watch_released,
    _window_reset,
    random_row,
)

M32 = 0xFFFFFFFF
PAUSE = 450  # cycles of a pause on ``beats`` or ``results``: longer than two memory round trips
GROUPS = [0b0111, 0b1000, 0b110000, 0]  # three members, one, two, none (unconfigured)
JOB_GROUPS = [(0, 0, 1), (2,), (0,)]  # the groups each job's chunks use


def _contribution(rng: random.Random, am: AggregatorModel, job_id: int, width: int,
                  max_el: int, chunk: int | None = None) -> tuple[Message, list[int]]:
    """One contribution of ``job_id`` near its head in the model now (module docstring), or of
    ``chunk``, and its payload as W-bit beats."""
    job = am.job_table[job_id]
    k = rng.choices([0, rng.randrange(job.window), rng.randint(-3, -1), rng.randint(job.window, job.window + 2)],
                    [0.3, 0.55, 0.08, 0.07])[0]  # the head's chunk often: it completes, the window moves on
    chunk = (job.head + k) & M32 if chunk is None else chunk & M32
    group = JOB_GROUPS[job_id][chunk % len(JOB_GROUPS[job_id])]
    count = 1 + (chunk * 7 + job_id) % max_el
    s = am.slot[am.slot_index(job, chunk)]
    held = s.state.name != "FREE" and s.chunk == chunk and s.job_id == job_id  # (then another header mismatches)
    if rng.random() < 0.03:
        group = 3 if rng.random() < 0.5 or not held else (group + 1) % 3
    if held and rng.random() < 0.04:
        count = count % max_el + 1
    members = _members(group)
    missing = [k for k in members if not (s.chunk == chunk and s.bitmap >> k & 1)] or members
    sender = rng.choices([rng.choice(missing), rng.choice(members), 9, 40], [0.85, 0.08, 0.04, 0.03])[0]
    return _message(rng, job_id, chunk, group, sender, count, width)


def _members(group: int) -> list[int]:
    """The senders of ``GROUPS[group]`` (sender 0 for the empty group)."""
    return [k for k in range(32) if GROUPS[group] >> k & 1] or [0]


def _message(rng: random.Random, job_id: int, chunk: int, group: int, sender: int, count: int,
             width: int) -> tuple[Message, list[int]]:
    """A contribution of ``count`` random elements and its payload as W-bit beats."""
    beats = payload_beats(count, width)
    words = [random_row(rng, lanes(width)) for _ in range(beats)]
    payload = np.concatenate([lanes_of(w, lanes(width)) for w in words])[:count]
    return Message(msg_type=0, flags=0, group_id=group, job_id=job_id, round_id=1, chunk=chunk, sender_id=sender,
                   scale_exp=0, element_count=count, payload=payload, session=1), words


def _stream(rng: random.Random, am: AggregatorModel, twin: DecisionRecordModel, n: int, width: int,
            row_bits: int, group: int, snaps: list | None = None):
    """``n`` contributions back to back, in chunk order from job 0's head: every member of
    ``GROUPS[group]`` in turn to each chunk (the last one completes it), one W-bit beat each,
    decided by the twin as they are made; as :func:`_messages`, with no resets."""
    members, job = _members(group), am.job_table[0]
    out, head = [], job.head
    for i in range(n):
        chunk = (head + i // len(members)) & M32
        msg, words = _message(rng, 0, chunk, group, members[i % len(members)], lanes(width), width)
        slot = am.slot_index(job, msg.chunk)
        out.append((msg, GateMessage(words, slot << row_bits, msg.element_count, i & 0xFFFF), *twin.contribute(msg)))
        _snap(am, snaps, i + 1)
    return out, []


def _snap(am: AggregatorModel, snaps: list | None, count: int) -> None:
    """The model after ``count`` messages (and any window reset before the next), for the probes:
    its slot tags, release mode and heads."""
    if snaps is not None:
        snaps.append(SimpleNamespace(count=count, tags=am.tags.copy(), release=am.release,
                                     heads=[j.head for j in am.job_table]))


def _model_probe(am: AggregatorModel, tags, job: int, chunk: int) -> int:
    """The golden model's JOBj_PROBE_BITMAP of (job, chunk) with the slot tags ``tags``."""
    view = SimpleNamespace(n_jobs=am.n_jobs, job_table=am.job_table, tags=tags, slots=am.slots)
    return int(AggregatorModel.probe_bitmaps(view, job, np.array([chunk], np.int64))[0])


def _messages(rng: random.Random, am: AggregatorModel, twin: DecisionRecordModel, n: int, width: int,
              max_el: int, row_bits: int, p_reset: float = 0.0, repeats: int = 0, snaps: list | None = None):
    """``n`` contributions, each decided by the twin as it is made (the next follows the heads):
    (Message, GateMessage, outcome, decision, results) each; and before a message, with
    probability ``p_reset``, a window reset of a random job to a chunk near its head or anywhere,
    applied to the twin there: the resets as (index of the message after it, job, head). After
    a resend, half the time the next message is its job's chunk a window on (the resent slot's
    next chunk: it must not rewrite the slot before the resend reads it), or, with ``repeats``,
    the next ``repeats`` messages are the same resend again (a sender asking for a lost result
    over and over: each one queues its slot, so the release queue fills while results wait)."""
    out, resets, words, again = [], [], [], 0
    for i in range(n):
        if again < repeats and out and out[-1][2] == Outcome.RESULT_RESENT:  # the same resend again
            again += 1
            msg = out[-1][0]
            slot = am.slot_index(am.job_table[msg.job_id], msg.chunk)
            out.append((msg, GateMessage(words, slot << row_bits, msg.element_count, i & 0xFFFF),
                        *twin.contribute(msg)))
            _snap(am, snaps, i + 1)
            continue
        again = 0
        if i and rng.random() < p_reset:
            job_id = rng.randrange(am.n_jobs)
            head = rng.choice([am.job_table[job_id].head + rng.randint(-4, 40), rng.getrandbits(32)]) & M32
            twin.reset_window(job_id, head)
            resets.append((i, job_id, head))
            _snap(am, snaps, i)
        job_id, chunk = rng.choice([0, 0, 0, 1, 1, 2]), None
        if out and out[-1][2] == Outcome.RESULT_RESENT and not repeats and rng.random() < 0.5:  # its next chunk
            job_id = out[-1][0].job_id
            chunk = out[-1][0].chunk + am.job_table[job_id].window
        msg, words = _contribution(rng, am, job_id, width, max_el, chunk)
        slot = am.slot_index(am.job_table[job_id], msg.chunk)
        gate = GateMessage(words, slot << row_bits, msg.element_count, i & 0xFFFF)
        out.append((msg, gate, *twin.contribute(msg)))
        _snap(am, snaps, i + 1)
    return out, resets


PADS = 40  # job 1's non-member contributions after each step of ``_mode_changes``: time for probes


def _mode_changes(rng: random.Random, am: AggregatorModel, twin: DecisionRecordModel, width: int, max_el: int,
                  row_bits: int, snaps: list | None = None):
    """Job 0's chunks across release-mode changes (the probe's pending bit, hdl/record_probe.py):
    in order, head + 1 and head + 2 completed (COMPLETE: held behind the head) and
    head + 3 begun; on completion, head + 4 and head + 3 completed (RELEASED at once); back in
    order, the head's chunk completed (released with head + 1 and head + 2: the run stops at
    head + 3, released) and head + 3 sent again (resent). Each step is followed by ``PADS``
    contributions to job 1 from a non-member (decided, no state changed), so the probes see it;
    each mode change comes at a window reset of job 2 (disabled), which drains the harness as the
    core's phases drain before CTRL changes. Returns (made, resets) as :func:`_messages` and the
    keys to probe: job 0's five chunks."""
    made, resets, h = [], [], am.job_table[0].head

    def add(job: int, chunk: int, group: int, sender: int) -> None:
        chunk &= M32
        msg, words = _message(rng, job, chunk, group, sender, 1 + (chunk * 7 + job) % max_el, width)
        slot = am.slot_index(am.job_table[job], chunk)
        made.append((msg, GateMessage(words, slot << row_bits, msg.element_count, len(made) & 0xFFFF),
                     *twin.contribute(msg)))
        _snap(am, snaps, len(made))

    def chunk(d: int, senders: tuple[int, ...] = (0, 1, 2)) -> None:  # group 0: senders 0, 1, 2
        for sender in senders:
            add(0, h + d, 0, sender)

    def pads() -> None:  # group 2's members are senders 4 and 5
        for _ in range(PADS):
            add(1, am.job_table[1].head, 2, 9)

    def switch(mode: ReleaseMode) -> None:
        resets.append((len(made), 2, am.job_table[2].head))
        twin.reset_window(2, am.job_table[2].head)
        am.release = mode
        _snap(am, snaps, len(made))

    chunk(1)  # in order: head + 1 and head + 2 complete behind the head (held), head + 3 begun
    chunk(2)
    chunk(3, (0,))
    pads()
    switch(ReleaseMode.ON_COMPLETION)
    pads()  # the held chunks probed on completion
    chunk(4)  # released at once
    chunk(3, (1, 2))
    pads()
    switch(ReleaseMode.IN_ORDER)
    pads()  # the chunks released on completion probed in order, ahead of the head
    chunk(0)  # the head: released with head + 1, head + 2; the run stops at head + 3 (not pending)
    pads()
    chunk(3, (0,))  # resent
    pads()
    return made, resets, [(0, (h + d) & M32) for d in range(5)]


def _check_results(made, commands, responses, width: int) -> int:
    """The rows of every result the model released for its own completing message (the
    message's store responses, its last write) are the result's payload; returns how many."""
    k, checked = 0, 0
    for msg, gate, _outcome, decision, results in made:
        n = len(gate.data) if decision != Decision.DISCARD and len(gate.data) == payload_beats(gate.elements, width) \
            else 0
        rows = [responses[k + b][0] for b in range(n)]
        k += n
        mine = [r for r in results if r.chunk == msg.chunk and r.job_id == msg.job_id and not r.resent]
        if mine and n:
            got = np.concatenate([lanes_of(v, lanes(width)) for v in rows])[:msg.element_count]
            assert (got == mine[0].payload).all(), f"result of chunk {msg.chunk}: {got}, want {mine[0].payload}"
            checked += 1
    assert k == len(commands)
    return checked


@cocotb.test()
async def decisions_on_records(dut):
    p = tb_params()
    rng = random.Random(p.get("seed", 1))
    w, max_el, jobs = p["data_width"], p["max_elements"], p["jobs"]
    slots, row_bits = p["sums"]["slots"], p["sums"]["row_bits"]
    sums = Bench(dut, {"data_width": w, **p["sums"]})
    recs = Bench(dut, {"data_width": w, **p["records"], "slots": slots, "row_bits": 0, "row_width": RECORD_BITS,
                       "axi_id": 1}, prefix="rec_")
    am = AggregatorModel(slots=slots, elements=max_el, groups=len(GROUPS), jobs=jobs,
                         release=ReleaseMode.IN_ORDER if p["in_order"] else ReleaseMode.ON_COMPLETION)
    for g, members in enumerate(GROUPS):
        am.set_group(g, members)
    heads = [rng.choice([0, M32 - 2, rng.getrandbits(32)]) for _ in range(jobs)]
    for j, (base, lw) in enumerate(p["regions"]):
        am.set_job(j, enabled=j < 2, base=base, log2_window=lw)

    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    dut.rsp__ready.value = 0
    dut.reset__valid.value = 0
    dut.probe_job.value = dut.probe_chunk.value = 0
    layout = region_layout(slots)
    dut.region.value = sum(pack(layout, {"base": b, "log2_window": lw}) << (j * layout.size)
                           for j, (b, lw) in enumerate(p["regions"]))
    size = max(b.base + b.rows * b.stride for b in (sums, recs))
    ram = attach_ram(dut, size)
    content = bytearray(rng.randbytes(size))  # every record random garbage: the first resets' sweeps free them
    ram.write(0, bytes(content))
    for b in (sums, recs):
        b.ram, b.content = ram, bytes(content[b.base:b.base + b.rows * b.stride])

    def initial_of(b: Bench):
        return lambda row: int.from_bytes(content[b.address(row):b.address(row) + b.row_bytes], "little")

    twin = DecisionRecordModel(am, jobs, w, initial_of(recs))
    for j in range(jobs):
        twin.reset_window(j, heads[j])
    probing = p.get("probe", p.get("stream") is None)  # not in a bench's run (its figures)
    snaps = [] if probing else None
    _snap(am, snaps, 0)
    keys = None
    if p.get("stream") is not None:
        made, resets = _stream(rng, am, twin, p.get("messages", 200), w, row_bits, p["stream"], snaps)
    elif p.get("scenario") == "mode_changes":
        made, resets, keys = _mode_changes(rng, am, twin, w, max_el, row_bits, snaps)
    else:
        made, resets = _messages(rng, am, twin, p.get("messages", 200), w, max_el, row_bits, p.get("p_reset", 0.0),
                                 p.get("resend_repeats", 0), snaps)
    messages = [gate for _, gate, *_ in made]
    # the gate's decisions with ``emit`` (the completer's commands tagged EMIT_TAG, or its chunk's
    # rows READ so tagged if drained); the store's ``rsp`` carries the WRITE / ADD responses only
    decisions = [d.value | (EMIT if emits(outcome, results) else 0) for _, _, outcome, d, results in made]
    want = expected_commands(messages, decisions, w, sums.address_bits, max_el)
    sum_model = SlotStoreModel(w, initial_of(sums))  # (a READ changes nothing)
    want.commands = [c for c in want.commands if c.op != Op.READ]
    expected = [(*sum_model.apply(c.op, c.row, c.data, c.lanes), c.tag) for c in want.commands]
    results_checked = _check_results(made, want.commands, expected, w)
    inputs = PausingInputs(dut, messages, None, w, sums.address_bits, max_el)
    inputs.pausing(p.get("p_pause", 0.0), PAUSE)
    msg_bits = request_layout(sums.address_bits, max_el).size
    inputs.queues[1] = [q | side << msg_bits for q, side in zip(inputs.queues[1], twin.sides, strict=True)]
    assert RecordSide.size + msg_bits == len(dut.req__payload)

    random_axi_pauses(ram, rng, p.get("p_axi", 0.3))
    vary_latency(dut, rng, *p.get("latency_range", (20, 200)))
    cocotb.start_soon(bursts_by_id(dut, {0: sums, 1: recs}))
    state = SimpleNamespace(dut=dut, rows=slots, p={"jobs": jobs})
    released, outcomes = [], []
    cocotb.start_soon(_watch_released(state, released))
    cocotb.start_soon(_watch_outcomes(dut, outcomes))
    heads_seen: dict[int, list[int]] = {j: [] for j in range(jobs)}
    cocotb.start_soon(_watch_heads(dut, slots, jobs, heads_seen))
    result_rows: list[int] = []
    result_stamps: list[int] = []
    cocotb.start_soon(_take_results(dut, rng, result_rows, p.get("p_stream"),
                                    p.get("p_result_pause", p.get("p_pause", 0.0) / 3), result_stamps))
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    for j in range(jobs):  # each job's head, as the model's, and its region's records FREE
        await _window_reset(state, j, heads[j])
    cocotb.start_soon(_resets_between(dut, jobs, resets))
    taken, samples, probing_on = [0], [], [probing]
    cocotb.start_soon(_count_taken(dut, taken))
    if probing:
        regions = [1 << lw for _, lw in p["regions"]]
        cocotb.start_soon(_probe(dut, rng, made, regions, outcomes, taken, samples, probing_on, keys))

    start = _cycle()
    result = await drive_to_store(dut, rng, inputs, want, expected, sums.rsp_layout, p)
    for _ in range(100):  # the last messages' decisions (discards: no store response to wait for)
        if len(outcomes) >= len(made):
            break
        await ClockCycles(dut.clk, 20)
    await ClockCycles(dut.clk, 8)
    want_outcomes = [int(o) for _, _, o, _, _ in made]
    assert outcomes == want_outcomes, next(f"outcome {k} ({made[k][0]}): {o}, want {Outcome(want_outcomes[k]).name}"
                                           for k, o in enumerate(outcomes + [None]) if k >= len(want_outcomes)
                                           or o != want_outcomes[k])
    for flag in ("mem_error", "store_mem_error", "rec_mem_error", "copy_error", "arb_error", "arb_dropped",
                 "state_error", "split_error", "record_error"):
        assert not int(getattr(dut, flag).value), f"{flag} set"
    got_chunks = _released_chunks(released, jobs)
    want_chunks = {j: [r.chunk for (*_, results), ordered in zip(made, twin.in_order, strict=True) if ordered
                       for r in results if r.job_id == j and not r.resent] for j in range(jobs)}
    assert got_chunks == want_chunks, f"released {got_chunks}, want {want_chunks} (the results of in-order decisions)"
    want_results = [r for *_, results in made for r in results]
    for _ in range(200):  # the last results' rows (the emitter reads them back after the decisions)
        if len(result_rows) >= sum(payload_beats(len(r.payload), w) for r in want_results):
            break
        await ClockCycles(dut.clk, 20)
    counts = check_counters(dut, want)
    for b, rows in ((sums, sum_model.rows), (recs, twin.records)):
        b.check_bursts()
        await b.check_memory(SimpleNamespace(rows=rows))
    results_emitted = _check_result_rows(result_rows, want_results, w)
    probing_on[0] = False
    heads_checked = _check_heads(dut, am, made, heads_seen, twin.in_order)
    probes = _check_probes(am, snaps, samples) if probing else {}
    # the gain (docs/large_slots.md, "Results from the completing contribution's own ADD
    # responses"): a released chunk's rows are READ only if its completer did not emit it (a
    # release's later chunks, resends); the completer's own chunk never
    own_rows = sum(payload_beats(len(results[0].payload), w) for _, _, outcome, _, results in made
                   if emits(outcome, results))
    want_reads = sum(payload_beats(len(r.payload), w) for r in want_results) - own_rows
    assert int(dut.data_reads.value) == want_reads, \
        f"{int(dut.data_reads.value)} data READs, want {want_reads} (own rows {own_rows} not read)"
    sweeps = jobs + len(resets)  # the counters last: the records above fail first
    assert int(dut.sweeps.value) == sweeps, f"{int(dut.sweeps.value)} sweeps, want {sweeps}"
    freed = sum(1 << p["regions"][j][1] for j in list(range(jobs)) + [j for _, j, _ in resets])
    assert int(dut.records_freed.value) == freed, f"{int(dut.records_freed.value)} records freed, want {freed}"
    seen = {Outcome(o).name: want_outcomes.count(o) for o in set(want_outcomes)}
    result.update(counts, outcomes=seen, results_checked=results_checked, window_resets=len(resets),
                  released_runs=len(released), long_runs=sum(r[-1] > 0 for r in released),
                  results_emitted=results_emitted, overflowed=sum(r.overflow for r in want_results),
                  resent=sum(r.resent for r in want_results), data_reads=want_reads, own_rows=own_rows,
                  pin_waits=int(dut.pin_waits.value), heads_checked=heads_checked, **probes)
    if p.get("stream") is not None:  # a bench's run: its figures, not the random streams' coverage
        result.update(result_cycles=result_stamps[-1] - start, result_rate=steady_rate(result_stamps),
                      results_per_kcycle=1000 * results_emitted / (result_stamps[-1] - start))
        dut._log.info(f"{len(messages)} messages: {result}")
        if p.get("out"):
            Path(p["out"]).write_text(json.dumps(result))
        return
    if keys is not None:  # a directed run: its probes across the mode changes
        assert all(probes[f"probes_{k}"] >= 3 for k in PROBE_KINDS), f"too few probes across the mode changes: {result}"
        dut._log.info(f"{len(messages)} messages: {result}")
        return
    need = {o.name for o in Outcome} - {"REJECT_BUSY"} if p["in_order"] else \
        {"AGGREGATED", "REJECT_BUSY", "STALE", "RESULT_RESENT", "REJECT_NON_MEMBER", "REJECT_UNCONFIGURED"}
    assert need <= set(seen) and results_checked > 10, f"too few of some outcome: {result}"
    if p["in_order"]:
        assert result["long_runs"] > 0, f"no run released behind a head: {result}"
    assert result["overflowed"] > 0 and result["pin_waits"] > 0, f"no saturated result or no pinned request: {result}"
    assert result["resent"] > 0, f"no resent result: {result}"
    if probing:
        assert probes["probes_held"] >= 5 and probes["probes_empty"] >= 5, f"too few probes of each kind: {result}"
    dut._log.info(f"{len(messages)} messages: {result}")


class PausingInputs(Inputs):
    """``Inputs`` whose ``beats`` also pause for ``pause`` cycles in the middle of a message
    (with probability ``p_pause`` per cycle there): its request, taken with its first beat, is
    decided, may release its chunk and the emitter may read the record back long before the
    message's last beat, and so its commands, reach the store (the data READs must wait)."""

    def pausing(self, p_pause: float, pause: int) -> None:
        self.p_pause, self.pause, self.left = p_pause, pause, 0
        self.lasts = {i for i, b in enumerate(self.queues[0]) if b & 1 << self.last_bit}

    @property
    def last_bit(self) -> int:
        return beat_layout(len(self.ports[0][1]) - 1)["last"].offset

    def offer(self, rng: random.Random, probs: list[float]) -> None:
        mid = self.sent[0] and self.sent[0] - 1 not in self.lasts and self.sent[0] < len(self.queues[0])
        if not self.left and mid and rng.random() < self.p_pause:
            self.left = self.pause
        if self.left:
            self.left -= 1
            probs = [0.0, *probs[1:]]
        super().offer(rng, probs)


async def _take_results(dut, rng: random.Random, rows: list[int], p_ready: float | None,
                        p_pause: float = 0.0, stamps: list[int] | None = None) -> None:
    """Every result row the emitter puts out (``results``), taken at random (``p_ready``, else
    re-drawn every 200 cycles), with pauses of ``PAUSE`` cycles (probability ``p_pause`` per
    cycle: the emitter backs up, releases wait in its queue); ``stamps``: the cycle of each."""
    p, cycle, left = p_ready, 0, 0
    while True:
        if p_ready is None and cycle % 200 == 0:
            p = rng.choice([0.2, 0.6, 1.0])
        if not left and rng.random() < p_pause:
            left = PAUSE
        left = max(0, left - 1)
        await RisingEdge(dut.clk)
        # for this cycle: a row valid now is taken at the next edge
        dut.results__ready.value = not left and rng.random() < p
        await ReadOnly()
        if int(dut.results__valid.value) and int(dut.results__ready.value):
            rows.append(int(dut.results__payload.value))
            if stamps is not None:
                stamps.append(_cycle())
        cycle += 1


def _check_result_rows(rows: list[int], want: list, width: int) -> int:
    """The rows on ``results`` are the model's released results in order: each one's header
    (RESULT, its flags OVERFLOW and RESENT as the model's, job, round, chunk, group, scale, element count, session)
    on every row (OVERFLOW on its last row: an own result's earlier rows may not have it yet), its payload's elements in the rows' lanes, ``last`` on its last row only;
    returns how many results."""
    layout = result_row_layout(width)
    k = 0
    for n, r in enumerate(want):
        count = len(r.payload)
        beats = payload_beats(count, width)
        assert k + beats <= len(rows), f"result {n} (job {r.job_id} chunk {r.chunk}): {len(rows) - k} rows, want {beats}"
        hdr = pack(AggHeaderLayout, {"msg_type": wire.MsgType.RESULT, "flags": r.flags,
                                     "group_id": r.group_id, "job_id": r.job_id, "round_id": r.round_id,
                                     "chunk": r.chunk, "scale_exp": r.scale_exp, "element_count": count,
                                     "session": r.session})
        got = [{name: rows[k + b] >> f.offset & ((1 << f.width) - 1) for name, f in layout} for b in range(beats)]
        ovf = pack(AggHeaderLayout, {"flags": wire.Flags.OVERFLOW})
        for b, row in enumerate(got):
            # a result from its completer's own responses has each row's flag after that row (only
            # the last row's is the result's: FrameFIFO keeps it), so OVERFLOW may be 0 before it
            mask = ~ovf if b < beats - 1 and hdr & ovf else ~0
            assert row["hdr"] & mask == hdr & mask, \
                f"result {n} (job {r.job_id} chunk {r.chunk}) row {b}: header {row['hdr']:#x}, want {hdr:#x}"
            assert row["last"] == (b == beats - 1), f"result {n} row {b}: last {row['last']}" + str(
                [(x >> layout["hdr"].offset + 72 & 0xFFFFFFFF, x >> layout["last"].offset & 1) for x in rows[:12]] + [(r.chunk, len(r.payload)) for r in want[:6]])
        elements = np.concatenate([lanes_of(row["data"], lanes(width)) for row in got])[:count]
        assert (elements == r.payload).all(), f"result {n} (job {r.job_id} chunk {r.chunk}): {elements}, want {r.payload}"
        k += beats
    assert k == len(rows), f"{len(rows) - k} rows beyond the {len(want)} results"
    return len(want)


async def _resets_between(dut, jobs: int, resets: list[tuple[int, int, int]]) -> None:
    """Each window reset (index, job, head) offered right after the ``index``-th request is taken
    (the harness takes no request while a reset waits, so it falls between those two messages),
    until taken; the requests counted as they are taken."""
    taken, k, offered, took = 0, 0, False, False
    while k < len(resets) or offered:
        await RisingEdge(dut.clk)
        if took:  # taken at this edge
            dut.reset__valid.value = 0
            offered, k = False, k + 1
        if not offered and k < len(resets) and taken == resets[k][0]:
            dut.reset__payload.value = pack(ResetLayout(jobs), {"job": resets[k][1], "head": resets[k][2]})
            dut.reset__valid.value = 1
            offered = True
        await ReadOnly()
        fire = int(dut.req__valid.value) & int(dut.req__ready.value)
        assert not (offered and fire), "a request taken while a window reset waits"
        taken += fire
        took = offered and bool(int(dut.reset__ready.value))


async def _watch_outcomes(dut, seen: list) -> None:
    """Every outcome code the gate takes a decision with, in order."""
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if int(dut.outcome_valid.value):
            seen.append(int(dut.outcome.value))


async def _count_taken(dut, taken: list[int]) -> None:
    """Requests taken on ``req`` so far (``taken[0]``)."""
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        taken[0] += int(dut.req__valid.value) & int(dut.req__ready.value)


async def _watch_heads(dut, slots: int, jobs: int, seen: dict[int, list[int]]) -> None:
    """The cycle after every released run (``released_valid``) the job's ``head`` is the run's new
    head (asserted here); each job's heads then, in order, into ``seen``."""
    layout, hl, due = released_layout(slots, jobs), head_layout(slots), None
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if due is not None:
            got = int(dut.head.value) >> (32 * due[0]) & M32
            assert got == due[1], f"job {due[0]}'s head {got:#x} after a release, want {due[1]:#x}"
            seen[due[0]].append(got)
        due = None
        if int(dut.released_valid.value):
            r = _unpack(layout, int(dut.released.value))
            due = (r["job"], _unpack(hl, r["head"])["chunk"])


def _check_heads(dut, am: AggregatorModel, made, seen: dict[int, list[int]], in_order: list[bool]) -> int:
    """``head`` after every release is the model's head after it (the model's heads after each
    releasing decision made in order (``in_order``: each message's mode), per job, in order,
    among the hardware's: a long run may release in two parts) and at the end each job's model
    head; returns the heads checked."""
    checked = 0
    for j, hw in seen.items():
        want = [[r.chunk for r in results if r.job_id == j and not r.resent]
                for (*_, results), ordered in zip(made, in_order, strict=True) if ordered]
        want = [(c[-1] + 1) & M32 for c in want if c]
        it = iter(hw)
        assert all(h in it for h in want), f"job {j}'s heads {hw[:10]}..., want {want[:10]}... among them"
        got = int(dut.head.value) >> (32 * j) & M32
        assert got == am.job_table[j].head, f"job {j}'s head {got:#x} at the end, want {am.job_table[j].head:#x}"
        checked += len(want) + 1
    return checked


async def _probe(dut, rng: random.Random, made, windows: list[int], outcomes: list, taken: list[int],
                 samples: list, on: list[bool], keys: list[tuple[int, int]] | None = None) -> None:
    """Probes while the messages flow: a job and chunk (one of ``keys`` if given, else a recent
    message's, another chunk of its slot, or any; half the time the last one again, later) on
    ``probe_job`` / ``probe_chunk``
    until ``probe_ok``, then its answer as (job, chunk, bitmap, decisions out, requests taken):
    the record it answers with had every ADD issued before the decisions out (a later one to its
    slot makes it stale), the head it compares with moved at most by the requests taken."""
    key = None
    while on[0]:
        if key is None or rng.random() < 0.5:
            if keys:
                key = rng.choice(keys)
            else:
                msg = made[min(max(taken[0] - rng.randint(0, 4), 0), len(made) - 1)][0]
                job, chunk = rng.choices([(msg.job_id, msg.chunk), (msg.job_id, msg.chunk + windows[msg.job_id]),
                                          (rng.randrange(len(windows)), rng.getrandbits(32))], [0.6, 0.2, 0.2])[0]
                key = (job, chunk & M32)
        await RisingEdge(dut.clk)
        dut.probe_job.value, dut.probe_chunk.value = key
        for _ in range(20000):
            await ReadOnly()
            if int(dut.probe_ok.value) or not on[0]:
                break
            await RisingEdge(dut.clk)
        else:
            raise AssertionError(f"no probe answer for job {key[0]} chunk {key[1]:#x}")
        if on[0]:
            samples.append((*key, int(dut.probe_bitmap.value), len(outcomes), taken[0]))
        await ClockCycles(dut.clk, rng.randint(1, 120))


# what a probe may meet across a release-mode change (``_probe_kind``)
PROBE_KINDS = ("held_on_completion", "released_ahead_in_order")


def _probe_kind(am: AggregatorModel, snap: SimpleNamespace, job: int, chunk: int) -> str | None:
    """What (job, chunk) is in the model state ``snap`` (``_snap``) across a release-mode change:
    ``held_on_completion`` (COMPLETE: completed in order behind the head, still held, while the
    mode is on completion), ``released_ahead_in_order`` (RELEASED and not behind its job's head
    while in order: released on completion), else None."""
    t = snap.tags[am.slot_index(am.job_table[job], chunk)]
    if t[Tag.JOB] != job or t[Tag.CHUNK] != chunk:
        return None
    if t[Tag.STATE] == SlotState.COMPLETE and snap.release == ReleaseMode.ON_COMPLETION:
        return "held_on_completion"
    ahead = (chunk - snap.heads[job]) & M32 < 1 << 31
    if t[Tag.STATE] == SlotState.RELEASED and snap.release == ReleaseMode.IN_ORDER and ahead:
        return "released_ahead_in_order"
    return None


def _check_probes(am: AggregatorModel, snaps: list, samples: list) -> dict[str, int]:
    """Each probe's bitmap is the golden model's for its job and chunk after some number of
    decisions between those out and the requests taken when it answered (every probe checked,
    the wrong ones reported together); counted: the probes held and empty, and per
    ``PROBE_KINDS`` those whose chunk is of that kind in every such model state."""
    held, wrong, kinds = 0, [], dict.fromkeys(PROBE_KINDS, 0)
    for job, chunk, bitmap, lo, hi in samples:
        near = [snap for snap in snaps if lo <= snap.count <= hi]
        want = {_model_probe(am, snap.tags, job, chunk) for snap in near}
        kind = {_probe_kind(am, snap, job, chunk) for snap in near}
        if bitmap not in want:
            wrong.append(("/".join(sorted(map(str, kind))),
                          f"job {job} chunk {chunk:#x} (decisions {lo}..{hi}): {bitmap:#x}, want one of {want}"))
        held += bitmap != 0
        if len(kind) == 1 and None not in kind:
            kinds[kind.pop()] += 1
    assert not wrong, f"{len(wrong)} of {len(samples)} probes wrong: " + "; ".join(  # the first 3 of each kind
        f"{k}: {sum(w[0] == k for w in wrong)}, e.g. " + ", ".join([w[1] for w in wrong if w[0] == k][:3])
        for k in sorted({w[0] for w in wrong}))
    return {"probes": len(samples), "probes_held": held, "probes_empty": len(samples) - held,
            **{f"probes_{k}": n for k, n in kinds.items()}}


def _cycle() -> int:
    """The simulation's time in clock cycles."""
    return int(get_sim_time("ns")) // CLOCK_NS


def _released_chunks(released: list, jobs: int) -> dict[int, list[int]]:
    """The chunks of each released part (job, new head chunk, head slot, start, run: the 1 + run
    chunks before the new head), per job in order."""
    out = {j: [] for j in range(jobs)}
    for job, head, _slot, _start, run in released:
        out[job] += [(head - 1 - run + i) & M32 for i in range(1 + run)]
    return out


def run_decision_records(width: int, *, seed: int, in_order: bool = True, messages: int = 250, depth: int = 64,
                         outstanding: int = 32, p_reset: float = 0.025, p_pause: float = 0.01,
                         queues: dict | None = None, sums_outstanding: int | None = None, log2_window: int = 3,
                         **tb: object) -> None:
    """Generate the harness at ``width`` (2 ** ``log2_window`` * 2 slots of 8 rows, ``max_elements``
    a slot's, 3 jobs in regions of 2 ** ``log2_window``, 4 and 4 slots, a payload FIFO of ``depth``
    beats, each engine's table of ``outstanding``, the slot store's of ``sums_outstanding`` if
    given; ``queues``: the harness's ``release_depth`` / ``prefetch`` / ``headers``, its defaults
    if not) and run ``decisions_on_records`` (``tb``: latency_range, p_axi, p_stream,
    p_result_pause, resend_repeats, scenario; ``stream`` (a group) and ``out`` for a bench's run)."""
    window = 1 << log2_window
    regions = [(0, log2_window), (window, 2), (window + 4, 2)]
    queues = queues or {}
    params = {**harness_params(width, slots=2 * window, depth=depth, outstanding=outstanding), "jobs": len(regions),
              **queues}
    if sums_outstanding is not None:
        params["sums"]["outstanding"] = sums_outstanding
    tight = "".join(f"_{k[0]}{v}" for k, v in sorted(queues.items())) + \
        ("" if sums_outstanding is None else f"_s{sums_outstanding}") + ("" if log2_window == 3 else f"_l{log2_window}")
    top = f"decision_records_w{width}_d{depth}_n{outstanding}{tight}"
    path = generate_verilog(decision_records_with_latency, name=top, params=params)
    run_cocotb(verilog=path, toplevel=top, test_module=__name__, testcase="decisions_on_records",
               params={**params, "messages": messages, "seed": seed, "regions": regions, "in_order": in_order,
                       "p_reset": p_reset, "p_pause": p_pause, **tb},
               timeout_s=600)
