"""AXI4 arbiter by ID: N managers, each with an AXI ID of its own, share one AXI4 port.

Built for the large-S design (docs/large_slots.md, "The record store"): the slot store (sums,
ID 0) and the record store (tag records, ID 1) share the core's one ``m_axi_mem``, and each takes
its own responses by ID (in order per ID, as AXI guarantees). Ports: ``s<k>_axi_*`` (subordinate
ports, one per entry of ``ids``) and ``m_axi_mem_*`` (the manager port; ``hdl/axi4.py``'s flat
AMBA names, so :class:`~wanreduce.hdl.axi_latency.AxiLatencyHarness` and cocotbext-axi attach).

* **AR, AW**: round-robin per burst (one address handshake = one burst) among the ports with a
  request, starting after the port granted last. The request leaves with its port's ID
  (``ids[k]``) whatever the manager drove; a request whose own ID differs sets ``error`` (a
  manager on port ``k`` must use ``ids[k]``, or its responses carry an ID it does not expect).
* **W** follows the AW order: each AW granted queues its port (``w_depth`` bursts; AW waits while
  the queue is full), and the W beats of the queue's head port alone pass until its ``wlast``. A
  W burst is never interleaved with another. W may pass before the memory accepts the AW.
* **R** by RID, **B** by BID to the port of that ID. A response whose ID belongs to no port is
  taken (never left on the bus: the design does not hang) and dropped (never delivered):
  ``dropped`` counts such handshakes (each R beat and each B; saturates at its maximum) and
  ``error`` is set. Both are sticky until reset; the owner reports them.

Every channel on both sides passes through the core's one register slice
(:class:`~wanreduce.hdl.skid_buffer.SkidBuffer`): every valid, ready and payload output comes
from a flip-flop, and the arbitration (a priority choice on registered valids and the registered
last grant) is one short level between two registers. Latency: two cycles per channel.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, fifo, wiring

from .axi4 import axi4_master_members, axi4_payload, axi4_port
from .axi_latency import AxiLatencyHarness
from .skid_buffer import SkidBuffer

__all__ = ["DROPPED_BITS", "AxiIdArbiter", "slave_prefix", "with_latency"]

DROPPED_BITS = 16
PREFIX = "m_axi_mem"


def slave_prefix(k: int) -> str:
    """The signal prefix of subordinate port ``k``: ``s<k>_axi``."""
    return f"s{k}_axi"


class AxiIdArbiter(wiring.Component):
    """``len(ids)`` subordinate ports ``s<k>_axi_*`` onto ``m_axi_mem_*``; port ``k``'s requests
    carry ID ``ids[k]`` and it receives the responses of that ID. See the module docstring."""

    def __init__(self, ids: Sequence[int], *, addr_width: int = 32, data_width: int = 64,
                 id_width: int = 1, w_depth: int = 4) -> None:
        ids = [int(i) for i in ids]
        if not 1 <= id_width <= 16:
            raise ValueError(f"id_width must be 1..16, got {id_width}")
        if not 1 <= len(ids) <= 8:
            raise ValueError(f"ids must name 1..8 ports, got {len(ids)}")
        if len(set(ids)) != len(ids):
            raise ValueError(f"ids must be distinct, got {ids}")
        for i in ids:
            if not 0 <= i < 1 << id_width:
                raise ValueError(f"ids: each must be 0..{(1 << id_width) - 1} (id_width "
                                 f"{id_width}), got {i}")
        if data_width < 8 or data_width > 1024 or data_width & (data_width - 1):
            raise ValueError(f"data_width must be a power of two from 8 to 1024 bits, got {data_width}")
        if not 12 <= addr_width <= 64:
            raise ValueError(f"addr_width must be 12..64, got {addr_width}")
        if not 2 <= w_depth <= 256:
            raise ValueError(f"w_depth must be 2..256, got {w_depth}")
        self.ids, self.addr_width, self.data_width = ids, addr_width, data_width
        self.id_width, self.w_depth = id_width, w_depth
        members: dict[str, wiring.Member] = {}
        for k in range(len(ids)):
            sub = axi4_master_members(slave_prefix(k), addr_width=addr_width,
                                      data_width=data_width, id_width=id_width)
            members |= {name: v.flip() for name, v in sub.items()}
        members |= axi4_master_members(PREFIX, addr_width=addr_width, data_width=data_width,
                                       id_width=id_width)
        members |= {"error": wiring.Out(1), "dropped": wiring.Out(DROPPED_BITS)}
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = len(self.ids)
        subs = [axi4_port(self, slave_prefix(k)) for k in range(n)]
        mem = axi4_port(self, PREFIX)
        payload = axi4_payload(self.addr_width, self.data_width, self.id_width)
        err = Signal()  # set by a request with a foreign ID or a response of no port's ID
        drop = Signal()  # a response dropped this cycle (at most one per channel: R and B)
        drops = Signal(range(3))
        m.d.comb += self.error.eq(err)

        q = fifo.SyncFIFOBuffered(width=max(1, (n - 1).bit_length()), depth=self.w_depth)
        m.submodules.w_order = q
        for ch in ("ar", "aw"):
            self._requests(m, ch, subs, mem, payload[ch], q if ch == "aw" else None, err)
        self._write_data(m, subs, mem, payload["w"], q)
        r_drop = self._responses(m, "r", subs, mem, payload["r"])
        b_drop = self._responses(m, "b", subs, mem, payload["b"])
        m.d.comb += [drop.eq(r_drop | b_drop), drops.eq(r_drop + b_drop)]
        with m.If(drop):
            m.d.sync += err.eq(1)
            top = (1 << DROPPED_BITS) - 1
            with m.If(self.dropped > top - drops):
                m.d.sync += self.dropped.eq(top)
            with m.Else():
                m.d.sync += self.dropped.eq(self.dropped + drops)
        return m

    @staticmethod
    def _slice(m: Module, name: str, fields: dict[str, int]) -> SkidBuffer:
        m.submodules[name] = buf = SkidBuffer(data.StructLayout(fields))
        return buf

    def _requests(self, m: Module, ch: str, subs: list, mem, fields: dict[str, int],
                  order: fifo.SyncFIFOBuffered | None, err: Signal) -> None:
        """AR or AW: a slice per port, round-robin per burst into the manager's slice (AW: the
        granted port queued for W in the same cycle)."""
        n = len(subs)
        ins = []
        for k, s in enumerate(subs):
            buf = self._slice(m, f"{ch}_in{k}", fields)
            m.d.comb += [buf.s.valid.eq(getattr(s, f"{ch}valid")),
                         getattr(s, f"{ch}ready").eq(buf.s.ready)]
            m.d.comb += [getattr(buf.s.payload, f).eq(getattr(s, f)) for f in fields]
            with m.If(buf.s.valid & buf.s.ready & (getattr(s, f"{ch}id") != self.ids[k])):
                m.d.sync += err.eq(1)
            ins.append(buf)
        out = self._slice(m, f"{ch}_out", fields)
        m.d.comb += [getattr(mem, f"{ch}valid").eq(out.m.valid),
                     out.m.ready.eq(getattr(mem, f"{ch}ready"))]
        m.d.comb += [getattr(mem, f).eq(getattr(out.m.payload, f)) for f in fields]

        last = Signal(range(max(n, 2)), name=f"{ch}_last", init=n - 1)  # port granted last
        grant = Signal(range(max(n, 2)), name=f"{ch}_grant")
        any_req = Signal(name=f"{ch}_any")
        m.d.comb += any_req.eq(Cat(*(b.m.valid for b in ins)).any())
        with m.Switch(last):  # the first port with a request after the one granted last
            for prev in range(n):
                with m.Case(prev):
                    for j in reversed(range(1, n + 1)):  # the highest priority assigned last
                        k = (prev + j) % n
                        with m.If(ins[k].m.valid):
                            m.d.comb += grant.eq(k)
        room = out.s.ready if order is None else out.s.ready & order.w_rdy
        take = any_req & room
        m.d.comb += out.s.valid.eq(take)
        with m.Switch(grant):
            for k in range(n):
                with m.Case(k):
                    m.d.comb += [getattr(out.s.payload, f).eq(getattr(ins[k].m.payload, f))
                                 for f in fields]
                    m.d.comb += getattr(out.s.payload, f"{ch}id").eq(self.ids[k])
        for k in range(n):
            m.d.comb += ins[k].m.ready.eq(take & (grant == k))
        with m.If(take):
            m.d.sync += last.eq(grant)
        if order is not None:
            m.d.comb += [order.w_en.eq(take), order.w_data.eq(grant)]

    def _write_data(self, m: Module, subs: list, mem, fields: dict[str, int],
                    order: fifo.SyncFIFOBuffered) -> None:
        """W: the beats of the port at the head of the AW order, until its ``wlast``."""
        ins = []
        for k, s in enumerate(subs):
            buf = self._slice(m, f"w_in{k}", fields)
            m.d.comb += [buf.s.valid.eq(s.wvalid), s.wready.eq(buf.s.ready)]
            m.d.comb += [getattr(buf.s.payload, f).eq(getattr(s, f)) for f in fields]
            ins.append(buf)
        out = self._slice(m, "w_out", fields)
        m.d.comb += [mem.wvalid.eq(out.m.valid), out.m.ready.eq(mem.wready)]
        m.d.comb += [getattr(mem, f).eq(getattr(out.m.payload, f)) for f in fields]
        sel = order.r_data
        # valid as an AND-OR of (sel == k) terms, not a case on ``sel``: an empty order queue's
        # ``r_data`` may be unknown in a 4-state simulator, and a case would make valid X there
        m.d.comb += out.s.valid.eq(order.r_rdy & Cat(
            (sel == k) & ins[k].m.valid for k in range(len(subs))).any())
        with m.Switch(sel):
            for k in range(len(subs)):
                with m.Case(k):
                    m.d.comb += [getattr(out.s.payload, f).eq(getattr(ins[k].m.payload, f))
                                 for f in fields]
        for k in range(len(subs)):
            m.d.comb += ins[k].m.ready.eq(order.r_rdy & (sel == k) & out.s.ready)
        m.d.comb += order.r_en.eq(out.s.valid & out.s.ready & out.s.payload.wlast)

    def _responses(self, m: Module, ch: str, subs: list, mem, fields: dict[str, int]) -> Signal:
        """R or B: the manager's slice, then to the slice of the port whose ID the response
        carries; a response of no port's ID is taken and dropped (returned: dropped this cycle)."""
        inp = self._slice(m, f"{ch}_in", fields)
        m.d.comb += [inp.s.valid.eq(getattr(mem, f"{ch}valid")),
                     getattr(mem, f"{ch}ready").eq(inp.s.ready)]
        m.d.comb += [getattr(inp.s.payload, f).eq(getattr(mem, f)) for f in fields]
        rid = getattr(inp.m.payload, f"{ch}id")
        known = Signal(name=f"{ch}_known")
        ready = Signal(name=f"{ch}_to_ready")
        for k, s in enumerate(subs):
            out = self._slice(m, f"{ch}_out{k}", fields)
            hit = rid == self.ids[k]
            m.d.comb += [out.s.valid.eq(inp.m.valid & hit), out.s.payload.eq(inp.m.payload)]
            with m.If(hit):
                m.d.comb += [known.eq(1), ready.eq(out.s.ready)]
            m.d.comb += [getattr(s, f"{ch}valid").eq(out.m.valid),
                         out.m.ready.eq(getattr(s, f"{ch}ready"))]
            m.d.comb += [getattr(s, f).eq(getattr(out.m.payload, f)) for f in fields]
        dropped = Signal(name=f"{ch}_drop")
        m.d.comb += [inp.m.ready.eq(ready | ~known), dropped.eq(inp.m.valid & ~known)]
        return dropped


def with_latency(*, delay_depth: int = 64, **params) -> AxiLatencyHarness:
    """The arbiter (``**params``) with delay lines on its ``m_axi_mem`` R and B (a ``latency``
    input): what the cocotb bench (sim/tb_axi_id_arbiter.py) simulates against an ``AxiRam``."""
    return AxiLatencyHarness(AxiIdArbiter(**params), delay_depth=delay_depth)
