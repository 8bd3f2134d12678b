"""WanEmulator: every site of a topology with its edge aggregator, behind an emulated WAN.

Site s's hosts talk to the forwarder's ``edge[s]`` address (``client_kwargs``); the forwarder
(``emulator/forwarder.py``, in a spawned process) hands their contributions to site s's
``SoftAggregator`` and multicasts them along the planner's trees, with every directed link's
delay and rate, to the other members' aggregators; each aggregator's results reach only its own
site's hosts. The aggregators run as threads of the owning process. Everything started here
ends by itself after ``lifetime`` seconds; ``close()`` ends it at once. docs/emulator.md.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterable
from typing import Any

from wanreduce import regs, wire
from wanreduce.host.softagg import SoftAggregator
from wanreduce.planner.group_table import GroupTable
from wanreduce.planner.topology import Topology

from .forwarder import LOSS_KINDS, ForwarderConfig, Routes, serve
from .scaling import SlotPlan, slot_plan

#: Ways to wait for the forwarder's pipe (start-up includes a spawned interpreter on a loaded
#: machine, so this is generous; it bounds a hang, it is not a performance limit).
PIPE_TIMEOUT = 120.0


class EmulatorError(RuntimeError):
    """The emulator could not start or answer (the message says which part and why)."""


def sharded_routes(topo: Topology, table: GroupTable) -> Routes:
    """The forwarder's routes for ``table``: every clique member's multicast tree to the other
    members; a reduce group's contributions to its owner only (``deliver``: the owner's
    aggregator; its results acknowledge the other members); a gather group's copies from its
    owner to the other members' hosts (``passthrough``)."""
    routes = Routes()
    deliver: dict[int, frozenset[int]] = {}
    acks: dict[int, tuple[int, ...]] = {}
    for gid, members in table.groups.items():
        routes.members[gid] = tuple(members)
        owner = table.reduce_owner.get(gid)
        sender = table.gather_owner.get(gid)
        for s in members:
            if owner is not None:  # reduce-scatter: s's shard to the owner's aggregator
                dests = [] if s == owner else [owner]
            elif sender is not None:  # all-gather: only the owner sends
                dests = [m for m in members if m != s] if s == sender else []
            else:
                dests = [m for m in members if m != s]
            if dests:
                routes.trees[(gid, s)] = topo.multicast_tree(s, dests)
        if owner is not None:
            deliver[gid] = frozenset((owner,))
            acks[gid] = tuple(m for m in members if m != owner)
        elif sender is not None:
            deliver[gid] = frozenset(m for m in members if m != sender)
    routes.deliver, routes.acks = deliver, acks
    routes.passthrough = frozenset(table.gather_owner)
    return routes


class WanEmulator:
    """Per-site SoftAggregators behind the emulated WAN of ``topo`` (a :class:`SiteNetwork`).

    ``topo`` is the topology as it runs (already scaled, ``scaling.scale_topology``). Each
    aggregator has S slots for ``memory`` bytes (``scaling.slot_plan``), split equally between
    the configured jobs (power-of-two regions). ``queue_bytes`` bounds every link's and port's FIFO (drops counted);
    ``loss`` drops a datagram at each WAN link it crosses with that probability (seeded by
    ``seed``): contribution and all-gather copies, NACKs and a shard owner's acks alike
    (``loss_on``: a subset of those kinds, ``LOSS_KINDS``, to test one recovery alone).
    ``drop``: (sender site, chunk, receiving site) copies lost once (fault injection).
    ``in_thread`` runs the forwarder as a thread of this process instead of a process.
    """

    def __init__(
        self,
        topo: Topology,
        *,
        memory: int,
        elements: int = wire.MAX_ELEMENTS_DEFAULT,
        loss: float = 0.0,
        loss_on: tuple[str, ...] = LOSS_KINDS,
        drop: tuple[tuple[int, int, int], ...] = (),
        seed: int = 0,
        queue_bytes: float = 64 << 20,
        lifetime: float = 600.0,
        groups: int = 64,
        in_thread: bool = False,
    ) -> None:
        if not 0.0 <= loss <= 1.0:
            raise ValueError(f"loss: must be in [0, 1], got {loss}")
        if not 0 < lifetime <= 86400:
            raise ValueError(f"lifetime: must be in (0, 86400] s, got {lifetime}")
        self.topo = topo
        self.n_sites = topo.n
        self.slots: SlotPlan = slot_plan(memory, elements)
        self.elements = elements
        self.window = self.slots.slots // 2
        self.aggregators = [
            SoftAggregator(slots=self.slots.slots, elements=elements, groups=groups,
                           jobs=4).start()
            for _ in range(topo.n)
        ]
        for s, agg in enumerate(self.aggregators):
            agg.write_register(regs.SITE_ID, s)
        cfg = ForwarderConfig(
            aggregators=[a.address for a in self.aggregators],
            links=[(u, v, float(bw) / 8, float(lat)) for (u, v), bw, lat
                   in zip(topo.directed, topo.dir_bw, topo.dir_latency, strict=True)],
            ports=[float(r) for r in topo.line_rate],
            queue_bytes=queue_bytes, loss=loss, loss_on=tuple(loss_on), drop=tuple(drop),
            seed=seed, lifetime=lifetime,
        )
        self._conn, child = multiprocessing.Pipe()
        if in_thread:
            self._worker: Any = threading.Thread(target=serve, args=(cfg, child),
                                                 name="wan-forwarder", daemon=True)
        else:
            ctx = multiprocessing.get_context("spawn")
            self._worker = ctx.Process(target=serve, args=(cfg, child), name="wan-forwarder",
                                       daemon=True)
        self._closed = False
        self._final: dict[str, Any] | None = None
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        try:
            self._worker.start()
            self.edges = [tuple(a) for a in self._ask(None, "ready")]
        except BaseException:
            self.close()
            raise

    # ---- the forwarder's pipe ----
    def _ask(self, msg: tuple | None, expect: str) -> Any:
        if msg is not None:
            self._conn.send(msg)
        if not self._conn.poll(PIPE_TIMEOUT):
            raise EmulatorError(f"the WAN forwarder did not answer {expect!r} within "
                                f"{PIPE_TIMEOUT:g} s (is the machine overloaded?)")
        reply = self._conn.recv()
        if reply[0] != expect:
            raise EmulatorError(f"the WAN forwarder answered {reply[0]!r}, expected {expect!r}")
        return reply[1] if len(reply) > 1 else None

    # ---- SiteNetwork ----
    def configure(self, table: GroupTable, *, jobs: Iterable[int]) -> None:
        """Groups of ``table`` on every aggregator and in the forwarder's trees; ``jobs`` enabled,
        each with an equal power-of-two region of the slots."""
        if table.n != self.n_sites:
            raise ValueError(f"table: {table.n} sites, the network has {self.n_sites}")
        jobs = sorted(set(jobs))
        regions = 1 << max(0, (len(jobs) - 1).bit_length())
        window = self.slots.slots // regions
        if window < 2:
            raise ValueError(f"jobs: {len(jobs)} jobs leave {window} slot per job window; "
                             "give more --memory or fewer jobs")
        routes = sharded_routes(self.topo, table)
        for agg in self.aggregators:
            agg.configure(groups=table.groups)
            for i, j in enumerate(jobs):
                agg.model.set_job(j, enabled=True, base=i * window,
                                  log2_window=window.bit_length() - 1)
        self.window = window // 2
        self._ask(("routes", routes), "ok")

    def client_kwargs(self, site: int) -> dict[str, Any]:
        """``aggregator`` (the site's edge; CONTROL and results use it too), ``window`` (W/2 of
        the job's window), ``elements_per_packet`` (E of the slots), ``wan_recovery`` (NACKs
        recover contributions lost on WAN links, docs/emulator.md) and ``rate_bps`` (the site's
        line rate: the pace of a sharded all-gather's multicast)."""
        if not 0 <= site < self.n_sites:
            raise ValueError(f"site: must be 0..{self.n_sites - 1}, got {site}")
        return {"aggregator": self.edges[site], "window": self.window,
                "elements_per_packet": self.elements, "wan_recovery": True,
                "rate_bps": float(self.topo.line_rate[site]) * 8}

    def stats(self) -> dict[str, Any]:
        """The forwarder's counters: per link and port bytes, drops, losses; lateness."""
        if self._closed:
            if self._final is None:
                raise EmulatorError("the WAN emulator is closed and left no statistics")
            return self._final
        return self._ask(("stats",), "stats")

    def link_bytes(self) -> dict[tuple[int, int], int]:
        """Bytes carried per directed WAN link (site index pairs)."""
        return {k: int(v["bytes"]) for k, v in self.stats()["links"].items()}

    def close(self) -> None:
        """Stop the forwarder and the aggregators (idempotent; also called at ``lifetime``)."""
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        try:
            if self._worker.is_alive():
                self._conn.send(("stop",))
                if self._conn.poll(10):
                    reply = self._conn.recv()
                    if reply[0] == "stats":
                        self._final = reply[1]
        except (OSError, EOFError):
            pass
        if self._worker.ident is not None:
            self._worker.join(10)
        if isinstance(self._worker, multiprocessing.process.BaseProcess):
            if self._worker.is_alive():
                self._worker.kill()
                self._worker.join(5)
        self._conn.close()
        for agg in self.aggregators:
            agg.close()

    def __enter__(self) -> WanEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

