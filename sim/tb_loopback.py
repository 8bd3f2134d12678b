"""cocotb bench that puts the generated core on the network: a UDP <-> AXI4-Stream bridge.

The bench plays the network around one site's edge FPGA. It binds a UDP socket on 127.0.0.1;
every datagram that arrives (aggregation header + payload, as the host driver sends it) is
wrapped in Ethernet/IPv4/UDP (``wire.wrap_frames``, addressed to the core's multicast group) and
driven into the core through cocotbext-axi: CONTROL messages and site 0 (the local site) on the
host-facing port, site s >= 1 on network port (s - 1) mod P. Every frame the core emits on
``m_axis_host`` is unwrapped and sent to every client address seen so far — the network's
multicast replication of the result stream.

Parameters (``tb_params()``): the core's, plus ``bridge_port`` (UDP port to bind),
``summary`` (path of a JSON file written at the end) and ``poll_cycles``. A datagram equal to
``STOP`` ends the bench.
"""

from __future__ import annotations

import json
import socket

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from wanreduce import wire
from wanreduce.sim import frames
from wanreduce.sim.simulator import tb_params

STOP = b"wanreduce-loopback-stop"
CLOCK_NS = 4
MAX_DATAGRAM = 65535


def ingress_port(datagram: bytes, ports: int) -> int:
    """Which core port a datagram enters (``ports`` is the host-facing port's index)."""
    hdr = wire.AggHeader.unpack(datagram)
    if hdr.msg_type == wire.MsgType.CONTROL or hdr.sender_id == 0:
        return ports
    return (hdr.sender_id - 1) % ports


@cocotb.test()
async def bridge(dut):
    """Run the UDP bridge until a STOP datagram arrives."""
    p = tb_params()
    ports, poll = p["ports"], p.get("poll_cycles", 16)
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    names = [f"s_axis_net{i}" for i in range(ports)] + ["s_axis_host"]
    sources = [AxiStreamSource(AxiStreamBus.from_prefix(dut, n, bus_separator="__"), dut.clk, dut.rst)
               for n in names]
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_host", bus_separator="__"), dut.clk, dut.rst)
    await ClockCycles(dut.clk, 5)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    sock.bind(("127.0.0.1", p["bridge_port"]))
    sock.setblocking(False)
    clients: dict[tuple[str, int], None] = {}
    stats = {"runts_dropped": 0, "datagrams_in": 0, "datagrams_out": 0, "frames_per_port": [0] * (ports + 1), "cycles": 0}

    async def egress() -> None:
        while True:
            f = await sink.recv()
            dgram = bytes(f.tdata)[wire.AGG_OFFSET :]
            for addr in list(clients):
                try:
                    sock.sendto(dgram, addr)
                except OSError:  # a client that went away: the network drops, as a real one would
                    pass
            stats["datagrams_out"] += 1

    cocotb.start_soon(egress())
    start_ns = get_sim_time("ns")
    stopping = False
    while not stopping:
        for _ in range(256):
            try:
                data, addr = sock.recvfrom(MAX_DATAGRAM)
            except BlockingIOError:
                break
            if data == STOP:
                stopping = True
                break
            clients.setdefault(addr, None)
            stats["datagrams_in"] += 1
            if len(data) < wire.AGG_HEADER_BYTES:
                stats["runts_dropped"] += 1  # cannot be framed: dropped and counted here
                continue
            port = ingress_port(data, ports)
            stats["frames_per_port"][port] += 1
            sender = wire.AggHeader.unpack(data).sender_id
            frame = wire.wrap_frames(np.frombuffer(data, np.uint8)[None, :],
                                     frames.to_core(sender % wire.MAX_SENDERS))[0]
            sources[port].send_nowait(AxiStreamFrame(frame.tobytes()))
        await ClockCycles(dut.clk, poll)
    for s in sources:
        await s.wait()
    await ClockCycles(dut.clk, 200)
    stats["cycles"] = int((get_sim_time("ns") - start_ns) // CLOCK_NS)
    sock.close()
    if p.get("summary"):
        with open(p["summary"], "w") as fh:
            json.dump(stats, fh)
