"""cocotb bench of ``wanreduce_core``'s CONTROL path under egress backpressure (issue 12).

``reply_header_under_stalls``: the CONTROL message read ID, write RESULT_IP, read ID, read ID
on the host port while the sink on ``m_axis_host`` takes the reply's first ``k`` beats and then
holds ``tready`` low for ``stall`` cycles, swept over (k, stall). RESULT_IP alternates between
its reset value and 10.255.1.255, so every reply is framed while the destination changes. Every
reply must carry a valid IPv4 header checksum and one whole destination (old or new), and the
configuration the documentation states: the reply's header reflects the operations of the
message's first beat (W/64 operations), so at W = 64 the old RESULT_IP, at W >= 128 the new.

``reply_echoes_request``: ``frames.control_probe`` (header echoed with msg_type 4 and sender =
SITE_ID, unmapped address reads 0, odd trailing word echoed but not executed), the same reply
the software aggregator gives (tests/test_softagg.py).

``max_elements_zero_and_one``: MAX_ELEMENTS written to 0 and to 1 over CONTROL, read back
(the host must still reach the core), a 2-element contribution dropped for ELEMENT_COUNT, the
register restored to E and read back.

``probe_bitmap``: JOB0_PROBE / JOB0_PROBE_BITMAP (issue 13) while chunk 0 collects (two of three
members in), chunk 1 is complete behind it, chunk 2 was never sent, then after both are
released; every read equals ``AggregatorModel.probe_bitmap`` fed the same contributions.

Parameters (``tb_params()``): the core's (ports, width, slots, elements, groups, jobs).
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSource

from wanreduce import regs, wire
from wanreduce.hdl.layouts import header_beats, payload_beats
from wanreduce.model import AggregatorModel, Drop, Message, PortConfig, parse_frame
from wanreduce.sim import frames
from wanreduce.sim.simulator import tb_params

NEW_RESULT_IP = 0x0AFF01FF  # 10.255.1.255
# cycles a reply may take (ingress store-and-forward, four operations, framing): generous, in
# simulated cycles, so the bench does not depend on how fast the host machine is
REPLY_CYCLES = 5_000


class StallSink:
    """``m_axis_host`` sink: takes the first ``k`` beats of each frame, then holds ``tready``
    low for ``stall`` cycles, then takes everything; collects whole frames (tkeep bytes)."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.k, self.stall = 0, 0
        self.frames: list[bytes] = []

    async def run(self) -> None:
        dut, nbytes = self.dut, len(self.dut.m_axis_host__tkeep)
        ready, taken, stall_left, cur = 1, 0, None, bytearray()
        dut.m_axis_host__tready.value = ready
        while True:
            await RisingEdge(dut.clk)
            if ready and dut.m_axis_host__tvalid.value:
                keep = int(dut.m_axis_host__tkeep.value)
                data = int(dut.m_axis_host__tdata.value).to_bytes(nbytes, "little")
                cur += bytes(data[b] for b in range(nbytes) if keep >> b & 1)
                taken += 1
                if dut.m_axis_host__tlast.value:
                    self.frames.append(bytes(cur))
                    cur, taken, stall_left = bytearray(), 0, None
            if taken == self.k and stall_left is None:
                stall_left = self.stall
            ready = int(not stall_left)
            if stall_left:
                stall_left -= 1
            dut.m_axis_host__tready.value = ready


class ControlBench:
    def __init__(self, dut) -> None:
        self.dut, self.p = dut, tb_params()
        for i in range(self.p["ports"]):
            getattr(dut, f"s_axis_net{i}__tvalid").value = 0
        self.host = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_host", bus_separator="__"),
                                    dut.clk, dut.rst)
        self.sink = StallSink(dut)

    async def start(self) -> None:
        cocotb.start_soon(Clock(self.dut.clk, 4, unit="ns").start())
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 5)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)
        cocotb.start_soon(self.sink.run())

    async def send(self, data: bytes, frames_out: int) -> None:
        """Send one frame on the host port and wait until ``frames_out`` frames came out."""
        await self.host.send(AxiStreamFrame(data))
        for _ in range(REPLY_CYCLES):
            if len(self.sink.frames) >= frames_out:
                return
            await RisingEdge(self.dut.clk)
        raise AssertionError(f"no reply within {REPLY_CYCLES} cycles")

    async def control(self, ops: list[tuple[bool, int, int]]) -> tuple[bytes, list[int]]:
        """One CONTROL message; its reply frame and the reply's value words."""
        n = len(self.sink.frames)
        await self.send(frames.control(ops), n + 1)
        reply = self.sink.frames[n]
        agg = wire.AggHeader.unpack(reply[wire.AGG_OFFSET:])
        assert agg.msg_type == wire.MsgType.CONTROL_REPLY, agg
        return reply, wire.reply_values(reply[wire.HEADER_BYTES:])


@cocotb.test()
async def reply_header_under_stalls(dut):
    tb = ControlBench(dut)
    await tb.start()
    w = tb.p["width"]
    beats = header_beats(w) + payload_beats(2 * 4, w)  # the reply frame of four operations
    ip_of = slice(wire.IPV4_OFFSET, wire.IPV4_OFFSET + wire.IPV4_HEADER_BYTES)
    dst_of = slice(wire.IPV4_OFFSET + 16, wire.IPV4_OFFSET + 20)
    # the reply's header has the configuration after the operations of its first beat
    takes_new = w // 64 >= 2
    old, bad, n = regs.DEFAULT_RESULT_IP, [], 0
    for k in range(beats):
        for stall in range(9):
            new = NEW_RESULT_IP if old == regs.DEFAULT_RESULT_IP else regs.DEFAULT_RESULT_IP
            tb.sink.k, tb.sink.stall = k, stall
            reply, values = await tb.control(
                [(False, regs.ID, 0), (True, regs.RESULT_IP, new), (False, regs.ID, 0),
                 (False, regs.ID, 0)])
            n += 1
            assert values == [regs.CORE_ID, new, regs.CORE_ID, regs.CORE_ID], values
            dst = int.from_bytes(reply[dst_of], "big")
            want = new if takes_new else old
            if wire.ipv4_checksum(reply[ip_of]) != 0 or dst != want:
                bad.append(f"k={k} stall={stall}: dst {wire.int_to_ip(dst)} (want "
                           f"{wire.int_to_ip(want)}), checksum ok "
                           f"{wire.ipv4_checksum(reply[ip_of]) == 0}")
            old = new
    assert not bad, f"{len(bad)} of {n} replies wrong:\n" + "\n".join(bad)
    dut._log.info("%d (beats taken, stall) combinations, every reply whole", n)


@cocotb.test()
async def max_elements_zero_and_one(dut):
    tb = ControlBench(dut)
    await tb.start()
    e = tb.p["elements"]
    host = regs.port_drops(tb.p["ports"], Drop.ELEMENT_COUNT)
    for limit in (0, 1):
        _, got = await tb.control([(True, regs.MAX_ELEMENTS, limit)])
        assert got == [limit]
        _, got = await tb.control([(False, regs.MAX_ELEMENTS, 0), (False, regs.ID, 0)])
        assert got == [limit, regs.CORE_ID], f"MAX_ELEMENTS {limit}: read back {got}"
    # a contribution above the limit is still dropped for its element count
    _, (drops_before,) = await tb.control([(False, host, 0)])
    await tb.host.send(AxiStreamFrame(frames.contribution(sender=0, chunk=0, payload=[1, 2],
                                                          multicast=False)))
    await tb.host.wait()
    await ClockCycles(dut.clk, 200)
    _, (drops_after,) = await tb.control([(False, host, 0)])
    assert drops_after == drops_before + 1
    _, got = await tb.control([(True, regs.MAX_ELEMENTS, e), (False, regs.MAX_ELEMENTS, 0)])
    assert got == [e, e]


@cocotb.test()
async def reply_echoes_request(dut):
    tb = ControlBench(dut)
    await tb.start()
    _, got = await tb.control([(True, regs.SITE_ID, 0x2A)])
    assert got == [0x2A]
    hdr, words, want_hdr, want_words = frames.control_probe(0x2A)
    n = len(tb.sink.frames)
    await tb.send(wire.frame(hdr, words.view(np.int32), frames.to_core(0, multicast=False)), n + 1)
    reply = tb.sink.frames[n]
    assert wire.AggHeader.unpack(reply[wire.AGG_OFFSET:]) == want_hdr
    got_words = np.frombuffer(reply[wire.HEADER_BYTES:], np.uint32)
    assert np.array_equal(got_words, want_words), got_words
    _, got = await tb.control([(False, regs.SITE_ID, 0)])
    assert got == [0x2A], "the odd trailing word was executed"


@cocotb.test()
async def probe_bitmap(dut):
    tb = ControlBench(dut)
    await tb.start()
    p = tb.p
    model = AggregatorModel(slots=p["slots"], elements=p["elements"], groups=p["groups"], jobs=p["jobs"])
    model.set_group(0, 0b111)
    model.set_job(0, enabled=True, base=0, log2_window=2)
    await tb.control([(True, regs.group(0), 0b111),
                      (True, regs.job_cfg(0), regs.pack_job_cfg(enabled=True, log2_window=2, base=0))])
    port = PortConfig(local_mac=frames.CORE_MAC, local_ip=frames.CORE_IP,
                      max_elements=p["elements"], elements=p["elements"])

    async def contribute(sender: int, chunk: int, results: int = 0) -> None:
        """One contribution on the host port (into the model too); waits for its results."""
        data = frames.contribution(sender=sender, chunk=chunk, payload=[sender, chunk],
                                   multicast=False, session=0x77)
        msg = parse_frame(data, port)
        assert isinstance(msg, Message), msg
        model.contribute(msg)
        if results:
            await tb.send(data, len(tb.sink.frames) + results)
        else:
            await tb.host.send(AxiStreamFrame(data))
            await tb.host.wait()
        await ClockCycles(dut.clk, 50)  # through the parser and the reducer

    async def probe(chunks: list[int]) -> None:
        ops = []
        for c in chunks:
            ops += [(True, regs.job_probe(0), c), (False, regs.job_probe_bitmap(0), 0)]
        _, got = await tb.control(ops)
        want = []
        for c in chunks:
            want += [c, model.probe_bitmap(0, c)]
        assert got == want, f"probe {chunks}: core {got}, model {want}"

    await contribute(0, 0)
    await contribute(2, 0)
    for s in range(3):
        await contribute(s, 1)
    await probe([0, 1, 2, 0])
    assert model.probe_bitmap(0, 0) == 0b101 and model.probe_bitmap(0, 1) == 0b111
    await contribute(1, 0, results=2)  # releases chunks 0 and 1
    await probe([0, 1])
    assert model.probe_bitmap(0, 0) == 0 == model.probe_bitmap(0, 1)
    # another job's probe register is its own (job 1 disabled: nothing held)
    _, got = await tb.control([(True, regs.job_probe(1), 1), (False, regs.job_probe_bitmap(1), 0),
                               (False, regs.job_probe(0), 0)])
    assert got == [1, 0, 1]
