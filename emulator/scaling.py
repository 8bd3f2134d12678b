"""Scaling a topology to fit this machine, and FPGA memory to aggregator slots.

The emulator runs the WAN at ``rate_scale`` x every link and port rate and ``time_scale`` x every
propagation delay; the planner is asked about the *same* scaled topology (``scale_topology``), so
measurement and prediction describe one network.

Memory to slots: the planner gives a site S = floor(M / c) slots of c = 4E bytes and models S
chunks in flight per sender (docs/planner.md, round model 5). The host driver keeps at most W/2
chunks of a job in flight (lost-result recovery, docs/host.md), so, as ``wanreduce plan`` prints
for the shared model, the job needs a window of W = 2S slots for the planned rate. The software
aggregator's slot count (and a job's window) must be a power of two: S is rounded down to one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from wanreduce.planner.topology import Topology, check_number, format_size

ELEMENT_BYTES = 4


def scale_topology(topo: Topology, rate_scale: float, time_scale: float) -> Topology:
    """``topo`` with every link bandwidth and site line rate x ``rate_scale`` and every link
    latency x ``time_scale`` (the sites' FPGA memory unchanged)."""
    for name, v in (("--rate-scale", rate_scale), ("--time-scale", time_scale)):
        if not (isinstance(v, int | float) and 1e-9 <= v <= 1e3):
            raise ValueError(f"{name}: must be a number in [1e-09, 1000], got {v!r}")
    sites = [replace(s, line_rate_bps=s.line_rate_bps * rate_scale) for s in topo.sites]
    links = [replace(lk, latency_s=lk.latency_s * time_scale,
                     bandwidth_bps=lk.bandwidth_bps * rate_scale) for lk in topo.links]
    for lk in links:  # the scaled network must still be one the planner accepts
        check_number("bandwidth_gbps", lk.bandwidth_bps / 1e9, f"link {lk.a}-{lk.b} scaled bandwidth")
    return replace(topo, name=f"{topo.name} x{rate_scale:g} rate x{time_scale:g} time",
                   sites=sites, links=links)


@dataclass(frozen=True)
class SlotPlan:
    """What one memory size gives: S in flight (a power of two), the aggregator's slots."""

    memory: int  # bytes asked for
    elements: int  # E per slot
    in_flight: int  # S: floor(M / 4E) rounded down to a power of two
    slots_per_job: int  # W = 2S (the driver keeps W/2 in flight)

    @property
    def planner_memory(self) -> int:
        """The memory the planner is asked about: S slots of 4E bytes (what runs)."""
        return self.in_flight * self.elements * ELEMENT_BYTES

    def describe(self) -> str:
        return (f"--memory {format_size(self.memory)}: S = {self.in_flight} slots of "
                f"{self.elements * ELEMENT_BYTES} B in flight per sender (planner memory "
                f"{format_size(self.planner_memory)}), job window W = {self.slots_per_job}")


def slot_plan(memory: int, elements: int) -> SlotPlan:
    """Slots for ``memory`` bytes of FPGA memory at ``elements`` per slot (module docstring)."""
    s = memory // (elements * ELEMENT_BYTES)
    if s < 1:
        raise ValueError(f"--memory: {format_size(memory)} is smaller than one slot "
                         f"({elements * ELEMENT_BYTES} B); allowed >= {elements * ELEMENT_BYTES} B")
    s = 1 << (s.bit_length() - 1)
    return SlotPlan(memory, elements, s, 2 * s)
