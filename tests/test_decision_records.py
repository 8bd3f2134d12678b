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

from wanreduce.hdl.decision_record_harness import DecisionOnRecords
from wanreduce.sim.tb_decision_records import run_decision_records


@pytest.mark.parametrize(("kw", "msg"), [
    ({"sums": {"slots": 16}}, "sums must give row_bits"),
    ({"records": {"side_shape": 8}}, r"records must not give \['side_shape'\]"),
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
