"""Register map of the aggregator core — one definition for the RTL, the host and the docs.

Registers are 32 bits, word-addressed by a 16-bit address, reached only through CONTROL
messages on the host-facing port (see docs/protocol.md "Control messages"); the network ports
drop CONTROL frames. The table of ``docs/registers.md`` is generated from this module
(``python -m wanreduce.regs``; ``tests/test_control_block.py`` keeps them in step; the notes
after the table are written by hand).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from wanreduce import wire
from wanreduce.model import Drop, Outcome

CORE_ID = 0x57524147  # "WRAG"


class Access(enum.Enum):
    RO = "ro"
    RW = "rw"


@dataclass(frozen=True)
class Reg:
    name: str
    addr: int
    access: Access
    reset: int = 0
    doc: str = ""


# Fixed registers
ID = 0x0000
PARAMS0 = 0x0001  # constant: params0()
PARAMS1 = 0x0002  # constant: params1()
STATUS = 0x0003  # sticky status bits, cleared by reset only
STATUS_MEM_ERROR = 1 << 0  # the DRAM slot memory answered an AXI error (SLVERR/DECERR)
STATUS_RECORD_ERROR = 1 << 1  # the record path (slot memory records) found itself inconsistent
CTRL = 0x0010  # bit 0: release on completion (else in chunk order)
CTRL_RELEASE_ON_COMPLETION = 1 << 0
LOCAL_MAC_HI = 0x0011
LOCAL_MAC_LO = 0x0012
LOCAL_IP = 0x0013
UDP_PORT = 0x0014
MAX_ELEMENTS = 0x0015
SITE_ID = 0x0016
RESULT_MAC_HI = 0x0018
RESULT_MAC_LO = 0x0019
RESULT_IP = 0x001A
RESULT_UDP_PORT = 0x001B

GROUP_BASE = 0x0100  # + g: membership bitmap of group g
JOB_BASE = 0x0200  # + 4j
JOB_STRIDE = 4
JOB_CFG_OFFSET = 0  # bit 0 enable, bits 12..8 log2 window, bits 31..16 base slot
JOB_HEAD_OFFSET = 1  # read: next chunk to release; write: window reset to this chunk
JOB_PROBE_OFFSET = 2  # a chunk number to inspect (RW, no side effect)
JOB_PROBE_BITMAP_OFFSET = 3  # contributors of that chunk while held unreleased, else 0 (RO)
PORT_COUNTER_BASE = 0x1000  # + 16p + r: r = 0 frames in, r = 1 + Drop reason
PORT_COUNTER_STRIDE = 16
OUTCOME_COUNTER_BASE = 0x1800  # + Outcome
RESULTS_OUT = 0x1810  # result frames sent (including resent ones)
CONTROL_IN = 0x1811  # control messages processed
RESULTS_WITHHELD = 0x1812  # results not sent: assembled after STATUS.MEM_ERROR was set
# the record path's counters (slot memory records only), RECORD_COUNTER_BASE + their index here
RECORD_COUNTER_BASE = 0x1820
RECORD_COUNTERS = {
    "mismatches": "messages whose beat count disagreed with their element count (drained, no command)",
    "orphans": "decisions with no message waiting for them (dropped)",
    "pin_waits": "cycles a request waited for its slot's earlier chunk to be read (the pin)",
    "records_freed": "records written FREE by window resets (and the region resets after a JOBj_CFG change)",
    "arb_dropped": "AXI responses with an ID no engine owns (dropped; STATUS.MEM_ERROR)",
}

DEFAULT_LOCAL_MAC = 0x02_00_00_00_00_01
DEFAULT_LOCAL_IP = 0x0A_00_00_01
DEFAULT_RESULT_MAC = 0x02_00_00_00_01_00
DEFAULT_RESULT_IP = 0x0A_00_01_00


def job_cfg(job: int) -> int:
    return JOB_BASE + JOB_STRIDE * job + JOB_CFG_OFFSET


def job_head(job: int) -> int:
    return JOB_BASE + JOB_STRIDE * job + JOB_HEAD_OFFSET


def job_probe(job: int) -> int:
    return JOB_BASE + JOB_STRIDE * job + JOB_PROBE_OFFSET


def job_probe_bitmap(job: int) -> int:
    return JOB_BASE + JOB_STRIDE * job + JOB_PROBE_BITMAP_OFFSET


def group(g: int) -> int:
    return GROUP_BASE + g


def port_frames_in(port: int) -> int:
    return PORT_COUNTER_BASE + PORT_COUNTER_STRIDE * port


def port_drops(port: int, reason: Drop) -> int:
    return PORT_COUNTER_BASE + PORT_COUNTER_STRIDE * port + 1 + int(reason)


def outcome_counter(outcome: Outcome) -> int:
    return OUTCOME_COUNTER_BASE + int(outcome)


JOB_CFG_LOG2_WINDOW_MAX = 0x1F  # JOBj_CFG bits 12..8
JOB_CFG_BASE_MAX = 0xFFFF  # JOBj_CFG bits 31..16: a region starts below slot 65 536, whatever S


def pack_job_cfg(*, enabled: bool, log2_window: int, base: int) -> int:
    """JOBj_CFG's value; a ``log2_window`` or ``base`` beyond its field is refused in one line
    (masking it would configure another region: a records core has S up to 2**20, but its base
    field is 16 bits like every core's)."""
    for name, v, hi in (("log2_window", log2_window, JOB_CFG_LOG2_WINDOW_MAX), ("base", base, JOB_CFG_BASE_MAX)):
        if not 0 <= v <= hi:
            raise ValueError(f"{name} must be 0..{hi} (its JOBj_CFG field), got {v}")
    return (int(enabled) & 1) | (log2_window << 8) | (base << 16)


def unpack_job_cfg(value: int) -> tuple[bool, int, int]:
    return bool(value & 1), (value >> 8) & JOB_CFG_LOG2_WINDOW_MAX, (value >> 16) & JOB_CFG_BASE_MAX


def params0(*, ports: int, width: int, slots: int, groups: int) -> int:
    """PARAMS0: network ports P | W/32 << 8 (the bus width in 32-bit words; 0 for the software
    aggregator) | log2 S << 16 | G << 24."""
    return ports | (width // 32) << 8 | (slots.bit_length() - 1) << 16 | groups << 24


def params1(*, elements: int, jobs: int) -> int:
    """PARAMS1: E | J << 16."""
    return elements | jobs << 16


def record_counter(name: str) -> int:
    """Address of the record path's counter ``name`` (one of :data:`RECORD_COUNTERS`)."""
    return RECORD_COUNTER_BASE + list(RECORD_COUNTERS).index(name)


def register_map(
    *, ports: int, groups: int, jobs: int, elements: int, width: int, slots: int, records: bool = False
) -> list[Reg]:
    """Every register of a core with these parameters (``ports`` counts network ports; the
    host-facing port's counters follow them at index ``ports``; ``records``: a core with slot
    memory records, which also has the record path's counters). ID, PARAMS0 and PARAMS1 are
    constants: their "reset" is the value they always read."""
    regs = [
        Reg("ID", ID, Access.RO, CORE_ID, "core identifier 'WRAG'"),
        Reg("PARAMS0", PARAMS0, Access.RO,
            params0(ports=ports, width=width, slots=slots, groups=groups),
            "constant: P + (W/32 << 8) + (log2 S << 16) + (G << 24); W/32 = bus width in words"),
        Reg("PARAMS1", PARAMS1, Access.RO, params1(elements=elements, jobs=jobs),
            "constant: E + (J << 16)"),
        Reg("STATUS", STATUS, Access.RO, 0,
            "bit 0 MEM_ERROR: the DRAM slot memory answered an AXI error response (SLVERR/DECERR); "
            "sticky until reset; from then on no result is sent (RESULTS_WITHHELD). bit 1 "
            "RECORD_ERROR (slot memory records only): the record path found itself inconsistent "
            "(payload gate, flip-flop copy, read split or decision state error); sticky until reset"),
        Reg("CTRL", CTRL, Access.RW, 0, "bit 0: release on completion (0: in chunk order)"),
        Reg("LOCAL_MAC_HI", LOCAL_MAC_HI, Access.RW, DEFAULT_LOCAL_MAC >> 32, "our MAC 47..32"),
        Reg("LOCAL_MAC_LO", LOCAL_MAC_LO, Access.RW, DEFAULT_LOCAL_MAC & 0xFFFFFFFF, "our MAC 31..0"),
        Reg("LOCAL_IP", LOCAL_IP, Access.RW, DEFAULT_LOCAL_IP, "our IPv4 address (results' source)"),
        Reg("UDP_PORT", UDP_PORT, Access.RW, wire.DEFAULT_UDP_PORT, "UDP port contributions must use"),
        Reg("MAX_ELEMENTS", MAX_ELEMENTS, Access.RW, elements, "element count limit (clamped to E)"),
        Reg("SITE_ID", SITE_ID, Access.RW, 0, "sender id written into results"),
        Reg("RESULT_MAC_HI", RESULT_MAC_HI, Access.RW, DEFAULT_RESULT_MAC >> 32, "results' destination MAC 47..32"),
        Reg("RESULT_MAC_LO", RESULT_MAC_LO, Access.RW, DEFAULT_RESULT_MAC & 0xFFFFFFFF, "results' destination MAC 31..0"),
        Reg("RESULT_IP", RESULT_IP, Access.RW, DEFAULT_RESULT_IP, "results' destination IPv4 (unicast or multicast)"),
        Reg("RESULT_UDP_PORT", RESULT_UDP_PORT, Access.RW, wire.DEFAULT_UDP_PORT, "results' destination UDP port"),
    ]
    regs += [Reg(f"GROUP{g}", group(g), Access.RW, 0, f"membership bitmap of group {g}") for g in range(groups)]
    for j in range(jobs):
        regs.append(Reg(f"JOB{j}_CFG", job_cfg(j), Access.RW, 0, "bit 0 enable, 12..8 log2 window, 31..16 base slot"))
        regs.append(Reg(f"JOB{j}_HEAD", job_head(j), Access.RW, 0, "read: next chunk to release; write: window reset"))
        regs.append(Reg(f"JOB{j}_PROBE", job_probe(j), Access.RW, 0, "a chunk number to inspect (no side effect)"))
        regs.append(Reg(f"JOB{j}_PROBE_BITMAP", job_probe_bitmap(j), Access.RO, 0,
                        "contributor bitmap of chunk JOBj_PROBE while its slot collects it or holds it "
                        "complete for in-order release; 0: not held (no contribution yet, released, "
                        "or the slot holds another chunk)"))
    for p in range(ports + 1):
        label = "host port" if p == ports else f"network port {p}"
        regs.append(Reg(f"PORT{p}_FRAMES_IN", port_frames_in(p), Access.RO, 0, f"{label}: frames received"))
        for reason in Drop:
            regs.append(Reg(f"PORT{p}_DROP_{reason.name}", port_drops(p, reason), Access.RO, 0, f"{label}: dropped, {reason.name.lower()}"))
    for o in Outcome:
        regs.append(Reg(f"OUTCOME_{o.name}", outcome_counter(o), Access.RO, 0, f"contributions: {o.name.lower()}"))
    regs.append(Reg("RESULTS_OUT", RESULTS_OUT, Access.RO, 0, "result frames sent (resent included)"))
    regs.append(Reg("CONTROL_IN", CONTROL_IN, Access.RO, 0, "control messages processed"))
    regs.append(Reg("RESULTS_WITHHELD", RESULTS_WITHHELD, Access.RO, 0,
                    "results not sent because STATUS.MEM_ERROR was set when they were ready"))
    if records:  # a core with slot memory records (the record path)
        for name, doc in RECORD_COUNTERS.items():
            regs.append(Reg(f"RECORD_{name.upper()}", record_counter(name), Access.RO, 0,
                            f"slot memory records only: {doc}"))
    return regs


def markdown(ports: int = 2, groups: int = 2, jobs: int = 2, elements: int = wire.DEFAULT_ELEMENTS,
             width: int = 64, slots: int = 16) -> str:
    """The register map as a Markdown table (the start of docs/registers.md)."""
    lines = [
        "# Register map",
        "",
        "Generated by `python -m wanreduce.regs` from `wanreduce/regs.py` (shown for P=2 network",
        f"ports, W={width}, S={slots}, E={elements}, G=2 groups, J=2 jobs; groups, jobs and port",
        "counters repeat with the strides below; the RECORD_ counters only in a core with",
        "`--slot-memory records`).",
        "Registers are 32 bits, reached only by CONTROL messages on the host-facing port.",
        f"Strides: group {1}, job {JOB_STRIDE}, port counters {PORT_COUNTER_STRIDE}; the host",
        "port's counters follow the network ports'. Counters are free-running 32-bit (wrap).",
        "",
        "| address | name | access | reset | meaning |",
        "|---|---|---|---|---|",
    ]
    for r in register_map(ports=ports, groups=groups, jobs=jobs, elements=elements, width=width,
                          slots=slots, records=True):
        lines.append(f"| 0x{r.addr:04x} | {r.name} | {r.access.value} | 0x{r.reset:x} | {r.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
