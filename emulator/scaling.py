"""Scaling a topology to fit this machine, and FPGA memory to aggregator slots.

The emulator runs the WAN at ``rate_scale`` x every link and port rate and ``time_scale`` x every
propagation delay; the planner is asked about the *same* scaled topology (``scale_topology``), so
measurement and prediction describe one network.

Memory to slots: each aggregator gets S = floor(M / c) slots of c = 4E bytes, as the planner
counts them (rounded down to a power of two: the software aggregator's slot count and a job's
window must be one). The host driver keeps W/2 chunks of a job in flight (lost-result recovery,
docs/host.md), so a sender has S/2 chunks in flight. The planner's shared model has S in flight,
each slot held for the round trip; here a sender's window advances on its *own* site's
aggregator's results, which come one farthest-member one-way delay after the chunk left, so in
steady state S/2 chunks advance per one-way delay: S chunks per round trip, the planner's
memory-bound rate (docs/emulator.md, "Memory"). The planner is asked about S x c bytes.
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
    """What one memory size gives: the aggregator's S slots (a power of two) and their memory."""

    memory: int  # bytes asked for
    elements: int  # E per slot
    slots: int  # S: floor(M / 4E) rounded down to a power of two; a job's window W = S

    @property
    def planner_memory(self) -> int:
        """The memory the planner is asked about: S slots of 4E bytes (what runs)."""
        return self.slots * self.elements * ELEMENT_BYTES

    def describe(self) -> str:
        return (f"--memory {format_size(self.memory)}: S = {self.slots} slots of "
                f"{self.elements * ELEMENT_BYTES} B per aggregator (planner memory "
                f"{format_size(self.planner_memory)}), {self.slots // 2} chunks in flight per "
                "sender (W/2)")


def slot_plan(memory: int, elements: int) -> SlotPlan:
    """Slots for ``memory`` bytes of FPGA memory at ``elements`` per slot (module docstring)."""
    s = memory // (elements * ELEMENT_BYTES)
    if s < 2:
        raise ValueError(f"--memory: {format_size(memory)} holds fewer than two slots of "
                         f"{elements * ELEMENT_BYTES} B; allowed >= {2 * elements * ELEMENT_BYTES} B")
    return SlotPlan(memory, elements, 1 << (s.bit_length() - 1))
