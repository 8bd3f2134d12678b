"""AXI4 data-width upconverter: a narrow AXI4 manager (e.g. the core's 64-bit ``m_axi_mem``) onto a
wider memory port (e.g. LiteDRAM's 128-bit AXI port), two narrow beats packed into each wide beat.

Why not pass narrow transfers through (AXI allows ``awsize`` below the bus width): the memory
controller turns every beat into one DRAM burst, so a 64-bit beat on a 128-bit port would cost a
whole 128-bit burst and halve the DRAM bandwidth. Here a burst of ``n`` narrow beats from byte
address ``a`` becomes one burst of ``ceil((o + n) / R)`` wide beats from ``a`` rounded down to the
wide beat, ``R`` = wide / narrow width and ``o`` the narrow lane of ``a`` in its wide beat:

* **AW / AR**: converted and registered (:class:`~wanreduce.hdl.skid_buffer.SkidBuffer`); the
  lane ``o`` (and, for reads, ``n``) of each burst goes into a FIFO for its data channel. A
  request is taken only when both have room.
* **W**: narrow beats fill the wide beat from lane ``o`` upwards; the wide beat leaves when its
  top lane is filled or on ``wlast``, with ``wstrb`` set only on the lanes written (a burst
  starting or ending mid-beat leaves the other lanes of memory untouched). W does not wait for
  AW to be accepted downstream (a memory controller may take AW only once it holds the data).
* **R**: each wide beat (registered) gives the narrow beats of its lanes from ``o`` (first beat)
  or 0, up to the top lane or the burst's last beat; ``rlast`` on the ``n``-th.
* **B**: one per burst either way: wired through (B carries no data: its order does not matter
  here).

Supported: INCR bursts of full narrow beats (``size`` = log2(narrow bytes)), what
:class:`~wanreduce.hdl.dram_slot_store.DramSlotStore` issues. Any other burst type or size is
converted as if it were one and sets the sticky ``error`` output (never silently: the owner
reports it). A burst within a 4 KiB page stays within it (the wide range is the narrow range
rounded to wide beats). The FIFOs pair bursts and data in order: right for any number of IDs
while the memory returns R in AR order across IDs (W follows AW order: the manager's, e.g.
``AxiIdArbiter``'s). LiteDRAM's AXI frontend does (no reordering: one read command stream, RID
from a FIFO of the ARs' IDs; docs/large_slots.md, "How a 256-bit record travels"); a memory
that does not is caught, not trusted: each read's ID is queued with its lane and length, and a
burst's first R beat whose RID differs sets ``error`` too.
Both sides use ``hdl/axi4.py``'s flat AMBA names: ``s_axi_*`` (subordinate, narrow) and
``m_axi_*`` (manager, wide). With equal widths the component is wires.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, wiring

from .axi4 import AxiBurst, axi4_master_members, axi4_payload, axi4_port
from .skid_buffer import SkidBuffer

__all__ = ["AxiUpsizer"]


class AxiUpsizer(wiring.Component):
    """``s_axi_*`` (``narrow_width`` bits) -> ``m_axi_*`` (``wide_width`` bits); see the module
    docstring. ``depth``: bursts whose lane (and read length) wait for their data channel.
    ``r_ping_pong`` (default; False: the plain ``SKID`` register of 193bd2d and before): the wide R
    input register is ``SkidBuffer(ping_pong=True, ready_copy=True)``, the same beats in the same
    cycles, but the unpacking's ready (``left`` / ``pos`` / the lane FIFO's head -> ``last`` ->
    ``r_in.m.ready``) reaches no data register's enable, and ``r_in.s.ready`` (the flip-flop
    LiteDRAM's read-data CDC FIFO reads) drives no data register's enable either (the slots'
    enables are their own flip-flops): the Versa DRAM build's ``mem_upsizer.m__payload`` (8.21 ns)
    and ``clockdomaincrossing4_cdc_rdport_dat_r`` from ``mem_upsizer.r_in.s__ready`` (8.19 ns) at
    main 193bd2d's seeds 5 / 4. The enable copies' check (``copy_error``, never if right) sets
    the sticky ``error``."""

    def __init__(self, narrow_width: int, wide_width: int, *, addr_width: int = 32,
                 id_width: int = 1, depth: int = 16, r_ping_pong: bool = True) -> None:
        for name, w in (("narrow_width", narrow_width), ("wide_width", wide_width)):
            if w < 8 or w > 1024 or w & (w - 1):
                raise ValueError(f"{name} must be a power of two from 8 to 1024 bits, got {w}")
        if wide_width < narrow_width:
            raise ValueError(f"wide_width must be >= narrow_width ({narrow_width}), got {wide_width}")
        if not 12 <= addr_width <= 64:
            raise ValueError(f"addr_width must be 12..64, got {addr_width}")
        if depth < 2:
            raise ValueError(f"depth must be >= 2, got {depth}")
        self.narrow_width, self.wide_width = narrow_width, wide_width
        self.addr_width, self.id_width, self.depth = addr_width, id_width, depth
        self.r_ping_pong = bool(r_ping_pong)
        self.ratio = wide_width // narrow_width
        sub = axi4_master_members("s_axi", addr_width=addr_width, data_width=narrow_width,
                                  id_width=id_width)
        super().__init__({
            **{k: v.flip() for k, v in sub.items()},
            **axi4_master_members("m_axi", addr_width=addr_width, data_width=wide_width,
                                  id_width=id_width),
            "error": wiring.Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        s, w = axi4_port(self, "s_axi"), axi4_port(self, "m_axi")
        payload = axi4_payload(self.addr_width, self.wide_width, self.id_width)
        if self.ratio == 1:
            for ch, sigs in payload.items():
                up, down = (s, w) if ch in ("aw", "w", "ar") else (w, s)
                for name in (*sigs, f"{ch}valid"):
                    m.d.comb += getattr(down, name).eq(getattr(up, name))
                m.d.comb += getattr(up, f"{ch}ready").eq(getattr(down, f"{ch}ready"))
            return m
        self._write_data(m, s, w, self._address(m, s, w, "aw", payload["aw"]))
        self._read_data(m, s, w, self._address(m, s, w, "ar", payload["ar"]))
        m.d.comb += [s.bvalid.eq(w.bvalid), s.bid.eq(w.bid), s.bresp.eq(w.bresp),
                     w.bready.eq(s.bready)]
        return m

    @property
    def _lane_bits(self) -> int:
        return self.ratio.bit_length() - 1

    def _address(self, m: Module, s, w, ch: str, fields: dict[str, int]) -> fifo.SyncFIFOBuffered:
        """AW or AR: convert, register, and queue the lane (and the read's length); returns
        the queue."""
        nbytes_log = (self.narrow_width // 8).bit_length() - 1
        wbytes_log = (self.wide_width // 8).bit_length() - 1
        lb = self._lane_bits
        p = ch  # aw or ar: signal prefix
        layout = data.StructLayout(fields)
        m.submodules[f"{ch}_out"] = out = SkidBuffer(layout)
        m.submodules[f"{ch}_lanes"] = q = fifo.SyncFIFOBuffered(
            width=lb + (8 + self.id_width if ch == "ar" else 0), depth=self.depth)
        addr, length = getattr(s, f"{p}addr"), getattr(s, f"{p}len")
        lane = addr[nbytes_log:wbytes_log]
        wide_len = Signal(9, name=f"{ch}_wide_len")  # wide beats - 1
        m.d.comb += wide_len.eq((lane + length) >> lb)
        take = getattr(s, f"{p}valid") & out.s.ready & q.w_rdy
        m.d.comb += [
            getattr(s, f"{p}ready").eq(out.s.ready & q.w_rdy),
            out.s.valid.eq(take), q.w_en.eq(take),
            q.w_data.eq(lane if ch == "aw" else Cat(lane, length, s.arid)),
        ]
        for name in fields:
            m.d.comb += getattr(out.s.payload, name).eq(getattr(s, name))
        m.d.comb += [
            getattr(out.s.payload, f"{p}addr").eq(Cat(Const(0, wbytes_log), addr[wbytes_log:])),
            getattr(out.s.payload, f"{p}len").eq(wide_len),
            getattr(out.s.payload, f"{p}size").eq(wbytes_log),
        ]
        bad = ((getattr(s, f"{p}burst") != AxiBurst.INCR)
               | (getattr(s, f"{p}size") != nbytes_log))
        with m.If(take & bad):
            m.d.sync += self.error.eq(1)
        m.d.comb += getattr(w, f"{p}valid").eq(out.m.valid)
        m.d.comb += out.m.ready.eq(getattr(w, f"{p}ready"))
        for name in fields:
            m.d.comb += getattr(w, name).eq(getattr(out.m.payload, name))
        return q

    def _write_data(self, m: Module, s, w, q: fifo.SyncFIFOBuffered) -> None:
        """Pack narrow W beats into wide ones, from the burst's lane; leave on top lane or wlast."""
        r, nw, lb = self.ratio, self.narrow_width, self._lane_bits
        layout = data.StructLayout({"wdata": self.wide_width, "wstrb": self.wide_width // 8,
                                    "wlast": 1})
        m.submodules.w_out = out = SkidBuffer(layout)
        # narrow W enters through a register (skid buffer): the manager's wvalid/wlast (the DRAM
        # store's beat count against its burst length) no longer run on through the lane choice
        # into the accumulator's enables (64 + 8 flip-flops: the Versa DRAM build's core path,
        # 9.6 ns, in vdram22's seed-2 placement)
        m.submodules.w_in = w_in = SkidBuffer(data.StructLayout({"wdata": nw, "wstrb": nw // 8, "wlast": 1}))
        m.d.comb += [w_in.s.valid.eq(s.wvalid), s.wready.eq(w_in.s.ready), w_in.s.payload.wdata.eq(s.wdata),
                     w_in.s.payload.wstrb.eq(s.wstrb), w_in.s.payload.wlast.eq(s.wlast)]
        wi = w_in.m.payload
        first = Signal(init=1)  # the next narrow beat starts a burst (its lane from the FIFO)
        pos = Signal(lb)
        acc = Signal(self.wide_width)
        acc_strb = Signal(self.wide_width // 8)
        lane = Mux(first, q.r_data[:lb], pos)
        ok = ~first | q.r_rdy
        take = w_in.m.valid & ok & out.s.ready
        leave = wi.wlast | (lane == r - 1)
        m.d.comb += [w_in.m.ready.eq(ok & out.s.ready), q.r_en.eq(take & first),
                     out.s.valid.eq(take & leave), out.s.payload.wlast.eq(wi.wlast)]
        nb = nw // 8
        for i in range(r):
            here = lane == i
            m.d.comb += [
                out.s.payload.wdata[i * nw:(i + 1) * nw].eq(
                    Mux(here, wi.wdata, acc[i * nw:(i + 1) * nw])),
                out.s.payload.wstrb[i * nb:(i + 1) * nb].eq(
                    Mux(here, wi.wstrb, acc_strb[i * nb:(i + 1) * nb])),
            ]
        with m.If(take):
            m.d.sync += [first.eq(wi.wlast), pos.eq(lane + 1)]
            with m.If(leave):
                m.d.sync += acc_strb.eq(0)
            with m.Else():
                m.d.sync += acc_strb.eq(out.s.payload.wstrb)
        # the wide data register loads without ``out.s.ready`` (w_out's ready flip-flop ->
        # ``take`` -> its 128 enables was the Versa DRAM build's 8.23 ns at session 44's seed 3):
        # a beat waiting on w_in writes only its own lane (the others reload themselves), the
        # beat stays until taken and its lane with it, so the load is the one its take makes
        with m.If(w_in.m.valid & ok & ~leave):
            m.d.sync += acc.eq(out.s.payload.wdata)
        m.d.comb += [w.wvalid.eq(out.m.valid), out.m.ready.eq(w.wready),
                     w.wdata.eq(out.m.payload.wdata), w.wstrb.eq(out.m.payload.wstrb),
                     w.wlast.eq(out.m.payload.wlast)]

    def _read_data(self, m: Module, s, w, q: fifo.SyncFIFOBuffered) -> None:
        """Unpack each wide R beat into the narrow beats of the burst's lanes."""
        r, nw, lb = self.ratio, self.narrow_width, self._lane_bits
        layout = data.StructLayout({"rdata": self.wide_width, "rresp": 2, "rid": self.id_width})
        # r_ping_pong: the sink's ready reaches only the read pointer, no data enable (class docstring)
        m.submodules.r_in = rin = SkidBuffer(layout, ping_pong=self.r_ping_pong, ready_copy=self.r_ping_pong)
        if self.r_ping_pong:
            with m.If(rin.copy_error):
                m.d.sync += self.error.eq(1)
        m.d.comb += [rin.s.valid.eq(w.rvalid), w.rready.eq(rin.s.ready),
                     rin.s.payload.rdata.eq(w.rdata), rin.s.payload.rresp.eq(w.rresp),
                     rin.s.payload.rid.eq(w.rid)]
        first = Signal(init=1)
        pos = Signal(lb)
        left = Signal(8)  # narrow beats after this one in the burst
        lane = Mux(first, q.r_data[:lb], pos)
        remaining = Mux(first, q.r_data[lb:lb + 8], left)
        ok = ~first | q.r_rdy
        valid = rin.m.valid & ok
        last = remaining == 0
        take = valid & s.rready
        m.d.comb += [
            s.rvalid.eq(valid), s.rlast.eq(last), s.rresp.eq(rin.m.payload.rresp),
            s.rid.eq(rin.m.payload.rid),
            s.rdata.eq(rin.m.payload.rdata.word_select(lane, nw)),
            q.r_en.eq(take & first),
            rin.m.ready.eq(take & (last | (lane == r - 1))),
        ]
        with m.If(take):
            m.d.sync += [first.eq(last), pos.eq(lane + 1), left.eq(remaining - 1)]
        # a burst's first beat with another ID than the read it is paired with: the memory
        # returned reads out of AR order (another ID's burst first), unpacked wrongly
        with m.If(take & first & (rin.m.payload.rid != q.r_data[lb + 8:])):
            m.d.sync += self.error.eq(1)
