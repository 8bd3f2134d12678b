"""The emulator's data plane: one event loop that carries every site's datagrams over the WAN.

Per site s it holds three kinds of UDP sockets on loopback:

* ``edge[s]``: where site s's hosts send (contributions and CONTROL) and where their results
  and CONTROL replies come from (the client's aggregator, control address and result source);
* ``up[s]``: the one socket from which every contribution reaches aggregator s (the site's own
  and the other members' copies), so the aggregator sends each result once, back to it; results
  arriving there are passed to every host seen at ``edge[s]`` (the FPGA's result stream to its
  local hosts), never to another site;
* one CONTROL socket per host address at ``edge[s]`` (NAT), so each ControlClient gets its own
  replies.

A contribution from a host at site s goes to aggregator s at once (host and edge FPGA share the
site) and, when its group (``group_id`` in the header, members from the GroupTable) has other
members, once through s's egress port, then along s's shortest-latency multicast tree for that
group (``Topology.multicast_tree``), copied where the tree branches; at each member r it passes
r's FPGA ingress port and reaches aggregator r. Every port and link is a
:class:`~wanreduce.emulator.link.LinkQueue` (rate, propagation delay, bounded FIFO, seeded
random loss on WAN links: every datagram crossing one may be lost there, contribution copies,
NACKs and acks alike, ``LOSS_KINDS``). Events are processed in time order and only once the wall clock has reached
them, so a datagram that arrives later can never be queued ahead of an earlier one; how late
deliveries leave against their scheduled time is recorded (``late_max``/``late_mean``), the
measure of whether the loop keeps up. Anything that is not a well-formed contribution goes to the
site's own aggregator only (which counts and drops it); datagrams from unexpected sources are
counted and ignored. The sharded plan's groups (``Routes``: ``deliver``, ``passthrough``,
``acks``) reach only their owner's aggregator, pass all-gather copies to the hosts, and send the
owner's results back to the contributors as acknowledgements. NACKs (WAN-link loss recovery,
``host/wan_recovery.py``) from a host at
site s travel to the named member's site over the WAN links and reach the hosts that listen for
NACKs there (``nack``).

``serve`` runs until its ``lifetime`` has passed or it is told to stop over its pipe; it runs in
a process (``WanEmulator``) or a thread (``LocalNetwork``).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import select
import socket
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from wanreduce import wire

from .link import LinkQueue

Address = tuple[str, int]
_HDR = wire.AGG_HEADER_BYTES
_MAGIC = wire.MAGIC.to_bytes(2, "big")
_CONTRIBUTION = int(wire.MsgType.CONTRIBUTION)
_RESULT = int(wire.MsgType.RESULT)
_CONTROL = int(wire.MsgType.CONTROL)
_CONTROL_REPLY = int(wire.MsgType.CONTROL_REPLY)
_NACK = int(wire.MsgType.NACK)
_OFF = {f.name: f.agg_offset for f in wire.AGG_FIELDS}
_TYPE, _GROUP, _COUNT = _OFF["msg_type"], _OFF["group_id"], _OFF["element_count"]
_CHUNK = _OFF["chunk"]
_BUF = 8 << 20  # socket buffers (as far as the kernel allows)
_MAX_NAT = 64  # CONTROL sockets per site (one per host address)
_BURST = 256  # datagrams read from one socket before looking at the clock again
_ACK = -2  # heap entry: a result delivered to the hosts of a contributing site (Routes.acks)
#: What the WAN carries, each subject to the random loss unless left out of ``loss_on``:
#: contribution copies (and all-gather copies), NACKs, and a shard owner's acks.
LOSS_KINDS = ("data", "nacks", "acks")


@dataclass
class ForwarderConfig:
    """Everything the data plane needs (picklable: it is sent to a spawned process)."""

    aggregators: list[Address]  # aggregator of site s
    links: list[tuple[int, int, float, float]]  # directed WAN links: (u, v, bytes/s, delay s)
    ports: list[float]  # per site: egress and FPGA-ingress port rate, bytes/s
    queue_bytes: float = float("inf")  # per link and port
    loss: float = 0.0  # per WAN link crossing of every datagram of the kinds in ``loss_on``
    loss_on: tuple[str, ...] = LOSS_KINDS  # a subset of LOSS_KINDS (tests, diagnosis)
    # fault injection (tests, benchmarks): (sender site, chunk, receiving site): that copy of
    # the sender's contribution is lost once, before the receiver's ingress port
    drop: tuple[tuple[int, int, int], ...] = ()
    seed: int = 0
    lifetime: float = 600.0  # seconds; the loop ends by itself after this
    host: str = "127.0.0.1"


@dataclass
class Routes:
    """Group members and, per (group, sender), the multicast tree: node -> [(link, child)].

    The sharded data path (docs/emulator.md, "The sharded plan") adds, per group: ``deliver``,
    the sites whose aggregator takes its contributions (default: every member; a reduce group's
    owner only, so a contribution reaches the sender's own aggregator only if it is listed);
    ``passthrough``, groups whose copies pass the receiving FPGA to its hosts (an all-gather:
    no aggregator, no slots); ``acks``, the sites whose hosts get the group's results as
    acknowledgements (a reduce group's contributors): one copy after the path's one-way delay,
    no link capacity taken (the FPGA's ack of a remote contribution is a header)."""

    members: dict[int, tuple[int, ...]] = field(default_factory=dict)
    trees: dict[tuple[int, int], dict[int, list[tuple[int, int]]]] = field(default_factory=dict)
    deliver: dict[int, frozenset[int]] = field(default_factory=dict)
    passthrough: frozenset[int] = frozenset()
    acks: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def delivers(self, g: int, site: int) -> bool:
        """Whether a contribution of group ``g`` is delivered at ``site`` (to its aggregator, or
        to its hosts when ``g`` passes through)."""
        d = self.deliver.get(g)
        return site in self.members.get(g, ()) if d is None else site in d


def _socket(host: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            s.setsockopt(socket.SOL_SOCKET, opt, _BUF)
        except OSError:
            pass
    s.bind((host, 0))
    s.setblocking(False)
    return s


def _well_formed_contribution(pkt: bytes) -> bool:
    n = len(pkt)
    return (n > _HDR and pkt[_TYPE] == _CONTRIBUTION and pkt[:2] == _MAGIC
            and pkt[2] == wire.VERSION
            and n == _HDR + 4 * int.from_bytes(pkt[_COUNT:_COUNT + 2], "big"))


def _next_hops(n: int, links: list[tuple[int, int, float, float]]) -> dict[tuple[int, int], int]:
    """(node, destination) -> index of the first link of a shortest-latency path (Dijkstra)."""
    into: dict[int, list[tuple[int, int]]] = {}
    for k, (u, v, _rate, _delay) in enumerate(links):
        into.setdefault(v, []).append((k, u))
    hops: dict[tuple[int, int], int] = {}
    for dst in range(n):
        dist = {dst: 0.0}
        heap = [(0.0, dst)]
        while heap:
            d, v = heapq.heappop(heap)
            if d > dist.get(v, math.inf):
                continue
            for k, u in into.get(v, ()):
                nd = d + links[k][3]
                if nd < dist.get(u, math.inf):
                    dist[u] = nd
                    hops[(u, dst)] = k
                    heapq.heappush(heap, (nd, u))
    return hops


class Forwarder:
    """The event loop's state (see the module docstring)."""

    def __init__(self, cfg: ForwarderConfig) -> None:
        self.cfg = cfg
        unknown = set(cfg.loss_on) - set(LOSS_KINDS)
        if unknown:
            raise ValueError(f"loss_on: {sorted(unknown)} not in {LOSS_KINDS}")
        self.lossy = {k: k in cfg.loss_on for k in LOSS_KINDS}
        self.drop = set(cfg.drop)
        n = len(cfg.aggregators)
        self.n = n
        rng = random.Random(cfg.seed)
        self.links = [LinkQueue(rate, delay, cfg.queue_bytes, cfg.loss, rng)
                      for _u, _v, rate, delay in cfg.links]
        self.egress = [LinkQueue(r, 0.0, cfg.queue_bytes) for r in cfg.ports]
        self.ingress = [LinkQueue(r, 0.0, cfg.queue_bytes) for r in cfg.ports]
        self.edge = [_socket(cfg.host) for _ in range(n)]
        self.up = [_socket(cfg.host) for _ in range(n)]
        self.aggs = [tuple(a) for a in cfg.aggregators]
        self.hosts: list[dict[Address, None]] = [{} for _ in range(n)]
        self.nat: dict[tuple[int, Address], socket.socket] = {}
        self.role: dict[int, tuple[str, int, Address | None]] = {}
        for s in range(n):
            self.role[self.edge[s].fileno()] = ("edge", s, None)
            self.role[self.up[s].fileno()] = ("up", s, None)
        self.socks = {s.fileno(): s for s in self.edge + self.up}
        self.routes = Routes()
        self.heap: list[tuple[float, int, int, int, int, bytes]] = []
        self.seq = itertools.count()
        self.counters = dict.fromkeys(
            ("contributions", "copies_delivered", "local_only", "results", "control",
             "foreign", "stray", "nat_full", "nacks", "nacks_delivered", "nacks_stray",
             "acks", "acks_lost", "dropped_injected"), 0)
        self.nack_hosts: list[dict[Address, None]] = [{} for _ in range(n)]
        # (target, job, group, chunk) -> NACKs naming it, from every requester (how many NACKs one
        # lost contribution costs: the start-up bursts of issue 15)
        self.nack_named: dict[tuple[int, int, int, int], int] = {}
        self.next_hop = _next_hops(n, cfg.links)
        self._paths: dict[tuple[int, int], list[int]] = {}
        self.late_max = 0.0
        self.late_sum = 0.0

    # ---- routing of one contribution ----
    def inject(self, t: float, s: int, addr: Address, pkt: bytes) -> None:
        """A datagram from host ``addr`` of site s at time t (a well-formed contribution makes
        ``addr`` one of the site's hosts, which get its aggregator's results)."""
        if not _well_formed_contribution(pkt):
            self.up[s].sendto(pkt, self.aggs[s])
            self.counters["local_only"] += 1
            return
        self.hosts[s].setdefault(addr, None)
        self.counters["contributions"] += 1
        g = pkt[_GROUP]
        if g not in self.routes.deliver or s in self.routes.deliver[g]:
            self.up[s].sendto(pkt, self.aggs[s])
        if (g, s) not in self.routes.trees:  # unknown group, not a member, or alone
            self.counters["local_only"] += 1
            return
        ta = self.egress[s].offer(t, len(pkt))  # a port: no random loss
        if ta is not None:
            heapq.heappush(self.heap, (ta, next(self.seq), g, s, s, pkt))

    def at_node(self, t: float, g: int, s: int, node: int, pkt: bytes) -> None:
        """The copy of sender s's datagram for group g is at ``node`` at time t."""
        for k, v in self.routes.trees[(g, s)].get(node, ()):
            ta = self.links[k].offer(t, len(pkt), lossy=self.lossy["data"])
            if ta is not None:
                heapq.heappush(self.heap, (ta, next(self.seq), g, s, v, pkt))
        if node != s and self.routes.delivers(g, node):
            if self.drop:
                key = (s, int.from_bytes(pkt[_CHUNK:_CHUNK + 4], "big"), node)
                if key in self.drop:
                    self.drop.discard(key)
                    self.counters["dropped_injected"] += 1
                    return
            ti = self.ingress[node].offer(t, len(pkt))
            if ti is not None:
                heapq.heappush(self.heap, (ti, next(self.seq), g, s, -1 - node, pkt))

    def nack(self, t: float, s: int, addr: Address, pkt: bytes) -> None:
        """A NACK from host ``addr`` of site s (``wire.parse_nack``): ``addr`` listens for NACKs
        at s; one naming chunks travels to its target member's site (sender id = site index)
        along the shortest-latency path, hop by hop through the WAN links (rate, delay, loss),
        and is handed to every NACK listener there (``at_nack``)."""
        self.counters["nacks"] += 1
        self.nack_hosts[s].setdefault(addr, None)
        nack = wire.parse_nack(pkt)
        if nack is None or not nack.chunks:
            return  # a hello (or malformed: counted by nobody else, it goes nowhere)
        if not 0 <= nack.target < self.n or nack.target == s:
            self.counters["nacks_stray"] += 1
            return
        named = self.nack_named
        for ch in nack.chunks:
            key = (nack.target, nack.job, nack.group, ch)
            named[key] = named.get(key, 0) + 1
        self.at_nack(t, nack.target, s, pkt)

    def at_nack(self, t: float, target: int, node: int, pkt: bytes) -> None:
        """A NACK for site ``target`` is at ``node`` at time t."""
        if node == target:
            self.counters["nacks_delivered"] += 1
            for h in self.nack_hosts[target]:
                self.edge[target].sendto(pkt, h)
            return
        k = self.next_hop.get((node, target))
        if k is None:
            self.counters["nacks_stray"] += 1
            return
        ta = self.links[k].offer(t, len(pkt), lossy=self.lossy["nacks"])
        if ta is not None:
            heapq.heappush(self.heap, (ta, next(self.seq), -1, target, self.cfg.links[k][1], pkt))

    def run_due(self, now: float) -> None:
        """Process every event whose time has come (in time order)."""
        heap = self.heap
        while heap and heap[0][0] <= now:
            t, _, g, s, node, pkt = heapq.heappop(heap)
            if g == _ACK:  # a result acknowledging site s's contributions
                self.to_hosts(s, pkt)
                continue
            if g < 0:  # a NACK (s: its target site)
                self.at_nack(t, s, node, pkt)
                continue
            if node >= 0:
                self.at_node(t, g, s, node, pkt)
                continue
            r = -1 - node
            if g in self.routes.passthrough:  # an all-gather copy: through the FPGA to the hosts
                self.to_hosts(r, pkt)
            else:
                self.up[r].sendto(pkt, self.aggs[r])
            self.counters["copies_delivered"] += 1
            late = time.monotonic() - t
            self.late_sum += late
            self.late_max = max(self.late_max, late)

    def to_hosts(self, s: int, pkt: bytes) -> None:
        """``pkt`` to every host of site s (from ``edge[s]``, the address its hosts expect)."""
        for h in self.hosts[s]:
            self.edge[s].sendto(pkt, h)

    def path(self, a: int, b: int) -> list[int]:
        """The links (indices) of the shortest-latency path a -> b."""
        p = self._paths.get((a, b))
        if p is None:
            p, node = [], a
            while node != b:
                k = self.next_hop[(node, b)]
                p.append(k)
                node = self.cfg.links[k][1]
            self._paths[(a, b)] = p
        return p

    def acknowledge(self, r: int, pkt: bytes) -> None:
        """A result of aggregator r: to the contributing sites its group acknowledges, after
        the path's one-way delay; lost on each link it crosses as any datagram is (the random
        loss; ``acks_lost``), though it takes no link capacity (a header)."""
        if len(pkt) <= _GROUP:
            return
        now = time.monotonic()
        lossy = self.lossy["acks"]
        for m in self.routes.acks.get(pkt[_GROUP], ()):
            if m != r and (r, m) in self.next_hop:
                self.counters["acks"] += 1
                links = self.path(r, m)
                if lossy and any(self.links[k].lose() for k in links):
                    self.counters["acks_lost"] += 1
                    continue
                delay = sum(self.cfg.links[k][3] for k in links)
                heapq.heappush(self.heap, (now + delay, next(self.seq), _ACK, m, 0, pkt))

    # ---- sockets ----
    def receive(self, fd: int) -> None:
        """Read what ``fd`` holds (at most a burst) and route it."""
        sock = self.socks[fd]
        kind, s, host = self.role[fd]
        clock = time.monotonic
        for _ in range(_BURST):
            try:
                pkt, addr = sock.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. ICMP port unreachable from a host that went away
                continue
            if kind == "edge":
                if len(pkt) > _TYPE and pkt[_TYPE] == _CONTROL:
                    self.control(s, addr, pkt)
                    continue
                if len(pkt) > _TYPE and pkt[_TYPE] == _NACK:
                    self.nack(clock(), s, addr, pkt)
                    continue
                self.inject(clock(), s, addr, pkt)
            elif addr != self.aggs[s]:
                self.counters["foreign"] += 1
            elif kind == "up":
                if len(pkt) > _TYPE and pkt[_TYPE] == _RESULT:
                    self.counters["results"] += 1
                    self.to_hosts(s, pkt)
                    if self.routes.acks:
                        self.acknowledge(s, pkt)
                else:
                    self.counters["stray"] += 1
            else:  # a CONTROL reply for one host
                self.edge[s].sendto(pkt, host)

    def control(self, s: int, addr: Address, pkt: bytes) -> None:
        """A CONTROL message from host ``addr`` at site s, through its own NAT socket."""
        self.counters["control"] += 1
        sock = self.nat.get((s, addr))
        if sock is None:
            if sum(1 for (site, _a) in self.nat if site == s) >= _MAX_NAT:
                self.counters["nat_full"] += 1
                return
            sock = _socket(self.cfg.host)
            self.nat[(s, addr)] = sock
            self.socks[sock.fileno()] = sock
            self.role[sock.fileno()] = ("nat", s, addr)
        sock.sendto(pkt, self.aggs[s])

    def stats(self) -> dict[str, Any]:
        """Per directed link and port: bytes, datagrams, drops, losses, peak backlog."""

        def row(q: LinkQueue) -> dict[str, float]:
            return {"bytes": q.carried, "packets": q.packets, "dropped": q.dropped,
                    "lost": q.lost, "peak_backlog": q.peak_backlog}

        delivered = max(self.counters["copies_delivered"], 1)
        return {
            "links": {(u, v): row(q) for (u, v, _r, _d), q in zip(self.cfg.links, self.links,
                                                               strict=True)},
            "egress": [row(q) for q in self.egress],
            "ingress": [row(q) for q in self.ingress],
            # NACK bursts: (member, chunk) pairs named, names in all, most names of one pair
            "counters": {**self.counters, "nacked_pairs": len(self.nack_named),
                         "nack_names": sum(self.nack_named.values()),
                         "nack_names_max": max(self.nack_named.values(), default=0)},
            "late_max": self.late_max,
            "late_mean": self.late_sum / delivered,
            "pending": len(self.heap),
        }

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()


def serve(cfg: ForwarderConfig, conn: Connection) -> None:
    """Run the data plane until ``cfg.lifetime`` has passed or ``("stop",)`` arrives on ``conn``.

    Pipe protocol: it first sends ``("ready", edge addresses)``; then answers ``("routes",
    Routes)`` with ``("ok",)`` and ``("stats",)`` with ``("stats", dict)``.
    """
    fwd = Forwarder(cfg)
    deadline = time.monotonic() + cfg.lifetime
    try:
        conn.send(("ready", [s.getsockname() for s in fwd.edge]))
        pipe = conn.fileno()
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            fwd.run_due(now)
            wait = min(0.2, deadline - now)
            if fwd.heap:
                wait = min(wait, max(0.0, fwd.heap[0][0] - time.monotonic()))
            ready, _, _ = select.select([pipe, *fwd.socks], [], [], wait)
            for fd in ready:
                if fd != pipe:
                    fwd.receive(fd)
                    continue
                try:
                    msg = conn.recv()
                except (EOFError, OSError):  # the owner is gone
                    return
                if msg[0] == "stop":
                    conn.send(("stats", fwd.stats()))
                    return
                if msg[0] == "routes":
                    fwd.routes = msg[1]
                    conn.send(("ok",))
                elif msg[0] == "stats":
                    conn.send(("stats", fwd.stats()))
    finally:
        fwd.close()
        conn.close()
