"""The whole core: CLI Verilog generation, and the cocotb system bench on the generated Verilog
against the golden model for three configurations (sim/tb_core.py, sim/core_scenario.py)."""

import pytest
from click.testing import CliRunner

from wanreduce.cli import cli
from wanreduce.hdl.core import CoreParams, WanreduceCore
from wanreduce.sim.simulator import generate_verilog, run_cocotb

CONFIGS = [
    # the three configurations; senders 2..32 spread over the ports
    dict(ports=2, width=64, slots=8, elements=64, groups=4, jobs=2, senders=3),
    dict(ports=4, width=256, slots=64, elements=256, groups=4, jobs=2, senders=9),
    dict(ports=8, width=512, slots=16, elements=256, groups=4, jobs=4, senders=32),
]
CORE_KEYS = ("ports", "width", "slots", "elements", "groups", "jobs")


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"W{c['width']}-P{c['ports']}-S{c['slots']}-N{c['senders']}")
def test_core_system(cfg):
    core = {k: cfg[k] for k in CORE_KEYS}
    verilog = generate_verilog(WanreduceCore, name="wanreduce_core", params=core)
    run_cocotb(verilog=verilog, toplevel="wanreduce_core", test_module="wanreduce.sim.tb_core",
               params={**cfg, "seed": cfg["width"]}, timeout_s=900)  # CPU seconds: load-independent


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"W{c['width']}")
def test_core_control_path(cfg):
    """sim/tb_core_control.py: whole reply headers under egress stalls while RESULT_IP changes;
    MAX_ELEMENTS 0 and 1 leave the registers reachable (issue 12, RTL bugs 1 and 2). Same
    Verilog as test_core_system (one build); bounded in simulated cycles and CPU time, not wall-clock."""
    core = {k: cfg[k] for k in CORE_KEYS}
    verilog = generate_verilog(WanreduceCore, name="wanreduce_core", params=core)
    run_cocotb(verilog=verilog, toplevel="wanreduce_core", test_module="wanreduce.sim.tb_core_control",
               params=core, timeout_s=900)  # CPU seconds: bounds a hang, not a slow machine


def test_verilog_command_writes_module_and_ports(tmp_path):
    res = CliRunner().invoke(cli, ["verilog", "--out", str(tmp_path), "--ports", "2", "--width", "64",
                                   "--slots", "8", "--elements", "32"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "wanreduce_core.sv").read_text()
    assert "module wanreduce_core" in text
    for port in ("s_axis_net0__tdata", "s_axis_net1__tready", "s_axis_host__tuser", "m_axis_host__tkeep"):
        assert port in text
    ports = (tmp_path / "wanreduce_core.ports.txt").read_text()
    assert "input  [63:0]   s_axis_net0__tdata" in ports and "output          m_axis_host__tlast" in ports
    assert "output          s_axis_net0__tready" in ports


@pytest.mark.parametrize(
    "args, message",
    [
        (["--width", "96"], "data width"),
        (["--slots", "12"], "slots must be a power of two"),
        (["--ports", "9"], "ports must be 1..8"),
        (["--elements", "5000"], "elements must be"),
        (["--width", "wide"], "not a valid integer"),
    ],
)
def test_verilog_command_rejects_bad_parameters_in_one_line(tmp_path, args, message):
    res = CliRunner().invoke(cli, ["verilog", "--out", str(tmp_path), *args])
    assert res.exit_code != 0
    assert message in res.output
    assert "Traceback" not in res.output


def test_core_params_validation():
    assert CoreParams()["width"] == 64
    with pytest.raises(ValueError, match="unknown"):
        CoreParams(lanes=4)


GOOD = dict(ports=2, width=64, slots=8, elements=16, groups=4, jobs=2)


@pytest.mark.parametrize(("field", "bad", "message"), [
    ("ports", 0, "ports must be 1..8, got 0"),
    ("ports", 9, "ports must be 1..8, got 9"),
    ("width", 96, "data width must be a power of two from 64 to 512 bits, got 96"),
    ("slots", 3, "slots must be a power of two from 2 to 4096, got 3"),
    ("slots", 8192, "slots must be a power of two from 2 to 4096, got 8192"),
    ("elements", 0, "elements must be 1..2237 (jumbo-frame limit), got 0"),
    ("groups", 33, "groups must be 1..32, got 33"),
    ("jobs", 0, "jobs must be 1..16, got 0"),
    ("jobs", 2.0, "jobs must be an integer, got 2.0"),
])
def test_parameters_checked_once_same_error_everywhere(field, bad, message):
    """The core, the reducer and the control block check their parameters with the same code:
    the same one-line error, naming the field and its range (hdl/params.py)."""
    from wanreduce.hdl.control_block import ControlBlock
    from wanreduce.hdl.reducer import Reducer

    p = GOOD | {field: bad}
    makers = [lambda: CoreParams(**p),
              lambda: ControlBlock(p["width"], **{k: v for k, v in p.items() if k != "width"})]
    if field != "ports":  # the reducer has no ports parameter
        makers.append(lambda: Reducer(p["width"], **{k: v for k, v in p.items() if k not in ("width", "ports")}))
    for make in makers:
        with pytest.raises(ValueError) as err:
            make()
        assert str(err.value) == message


def test_docs_port_table_matches_generated_ports():
    import re
    from pathlib import Path

    from wanreduce.commands.verilog import port_list
    from wanreduce.hdl.core import DEFAULTS

    doc = (Path(__file__).resolve().parents[1] / "docs" / "core.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (input|output) \| (\d+) \|$", doc, re.M)
    assert [(n, d, int(w)) for n, d, w in rows] == port_list(dict(DEFAULTS))
