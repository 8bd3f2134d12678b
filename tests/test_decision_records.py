"""The payload gate deciding with the record decision (``hdl/decision_record_harness.py``; issue
16, large S step 4; docs/large_slots.md, "The record store"): the cocotb bench
(``sim/tb_decision_records.py``) on ``AxiRam`` with latency 20-200 and pauses on every channel and
stream, records starting as garbage (freed by each job's first window reset, ``FreeSweep``) and
window resets of random jobs mid-run, every outcome, store response, result row, released chunk,
record and (``RecordEmitter``) every released result's rows read back against the golden model,
resent results (RESULT_RESENT, in order) included;
and the harness's parameter checks."""

from __future__ import annotations

import pytest
from stream_helpers import _cell_counts, _yosys_on, comb_cells_table, comb_cone, run_testbench

from wanreduce.hdl.decision_record_harness import DecisionOnRecords
from wanreduce.hdl.decision_state import DecisionState
from wanreduce.sim.tb_decision_records import run_decision_records
from wanreduce.sim.tb_gate_record import harness_params


@pytest.mark.parametrize(("kw", "msg"), [
    ({"sums": {"slots": 16}}, "sums must give row_bits"),
    ({"records": {"side_shape": 8}}, r"records must not give \['side_shape'\]"),
    ({"release_depth": 6}, "release_depth must be at least 7"),
])
def test_decision_on_records_rejects_bad_parameters(kw: dict, msg: str) -> None:
    params = {"address_width": 16, "jobs": 2, "depth": 16, "sums": {"slots": 16, "row_bits": 3},
              "records": {"base_address": 0x1000}, **kw}
    with pytest.raises(ValueError, match=msg):
        DecisionOnRecords(64, **params)


@pytest.mark.cocotb
@pytest.mark.parametrize("in_order", [True, False], ids=["in_order", "on_completion"])
def test_cocotb_decisions_on_records(in_order: bool) -> None:
    """W 64 (records of 4 beats): random contributions of three jobs, latency 20-200, pauses
    everywhere: every outcome, response, result row, released chunk, record and emitted result as
    the model's."""
    run_decision_records(64, seed=27 + in_order, in_order=in_order)


@pytest.mark.cocotb
@pytest.mark.parametrize("in_order", [True, False], ids=["in_order", "on_completion"])
def test_cocotb_decisions_on_records_w256(in_order: bool) -> None:
    """W 256 (a record a beat), in order and on completion: as at W 64."""
    run_decision_records(256, seed=29 if in_order else 30, in_order=in_order)


@pytest.mark.cocotb
def test_cocotb_probe_across_release_mode_changes() -> None:
    """W 64, job 0 across release-mode changes (``_mode_changes`` in sim/tb_decision_records.py):
    chunks completed in order and held behind the head, then on completion others completed and
    released at once, then back in order; every probe as the model's, among them at least 3 of a
    held chunk while on completion (its bitmap) and 3 of a chunk released on completion while
    in order (0). The probe's pending bit is ``DecisionState``'s: with main 460d16f's rule (DONE
    and not behind the head, in order only; its mode port driven with each request's) 40 of the
    111 probes read wrong, all 21 and 18 of those two kinds among them."""
    run_decision_records(64, seed=31, scenario="mode_changes")


# the record path's waits made to bind (docs/large_slots.md, "The results", "The three waits"):
# small queues (release queue 7, the emitter's 1 + 2), a slot store of 4 outstanding commands,
# results paused 450 cycles at 1 % a cycle, window resets at 8 % a message, and each resend
# asked again 6 times (each queues its slot while the results wait)
TIGHT = {"queues": {"release_depth": 7, "prefetch": 1, "headers": 1}, "sums_outstanding": 4,
         "p_result_pause": 0.01, "p_reset": 0.08, "p_pause": 0.0, "p_stream": 1.0, "resend_repeats": 6}


@pytest.mark.cocotb
@pytest.mark.slow  # 1-3 min each under load: CI's `make test-slow`
def test_cocotb_decisions_on_records_tight_queues() -> None:
    """W 64 on completion with ``TIGHT``: the release queue fills while the results wait (without
    the harness's admission of release candidates the state's room wait holds a candidate in C0
    with the emitter's record READ behind it: the run sticks); every result as the model's."""
    run_decision_records(64, seed=27, in_order=False, **TIGHT)


@pytest.mark.cocotb
@pytest.mark.slow  # 1-3 min each under load: CI's `make test-slow`
def test_cocotb_decisions_on_records_tight_in_order() -> None:
    """W 64 in order with ``TIGHT``'s queues and store table, results paused at 1 %, resets at 8 %:
    released runs wait in the queue when a window reset comes (without the reset's wait for the
    emitter the sweep frees a released record before it is read: result 29's header is 0x2)."""
    run_decision_records(64, seed=27, in_order=True, queues=TIGHT["queues"], sums_outstanding=4,
                         p_result_pause=0.01, p_reset=0.08)


@pytest.mark.slow
@pytest.mark.cocotb
def test_cocotb_decisions_on_records_tight_w256() -> None:
    """W 256 (a record a beat) in order with the in-order tight configuration above: every
    result as the model's. (On completion with ``TIGHT`` every check but the stream's coverage
    passed at seeds 30 and 31: too few fresh completions among the repeated resends.)"""
    run_decision_records(256, seed=29, in_order=True, queues=TIGHT["queues"], sums_outstanding=4,
                         p_result_pause=0.01, p_reset=0.08)


def _harness() -> DecisionOnRecords:
    """A small harness for Amaranth's simulator: W 64, S 16, two jobs."""
    return DecisionOnRecords(**{**harness_params(64, slots=16, depth=16, outstanding=4), "jobs": 2})


# the record path's own error flags: each one's sticky flip-flop, forced to 1 in the simulator
RECORD_ERRORS = {"error": lambda d: d.sums.gate.error, "split_error": lambda d: d.sums.split.error,
                 "state_error": lambda d: d.records.state.error}


@pytest.mark.parametrize("source", sorted(RECORD_ERRORS))
def test_record_error_is_the_or_of_the_record_paths_errors(source: str) -> None:
    """``record_error`` is 0 until one of the gate's ``error``, ``split_error``, ``state_error``
    is set (forced here), then 1 and stays 1; ``mem_error`` stays 0. (``copy_error``, the
    fourth, is combinational inside the arbiter: not forced.)"""
    dut = _harness()

    async def tb(ctx) -> None:
        await ctx.tick().repeat(4)
        assert (ctx.get(dut.record_error), ctx.get(dut.mem_error)) == (0, 0), "an error flag out of reset"
        ctx.set(RECORD_ERRORS[source](dut), 1)
        await ctx.tick().repeat(3)
        assert ctx.get(getattr(dut, source)) == 1, f"{source} not set"
        assert (ctx.get(dut.record_error), ctx.get(dut.mem_error)) == (1, 0), "record_error not the OR"

    run_testbench(dut, tb)


@pytest.mark.parametrize(("axi_id", "flag"), [(0, "store_mem_error"), (1, "rec_mem_error")])
def test_mem_error_is_the_or_of_the_axi_errors(axi_id: int, flag: str) -> None:
    """A read response with SLVERR on ``m_axi_mem`` with the slot store's ID (0) or the record
    engine's (1) sets that engine's flag and ``mem_error`` (their OR, with the ID arbiter's),
    not ``record_error``."""
    dut = _harness()

    async def tb(ctx) -> None:
        await ctx.tick().repeat(4)
        assert ctx.get(dut.mem_error) == 0, "mem_error out of reset"
        for name, value in (("rvalid", 1), ("rid", axi_id), ("rresp", 2), ("rlast", 1)):
            ctx.set(getattr(dut, f"m_axi_mem_{name}"), value)
        for _ in range(20):
            await ctx.tick()
            if ctx.get(dut.m_axi_mem_rready):
                break
        ctx.set(dut.m_axi_mem_rvalid, 0)
        await ctx.tick().repeat(6)
        assert ctx.get(getattr(dut, flag)) == 1, f"{flag} not set"
        assert (ctx.get(dut.mem_error), ctx.get(dut.record_error)) == (1, 0), "mem_error not the OR"

    run_testbench(dut, tb)


# the record path's ready chains (docs/large_slots.md, "The record path's ready chains (session
# 33)"): a flip-flop of one part -> logic -> a flip-flop of another, cut by the skid buffers on
# the decisions and between the pin and the fork, the owner FIFO's registered head, the pin's
# registered ``quiet`` and the release queue's registered ``room``
READY_CHAINS = {
    # chain 1: the gate's start (its decision's ready) -> the record engine's response handshake
    ("sums.gate.busy", "inflight"), ("sums.gate.busy", "cands"), ("sums.gate.busy", "records.engine.owed"),
    # chain 2: the release queue's head -> its level -> the candidates' admission / ``quiet`` -> the
    # pin; -> ``room`` -> the PEEK (``PendingWords``' operation, ``pk_d1`` its first delay)
    ("records.state.queue.fifo.queue.r_rdy", "pin.r_pin"), ("records.state.queue.fifo.queue.r_rdy", "pin.low0"),
    ("records.state.queue.fifo.queue.r_rdy", "records.state.pk_d1"),
}
# and what still has logic between its ends: the chains end in these flip-flops now
STILL = {("sums.gate.busy", "decisions.m__valid"), ("records.state.queue.fifo.queue.r_rdy", "quiet"),
         ("records.state.queue.fifo.queue.r_rdy", "records.state.queue.room_r")}


# the record path's probe and control chains (docs/large_slots.md, "The record path's probe and
# control chains (session 34)"): the fork's engine side reached the gate's request (the gate and
# the engine took it together), the admission's sums and the probe's compares reached the engine's
# command, the owner FIFO and the gate; on s34a 5f38b68 (the probe's registers had no names then)
# cands -> inflight / the owner FIFO's level / the gate's in_busy had 36 / 41 / 18 cells,
# reserved -> inflight 28, r_rdy -> the owner FIFO's level 40, the engine's cmd ready -> in_busy 11
PROBE_CHAINS = {
    ("cands", "inflight"), ("cands", "owner.queue.inner_level"), ("cands", "sums.gate.in_busy"),
    ("reserved", "inflight"), ("records.state.queue.fifo.queue.r_rdy", "owner.queue.inner_level"),
    ("records.engine.cmd_in.s__ready", "sums.gate.in_busy"),
    ("probe.v_chunk", "inflight"), ("probe.v_chunk", "owner.queue.inner_level"),
}
# where those chains end now: the admission's flip-flop, the probe's ``other``, the fork's ``sent``
PROBE_ENDS = {("cands", "room_r"), ("reserved", "room_r"), ("probe.v_chunk", "probe.other"),
              ("records.engine.cmd_in.s__ready", "adds.m__valid")}
ARITH = {"$add", "$sub", "$lt", "$le", "$gt", "$ge", "$eq", "$ne", "$pmux"}


def _chains_cut(chains: set, ends: set, more: set) -> dict:
    """Every name of the pairs is in the harness's netlist; no ``chains`` pair has logic between
    its ends within a cycle, every ``ends`` pair has some; the table of cells (with ``more``'s)."""
    pairs = chains | ends | more
    _yosys_on(_harness(), "".join(f"select -assert-min 1 w:{name}; " for name in sorted({n for p in pairs for n in p})))
    table = comb_cells_table(_harness(), sorted({s for s, _ in pairs}), sorted({r for _, r in pairs}))
    assert {pair: table[pair] for pair in chains if table[pair]} == {}
    assert {pair for pair in ends if not table[pair]} == set()
    return table


def test_the_record_paths_probe_and_admission_chains_are_cut() -> None:
    """No logic within a cycle across each chain above (yosys on the harness), their new ends
    have some (every name is in the netlist); and the request taken into the pin's register
    (``req.valid`` -> ``load``) reaches ``r_pin`` only through the final choice of flag, no
    comparison (on s34a 5f38b68: 56 cells, 7 subtractions among them)."""
    table = _chains_cut(PROBE_CHAINS, PROBE_ENDS, {("req__valid", "pin.r_pin"), ("req__valid", "pin.r_load")})
    load = table["req__valid", "pin.r_load"]  # round 6: the choice of flag after the flip-flops
    assert 0 < sum(load.values()) <= 4 and not set(load) & ARITH, load
    assert not table["req__valid", "pin.r_pin"], table["req__valid", "pin.r_pin"]


# round 3 (issue 16, docs/large_slots.md, "The record path's admission and the gate's request
# (session 35, round 3)"): the gate's request ready (its payload FIFO's read pointer ``rp`` -> its
# room -> ``take`` -> ``req.ready``) reached the engine's command, so ``inflight``, the owner FIFO
# and the admission, and ``held``'s output register;
# the release queue's level reached ``room_r``'s sums; the response handshake (the decisions'
# ready, the owner FIFO's head, the results' ready: the emitter's ``own_taken``) reached ``cands``
# and ``reserved``. On main 47267f1 each pair below had logic between its ends (the counts in
# docs/large_slots.md)
ROUND3_CHAINS = {
    *(("sums.gate.fifo.rp", end) for end in ("inflight", "owner.queue.inner_level", "room_r", "reserved", "cands",
                                            "held.m__valid", "adds.m__valid")),
    ("records.state.queue.fifo.queue.r_rdy", "room_r"), ("records.state.queue.fifo.queue.inner_level", "room_r"),
    *((src, end) for src in ("decisions.s__ready", "owner.head.m__valid") for end in ("reserved", "cands")),
    ("results__ready", "reserved"),
}
# where they end now: the payload FIFO's registered ready, the level bound, the answers counted a
# cycle late (the engine's ready ends in the fork's buffer ``adds``: PROBE_ENDS)
ROUND3_ENDS = {("sums.gate.fifo.rp", "sums.gate.fifo.s__ready"), ("records.state.queue.fifo.queue.inner_level", "lvl"),
               ("decisions.s__ready", "rows_returned"), ("owner.head.m__valid", "cands_left"),
               ("results__ready", "rows_own")}
# round 4 (docs/large_slots.md, "(session 35, round 4)"): ``rows_back``'s adder (the rows returned
# plus the emitter's ``own_taken``) sat after the response handshake's late select; it adds two
# flip-flops now. On main 43c9dd8 each pair below had logic between its ends (rows_back a flip-flop)
ROUND4_CHAINS = {(src, "rows_back") for src in ("decisions.s__ready", "owner.head.m__valid", "results__ready")}
# and the marker's ``lasts - snap`` (the gate's count of messages whose last command is pushed, the
# snapshot) reached the gate's command ready, ``start`` and its ``error``; it ends in ``lasts_caught``
ROUND4_CHAINS |= {(src, end) for src in ("sums.lasts", "snap") for end in ("sums.gate.error", "sums.gate.busy")}
ROUND4_ENDS = {("sums.lasts", "lasts_caught"), ("snap", "lasts_caught")}
SUMS = {"$add", "$sub", "$lt", "$le", "$gt", "$ge"}
# round 5 (docs/large_slots.md, "(session 36, round 5)"): the store split's queue level (its
# ``room``, a compare) -> the store's command handshake -> the arbiter's ``e_go`` -> the emitter's
# ``data_cmd.ready`` -> its ``take`` (chain A: -> ``read_chunk`` -> ``+ 1`` -> the pin's
# ``emitted``; chain B: -> ``rec_data.ready`` -> the response handshake -> ``inflight``,
# ``cands_left``, ``rows_returned``, the owner FIFO's read); the arbiter's level (its room, a
# compare) -> ``e_room`` -> the marker, and -> the gate's command ready -> its ``start``. On main
# 96d8c95 each pair below had logic between its ends (the split's level: 27 cells into
# ``emitted0`` with the ``$add``, 14 / 14 / 16 / 15 into ``inflight`` / ``cands_left`` /
# ``rows_returned`` / the owner FIFO's head, 13 into ``marked``; the arbiter's phase 12 / 12 / 14
# / 13 into those four; the arbiter's level 6 into ``marked``, 20 / 23 into the gate's ``error`` /
# ``busy``; counts in docs/large_slots.md)
LATE = ("sums.split.queue.level", "sums.arbiter.e_phase", "sums.store.cmd_in.s__ready")
ROUND5_CHAINS = {
    *(("sums.split.queue.level", end) for end in ("pin.emitted0", "pin.emitted1", "marked")),
    *((src, end) for src in LATE for end in ("inflight", "cands_left", "rows_returned", "owner.head.m__valid")),
    *(("sums.arbiter.level", end) for end in ("marked", "sums.gate.error", "sums.gate.busy")),
}
# where they end now: the split's and the arbiter's ``room`` flip-flops; the store's ready still
# reaches ``emitted`` (``read_done``, the enable: no sum), ``emitted`` adds nothing after the
# select (ROUND5_NO_SUM)
ROUND5_ENDS = {("sums.split.queue.level", "sums.split.room"), ("sums.arbiter.level", "sums.arbiter.room_r")}
ROUND5_NO_SUM = {(src, end) for src in LATE[1:] for end in ("pin.emitted0", "pin.emitted1")}


def test_the_record_paths_admission_and_gate_request_chains_are_cut() -> None:
    """No logic within a cycle across each round-3 / round-4 / round-5 chain above (yosys on the
    harness), their new ends have some (every name is in the netlist); the release queue's push
    (from the state's effect register ``fx``) reaches ``room_r`` only through choices, no sum or
    compare (on main 47267f1 it went through ``level + push`` and the compares); ``rows_back``
    adds flip-flops only, the marker's subtractions end in ``lasts_caught`` (round 4); the store's
    command ready reaches the pin's ``emitted`` through no sum (round 5: the ``+ 1`` is made
    before the emitter's select; on main 96d8c95 one ``$add`` among 25 / 26 cells)."""
    table = _chains_cut(ROUND3_CHAINS | ROUND4_CHAINS | ROUND5_CHAINS, ROUND3_ENDS | ROUND4_ENDS | ROUND5_ENDS,
                        {("records.state.fx", "room_r"), *ROUND5_NO_SUM})
    push = table["records.state.fx", "room_r"]
    assert push and not set(push) & SUMS, push
    late = {pair: table[pair] for pair in ROUND5_NO_SUM}
    assert all(late.values()) and not any(set(c) & SUMS for c in late.values()), late
    sources, cells = comb_cone(_harness(), "rows_back")  # the adder, from the two flip-flops only
    assert sources == {"rows_returned", "rows_own"} and "$add" in cells, (sources, cells)


# round 6 (docs/large_slots.md, "(session 37, round 6)"): the pin's flag. Within a cycle of
# ``proc; flatten`` the request's handshake reached ``r_pin`` only through its final choice, but
# synthesis shares the two flags' compares (yosys ``share``, after ``alumacc``: one compare of
# operands chosen by ``load``), so on main 9b17453 ``req.valid`` reached ``r_pin`` through 4
# ``$alu`` and the window's ``$shl``, and so did the pin's ``out.ready`` (``held.s__ready``)
SHARE = "opt -nodffe -nosdff; wreduce; peepopt; opt_clean; alumacc; share; opt -nodffe -nosdff; opt_clean; "


def test_the_pins_handshake_reaches_no_shared_compare() -> None:
    """After synthesis's resource sharing (``SHARE``), neither the request's valid nor the pin's
    ``out.ready`` reaches a compare, a sum or a shift into the pin's flag (``r_pin``, now the
    choice after the two flags' flip-flops) or into those flip-flops."""
    srcs, regs = ["req__valid", "held.s__ready"], ["pin.r_pin", "pin.r_pin_off", "pin.r_pin_cur", "pin.r_load"]
    stop = "-$dff,$memrd,$memrd_v2"
    pairs = [(s, r) for s in srcs for r in regs]
    script = SHARE + "".join(
        f"select -assert-min 1 w:{r}; select -set fwd w:{s} %co*:{stop}; "
        f"select -set bwd w:{r} %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:{stop}; "
        f"tee -q -o stat{i}.txt stat @fwd @bwd %i c:* %i t:$dff %d; " for i, (s, r) in enumerate(pairs))
    stats = _yosys_on(_harness(), script, *[f"stat{i}.txt" for i in range(len(pairs))])
    table = {pair: _cell_counts(st) for pair, st in zip(pairs, stats, strict=True)}
    assert {pair: c for pair, c in table.items() if set(c) & {"$alu", "$shl", "$sub", "$add", *ARITH}} == {}
    assert table["req__valid", "pin.r_load"], table


# round 6: the pending bit's read (the block RAM's late output) reached ``c2_pend`` through the
# bit's 64-to-1 choice and the bypass's slot compares (``fx_slot == ahead_slot``); the late
# operand had the C2 compares ``fx_slot == c2_slot`` and ``fx_job == c2_job`` (on main 9b17453:
# two ``$eq`` in ``late``'s cone); a CLEAR's region mask (128 ``$ge`` / ``$le``, a ``$gt``) was in
# front of the banks' write data
def _state() -> DecisionState:
    return DecisionState(slots=32768, jobs=2, regions=True)


def test_the_late_operand_has_no_compare_and_the_bit_read_one_level() -> None:
    """``late``'s cone has no equality compare (they are made at C1 and registered:
    ``same_slot`` / ``same_job``), its pending bit comes from the bit port's registers; the
    word read reaches, within a cycle, only the bit port's first register (``rd_part0``, through
    choices only) and not the bypass's flip-flops."""
    sources, cells = comb_cone(_state(), "late")
    assert not {"$eq", "$ne"} & set(cells), cells
    assert {"same_slot", "byv", "pending.rd_part0", "pending.rd_hi0"} <= sources, sorted(sources)
    table = comb_cells_table(_state(), ["pending.rd_word0"], ["pending.rd_part0", "byp", "byv", "same_slot"])
    part = table["pending.rd_word0", "pending.rd_part0"]
    assert part and not set(part) & (ARITH | {"$alu", "$sub", "$add"}), part
    assert not any(table["pending.rd_word0", r] for r in ("byp", "byv", "same_slot")), table


def test_a_clears_mask_is_no_compare_before_the_banks() -> None:
    """The banks' write data (``wr_a``) sees no region compare: a CLEAR's mask is ``clr_m``, a
    flip-flop (on main 9b17453: 128 ``$ge``, 128 ``$le`` and a ``$gt`` in ``wr_a``'s cone)."""
    sources, cells = comb_cone(_state(), "pending.wr_a")
    assert not {"$gt", "$ge", "$lt", "$le", "$sub"} & set(cells), cells
    assert "pending.clr_m" in sources, sorted(sources)


# round 7 (docs/large_slots.md, "(session 38, round 7)"): the sweep's ``owns`` was ``pending != 0``
# (a 16-bit compare) in front of the response handshake: on main 8576c88 ``sweep.pending`` reached
# ``inflight`` / the owner FIFO's head (``skid_valid``, ``m__valid``) through 27 / 24 / 24 cells
ROUND7_CHAINS = {("sweep.pending", end) for end in ("inflight", "owner.head.skid_valid", "owner.head.m__valid")}
ROUND7_ENDS = {("sweep.pending", "sweep.owns_r")}


def test_the_sweeps_count_reaches_no_response_handshake() -> None:
    """``owns`` is a flip-flop (``owns_r``, ``nonzero_next``): the sweep's count reaches neither
    ``inflight`` nor the owner FIFO's head within a cycle, only ``owns_r``."""
    _chains_cut(ROUND7_CHAINS, ROUND7_ENDS, set())


# round 7 (docs/large_slots.md, "(session 38, round 7)"): the region masks compared the step's
# words with the region's first and last words (``wa == w_base`` ..., then ``lo_e > hi_e``, a
# carry chain) in front of ``region_a_r`` / ``region_b_r`` and the scan's inputs; P1 compared
# ``wb_c`` (``next_word(wa_c)``: ``+ 1``, a compare, a choice) with ``wa_c`` into ``same`` /
# ``b_scan``. On main 8576c88: two ``$eq`` and a ``$gt`` in each mask's cone, a ``$add`` from
# ``wa_c`` into ``same`` and ``b_scan``
def test_the_region_masks_see_flags_and_p1_no_compare_after_the_next_word() -> None:
    """Each region mask's cone has no compare but with constants (its word's flags, ``fl_*``,
    loaded with the words); ``wa_c`` (P1's first word) reaches ``same``, ``b_scan`` and the
    second word's flags through no ``$add`` (the compares are ``wa_c``'s, made in parallel)."""
    for tag in ("a", "b"):
        sources, cells = comb_cone(_state(), f"pending.region_{tag}")
        assert not {"$eq", "$ne", "$gt", "$lt", "$add", "$sub"} & set(cells), (tag, cells)
        assert {f"pending.fl_{tag}_base", f"pending.fl_{tag}_last", "pending.fl_lo_gt_hi"} <= sources, sorted(sources)
    ends = ["pending.same", "pending.b_scan", "pending.fl_b_base", "pending.fl_b_last", "pending.fl_own_b"]
    table = comb_cells_table(_state(), ["pending.wa_c"], ends)
    assert all(table.values()), table
    assert {pair: c for pair, c in table.items() if {"$add", "$sub"} & set(c)} == {}


# round 7: the scan's S1 (``scan_ix_lo_w_r`` ...: the halves' carry chains and index trees) started
# behind ``below`` (``first`` / ``off``'s 64 compares, ORed into ``xa_r`` in S1); on main 8576c88
# ``off`` and ``first`` reached each of S1's ``lo`` registers
S1_LO = ["pending.scan_ix_lo_w_r", "pending.scan_run_lo_w_r", "pending.scan_all_lo_w_r"]


def test_the_scans_first_stage_starts_at_flip_flops() -> None:
    """``below`` is ORed into ``scan_xa_r`` in R: within a cycle ``off`` / ``first`` reach none of
    S1's ``lo`` half's registers, only ``below``'s own (``scan_below_w_r``) and ``scan_xa_r``."""
    table = comb_cells_table(_state(), ["pending.off", "pending.first"],
                             [*S1_LO, "pending.scan_below_w_r", "pending.scan_xa_r"])
    assert {pair: c for pair, c in table.items() if pair[1] in S1_LO and c} == {}
    assert all(table[src, end] for src in ("pending.off", "pending.first")
               for end in ("pending.scan_below_w_r", "pending.scan_xa_r")), table


# round 2 (issue 16): the pending words' addresses. On main 0e64234 (``scan_stages=3``) the cone of
# ``rd_a`` / ``rd_b`` at S 32 768 held the region arithmetic (1 $sub, 15 $gt: the start slot and
# the window masks) and the operation's choice (``peek``: C0's valid, ``quiet``'s rel_d1 / rel_d2)
QUIET_SOURCES = {"c0_valid", "c0_release", "c0_was", "ahead_valid", "busy", "rel_d1", "rel_d2", "rel_on"}


@pytest.mark.parametrize("port", ["rd_a", "rd_b"])
def test_the_pending_words_addresses_have_no_region_arithmetic(port: str) -> None:
    """The words ``PendingWords`` reads (its block RAMs' addresses) come, within a cycle, from no
    subtraction or comparison of the region arithmetic (it ends in the step's registers, P1) and
    not from the PEEK's choice (``quiet``, C0's valid: only the operation's valid sees them); what
    is left is the scan's next word from the step's registers (``$add``, ``$eq``)."""
    sources, cells = comb_cone(DecisionState(slots=32768, jobs=2, regions=True), f"pending.{port}")
    assert not {"$sub", "$gt", "$ge", "$lt", "$le"} & set(cells), cells
    assert not QUIET_SOURCES & sources, sorted(QUIET_SOURCES & sources)


def test_the_record_paths_ready_chains_are_cut() -> None:
    """No logic between the two ends of each ready chain within a cycle (yosys on the harness):
    each end reaches the other only through a flip-flop now; the new flip-flops (the decisions'
    skid buffer, ``quiet``, the release queue's ``room``) are where the chains end (and every
    name is in the netlist: an end that is not would pass vacuously)."""
    pairs = READY_CHAINS | STILL
    _yosys_on(_harness(), "".join(f"select -assert-min 1 w:{name}; " for name in sorted({n for p in pairs for n in p})))
    table = comb_cells_table(_harness(), sorted({s for s, _ in pairs}), sorted({r for _, r in pairs}))
    assert {pair: table[pair] for pair in READY_CHAINS if table[pair]} == {}
    assert {pair for pair in STILL if not table[pair]} == set()
