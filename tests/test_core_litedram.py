"""The whole core with its slots in DRAM through LiteDRAM's real controller (issue 16 item 5,
its last clause): the core as the Versa builds it, the board's converter, LiteDRAM's AXI
frontend and controller on its DDR3 model (hdl/boards/litedram_model_core.py), running
sim/tb_core.py's whole scenario against the golden model (sim/tb_core_litedram.py)."""

from __future__ import annotations

import pytest

from wanreduce.hdl.boards.litedram_model import simulate_on_model
from wanreduce.hdl.boards.litedram_model_core import LiteDramModelCore

TB = "wanreduce.sim.tb_core_litedram"
# tests/test_core.py's W 64 configuration (3 senders on 2 network ports and the host port)
CORE = dict(ports=2, width=64, slots=8, elements=64, groups=4, jobs=2)


def test_region_must_fit_the_model_memory() -> None:
    st = LiteDramModelCore(**CORE).core.reducer.store
    assert (st.base_address, st.region_end, st.burst_beats) == (0, 2048, 64)  # 8 slots x 32 rows x 8 B
    with pytest.raises(ValueError, match=r"the core's slot store's region ends at 0x80000, beyond the model's 0x40000"):
        LiteDramModelCore(**{**CORE, "slots": 2048})


def store_params(**core: int) -> dict:
    """What the bench checks the core's bursts against: its store's rows, burst size, base."""
    st = LiteDramModelCore(**core).core.reducer.store
    return {"slots": st.rows, "burst_beats": st.burst_beats, "base_address": st.base_address}


@pytest.mark.slow
@pytest.mark.cocotb
def test_cocotb_core_system_through_litedram() -> None:
    """Every phase of the whole-core scenario (drops on every port, rejects, saturation with
    the overflow flag, resend, duplicate / mismatch, busy / stale / out of window, a window
    reset; two jobs, two groups) with the slots behind the Versa's controller: every result
    frame and counter as the golden model's, STATUS and RESULTS_WITHHELD 0, no converter
    error, every burst legal, reads and writes both reaching the DRAM."""
    r = simulate_on_model(LiteDramModelCore, "core_on_litedram_w64", CORE, TB, "core_system",
                          {"senders": 3, "seed": 65, "store": store_params(**CORE)})
    print(r)  # with -s: the figures docs/benchmarks.md quotes
    assert r["results"] > 0 and r["read_latency"]["n"] > 0 and r["write_latency"]["n"] > 0, r


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
                           "store": store_params(**PERF)})
    print(r)  # with -s: the figures docs/benchmarks.md quotes
    assert r["results_checked"] == 10, r
    assert r["row_writes"] == r["beats"], "every payload beat writes its row once"
    assert r["row_reads"] == r["beats"] * 2 // 3, "every ADD (two of three contributions) reads its rows"
    # the DRAM busy with data at least half the time (the store alone on this path: 0.67-0.70,
    # docs/benchmarks.md), and not more than the bus can carry
    assert 0.5 <= r["dram_efficiency"] < 1.0, r
