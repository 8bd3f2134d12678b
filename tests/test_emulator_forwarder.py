"""The WAN forwarder (emulator/forwarder.py) between plain sockets standing in for the aggregators.

Line topology A - B - C - D; group 5 = {A, C, D}. A host at A sends contributions: A's own
aggregator gets them at once, C's and D's after the path's delays and at the links' rate, B's
none; exactly the tree's links carry one copy each; results of an aggregator reach only its own
site's hosts. Times are checked as lower bounds (exact: a copy can never arrive early) and upper
bounds of the scheduled time plus the lateness the forwarder itself reports, plus a margin for a
loaded machine.
"""

import multiprocessing
import socket
import struct
import threading
import time

import pytest

from wanreduce import wire
from wanreduce.emulator.forwarder import ForwarderConfig, Routes, serve
from wanreduce.packetize import AGG_HEADER_STRUCT
from wanreduce.planner.topology import topology_from_dict

DELAYS = {("A", "B"): 0.05, ("B", "C"): 0.10, ("C", "D"): 0.05}
RATE = 1e6  # bytes/s on every WAN link (8 Mb/s)
COUNT = 250  # elements per datagram: 1022 bytes
MARGIN = 3.0  # s: scheduling on a loaded machine, on top of the forwarder's own lateness


def _topo():
    return topology_from_dict({
        "sites": ["A", "B", "C", "D"],
        "links": [{"a": a, "b": b, "latency_ms": d * 1e3, "bandwidth_gbps": RATE * 8 / 1e9}
                  for (a, b), d in DELAYS.items()],
    })


def _sock(timeout=0.05):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("127.0.0.1", 0))
    s.settimeout(timeout)
    return s


def _datagram(msg_type, group, chunk, sender=0):
    hdr = AGG_HEADER_STRUCT.pack(wire.MAGIC, wire.VERSION, msg_type, 0, group, 0, 0, chunk,
                                 sender, 0, COUNT, 0)
    return hdr + struct.pack(f"<{COUNT}i", *range(COUNT))


class Net:
    """The forwarder in a thread, four fake aggregators recording (time, datagram, source)."""

    def __init__(self, loss=0.0, queue_bytes=float("inf"), seed=1):
        self.topo = _topo()
        self.aggs = [_sock() for _ in range(4)]
        self.got = [[] for _ in range(4)]
        cfg = ForwarderConfig(
            aggregators=[s.getsockname() for s in self.aggs],
            links=[(u, v, float(bw) / 8, float(lat)) for (u, v), bw, lat
                   in zip(self.topo.directed, self.topo.dir_bw, self.topo.dir_latency, strict=True)],
            ports=[1e9] * 4, queue_bytes=queue_bytes, loss=loss, seed=seed, lifetime=60.0)
        self.conn, child = multiprocessing.Pipe()
        self.fwd = threading.Thread(target=serve, args=(cfg, child), daemon=True)
        self.fwd.start()
        assert self.conn.poll(30)
        tag, edges = self.conn.recv()
        self.edges = [tuple(e) for e in edges]
        routes = Routes({5: (0, 2, 3)}, {(5, s): self.topo.multicast_tree(s, [m for m in (0, 2, 3)
                                                                           if m != s])
                                         for s in (0, 2, 3)})
        self.conn.send(("routes", routes))
        assert self.conn.recv() == ("ok",)
        self.stop_rx = threading.Event()
        self.rx = [threading.Thread(target=self._record, args=(i,), daemon=True) for i in range(4)]
        for t in self.rx:
            t.start()

    def _record(self, i):
        while not self.stop_rx.is_set():
            try:
                pkt, src = self.aggs[i].recvfrom(65536)
            except (TimeoutError, OSError):
                continue
            self.got[i].append((time.monotonic(), pkt, src))

    def stats(self):
        self.conn.send(("stats",))
        return self.conn.recv()[1]

    def close(self):
        self.conn.send(("stop",))
        final = self.conn.recv()[1]
        self.fwd.join(10)
        self.stop_rx.set()
        for t in self.rx:
            t.join(5)
        for s in self.aggs:
            s.close()
        return final


def _wait_for(cond, limit=30.0):
    end = time.monotonic() + limit
    while time.monotonic() < end and not cond():
        time.sleep(0.02)
    return cond()


def test_multicast_reaches_exactly_the_group_after_its_delay_and_at_its_rate():
    net = Net()
    host = _sock()
    try:
        k = 40
        size = len(_datagram(wire.MsgType.CONTRIBUTION, 5, 0))
        t0 = time.monotonic()
        for c in range(k):
            host.sendto(_datagram(wire.MsgType.CONTRIBUTION, 5, c), net.edges[0])
        assert _wait_for(lambda: len(net.got[3]) == k and len(net.got[2]) == k)
        time.sleep(0.3)  # nothing else may come
        st = net.stats()
        assert [len(g) for g in net.got] == [k, 0, k, k]
        late = st["late_max"]
        # A's aggregator: at once; C: 0.15 s of delay, two links of store and forward
        first_c = net.got[2][0][0] - t0
        last_c = net.got[2][-1][0] - t0
        last_d = net.got[3][-1][0] - t0
        ser = size / RATE
        assert first_c >= 0.15 + 2 * ser
        assert last_c >= 0.15 + (k + 1) * ser  # the burst leaves A->B at the link's rate
        assert last_d >= 0.20 + (k + 2) * ser
        assert last_d <= 0.20 + (k + 2) * ser + late + MARGIN
        # one copy per tree link, none elsewhere
        want = {(0, 1): k * size, (1, 2): k * size, (2, 3): k * size}
        assert {e: row["bytes"] for e, row in st["links"].items() if row["bytes"]} == want
        # every copy arrives from the forwarder's one socket toward that aggregator, in order
        for i in (0, 2, 3):
            assert len({src for _t, _p, src in net.got[i]}) == 1
            chunks = [struct.unpack_from(">I", p, 12)[0] for _t, p, _s in net.got[i]]
            assert chunks == list(range(k))
    finally:
        host.close()
        net.close()


def test_results_reach_only_their_own_sites_hosts():
    net = Net()
    hosts = [_sock() for _ in range(4)]
    try:
        for s in (0, 2, 3):  # each host registers at its edge by contributing
            hosts[s].sendto(_datagram(wire.MsgType.CONTRIBUTION, 5, 0, s), net.edges[s])
        assert _wait_for(lambda: all(len(net.got[i]) == 3 for i in (0, 2, 3)))
        # aggregator C answers with a result to where its contributions came from
        src = net.got[2][0][2]
        net.aggs[2].sendto(_datagram(wire.MsgType.RESULT, 5, 0), src)
        hosts[2].settimeout(10)
        pkt, frm = hosts[2].recvfrom(65536)
        assert frm == net.edges[2] and pkt[3] == wire.MsgType.RESULT
        for s in (0, 3):
            hosts[s].settimeout(0.5)
            with pytest.raises(TimeoutError):
                hosts[s].recvfrom(65536)
        # a stranger sending to the aggregator-facing socket is counted and ignored
        hosts[1].sendto(_datagram(wire.MsgType.RESULT, 5, 0), src)
        assert _wait_for(lambda: net.stats()["counters"]["foreign"] == 1)
    finally:
        for h in hosts:
            h.close()
        net.close()


def test_loss_and_queue_drops_are_counted():
    net = Net(loss=0.3, seed=3)
    host = _sock()
    try:
        k = 200
        for c in range(k):
            host.sendto(_datagram(wire.MsgType.CONTRIBUTION, 5, c), net.edges[0])
        assert _wait_for(lambda: len(net.got[0]) == k)
        time.sleep(0.2 + k * 1022 / RATE * 3)
        st = net.close()
        ab = st["links"][(0, 1)]
        assert ab["lost"] > 20 and ab["lost"] + ab["packets"] == k
        # C gets what survived A->B and B->C; D what also survived C->D
        bc, cd = st["links"][(1, 2)], st["links"][(2, 3)]
        assert bc["lost"] + bc["packets"] == ab["packets"]
        assert len(net.got[2]) == bc["packets"] and len(net.got[3]) == cd["packets"]
    finally:
        host.close()
    net = Net(queue_bytes=5 * 1022)
    host = _sock()
    try:
        for c in range(50):
            host.sendto(_datagram(wire.MsgType.CONTRIBUTION, 5, c), net.edges[0])
        assert _wait_for(lambda: len(net.got[0]) == 50)
        time.sleep(0.6)
        st = net.close()
        assert st["links"][(0, 1)]["dropped"] > 0
        assert st["links"][(0, 1)]["dropped"] + st["links"][(0, 1)]["packets"] == 50
    finally:
        host.close()


def test_garbage_goes_to_the_own_aggregator_only():
    net = Net()
    host = _sock()
    try:
        host.sendto(b"\x00" * 30, net.edges[0])
        bad = bytearray(_datagram(wire.MsgType.CONTRIBUTION, 5, 0))
        bad[0] ^= 0xFF  # wrong magic
        host.sendto(bytes(bad), net.edges[0])
        assert _wait_for(lambda: len(net.got[0]) == 2)
        time.sleep(0.5)
        assert [len(g) for g in net.got] == [2, 0, 0, 0]
        # a sender of garbage is not one of the site's hosts: it gets no results
        net.aggs[0].sendto(_datagram(wire.MsgType.RESULT, 5, 0), net.got[0][0][2])
        assert _wait_for(lambda: net.stats()["counters"]["results"] == 1)
        host.settimeout(0.5)
        with pytest.raises(TimeoutError):
            host.recvfrom(65536)
        assert net.close()["counters"]["local_only"] == 2
    finally:
        host.close()
