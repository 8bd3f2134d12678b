"""RTL loopback: N host-driver processes all-reduce through the generated core in simulation.

``run_loopback`` generates the core's Verilog, starts it under cocotb with the UDP bridge of
``sim/tb_loopback.py`` (the simulator is its own process), configures the core over CONTROL
messages, then starts N real OS processes, each an ``AggregatorClient`` with its own UDP socket
(site i = sender i), which all-reduce seeded random tensors for a number of rounds. Every
result is compared bit for bit with ``host.reference.expected_allreduce`` (the golden model);
the core's status counters, the drivers' retransmissions and the simulated cycles are returned.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from wanreduce import regs
from wanreduce.fixedpoint import check_dtype
from wanreduce.model import Drop, Outcome

# A simulated core is ~10^4 times slower than silicon, and slower still on a loaded machine: the
# drivers' retransmission timers start high and then follow the measured latency (host/rtt.py).
DRIVER_TIMING = dict(rtt=0.05, initial_rto=3.0, min_rto=0.2, max_rto=60.0, max_retries=8)
# CONTROL replies while the bridge starts: each ping waits this long (the build can take minutes).
PING_TIMEOUT = 2.0


@dataclass
class LoopbackResult:
    sites: int
    elements: int
    rounds: int
    dtype: str
    verified: bool
    mismatches: list[str]
    packets_sent: int
    retransmissions: int
    final_rto: list[float]  # each site's retransmission timeout at the end (s)
    results: list[list[np.ndarray]]  # results[round][site]: what each site's all-reduce returned
    results_out: int
    outcomes: dict[str, int]
    drops: dict[str, int]
    cycles: int
    wall_s: float
    bridge: dict = field(default_factory=dict)
    core: dict = field(default_factory=dict)

    @property
    def cycles_per_element(self) -> float:
        return self.cycles / max(1, self.elements * self.rounds)


def site_tensors(sites: int, elements: int, rounds: int, dtype: str, seed: int) -> list[list[np.ndarray]]:
    """The tensors site i all-reduces in each round (same on every machine for the same seed)."""
    dt = check_dtype(np.dtype(dtype) if dtype != "bfloat16" else __import__("ml_dtypes").bfloat16)
    out = []
    for r in range(rounds):
        rng = np.random.default_rng([seed, r])
        scale = 10.0 ** rng.uniform(-3, 2)
        out.append([(rng.standard_normal(elements) * scale).astype(dt) for _ in range(sites)])
    return out


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _site_main(i: int, addr: tuple[str, int], sites: int, elements: int, rounds: int, dtype: str,
               seed: int, window: int, per_packet: int, timeout: float, q, go) -> None:
    """One site: a separate OS process with its own socket (spawned). All sites start together
    (``go``) so that start-up skew does not show up as retransmissions."""
    from wanreduce.host.driver import AggregatorClient

    try:
        xs = site_tensors(sites, elements, rounds, dtype, seed)
        ys = []
        with AggregatorClient(addr, sender_id=i, elements_per_packet=per_packet, group_sizes={0: sites},
                              job_windows={0: window}, window=max(1, window // 2),  # all it has
                              timeout=timeout, **DRIVER_TIMING) as c:
            q.put(("ready", i))
            if not go.wait(timeout):
                raise TimeoutError("the other sites never became ready")
            for r in range(rounds):
                ys.append(c.allreduce(xs[r][i], job=0, group=0, round=r))
            q.put((i, ys, c.stats.datagrams_sent, c.stats.retransmissions, c.timer.rto, None))
    except Exception as exc:  # reported by the parent, one line
        q.put((i, None, 0, 0, 0.0, f"{type(exc).__name__}: {exc}"))


def run_loopback(
    *,
    sites: int = 3,
    elements: int = 4096,
    rounds: int = 1,
    dtype: str = "float32",
    sim: str | None = None,
    core: dict | None = None,
    seed: int = 1,
    timeout: float = 120.0,
    progress: Callable[[str], None] | None = None,
) -> LoopbackResult:
    """Run the RTL loopback and verify every site's result against the golden model."""
    from wanreduce.hdl.core import CoreParams, WanreduceCore
    from wanreduce.host.control import ControlClient
    from wanreduce.host.reference import expected_allreduce
    from wanreduce.sim.simulator import generate_verilog, run_cocotb, select_simulator

    say = progress or (lambda _msg: None)
    params = dict(CoreParams(**(core or {})))
    if not 1 <= sites <= 32:
        raise ValueError(f"sites must be 1..32 (32-bit contributor bitmaps), got {sites}")
    if elements < 1:
        raise ValueError(f"elements must be >= 1, got {elements}")
    sim = select_simulator(sim)
    per_packet = params["elements"]
    window = params["slots"]
    say(f"generating Verilog ({', '.join(f'{k}={v}' for k, v in params.items())})")
    verilog = generate_verilog(WanreduceCore, name="wanreduce_core", params=params)

    # CPU seconds the simulator may use (it spins while it waits): a build-and-idle allowance plus
    # ~25x the ~40 us of simulation per site-element measured here (docs/benchmarks.md).
    sim_cpu_s = 600 + timeout + 1e-3 * sites * elements * rounds
    port = _free_port()
    workdir = Path(tempfile.mkdtemp(prefix="wanreduce-loopback-"))
    summary = workdir / "bridge.json"
    sim_error: list[BaseException] = []

    def simulate() -> None:
        try:
            run_cocotb(verilog=verilog, toplevel="wanreduce_core", test_module="wanreduce.sim.tb_loopback",
                       params={**params, "bridge_port": port, "summary": str(summary)}, sim=sim,
                       timeout_s=sim_cpu_s)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            sim_error.append(exc)

    t0 = time.perf_counter()
    say(f"building and starting the {sim} simulation (bridge on 127.0.0.1:{port})")
    quiet = {"COCOTB_LOG_LEVEL": "WARNING", "GPI_LOG_LEVEL": "WARNING", "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    saved = {k: os.environ.get(k) for k in quiet}
    os.environ.update(quiet)
    simulator = threading.Thread(target=simulate, daemon=True)
    simulator.start()
    addr = ("127.0.0.1", port)
    ctl = ControlClient(addr, timeout=timeout)  # configuration: the whole budget, with resends
    try:
        deadline = time.monotonic() + 600  # the first Verilator build of a core takes a while
        while not ctl.ping(timeout=PING_TIMEOUT):
            if sim_error or not simulator.is_alive():
                raise RuntimeError(f"simulation ended before the bridge answered: {sim_error[:1]}")
            if time.monotonic() > deadline:
                raise TimeoutError("the simulated core did not answer within 600 s")
        say("configuring the core over CONTROL messages")
        ctl.set_group(0, range(sites))
        ctl.set_job(0, enabled=True, log2_window=int(math.log2(window)), base=0)
        before = _read_counters(ctl, params["ports"])

        say(f"{sites} site processes all-reduce {rounds} x {elements} {dtype} elements")
        ctx = mp.get_context("spawn")
        q, go = ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=_site_main, args=(i, addr, sites, elements, rounds, dtype, seed,
                                                      window, per_packet, timeout, q, go), daemon=True)
                 for i in range(sites)]
        for p in procs:
            p.start()
        # No overall wall-clock limit: each site fails by itself after ``timeout`` s without
        # progress and reports it; a site process that died without a report ends the wait.
        outs, ready, gone = {}, 0, set()
        while len(outs) < sites:
            try:
                msg = q.get(timeout=5)
            except Exception:  # queue.Empty
                if sim_error:
                    raise RuntimeError(f"simulation failed: {sim_error[0]}") from None
                dead = {i for i, p in enumerate(procs) if i not in outs and p.exitcode is not None}
                if dead & gone:  # dead for a whole poll: its report is not just in flight
                    i = min(dead & gone)
                    raise RuntimeError(
                        f"site {i} process exited (code {procs[i].exitcode}) without a result"
                    ) from None
                gone = dead
                continue
            if msg[0] == "ready":
                ready += 1
                if ready == sites:
                    go.set()
                continue
            i, ys, sent, retx, rto, err = msg
            outs[i] = (ys, sent, retx, err, rto)
        for p in procs:
            p.join(10)
        errors = [f"site {i}: {o[3]}" for i, o in sorted(outs.items()) if o[3]]
        if errors:
            raise RuntimeError("; ".join(errors))
        after = _read_counters(ctl, params["ports"])
    finally:
        ctl.close()
        from wanreduce.sim.tb_loopback import STOP

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(STOP, addr)
        simulator.join(120)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    wall = time.perf_counter() - t0
    if sim_error:
        raise RuntimeError(f"simulation failed: {sim_error[0]}")

    say("verifying every result against the golden model")
    xs = site_tensors(sites, elements, rounds, dtype, seed)
    mismatches = []
    for r in range(rounds):
        want = expected_allreduce(xs[r], elements=per_packet)
        for i in range(sites):
            got = outs[i][0][r]
            if got.dtype != want.dtype or not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
                bad = int(np.count_nonzero(got != want))
                mismatches.append(f"round {r} site {i}: {bad} of {elements} elements differ")
    delta = {k: after[k] - before[k] for k in after}
    bridge = json.loads(summary.read_text()) if summary.exists() else {}
    return LoopbackResult(
        sites=sites, elements=elements, rounds=rounds, dtype=dtype, verified=not mismatches,
        mismatches=mismatches,
        packets_sent=sum(o[1] for o in outs.values()), retransmissions=sum(o[2] for o in outs.values()),
        final_rto=[outs[i][4] for i in sorted(outs)],
        results=[[outs[i][0][r] for i in range(sites)] for r in range(rounds)],
        results_out=delta["RESULTS_OUT"],
        outcomes={o.name.lower(): delta[f"OUTCOME_{o.name}"] for o in Outcome if delta[f"OUTCOME_{o.name}"]},
        drops={r.name.lower(): delta[f"DROP_{r.name}"] for r in Drop if delta[f"DROP_{r.name}"]},
        cycles=int(bridge.get("cycles", 0)), wall_s=wall, bridge=bridge, core=params,
    )


def _read_counters(ctl, ports: int) -> dict[str, int]:
    """Outcome counters, results out, and drops by reason summed over every port."""
    names, addrs = [], []
    for o in Outcome:
        names.append(f"OUTCOME_{o.name}")
        addrs.append(regs.outcome_counter(o))
    names.append("RESULTS_OUT")
    addrs.append(regs.RESULTS_OUT)
    for r in Drop:
        for p in range(ports + 1):
            names.append(f"DROP_{r.name}@{p}")
            addrs.append(regs.port_drops(p, r))
    values = dict(zip(names, ctl.read_many(addrs), strict=True))
    out = {k: v for k, v in values.items() if "@" not in k}
    for r in Drop:
        out[f"DROP_{r.name}"] = sum(values[f"DROP_{r.name}@{p}"] for p in range(ports + 1))
    return out
