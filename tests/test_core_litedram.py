"""The whole core with its slots in DRAM through LiteDRAM's real controller (issue 16 item 5,
its last clause): the core as the Versa builds it (``--slot-memory dram``, and ``records``: the
record engine beside the sums' store on the same port, AXI IDs 0 and 1), the board's converter,
LiteDRAM's AXI frontend and controller on its DDR3 model (hdl/boards/litedram_model_core.py),
running sim/tb_core.py's whole scenario against the golden model (sim/tb_core_litedram.py)."""

from __future__ import annotations

import pytest

from wanreduce.hdl.boards.litedram_model import simulate_on_model
from wanreduce.hdl.boards.litedram_model_core import LiteDramModelCore
from wanreduce.hdl.record_reducer import record_memory

TB = "wanreduce.sim.tb_core_litedram"
# tests/test_core.py's W 64 configuration (3 senders on 2 network ports and the host port)
CORE = dict(ports=2, width=64, slots=8, elements=64, groups=4, jobs=2)


def test_region_must_fit_the_model_memory() -> None:
    st = LiteDramModelCore(**CORE).core.reducer.store
    assert (st.base_address, st.region_end, st.burst_beats) == (0, 2048, 64)  # 8 slots x 32 rows x 8 B
    with pytest.raises(ValueError, match=r"the core's slot store's region ends at 0x80000, beyond the model's 0x40000"):
        LiteDramModelCore(**{**CORE, "slots": 2048})


def test_records_core_on_the_model_has_the_board_tops_memory_map() -> None:
    """The records core as ``board_core`` builds it: the sums' store (ID 0) as the dram core's,
    the records (ID 1, one 256-bit record a slot) from ``record_memory``'s base (the 4 KiB after
    the sums), both in the model's memory; a records region beyond it, or a slot memory
    without ``m_axi_mem``, refused in one line."""
    e = LiteDramModelCore(slot_memory="records", **CORE).engines
    base, end = record_memory(CORE["width"], slots=CORE["slots"], elements=CORE["elements"])
    assert [(i, x.axi_id, x.base_address, x.region_end) for i, x in e.items()] == \
        [(0, 0, 0, 2048), (1, 1, base, end)] and (base, end) == (4096, 4352)
    # S 1024 at E 64: sums 256 KiB (the model's all), records from there: beyond it
    with pytest.raises(ValueError, match=r"the core's record store's region ends at 0x48000, beyond the model's 0x40000"):
        LiteDramModelCore(slot_memory="records", **{**CORE, "slots": 1024})
    with pytest.raises(ValueError, match=r"slot_memory must be one of dram, records \(a core with m_axi_mem\), got 'onchip'"):
        LiteDramModelCore(slot_memory="onchip", **CORE)


def stores(**core) -> list[dict]:
    """What the bench checks the core's bursts against, by AXI ID: each engine's rows, row
    width, burst size, base."""
    return [{"slots": e.rows, "row_width": e.row_width, "burst_beats": e.burst_beats,
             "base_address": e.base_address}
            for _, e in sorted(LiteDramModelCore(**core).engines.items())]


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("slot_memory", ["dram", "records"])
def test_cocotb_core_system_through_litedram(slot_memory: str) -> None:
    """Every phase of the whole-core scenario (drops on every port, rejects, saturation with
    the overflow flag, resend, duplicate / mismatch, busy / stale / out of window, a window
    reset; two jobs, two groups) with the slots behind the Versa's controller: every result
    frame, head, probe answer and counter as the golden model's (a records core: its record
    counters too, and the records on ID 1 through the same converter and frontend), STATUS and
    RESULTS_WITHHELD 0, no converter error, every burst legal for its ID's engine, reads and
    writes of each engine reaching the DRAM."""
    # "dram" is the default: left out so its Verilog (and build) is the one cached before
    core = CORE if slot_memory == "dram" else {**CORE, "slot_memory": slot_memory}
    top = "core_on_litedram_w64" if slot_memory == "dram" else f"core_{slot_memory}_on_litedram_w64"
    r = simulate_on_model(LiteDramModelCore, top, core, TB, "core_system",
                          {"senders": 3, "seed": 65, "stores": stores(**core)})
    print(r)  # with -s: the figures docs/benchmarks.md quotes
    assert r["results"] > 0 and r["read_latency"]["n"] > 0 and r["write_latency"]["n"] > 0, r
    if slot_memory == "records":
        assert min(min(b.values()) for b in r["axi_beats_by_id"].values()) > 0, r


# tests/test_core.py's DRAM throughput configuration with 16 slots (128 KiB: inside the model's
# distinct 256 KiB) and 256 elements (the run's 1024-B contributions fit)
PERF = dict(ports=2, width=64, slots=16, elements=256, groups=2, jobs=1)


@pytest.mark.slow
@pytest.mark.cocotb
def test_cocotb_core_throughput_through_litedram() -> None:
    """sim/tb_core_perf.py's run through the Versa's controller: back-to-back 1024-B
    contributions on all three ports, a chunk's contributions far apart (``spread``), so every
    ADD reads the rows its chunk's WRITE put in the DRAM: every result equal to its sum, every
    payload beat writes its row once and every ADD reads it, no error flag; the DRAM's data
    bus busy at least half the time."""
    r = simulate_on_model(LiteDramModelCore, "core_on_litedram_perf_w64", PERF, TB, "throughput",
                          {"count": 256, "chunks": 10, "spread": True, "seed": 1,
                           "stores": stores(**PERF)})
    print(r)  # with -s: the figures docs/benchmarks.md quotes
    assert r["results_checked"] == 10, r
    assert r["row_writes"] == r["beats"], "every payload beat writes its row once"
    assert r["row_reads"] == r["beats"] * 2 // 3, "every ADD (two of three contributions) reads its rows"
    # the DRAM busy with data at least half the time (the store alone on this path: 0.67-0.70,
    # docs/benchmarks.md), and not more than the bus can carry
    assert 0.5 <= r["dram_efficiency"] < 1.0, r
