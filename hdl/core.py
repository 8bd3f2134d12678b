"""``wanreduce_core``: the aggregator at a site's network edge, parse → merge → reduce → emit.

::

    s_axis_net0 ─► IngressParser ─► SkidBuffer ───────────┐
    ...                                                   ├─► StreamMerger ─► Reducer ───┐
    s_axis_netP-1 ► IngressParser ─► SkidBuffer ──────────┤   (P+1 inputs)     (S slots) ├─► StreamMerger(2) ─► EgressFramer ─► m_axis_host
    s_axis_host ─► IngressParser ─► MessageDemux ─────────┘                              │
                   (CONTROL ok)     (registered)  └─ CONTROL ─► ControlBlock ────────────┘ (CONTROL_REPLY)

* P network ports receive the multicast streams of the other sites (CONTRIBUTION only).
* The host-facing port carries the local site's own contribution — aggregated in the core like
  any other member's — and CONTROL messages; configuration and counters are reachable only there.
* The reducer's input stage is a skid buffer with a registered ready, so its ready logic does
  not chain combinationally into the merger and the parsers; a ``SkidBuffer``
  (``hdl/skid_buffer.py``: registered ready) sits between each network parser and the merger (the host port's ``MessageDemux`` is
  registered the same way), so the merger's arbitration does not chain into the parsers' read
  side. Each costs a cycle of latency (``bench/bench_fpga_modules.py core_stub`` places the core
  with a stand-in reducer to time these cross-component paths).
* In the DRAM core (``slot_memory="dram"``) a ``SkidBuffer`` (``ready_copy``) also sits between
  the egress merger and the framer: the framer's ``tready`` path ends there (one cycle more per
  frame); and one between the merger and the reducer: the reducer's input ready (window reset)
  ends there, the merger's grants start from its registered ready (one cycle more per beat).
* Results (and control replies) leave on ``m_axis_host`` toward the local hosts, addressed to the
  configured result MAC/IP/UDP port (unicast or multicast).

All AXI4-Stream ports are ``AXIStreamSignature(W, user_width=1)``; in Verilog they flatten to
``s_axis_net0__tdata`` etc. (cocotbext-axi: ``AxiStreamBus.from_prefix(dut, "s_axis_net0",
bus_separator="__")``). ``docs/core.md`` lists the ports.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce.hdl.axi4 import axi4_forward
from wanreduce.hdl.axis import AXIStreamSignature
from wanreduce.hdl.control_block import ControlBlock
from wanreduce.hdl.egress_framer import EgressFramer
from wanreduce.hdl.ingress_parser import IngressParser, dram_cuts
from wanreduce.hdl.layouts import message_beat_layout
from wanreduce.hdl.message_demux import MessageDemux
from wanreduce.hdl.params import DEFAULTS, DRAM_STORE_DEFAULTS, MAX_SLOTS, CoreParams, check_wired
from wanreduce.hdl.record_reducer import RecordReducer
from wanreduce.hdl.reducer import Reducer
from wanreduce.hdl.skid_buffer import SkidBuffer
from wanreduce.hdl.stream_merger import StreamMerger

__all__ = ["DEFAULTS", "MAX_SLOTS", "CoreParams", "WanreduceCore", "net_port"]

def connect_through_slice(m: Module, name: str, data_width: int, src: wiring.PureInterface,
                          dst: wiring.PureInterface, *, on: bool, mux_copies: int = 0) -> None:
    """``src`` -> ``dst`` (message streams), through a ``SkidBuffer(ready_copy=True)`` submodule
    ``name`` when ``on`` (the DRAM core's timing slices: ``dst``'s ready ends at the slice);
    ``mux_copies``: the slice's output select in that many copies (SkidBuffer)."""
    if on:
        m.submodules[name] = sl = SkidBuffer(message_beat_layout(data_width), ready_copy=True,
                                             mux_copies=mux_copies)
        wiring.connect(m, src, sl.s)
        wiring.connect(m, sl.m, dst)
    else:
        wiring.connect(m, src, dst)


def net_port(p: int) -> str:
    """Name of network ingress port ``p`` (the Verilog port prefix)."""
    return f"s_axis_net{p}"


class WanreduceCore(wiring.Component):
    """The whole aggregator core; parameters as in :class:`CoreParams`.

    ``slot_memory="dram"`` keeps the partial sums in DRAM (``DramSlotStore``): the core then has
    the store's AXI4 master port ``m_axi_mem_*`` (flat AMBA names), and the store's parameters
    (``DRAM_STORE_DEFAULTS``: address_width, base_address, outstanding, burst_beats,
    burst_hold) may be given here too. A memory error shows in STATUS.MEM_ERROR
    (``wanreduce.regs``). ``pending``: the reducer's pending store (``"vector"``, the default, or
    ``"words"``: docs/reducer.md, "Pending words"). ``slot_memory="records"``: the sums and the
    per-slot records in DRAM, the reducer the record path (``RecordReducer``,
    hdl/record_reducer.py; S up to ``MAX_SLOTS_LARGE``), its ports and STATUS as with ``"dram"``
    (``pending`` is the reducer's: only its default is taken there)."""

    def __init__(self, *, slot_memory: str = "onchip", pending: str = "vector", **params: int) -> None:
        self.dram = {k: params.pop(k) for k in list(params) if k in DRAM_STORE_DEFAULTS}
        self.params = CoreParams(slot_memory, **params)
        check_wired(slot_memory)
        p = self.params
        self.slot_memory = slot_memory
        shape = {k: p[k] for k in ("slots", "elements", "groups", "jobs")}
        if slot_memory == "records":
            if pending != "vector":
                raise ValueError(f"pending must be 'vector' (the default) with slot_memory 'records' (the record "
                                 f"path keeps its own pending words), got {pending!r}")
            self.reducer = RecordReducer(p["width"], **shape, **self.dram)
        else:
            self.reducer = Reducer(p["width"], **shape, slot_memory=slot_memory, pending=pending, **self.dram)
        axis = AXIStreamSignature(p["width"], user_width=1)
        members = {net_port(i): In(axis) for i in range(p["ports"])}
        members["s_axis_host"] = In(axis)
        members["m_axis_host"] = Out(axis)
        members |= {n: mb for n, mb in self.reducer.signature.members.items() if n.startswith("m_axi_mem_")}
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        w, n_net = p["width"], p["ports"]

        parsers = []
        # the parsers' timing cuts (rd_more flip-flop, registered descriptor head, split address
        # compares) in the DRAM core only: hdl/ingress_parser.py dram_cuts
        cuts = dram_cuts(self.slot_memory == "dram")
        for i in range(n_net):
            parser = IngressParser(w, max_elements=p["elements"], **cuts)
            m.submodules[f"parser_net{i}"] = parser
            wiring.connect(m, wiring.flipped(getattr(self, net_port(i))), parser.s_axis)
            parsers.append(parser)
        host_parser = IngressParser(w, max_elements=p["elements"], accept_control=True, **cuts)
        m.submodules.parser_host = host_parser
        wiring.connect(m, wiring.flipped(self.s_axis_host), host_parser.s_axis)
        parsers.append(host_parser)

        # the register slices' skid registers on their own copy of the ready in the DRAM core
        # (hdl/skid_buffer.py ready_copy; docs/benchmarks.md session 42)
        ready_copy = self.slot_memory == "dram"
        # DRAM core: the merger's inputs (its slices, the demux's data buffer) as two slots read
        # alternately, so the merger's grant (their m.ready) reaches no data register's enable
        # (hdl/skid_buffer.py ping_pong; docs/benchmarks.md session 45)
        # (and the merger's arbitration reads the data buffer's valid from a copy of its own,
        # hdl/skid_buffer.py valid_copy; docs/benchmarks.md session 47)
        m.submodules.demux = demux = MessageDemux(w, ready_copy=ready_copy, ping_pong=ready_copy,
                                                  valid_copy=ready_copy)
        wiring.connect(m, host_parser.m_msg, demux.s_msg)

        m.submodules.merger = merger = StreamMerger(w, n_net + 1)
        for i in range(n_net):
            # Register slice (registered ready) per network port, like the registered demux on
            # the host port: the merger's arbitration does not chain into the parsers' read side.
            m.submodules[f"merger_slice{i}"] = pslice = SkidBuffer(message_beat_layout(w), ready_copy=ready_copy,
                                                                   ping_pong=ready_copy)
            wiring.connect(m, parsers[i].m_msg, pslice.s)
            wiring.connect(m, pslice.m, merger.s_msg[i])
        if ready_copy:  # the merger reads the copy of m_data.valid (equal every cycle)
            host_in = merger.s_msg[n_net]
            m.d.comb += [host_in.valid.eq(demux.m_data_valid_c), host_in.payload.eq(demux.m_data.payload),
                         demux.m_data.ready.eq(host_in.ready)]
        else:
            wiring.connect(m, demux.m_data, merger.s_msg[n_net])

        m.submodules.reducer = reducer = self.reducer
        # The reducer's input stage is itself a skid buffer with a registered ready (and the
        # merger's output is registered): no ready chain reducer -> merger -> parsers.
        # DRAM core: a register slice in front of the reducer too, so the reducer's input ready
        # (its stage I's ready AND the window reset's ``open``, from ``in_msg``) ends at the
        # slice and the merger's grant to its inputs (the merger slices' and the demux's output
        # register enables) starts from the slice's registered ready (``reducer.inputs.in_msg``
        # -> ``core.s_msg__1__payload``, 9.02 ns at session 42's seed 5; one cycle more per
        # beat: docs/benchmarks.md session 43)
        # (its output select in 4 copies: skid_valid -> core.s_msg__payload, session 46)
        connect_through_slice(m, "reducer_slice", w, merger.m_msg, reducer.s_msg, on=ready_copy, mux_copies=4)

        m.submodules.control = control = ControlBlock(
            w, ports=n_net, slots=p["slots"], elements=p["elements"], groups=p["groups"], jobs=p["jobs"],
            slot_memory=self.slot_memory,
        )
        wiring.connect(m, demux.m_control, control.s_msg)
        wiring.connect(m, control.reset, reducer.reset)
        # DRAM slot memory (the sums, or the sums and the records): the AXI4 port out of the
        # core, its errors into STATUS
        if self.slot_memory in ("dram", "records"):
            axi4_forward(m, reducer, self, "m_axi_mem")
            m.d.comb += [control.mem_error.eq(reducer.mem_error),
                         control.result_withheld.eq(reducer.result_withheld)]
        if self.slot_memory == "dram":  # the GROUP / JOB_CFG write strobe (the reducer's early decode)
            m.d.comb += reducer.cfg_written.eq(control.cfg_written)
        if self.slot_memory == "records":  # the record path's own errors: STATUS.RECORD_ERROR
            m.d.comb += [control.record_error.eq(reducer.record_error),
                         control.record_counters.eq(reducer.record_counters)]

        m.submodules.egress_merger = out_merger = StreamMerger(w, 2)
        wiring.connect(m, reducer.m_msg, out_merger.s_msg[0])
        wiring.connect(m, control.m_msg, out_merger.s_msg[1])
        m.submodules.egress = egress = EgressFramer(w, mcast_late=ready_copy)  # DRAM: dst_mac choice late
        # DRAM core: a register slice in front of the framer, so the framer's tready ->
        # s_msg.ready path ends at the slice's output register and the egress merger's and the
        # result assembler's output registers are enabled from the slice's registered ready
        # (m_axis_host.tready -> assembler.out's 154 enables, 11.81 ns at session 42's seed 4;
        # one cycle more per frame: docs/benchmarks.md session 42)
        connect_through_slice(m, "egress_slice", w, out_merger.m_msg, egress.s_msg, on=ready_copy)
        wiring.connect(m, egress.m_axis, wiring.flipped(self.m_axis_host))

        # configuration
        for parser in parsers:
            m.d.comb += [
                parser.local_mac.eq(control.local_mac),
                parser.local_ip.eq(control.local_ip),
                parser.udp_port.eq(control.udp_port),
                parser.max_elements.eq(control.max_elements),
            ]
        m.d.comb += [
            reducer.group_bitmap.eq(control.group_bitmap),
            reducer.job_cfg.eq(control.job_cfg),
            reducer.release_on_completion.eq(control.release_on_completion),
            control.head.eq(reducer.head),
            reducer.probe_job.eq(control.probe_job),
            reducer.probe_chunk.eq(control.probe_chunk),
            control.probe_bitmap.eq(reducer.probe_bitmap),
            control.probe_ok.eq(reducer.probe_ok),
            egress.src_mac.eq(control.local_mac),
            egress.src_ip.eq(control.local_ip),
            egress.dst_mac.eq(control.result_mac),
            egress.dst_ip.eq(control.result_ip),
            egress.udp_sport.eq(control.udp_port),
            egress.udp_dport.eq(control.result_udp_port),
            egress.site_id.eq(control.site_id),
        ]
        # status events
        for i, parser in enumerate(parsers):
            m.d.comb += [
                control.port_frame_in[i].eq(parser.frame_in),
                control.port_drop[i].eq(parser.drop),
                control.port_drop_reason[i].eq(parser.drop_reason),
            ]
        m.d.comb += [
            control.outcome.eq(reducer.outcome),
            control.outcome_code.eq(reducer.outcome_code),
            control.result_out.eq(reducer.result_out),
        ]
        return m
