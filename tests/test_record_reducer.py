"""``RecordReducer``'s result path (hdl/record_reducer.py; issue 16, "never a silently wrong
result"): what the result gate's ``error`` is made of. Its behaviour on a memory error is the
core benches' (tests/test_core.py: ``test_core_records_late_row_read_error_withholds_its_result``
and the other ``..._is_never_silent`` tests); ``record_error`` cannot be raised through the core's
ports (its sources are inconsistencies that the ingress parser and the design rule out), so
here its wiring into the gate is checked in the netlist."""

from __future__ import annotations

from stream_helpers import _yosys_on, comb_cells_table, comb_cone, count_components

from wanreduce.hdl.frame_fifo import FrameFIFO
from wanreduce.hdl.record_reducer import RecordReducer


def _reducer() -> RecordReducer:
    return RecordReducer(64, slots=8, elements=16, groups=4, jobs=2)


def test_the_gate_withholds_on_memory_and_record_errors() -> None:
    """The gate's ``error`` comes from the sticky ``record_error`` as well as from the memory
    errors' flip-flops (both engines' and the ID arbiter's), nothing else."""
    sources, _ = comb_cone(_reducer(), "gate.error")
    mem = {"path.sums.store.mem_error", "path.records.engine.mem_error", "path.arbiter.error"}
    assert sources == mem | {"path.record_error"}, sources


def test_results_pass_a_frame_fifo() -> None:
    """One ``FrameFIFO`` between the emitter and the gate, room for two of the longest results."""
    r = _reducer()
    assert count_components(r, FrameFIFO) == 1


def test_the_control_blocks_window_reset_reaches_the_path_from_flip_flops() -> None:
    """The control block's ``reset`` (a JOB_HEAD write, from its state machine) is registered
    before the record path sees it: no logic within a cycle from its ``valid`` to the pin's flag
    or register, the probe or the owner FIFO (the path's ``stop``; on s34a 5f38b68 it reached
    them all), only to the register (docs/large_slots.md, "The record path's probe and control
    chains")."""
    ends = ["path.pin.r_pin", "path.pin.r_valid", "path.probe.asked", "path.owner.queue.inner_level", "ctl_valid"]
    _yosys_on(_reducer(), "".join(f"select -assert-min 1 w:{name}; " for name in ["reset__valid", *ends]))
    table = comb_cells_table(_reducer(), ["reset__valid"], ends)
    assert {e for e in ends if table["reset__valid", e]} == {"ctl_valid"}, table
