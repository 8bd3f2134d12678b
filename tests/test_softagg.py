"""Software aggregator: datagram checks equal to the golden parser, golden-model results,
register map over CONTROL, accounting, and the `wanreduce serve` command."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner
from driver_helpers import wait_until

from wanreduce import regs, wire
from wanreduce.commands.serve import serve
from wanreduce.host.control import ControlClient, ControlTimeout
from wanreduce.host.reference import expected_allreduce
from wanreduce.host.softagg import SoftAggregator
from wanreduce.host.transport import MulticastOptions, UdpTransport
from wanreduce.model import (
    AggregatorModel,
    Drop,
    Message,
    Outcome,
    PortConfig,
    ReleaseMode,
    parse_frame,
)
from wanreduce.packetize import AGG_HEADER_STRUCT
from wanreduce.sim import frames

E = 64


def _dgram(count=4, *, typ=wire.MsgType.CONTRIBUTION, magic=wire.MAGIC, version=wire.VERSION,
           n_elems=None, chunk=0, sender=0, job=0, group=0, scale=0, payload=None):
    n_elems = count if n_elems is None else n_elems
    h = AGG_HEADER_STRUCT.pack(magic, version, typ, 0, group, job, 0, chunk, sender, scale, count, 0)
    if payload is None:
        payload = np.arange(n_elems, dtype="<i4")
    return h + np.asarray(payload, "<i4").tobytes()


def _classify_golden(d: bytes):
    """What model.parse_frame says about this datagram inside a well-formed frame."""
    if len(d) < wire.AGG_HEADER_BYTES:
        return Drop.TRUNCATED
    cfg = PortConfig(max_elements=E, elements=E)
    fr = wire.wrap_frames(np.frombuffer(d, np.uint8)[None, :], wire.L2L3(
        eth_dst=cfg.local_mac, ip_dst=cfg.local_ip, udp_dport=cfg.udp_port))[0].tobytes()
    r = parse_frame(fr, cfg, accept=(wire.MsgType.CONTRIBUTION, wire.MsgType.CONTROL))
    return r if isinstance(r, Drop) else None


CASES = [
    b"",
    b"\x57",
    _dgram()[:21],
    _dgram()[:22],  # header only, count 4: LENGTH
    _dgram(magic=0x1234),
    _dgram(version=2),
    _dgram(typ=wire.MsgType.RESULT),
    _dgram(typ=wire.MsgType.CONTROL_REPLY),
    _dgram(typ=9),
    _dgram(0),
    _dgram(E + 1),
    _dgram(E),
    _dgram(4, n_elems=3),
    _dgram(4, n_elems=5),
    _dgram(4) + b"\x00",
    _dgram(1),
    _dgram(E, typ=wire.MsgType.CONTROL),
    _dgram(E + 1, typ=wire.MsgType.CONTROL),
]


@pytest.mark.parametrize("d", CASES, ids=range(len(CASES)))
def test_datagram_checks_match_golden_parser(d):
    a = SoftAggregator(elements=E)
    try:
        a.handle_datagram(len(d), ("127.0.0.1", 9), bytearray(d) + bytearray(64))
        want = _classify_golden(d)
        dropped = [Drop(i) for i, v in enumerate(a.drops) if v]
        assert a.frames_in == 1
        assert dropped == ([want] if want is not None else [])
    finally:
        a.close()


def test_random_mutations_match_golden_parser():
    rng = np.random.default_rng(1)
    a = SoftAggregator(elements=E)
    try:
        base = bytearray(_dgram(10))
        for _ in range(300):
            d = bytearray(base)
            for _ in range(rng.integers(1, 3)):
                k = int(rng.integers(0, wire.AGG_HEADER_BYTES))
                d[k] = int(rng.integers(0, 256))
            d = d[: int(rng.integers(10, len(d) + 8))] if rng.random() < 0.3 else d
            before = list(a.drops)
            a.handle_datagram(len(d), ("127.0.0.1", 9), bytes(d) + bytes(64))
            moved = [Drop(i) for i in range(len(Drop)) if a.drops[i] != before[i]]
            want = _classify_golden(bytes(d))
            assert moved == ([want] if want is not None else []), bytes(d).hex()
    finally:
        a.close()


@pytest.mark.parametrize("release", list(ReleaseMode))
def test_contributions_follow_golden_model(release):
    """Random contributions from 3 real sockets: outcomes and results equal a model's."""
    rng = np.random.default_rng(int(release))
    ref = AggregatorModel(slots=8, elements=E, release=release)
    ref.set_group(0, 0b111)
    ref.set_job(0, enabled=True)
    with SoftAggregator(slots=8, elements=E, release=release) as a:
        a.configure(groups={0: [0, 1, 2]}, jobs=[0])
        sites = [UdpTransport(bind=("127.0.0.1", 0)) for _ in range(3)]
        want_results = []
        try:
            sent = 0
            for k in range(120):
                regular = (k % 3, k // 3, 16)
                extra = []
                if rng.random() < 0.2:  # noise: late resend, other count, far-ahead chunk
                    extra = [(int(rng.integers(0, 3)), max(0, k // 3 - int(rng.integers(0, 12))),
                              int(rng.choice([16, 16, int(rng.integers(1, E + 1))]))),
                             (int(rng.integers(0, 3)), k // 3 + 9, 16)][: int(rng.integers(1, 3))]
                for s, chunk, count in [regular, *extra]:
                    p = rng.integers(-(2**30), 2**30, count, dtype=np.int32)
                    _, rs = ref.contribute(Message(1, 0, 0, 0, 0, chunk, s, 0, count, p))
                    want_results += rs
                    sites[s].send_to(_dgram(count, chunk=chunk, sender=s, payload=p), a.address)
                    sent += 1
                    time.sleep(0.0003)
            # Every frame accounted for (frames in = drops + outcomes), then every result at every
            # member: waits for events, bounded generously, never for a fixed time.
            c = a.counters
            wait_until(lambda: sum(v for k, v in c().items() if k.startswith(("PORT0_DROP", "OUTCOME_")))
                       >= sent)
            assert {o.name: ref.counters[o] for o in Outcome} == {
                o.name: a.counters()[f"OUTCOME_{o.name}"] for o in Outcome}
            assert a.counters()["RESULTS_OUT"] == ref.results_out == len(want_results)
            # Every seen member received each result (in order).
            got = {i: [] for i in range(3)}
            buf = bytearray(65536)

            def drain() -> bool:  # a site is a member before any result it takes part in
                for i, t in enumerate(sites):
                    while t.recv_into(buf) is not None:
                        h = AGG_HEADER_STRUCT.unpack_from(buf)
                        got[i].append((h[7], h[3], np.frombuffer(buf, "<i4", h[10], 22).copy()))
                return all(len(g) >= len(want_results) for g in got.values())

            wait_until(drain)
            seen = [i for i in range(3) if got[i]]
            assert seen and len(want_results) >= 5
            for i in seen:
                tail = want_results[-len(got[i]):]
                assert [(g[0], g[1]) for g in got[i]] == [(r.chunk, r.flags) for r in tail]
                for g, r in zip(got[i], tail, strict=True):
                    np.testing.assert_array_equal(g[2], r.payload)
        finally:
            for t in sites:
                t.close()


def test_job_cfg_refuses_a_base_beyond_its_field_in_one_line():
    """JOBj_CFG's base is 16 bits on every core (a records core has S up to 2**20): a base from
    65 536 on, or a log2 window above 31, is refused in one line before anything is written,
    not masked into another region (base 65 540 was written as base 4 before)."""
    assert regs.unpack_job_cfg(regs.pack_job_cfg(enabled=True, log2_window=31, base=0xFFFF)) == (True, 31, 0xFFFF)
    for kw, message in ((dict(log2_window=2, base=0x10000), r"base must be 0\.\.65535 \(its JOBj_CFG field\), got 65536"),
                        (dict(log2_window=2, base=-1), r"base must be 0\.\.65535"),
                        (dict(log2_window=32, base=0), r"log2_window must be 0\.\.31 \(its JOBj_CFG field\), got 32")):
        with pytest.raises(ValueError, match=message) as e:
            regs.pack_job_cfg(enabled=True, **kw)
        assert "\n" not in str(e.value)
    with SoftAggregator(slots=16, elements=E, groups=4, jobs=2) as a, ControlClient(a.address) as c:
        before = c.read(regs.job_cfg(0))
        with pytest.raises(ValueError, match="base must be 0..65535"):
            c.set_job(0, log2_window=2, base=65540)
        assert c.read(regs.job_cfg(0)) == before, "a refused configuration was written"


def test_registers_over_control():
    with SoftAggregator(slots=16, elements=E, groups=4, jobs=2) as a:
        with ControlClient(a.address, max_ops=5) as c:
            assert c.read(regs.ID) == regs.CORE_ID
            assert c.params() == {"ports": 0, "width_words": 0, "log2_slots": 4, "groups": 4,
                                  "elements": E, "jobs": 2}
            c.set_group(3, [1, 4, 31])
            assert c.group_members(3) == [1, 4, 31] and a.model.group_table[3] == (1 << 1) | (1 << 4) | (1 << 31)
            c.set_job(1, log2_window=2, base=4, head=7)
            assert c.job_window(1) == 4 and c.read(regs.job_head(1)) == 7
            with pytest.raises(ValueError, match="refused"):
                c.set_job(0, log2_window=5)  # 32 slots > 16
            c.set_release_on_completion(True)
            assert a.model.release is ReleaseMode.ON_COMPLETION and c.read(regs.CTRL) == 1
            assert c.write(regs.MAX_ELEMENTS, 10_000) == E  # clamped to E
            assert c.write(regs.ID, 5) == regs.CORE_ID  # read-only
            assert c.write(regs.SITE_ID, -1) == 0xFFFFFFFF  # values travel as 32-bit words
            assert c.write(regs.SITE_ID, 3) == 3
            with pytest.raises(ValueError, match="register address"):
                c.read(0x10000)  # addresses are 16 bits
            assert c.read(0x7777) == 0
            # no DRAM slot memory: STATUS.MEM_ERROR and RESULTS_WITHHELD read 0, STATUS is ro
            assert c.memory_error() == (False, 0) and c.write(regs.STATUS, 1) == 0
            assert c.record_error() is False
            many = c.read_many([regs.group(g) for g in range(4)] * 3)  # split into 3 messages
            assert len(many) == 12
            cnt = c.counters()
        a.handle_datagram(3, ("127.0.0.1", 9), bytearray(64))
        cnt = a.counters()
        assert cnt["PORT0_DROP_TRUNCATED"] == 1
        assert cnt["PORT0_FRAMES_IN"] == cnt["CONTROL_IN"] + 1


@pytest.mark.parametrize("limit", [0, 1])
def test_max_elements_does_not_lock_out_control(limit):
    """MAX_ELEMENTS 0 or 1 still lets CONTROL through (E bounds it), but not contributions."""
    with SoftAggregator(slots=16, elements=E) as a, ControlClient(a.address) as c:
        a.configure(groups={0: [0]}, jobs=[0])
        assert c.write(regs.MAX_ELEMENTS, limit) == limit
        assert c.read(regs.MAX_ELEMENTS) == limit
        assert c.read_many([regs.ID, regs.MAX_ELEMENTS]) == [regs.CORE_ID, limit]
        a.handle_datagram(len(_dgram(2)), ("127.0.0.1", 9), bytearray(_dgram(2)))
        assert a.counters()["PORT0_DROP_ELEMENT_COUNT"] == 1
        assert c.write(regs.MAX_ELEMENTS, E) == E
        assert c.read(regs.MAX_ELEMENTS) == E
        a.handle_datagram(len(_dgram(2)), ("127.0.0.1", 9), bytearray(_dgram(2)))
        assert a.counters()["PORT0_DROP_ELEMENT_COUNT"] == 1
        assert a.counters()["OUTCOME_AGGREGATED"] == 1


def test_control_reply_echoes_request_like_the_rtl():
    """sim/frames.control_probe (also run on the RTL core by sim/tb_core_control.py): header
    echoed with msg_type 4 and sender SITE_ID, unmapped address reads 0, odd word not executed."""
    with SoftAggregator(elements=E) as a, ControlClient(a.address) as c:
        assert c.write(regs.SITE_ID, 0x2A) == 0x2A
        hdr, words, want_hdr, want_words = frames.control_probe(0x2A)
        with UdpTransport(bind=("127.0.0.1", 0)) as t:
            t.send_to(hdr.pack() + words.tobytes(), a.address)
            buf = bytearray(2048)
            assert t.wait_readable(30)  # generous: the aggregator thread may be slow under load
            n, _ = t.recv_into(buf)
        assert wire.AggHeader.unpack(bytes(buf[:n])) == want_hdr
        assert np.array_equal(np.frombuffer(bytes(buf[wire.AGG_HEADER_BYTES:n]), np.uint32),
                              want_words)
        assert c.read(regs.SITE_ID) == 0x2A  # the trailing SITE_ID write was not executed


LOOPBACK_MC = MulticastOptions(interface="127.0.0.1")  # multicast over lo: no route needed


def test_multicast_result_stream():
    group = "239.255.42.99"
    rx = UdpTransport(bind=("0.0.0.0", 0), join=(group,), multicast=LOOPBACK_MC)
    with rx, SoftAggregator(elements=E, multicast=LOOPBACK_MC) as a:
        a.configure(groups={0: [0]}, jobs=[0])
        with ControlClient(a.address) as c:
            c.write(regs.RESULT_IP, wire.ip_to_int(group))
            c.write(regs.RESULT_UDP_PORT, rx.address[1])
        with UdpTransport(bind=("127.0.0.1", 0)) as tx:
            tx.send_to(_dgram(4), a.address)
            assert rx.wait_readable(2.0), "multicast result never arrived"
            buf = bytearray(256)
            n, _ = rx.recv_into(buf)
            assert n == 22 + 16 and AGG_HEADER_STRUCT.unpack_from(buf)[2] == wire.MsgType.RESULT


def test_sites_multicast_contributions_and_receive_multicast_results():
    """The paper's model: each site sends once to a multicast group; results come back on
    another group; control goes unicast."""
    from wanreduce.host.driver import AggregatorClient

    contrib_group, result_group = "239.255.43.1", "239.255.43.2"
    with SoftAggregator(host="0.0.0.0", elements=64, join=(contrib_group,), multicast=LOOPBACK_MC) as a:
        port = a.address[1]
        a.configure(groups={0: [0, 1, 2]}, jobs=[0])
        result_port = port + 1  # the sites all listen on this port of the result group
        with ControlClient(("127.0.0.1", port)) as c:
            c.write(regs.RESULT_IP, wire.ip_to_int(result_group))
            c.write(regs.RESULT_UDP_PORT, result_port)
        xs = [np.random.default_rng(i).standard_normal(500).astype(np.float32) for i in range(3)]
        out = [None] * 3

        def site(i):
            with AggregatorClient((contrib_group, port), sender_id=i, elements_per_packet=64,
                                  multicast=LOOPBACK_MC, result_group=result_group,
                                  bind=("0.0.0.0", result_port),
                                  control_address=("127.0.0.1", port), group_sizes={0: 3},
                                  job_windows={0: 64}, rtt=0.01, timeout=10) as c:
                out[i] = c.allreduce(xs[i], job=0, group=0, round=0)

        ts = [threading.Thread(target=site, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()  # each driver ends by itself (its timeout)
        want = expected_allreduce(xs, elements=64)
        for y in out:
            assert y is not None and np.array_equal(y, want)


def test_control_timeout_is_clear():
    with ControlClient(("127.0.0.1", 9), timeout=0.2) as c:
        with pytest.raises(ControlTimeout, match="did not answer"):
            c.read(regs.ID)
        assert not c.ping()


@pytest.mark.parametrize(
    "args",
    [["--slots", "3"], ["--port", "abc"], ["--port", "70000"], ["--elements", "0"],
     ["--group", "x"], ["--group", "0:40"], ["--group", "9:0"], ["--job", "7"],
     ["--backend", "rtl"], ["--bogus"], ["--host", "no.such.host.invalid", "--port", "0"]],
)
def test_serve_bad_arguments_one_line(args):
    r = CliRunner().invoke(serve, args)
    assert r.exit_code in (1, 2)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("wanreduce: error: "), r.output


def test_serve_subprocess_with_driver():
    from wanreduce.host.driver import AggregatorClient

    p = subprocess.Popen(
        [sys.executable, "-c", "from wanreduce.cli import main; main()", "serve", "--port", "0", "--group", "0:0",
         "--job", "0", "--elements", "128"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        host, port = p.stdout.readline().strip().split(":")
        with AggregatorClient((host, int(port)), sender_id=0, elements_per_packet=128,
                              rtt=0.01, timeout=5) as c:
            x = np.linspace(-1, 1, 1000, dtype=np.float32)
            y = c.allreduce(x, job=0, group=0, round=0)
            np.testing.assert_allclose(y, x, atol=1e-6)
    finally:
        p.send_signal(2)
        _, err = p.communicate(timeout=60)  # generous: CI machines are shared and loaded
    assert p.returncode == 0 and "OUTCOME_AGGREGATED" in err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_on_signal_even_if_sigint_was_ignored(signum):
    """A server started in the background by a non-interactive shell inherits SIGINT as
    ignored; SIGINT and SIGTERM must still stop it cleanly (counters printed, exit 0)."""
    p = subprocess.Popen(
        [sys.executable, "-c", "from wanreduce.cli import main; main()", "serve", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert ":" in p.stdout.readline()
        p.send_signal(signum)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 0 and "stopped" in err
