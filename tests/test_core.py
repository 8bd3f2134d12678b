"""The whole core: CLI Verilog generation, and the cocotb system bench on the generated Verilog
against the golden model for three configurations (sim/tb_core.py, sim/core_scenario.py), with
the slots on chip and, at W 64 and 256, in DRAM (an AxiRam 20..200 cycles away, random pauses
on every AXI channel; hdl/core_dram_harness.py)."""

import pytest
from click.testing import CliRunner

from wanreduce.cli import cli
from wanreduce.hdl.core import CoreParams, WanreduceCore
from wanreduce.hdl.core_dram_harness import CoreDramHarness
from wanreduce.sim.simulator import generate_verilog, run_cocotb

CONFIGS = [
    # the three configurations; senders 2..32 spread over the ports
    dict(ports=2, width=64, slots=8, elements=64, groups=4, jobs=2, senders=3),
    dict(ports=4, width=256, slots=64, elements=256, groups=4, jobs=2, senders=9),
    dict(ports=8, width=512, slots=16, elements=256, groups=4, jobs=4, senders=32),
]
CORE_KEYS = ("ports", "width", "slots", "elements", "groups", "jobs")


def _core_params(cfg: dict, pending: str) -> dict:
    """The core's parameters; ``pending`` (the reducer's pending store) only when not the
    default, so the default core's Verilog (and its simulator build) is the one cached before."""
    core = {k: cfg[k] for k in CORE_KEYS}
    return core if pending == "vector" else core | {"pending": pending}


def _cfg_id(c: dict) -> str:
    return f"W{c['width']}-P{c['ports']}-S{c['slots']}-N{c['senders']}"


@pytest.mark.cocotb
@pytest.mark.parametrize(("cfg", "pending"), [
    *((c, "vector") for c in CONFIGS),
    (CONFIGS[0], "words"),  # the words variant at W 64 in make test, W 256 / 512 slow (build time)
    *(pytest.param(c, "words", marks=pytest.mark.slow) for c in CONFIGS[1:]),
], ids=lambda v: _cfg_id(v) if isinstance(v, dict) else v)
def test_core_system(cfg, pending):
    core = _core_params(cfg, pending)
    verilog = generate_verilog(WanreduceCore, name="wanreduce_core", params=core)
    run_cocotb(verilog=verilog, toplevel="wanreduce_core", test_module="wanreduce.sim.tb_core",
               params={**cfg, "seed": cfg["width"]}, testcase="core_system",
               timeout_s=900)  # CPU seconds: load-independent


DRAM_TOP = "wanreduce_core_dram"


def _dram_core(cfg: dict, pending: str = "vector", slot_memory: str = "dram"):
    core = _core_params(cfg, pending)
    # "dram" is the harness's default: left out so its Verilog (and build) is the one cached before
    core = core if slot_memory == "dram" else core | {"slot_memory": slot_memory}
    return generate_verilog(CoreDramHarness, name=DRAM_TOP, params=core)


# (slot memory, the reducer's pending store): the DRAM reducer with either, the record path
# (``RecordReducer``, its pending bits its own) once
DRAM_MEMORIES = [pytest.param("dram", "vector", id="dram-vector"), pytest.param("dram", "words", id="dram-words"),
                 pytest.param("records", "vector", id="records")]


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg", [
    CONFIGS[0],
    pytest.param(CONFIGS[1], marks=pytest.mark.slow),
], ids=_cfg_id)
@pytest.mark.parametrize(("slot_memory", "pending"), DRAM_MEMORIES)
def test_core_system_dram(cfg, slot_memory, pending):
    """Every core scenario (drops, rejects, saturation, resend, window reset, multi-job) with
    the slots in DRAM (the sums; with ``records`` the per-slot records too, starting as random
    bytes): the same results and counters as the golden model, the memory 20..200 cycles away
    with random pauses on every AXI channel."""
    run_cocotb(verilog=_dram_core(cfg, pending, slot_memory), toplevel=DRAM_TOP, test_module="wanreduce.sim.tb_core",
               params={**cfg, "seed": cfg["width"] + 1, "slot_memory": slot_memory}, testcase="core_system",
               timeout_s=1800)


# Issue 16 item 3: the records core at the Versa's S (docs/large_slots.md, "The core wiring", step 6):
# records 1 MiB + sums 8 MiB in one AxiRam. Job 0's region starts two slots below S (its chunks
# wrap from slot 32 767 to 0), job 1's two below 2^14 (they cross slot bit 14: every slot bit
# flips at both). Regions of 2^10, not 2^14: each region reset (after its JOBj_CFG write, and the
# window reset) FREE-writes the whole region at ~6 cycles a record (4 beats of 64 bits, pauses),
# 49 152 records and ~280 000 cycles with 2^14. A phase probes 2 chunks past each head and every
# chunk sent so far (a record READ each, 20-200 cycles away). Session 31, Verilator: 39 136
# cycles, 7 min of wall time at a load average of 11.5-12.5 on the 2-core machine (55 s of CPU),
# plus ~6 min for the Verilator build when not cached; every phase, head, probe and counter as
# the model's.
LARGE_S = dict(ports=2, width=64, slots=32768, elements=64, groups=4, jobs=2, senders=3)
LARGE_S_SCENARIO = dict(bases=[32766, 16382], log2_window=10, probe_span=2)


def test_large_s_scenario_crosses_the_high_slot_bits_and_probes_what_it_sent():
    """The large-S scenario's regions put chunks on both sides of slot bit 14 and of the wrap at
    S; each phase probes the chunks near each head and every chunk sent to the job (among them
    the ones held); bad regions or spans are one-line errors naming the field."""
    from wanreduce.sim.core_scenario import build

    keys = {k: LARGE_S[k] for k in (*CORE_KEYS, "senders") if k != "width"}
    sc = build(**keys, **LARGE_S_SCENARIO, seed=7)
    m = sc.model
    slots = {j: {m.slot_index(m.job_table[j], c) for ph in sc.phases for jj, c in ph.probes if jj == j}
             for j in (0, 1)}
    assert {32767, 0} <= slots[0] and {16383, 16384} <= slots[1], slots
    held = {k for ph in sc.phases for k, v in ph.probes.items() if v}
    assert {j for j, _ in held} == {0, 1}, "no chunk of each job held at some phase's end"
    assert max(len(ph.probes) for ph in sc.phases) < 64, "the whole window probed"
    x = 4 + (1 << LARGE_S_SCENARIO["log2_window"])  # job 1's chunks released on completion ("busy")
    assert {(1, c) for c in (x, x + 1, x + 2)} <= sc.phases[-1].probes.keys(), "not probed after the mode change"
    for bad, field in [(dict(bases=[0, 100]), "bases"), (dict(log2_window=15), "log2_window must be 2..14"),
                       (dict(bases=[0, 1 << 15]), "bases must be two slots in 0..32767"),
                       (dict(probe_span=0), "probe_span")]:
        with pytest.raises(ValueError, match=field):
            build(**keys, **({"log2_window": 14} | bad))


@pytest.mark.slow
@pytest.mark.cocotb
def test_core_system_records_large_s():
    """The core scenario (drops, rejects, saturation, resend, window reset, multi-job) through the
    records core at S 32 768, W 64, E 64: every result, head, probe and counter as the golden
    model's, the memory 20..200 cycles away with random pauses, every record freed first."""
    run_cocotb(verilog=_dram_core(LARGE_S, slot_memory="records"), toplevel=DRAM_TOP,
               test_module="wanreduce.sim.tb_core", testcase="core_system", timeout_s=900,
               params={**LARGE_S, **LARGE_S_SCENARIO, "seed": 7, "slot_memory": "records"})


@pytest.mark.cocotb
@pytest.mark.parametrize("slot_memory", ["dram", "records"])
def test_core_dram_memory_error_is_never_silent(slot_memory):
    """SLVERR on a read: STATUS.MEM_ERROR (sticky), RESULTS_WITHHELD, no result frame."""
    cfg = dict(CONFIGS[0], elements=16)
    run_cocotb(verilog=_dram_core(cfg, slot_memory=slot_memory), toplevel=DRAM_TOP,
               test_module="wanreduce.sim.tb_core", params={**cfg, "seed": 3, "slot_memory": slot_memory},
               testcase="mem_error_withholds_results", timeout_s=900)


@pytest.mark.cocotb
def test_core_records_read_error_is_never_silent():
    """A records core whose record reads answer SLVERR: STATUS.MEM_ERROR (sticky) and no result
    frame from then on (sim/tb_core.py ``record_read_error_is_never_silent``)."""
    cfg = dict(CONFIGS[0], elements=16)
    run_cocotb(verilog=_dram_core(cfg, slot_memory="records"), toplevel=DRAM_TOP,
               test_module="wanreduce.sim.tb_core", params={**cfg, "seed": 3, "slot_memory": "records"},
               testcase="record_read_error_is_never_silent", timeout_s=900)


@pytest.mark.cocotb
def test_core_records_late_row_read_error_withholds_its_result():
    """A records core: only the last row's sums READ of a multi-row result (8 rows at W 64,
    E 16) fails, after its first rows were read: the result is withheld (RESULTS_WITHHELD),
    STATUS.MEM_ERROR set, no frame leaves (sim/tb_core.py ``late_row_read_error_withholds_its_result``:
    the records core's results are store-and-forward)."""
    cfg = dict(CONFIGS[0], elements=16)
    run_cocotb(verilog=_dram_core(cfg, slot_memory="records"), toplevel=DRAM_TOP,
               test_module="wanreduce.sim.tb_core", params={**cfg, "seed": 3, "slot_memory": "records"},
               testcase="late_row_read_error_withholds_its_result", timeout_s=900)


# bench/bench_core.py's W 64 configuration (E 2048: 1024-B payloads fit), the same Verilog as
# bench/bench_core_dram.py's default run, so the two share one Verilator build.
DRAM_PERF = dict(ports=2, width=64, slots=64, elements=2048, groups=2, jobs=1)


def _dram_throughput(tmp_path, latency: int, bandwidth: float, **extra) -> dict:
    """sim/tb_core_perf.py's throughput run (back-to-back 1024-B contributions on all three
    ports, 10 chunks, every result checked against its sum) on the DRAM core, its memory
    ``latency`` cycles away and R/W moving on a ``bandwidth`` share of the cycles. A chunk's
    contributions arrive over a thousand cycles apart (``spread``, as over a WAN), so each
    ADD reads its rows from memory: the worst case for the store's in-flight table.
    ``extra``: ``slot_memory`` (the core's), ``probes`` (the bench's)."""
    import json

    out = tmp_path / "throughput.json"
    build = DRAM_PERF | {k: v for k, v in extra.items() if k == "slot_memory"}
    run_cocotb(verilog=generate_verilog(CoreDramHarness, name=DRAM_TOP, params=build), toplevel=DRAM_TOP,
               test_module="wanreduce.sim.tb_core_perf", testcase="throughput", timeout_s=1800,
               params={**build, **extra, "count": 256, "chunks": 10, "latency": latency, "bandwidth": bandwidth,
                       "spread": True, "seed": 1, "out": str(out)})
    return json.loads(out.read_text())


@pytest.mark.cocotb
def test_core_records_store_read_split_never_throttles_the_store(tmp_path):
    """The records core, its memory 100 cycles away, a chunk's contributions spread: every ADD
    and every result READ reads memory, so the sums store holds ~L cycles of commands
    unanswered; ``StoreReadSplit``'s queue (one entry per such command) must never run out of
    room (at 64 entries it had none on 8 459 of 19 688 cycles of bench_core_dram.py's 21-chunk
    run, 0.51 beat/cycle first to last; docs/benchmarks.md, "The record path: where the cycles
    go, and the fix"). The rate: a sanity floor (10 chunks fit in the payload gate's FIFO)."""
    r = _dram_throughput(tmp_path, latency=100, bandwidth=1.0, slot_memory="records",
                         probes={"room": "inner.reducer.path.sums.split.room"})
    assert r["results_checked"] == 10
    probes = r["probes"]
    assert probes["high"].get("room", 0) == probes["cycles"], probes
    assert r["beats_per_cycle"] >= 0.7, r


@pytest.mark.cocotb
def test_core_dram_full_rate_at_latency_100(tmp_path):
    """Issue 16 item 2: with the memory 100 cycles away (R and B) and its full bandwidth, the
    whole DRAM core takes 1024-B contributions at >= 0.95 beat/cycle in the steady state
    (simulated cycles; docs/benchmarks.md, "Aggregator core with DRAM slots")."""
    r = _dram_throughput(tmp_path, latency=100, bandwidth=1.0)
    assert r["results_checked"] == 10
    assert r["steady_beats_per_cycle"] >= 0.95, r
    assert r["row_writes"] == r["beats"], "every payload beat writes its row once"
    assert r["row_reads"] == r["beats"] * 2 // 3, "every ADD (two of three contributions) reads its rows"


@pytest.mark.cocotb
def test_core_dram_half_bandwidth_degrades_gracefully(tmp_path):
    """R and W on half the cycles (random pauses): every result still exact, the input stalls
    instead (counted), and the rate follows the memory: each payload beat writes one row, so
    about 0.5 beat/cycle at most (the pauses are random: +-0.05), and the core keeps close to
    that (>= 0.45; 0.487 measured at latency 50, docs/benchmarks.md)."""
    r = _dram_throughput(tmp_path, latency=100, bandwidth=0.5)
    assert r["results_checked"] == 10
    assert 0.45 <= r["steady_beats_per_cycle"] <= 0.55, r
    # every cycle of the run the reducer either took a beat, was offered one and stalled, or
    # had none offered; at half the rate most of the others are stalls
    assert r["stall_cycles"] >= 0.9 * (r["cycles"] - r["beats"]), r
    assert r["row_writes"] == r["beats"], "every payload beat writes its row once"


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"W{c['width']}")
def test_core_control_path(cfg):
    """sim/tb_core_control.py: whole reply headers under egress stalls while RESULT_IP changes;
    MAX_ELEMENTS 0 and 1 leave the registers reachable (issue 12, RTL bugs 1 and 2). Same
    Verilog as test_core_system (one build); bounded in simulated cycles and CPU time, not wall-clock."""
    core = {k: cfg[k] for k in CORE_KEYS}
    verilog = generate_verilog(WanreduceCore, name="wanreduce_core", params=core)
    run_cocotb(verilog=verilog, toplevel="wanreduce_core", test_module="wanreduce.sim.tb_core_control",
               params=core, timeout_s=900)  # CPU seconds: bounds a hang, not a slow machine


def test_verilog_command_writes_module_and_ports(tmp_path):
    res = CliRunner().invoke(cli, ["verilog", "--out", str(tmp_path), "--ports", "2", "--width", "64",
                                   "--slots", "8", "--elements", "32"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "wanreduce_core.sv").read_text()
    assert "module wanreduce_core" in text
    for port in ("s_axis_net0__tdata", "s_axis_net1__tready", "s_axis_host__tuser", "m_axis_host__tkeep"):
        assert port in text
    ports = (tmp_path / "wanreduce_core.ports.txt").read_text()
    assert "input  [63:0]   s_axis_net0__tdata" in ports and "output          m_axis_host__tlast" in ports
    assert "output          s_axis_net0__tready" in ports


@pytest.mark.parametrize(
    "args, message",
    [
        (["--width", "96"], "data width"),
        (["--slots", "12"], "slots must be a power of two"),
        (["--ports", "9"], "ports must be 1..8"),
        (["--elements", "5000"], "elements must be"),
        (["--width", "wide"], "not a valid integer"),
    ],
)
def test_verilog_command_rejects_bad_parameters_in_one_line(tmp_path, args, message):
    res = CliRunner().invoke(cli, ["verilog", "--out", str(tmp_path), *args])
    assert res.exit_code != 0
    assert message in res.output
    assert "Traceback" not in res.output


def test_core_params_validation():
    assert CoreParams()["width"] == 64
    with pytest.raises(ValueError, match="unknown"):
        CoreParams(lanes=4)


GOOD = dict(ports=2, width=64, slots=8, elements=16, groups=4, jobs=2)


@pytest.mark.parametrize(("field", "bad", "message"), [
    ("ports", 0, "ports must be 1..8, got 0"),
    ("ports", 9, "ports must be 1..8, got 9"),
    ("width", 96, "data width must be a power of two from 64 to 512 bits, got 96"),
    ("slots", 3, "slots must be a power of two from 2 to 4096, got 3"),
    ("slots", 8192, "slots must be a power of two from 2 to 4096, got 8192"),
    ("elements", 0, "elements must be 1..2237 (jumbo-frame limit), got 0"),
    ("groups", 33, "groups must be 1..32, got 33"),
    ("jobs", 0, "jobs must be 1..16, got 0"),
    ("jobs", 2.0, "jobs must be an integer, got 2.0"),
])
def test_parameters_checked_once_same_error_everywhere(field, bad, message):
    """The core, the reducer and the control block check their parameters with the same code:
    the same one-line error, naming the field and its range (hdl/params.py)."""
    from wanreduce.hdl.control_block import ControlBlock
    from wanreduce.hdl.reducer import Reducer

    p = GOOD | {field: bad}
    makers = [lambda: CoreParams(**p),
              lambda: ControlBlock(p["width"], **{k: v for k, v in p.items() if k != "width"})]
    if field != "ports":  # the reducer has no ports parameter
        makers.append(lambda: Reducer(p["width"], **{k: v for k, v in p.items() if k not in ("width", "ports")}))
    for make in makers:
        with pytest.raises(ValueError) as err:
            make()
        assert str(err.value) == message


def test_docs_port_table_matches_generated_ports():
    import re
    from pathlib import Path

    from wanreduce.commands.verilog import port_list
    from wanreduce.hdl.core import DEFAULTS

    doc = (Path(__file__).resolve().parents[1] / "docs" / "core.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (input|output) \| (\d+) \|$", doc, re.M)
    assert [(n, d, int(w)) for n, d, w in rows] == port_list(dict(DEFAULTS))


def test_verilog_command_slot_memory_dram(tmp_path):
    """--slot-memory dram: the core gains the AXI4 master port with flat AMBA names (and the
    DRAM store's slot range, the same as on chip: hdl/params.py); onchip keeps the port list as it was; bad values: one line."""
    res = CliRunner().invoke(cli, ["verilog", "--out", str(tmp_path), "--slot-memory", "dram",
                                   "--slots", "8", "--elements", "32"])
    assert res.exit_code == 0, res.output
    assert "dram slot memory" in res.output
    ports = (tmp_path / "wanreduce_core.ports.txt").read_text()
    for port in ("output [31:0]   m_axi_mem_awaddr", "output [7:0]    m_axi_mem_arlen",
                 "input  [63:0]   m_axi_mem_rdata", "input  [1:0]    m_axi_mem_bresp",
                 "output          m_axi_mem_rready", "input           m_axi_mem_wready"):
        assert port in ports, port
    assert "m_axi_mem_awaddr" in (tmp_path / "wanreduce_core.sv").read_text()
    res = CliRunner().invoke(cli, ["verilog", "--out", str(tmp_path / "o"), "--slots", "8"])
    assert res.exit_code == 0 and "m_axi_mem" not in (tmp_path / "o" / "wanreduce_core.ports.txt").read_text()
    for args, msg in ((["--slot-memory", "sram"], "--slot-memory: must be one of onchip, dram"),
                      (["--slots", "8192"], "slots must be a power of two from 2 to 4096, got 8192")):
        res = CliRunner().invoke(cli, ["verilog", "--out", str(tmp_path / "e"), *args])
        assert res.exit_code != 0 and msg in res.output and len(res.output.strip().splitlines()) == 1
    with pytest.raises(ValueError, match="to 4096 \\(DRAM slot memory\\), got 8192"):
        CoreParams("dram", slots=8192)  # the DRAM range is the core's (hdl/params.py)


def test_dram_store_parameters_reach_the_store_and_are_checked():
    from wanreduce.hdl.params import DRAM_STORE_DEFAULTS
    from wanreduce.hdl.reducer import Reducer

    core = WanreduceCore(slot_memory="dram", slots=8, elements=32, outstanding=64, burst_hold=0, index_bits=5)
    st = core.reducer.store
    assert (st.outstanding, st.burst_hold, st.burst_beats, st.address_width, st.index_bits) == (
        64, 0, DRAM_STORE_DEFAULTS["burst_beats"], DRAM_STORE_DEFAULTS["address_width"], 5)
    for make, msg in [
        (lambda: WanreduceCore(slot_memory="dram", outstanding=3), "outstanding must be a power of two from 4 to 1024, got 3"),
        (lambda: WanreduceCore(slot_memory="flash"), "slot memory must be one of onchip, dram, records, got 'flash'"),
        (lambda: Reducer(64, slots=8, elements=32, groups=2, jobs=2, outstanding=64),
         "unknown slot store parameter(s) for slot memory onchip: outstanding (dram: address_width, "
         "base_address, outstanding, burst_beats, burst_hold, index_bits)"),
    ]:
        with pytest.raises(ValueError) as err:
            make()
        assert str(err.value) == msg
