"""The reducer's port list, one definition for both reducers the core chooses from (``Reducer``,
hdl/reducer.py, and the record path's ``RecordReducer``, hdl/record_reducer.py): the core wires
either the same way (hdl/core.py)."""

from __future__ import annotations

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import JobCfgLayout, ResetLayout, message_stream

__all__ = ["reducer_ports"]


def reducer_ports(data_width: int, *, groups: int, jobs: int) -> dict[str, wiring.Member]:
    """The ports every reducer has (a DRAM one adds its memory port, ``mem_error`` and
    ``result_withheld``): messages in and out, the configuration, the window reset stream, the
    heads, the outcome and result strobes, and the probe."""
    return {
        "s_msg": In(message_stream(data_width)),
        "m_msg": Out(message_stream(data_width)),
        "group_bitmap": In(data.ArrayLayout(32, groups)),
        "job_cfg": In(data.ArrayLayout(JobCfgLayout, jobs)),
        "release_on_completion": In(1),
        "reset": In(stream.Signature(ResetLayout(jobs))),
        "head": Out(data.ArrayLayout(32, jobs)),
        "outcome": Out(1),
        "outcome_code": Out(4),
        "result_out": Out(1),
        # JOBj_PROBE_BITMAP (wanreduce.regs): the contributor bitmap of chunk probe_chunk of
        # job probe_job while held unreleased, else 0; probe_ok: probe_bitmap answers the
        # probe_job/probe_chunk of this cycle (a few cycles after they change)
        "probe_job": In(range(jobs)),
        "probe_chunk": In(32),
        "probe_bitmap": Out(32),
        "probe_ok": Out(1),
    }
