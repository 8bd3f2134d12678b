"""RTL loopback: real host-driver processes all-reduce through the generated core in simulation."""

import numpy as np
import pytest
from click.testing import CliRunner

from wanreduce import wire
from wanreduce.cli import cli
from wanreduce.host import agreement
from wanreduce.host.loopback import run_loopback, site_tensors
from wanreduce.host.reference import expected_allreduce
from wanreduce.sim.tb_loopback import ingress_port


def _assert_sums(r, seed: int, rtol: float) -> None:
    """Every site's result of every round is the NumPy sum of the sites' tensors, within the
    int32 fixed-point step (N^2 * max|x| / 2^31, x4) and the result dtype's rounding: an
    independent check of what ``verified`` compares with the golden model."""
    xs = site_tensors(r.sites, r.elements, r.rounds, r.dtype, seed)
    assert len(r.results) == r.rounds
    for rnd, got in enumerate(r.results):
        wide = [x.astype(np.float64) for x in xs[rnd]]
        want = np.sum(wide, axis=0)
        step = r.sites**2 * max(float(np.max(np.abs(x))) for x in wide) * 2.0**-29
        assert len(got) == r.sites
        for y in got:
            assert y.shape == want.shape and y.dtype == xs[rnd][0].dtype
            np.testing.assert_allclose(y.astype(np.float64), want, rtol=rtol, atol=step)


@pytest.mark.cocotb
def test_three_sites_float32_default_core():
    r = run_loopback(sites=3, elements=3000, rounds=2, seed=5)
    assert r.verified, r.mismatches
    _assert_sums(r, 5, rtol=2.0**-22)
    E = r.core["elements"]
    chunks = -(-3000 // E) + -(-agreement.LANES // E)  # + the agreement's chunks
    assert r.outcomes["aggregated"] == 3 * 2 * chunks  # every contribution aggregated once
    assert r.results_out >= 2 * chunks and not r.drops
    assert r.cycles > 0 and r.bridge["datagrams_in"] >= r.packets_sent


@pytest.mark.cocotb
def test_eight_sites_bfloat16_wide_core():
    core = dict(ports=8, width=512, slots=16, elements=256, groups=4, jobs=4)
    r = run_loopback(sites=8, elements=1500, rounds=1, dtype="bfloat16", core=core, seed=2)
    assert r.verified, r.mismatches
    _assert_sums(r, 2, rtol=2.0**-7)
    assert sum(r.bridge["frames_per_port"][:8]) > 0  # sites 1..7 came in on network ports


def test_reference_and_tensors_are_deterministic():
    a = site_tensors(3, 100, 2, "float16", seed=1)
    b = site_tensors(3, 100, 2, "float16", seed=1)
    assert all(np.array_equal(x, y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))
    y = expected_allreduce(a[0], elements=32)
    assert y.dtype == np.float16 and y.shape == (100,)
    assert np.allclose(y, np.sum([x.astype(np.float64) for x in a[0]], axis=0), rtol=1e-2, atol=1e-2)


def test_bridge_port_mapping():
    dgram = wire.AggHeader(wire.MsgType.CONTRIBUTION, sender_id=5, element_count=1).pack()
    assert ingress_port(dgram, 2) == 0  # site 5 -> network port (5 - 1) mod 2
    assert ingress_port(wire.AggHeader(wire.MsgType.CONTRIBUTION, sender_id=0).pack(), 2) == 2
    assert ingress_port(wire.AggHeader(wire.MsgType.CONTROL, sender_id=3).pack(), 4) == 4


@pytest.mark.parametrize(
    "args, message",
    [(["--sites", "0"], "--sites"), (["--dtype", "float64"], "--dtype"), (["--core-width", "100"], "data width"),
     (["--elements", "-3"], "--elements")],
)
def test_loopback_bad_arguments_one_line(args, message):
    res = CliRunner().invoke(cli, ["loopback", *args])
    assert res.exit_code != 0 and message in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1

