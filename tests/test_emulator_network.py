"""WanEmulator and LocalNetwork end to end: exact all-reduces, bytes on the trees' links, every
process and thread ending (after a client dies, and by their lifetime)."""

import multiprocessing
import pickle
import threading
import time

import numpy as np
import pytest

from wanreduce.emulator.local_network import LocalNetwork
from wanreduce.emulator.prediction import choose_plan, predict
from wanreduce.emulator.runner import run_rounds
from wanreduce.emulator.scaling import scale_topology
from wanreduce.emulator.site_network import SiteNetwork
from wanreduce.emulator.wan_emulator import WanEmulator
from wanreduce.host.driver import AggregatorClient
from wanreduce.host.reference import expected_allreduce
from wanreduce.planner import schedules
from wanreduce.planner.group_table import group_table
from wanreduce.planner.topology import load_topology, topology_from_dict

# A square with one diagonal: routes of two hops exist (A-B-C), so trees branch and relay.
SQUARE = {
    "sites": ["A", "B", "C", "D"],
    "links": [
        {"a": "A", "b": "B", "latency_ms": 10, "bandwidth_gbps": 0.1},
        {"a": "B", "b": "C", "latency_ms": 15, "bandwidth_gbps": 0.1},
        {"a": "C", "b": "D", "latency_ms": 10, "bandwidth_gbps": 0.1},
        {"a": "D", "b": "A", "latency_ms": 20, "bandwidth_gbps": 0.1},
        {"a": "B", "b": "D", "latency_ms": 12, "bandwidth_gbps": 0.1},
    ],
}


def _ended(net: WanEmulator, limit: float = 30.0) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if not net._worker.is_alive() and all(a._thread is None for a in net.aggregators):
            return True
        time.sleep(0.1)
    return False


def test_allreduce_over_four_emulated_sites_is_exact_and_uses_only_tree_links():
    topo = topology_from_dict(SQUARE)
    table = group_table(schedules.rotating_cliques(4, 2))
    with WanEmulator(topo, memory=64 << 10, lifetime=120) as net:
        net.configure(table, jobs=[0, 1])
        res = run_rounds(net, table, nbytes=12_000, rounds=2, timeout=20, lifetime=100)
        assert res.errors == []
        assert [r.checked for r in res.reports] == [2, 2, 2, 2]  # every result, bit for bit
        assert all(r.max_abs_err < 1e-5 for r in res.reports)
        used = net.link_bytes()
    tree_links = set()
    for gid in {g for r in range(2) for st in table.steps(r) for g in st.values()}:
        members = table.groups[gid]
        for s in members:
            for pairs in topo.multicast_tree(s, [m for m in members if m != s]).values():
                tree_links |= {topo.directed[k] for k, _v in pairs}
    assert {e for e, b in used.items() if b} == tree_links
    assert _ended(net, 1)


def test_a_killed_site_stops_the_others_and_every_process_ends():
    topo = topology_from_dict(SQUARE)
    table = group_table(schedules.all_to_all(4))
    net = WanEmulator(topo, memory=64 << 10, lifetime=120)
    try:
        net.configure(table, jobs=[0])
        t0 = time.monotonic()
        res = run_rounds(net, table, nbytes=8_000, rounds=3, timeout=3, lifetime=90, kill=(2, 1))
        took = time.monotonic() - t0
    finally:
        net.close()
    errors = res.errors
    assert any(e.startswith("site 2: process exited with code 9") for e in errors)
    assert len(errors) == 4  # the others fail too, each naming itself
    assert all(f"site {s}:" in " ".join(errors) for s in range(4))
    assert took < 90  # well before the lifetime: no hang
    assert multiprocessing.active_children() == []
    assert _ended(net, 1)


def test_the_emulator_stops_by_itself_at_its_lifetime():
    net = WanEmulator(topology_from_dict(SQUARE), memory=64 << 10, lifetime=2)
    assert net._worker.is_alive()
    assert _ended(net)  # without close()
    net.close()


def test_local_network_cliques_are_exact_with_threads():
    n = 6
    table = group_table(schedules.rotating_cliques(n, 3))
    with LocalNetwork(n, lifetime=60) as net:
        assert isinstance(net, SiteNetwork)
        net.configure(table, jobs=[0, 1])
        kw = [net.client_kwargs(s) for s in range(n)]
        assert pickle.loads(pickle.dumps(kw)) == kw
        xs = np.random.default_rng(0).standard_normal((n, 3000)).astype(np.float32)
        got, errors = {}, []
        bar = threading.Barrier(n)

        def site(s):
            try:
                with AggregatorClient(**kw[s], sender_id=s, timeout=20) as c:
                    for r in range(len(table.rounds)):
                        for st in table.steps(r):
                            bar.wait(60)
                            got[(r, s)] = (st[s], c.allreduce(xs[s], job=1, group=st[s], round=r))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(f"site {s}: {exc!r}")
                bar.abort()

        threads = [threading.Thread(target=site, args=(s,)) for s in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        for (_r, _s), (gid, y) in got.items():
            want = expected_allreduce([xs[m] for m in table.groups[gid]], elements=kw[0]["elements_per_packet"])
            assert np.array_equal(y, want)
        assert len(got) == n * len(table.rounds)


def test_prediction_of_clique_plans_is_the_planners_round_time():
    topo = scale_topology(load_topology("nine-city"), 1e-3, 1.0)
    plan = choose_plan(topo, "cliques-3", 500_000, 32 * 1996, 499)
    pred = predict(topo, plan, 500_000, 32 * 1996, 499)
    assert [sum(s) for s in pred.step_times] == pytest.approx(plan.round_times)
    assert all(0 < a < t for a, t in zip(sum(pred.agreement_times, []), sum(pred.step_times, []), strict=True))
    sharded = choose_plan(topo, "sharded", 500_000, 32 * 1996, 499)
    assert sharded.schedule.family in ("sharded", "hierarchical")
    best = choose_plan(topo, "best", 500_000, 32 * 1996, 499)
    assert group_table(best.schedule).groups  # the driver can run it (cliques)
    with pytest.raises(ValueError, match="--schedule"):
        choose_plan(topo, "tree", 500_000, 32 * 1996, 499)


def test_sharded_plans_are_priced_as_the_planner_models_them():
    """A sharded plan runs as its reduce-scatter/all-gather phases, so its prediction is the
    planner's own round time; on the scaled nine-city at 4 MiB that is the fastest in-network
    plan, and `best` picks it."""
    topo = scale_topology(load_topology("nine-city"), 1e-3, 4.0)
    nb, mem = 510_000, 4 << 20
    sharded = choose_plan(topo, "sharded", nb, mem, 499)
    c3 = choose_plan(topo, "cliques-3", nb, mem, 499)
    assert sharded.time < c3.time  # the planner's own ranking puts sharded first
    pred = predict(topo, sharded, nb, mem, 499)
    assert [sum(s) for s in pred.step_times] == pytest.approx(sharded.round_times)
    assert choose_plan(topo, "best", nb, mem, 499).family == sharded.family
