"""AXI4 (full, burst) master port with the standard signal names, for memory-facing components.

``axi4_master_members(prefix, ...)`` gives a component flat members ``<prefix>_awaddr``,
``<prefix>_awlen``, ..., ``<prefix>_rready`` (one member per AXI signal, not a nested
interface), so the generated Verilog carries exactly the AMBA names (``m_axi_mem_awaddr``, not
Amaranth's ``m_axi_mem__awaddr``) and cocotbext-axi (``AxiBus.from_prefix(dut, "m_axi_mem")``)
and vendor interconnects attach unchanged. ``axi4_port(component, prefix)`` returns them as
attributes without the prefix (``port.awaddr``). Channel payloads (everything but valid/ready)
are listed by :func:`axi4_payload`, e.g. for delay lines and register slices.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiBurst", "AxiResp", "axi4_forward", "axi4_master_members", "axi4_payload", "axi4_port"]

AxiBurst = SimpleNamespace(FIXED=0, INCR=1, WRAP=2)
AxiResp = SimpleNamespace(OKAY=0, EXOKAY=1, SLVERR=2, DECERR=3)


def axi4_payload(addr_width: int, data_width: int, id_width: int) -> dict[str, dict[str, int]]:
    """``{channel: {signal: width}}`` of the payload signals (valid/ready excluded); the master
    drives aw/w/ar, the slave b/r."""
    return {
        "aw": {"awid": id_width, "awaddr": addr_width, "awlen": 8, "awsize": 3, "awburst": 2,
               "awlock": 1, "awcache": 4, "awprot": 3, "awqos": 4},
        "w": {"wdata": data_width, "wstrb": data_width // 8, "wlast": 1},
        "b": {"bid": id_width, "bresp": 2},
        "ar": {"arid": id_width, "araddr": addr_width, "arlen": 8, "arsize": 3, "arburst": 2,
               "arlock": 1, "arcache": 4, "arprot": 3, "arqos": 4},
        "r": {"rid": id_width, "rdata": data_width, "rresp": 2, "rlast": 1},
    }


def axi4_master_members(prefix: str, *, addr_width: int, data_width: int,
                        id_width: int = 1) -> dict[str, wiring.Member]:
    """Flat ``wiring`` members of an AXI4 master port named ``<prefix>_<signal>``."""
    members: dict[str, wiring.Member] = {}
    for ch, sigs in axi4_payload(addr_width, data_width, id_width).items():
        out = Out if ch in ("aw", "w", "ar") else In
        for name, width in sigs.items():
            members[f"{prefix}_{name}"] = out(width)
        members[f"{prefix}_{ch}valid"] = out(1)
        members[f"{prefix}_{ch}ready"] = (In if out is Out else Out)(1)
    return members


def axi4_port(component: object, prefix: str) -> SimpleNamespace:
    """The ``<prefix>_*`` signals of ``component`` as attributes named without the prefix."""
    head = prefix + "_"
    return SimpleNamespace(**{name[len(head):]: getattr(component, name)
                              for name in dir(component) if name.startswith(head)})



def axi4_forward(m, inner: wiring.Component, outer: wiring.Component, prefix: str) -> None:
    """Wire ``inner``'s AXI4 master port ``<prefix>_*`` out through ``outer``'s port of the same
    name (a component passing a sub-component's memory port up: the reducer's store, the
    core's reducer): ``inner``'s outputs drive ``outer``'s, ``outer``'s inputs drive ``inner``'s."""
    for name, member in inner.signature.members.items():
        if not name.startswith(prefix + "_"):
            continue
        src, dst = (inner, outer) if member.flow == wiring.Out else (outer, inner)
        m.d.comb += getattr(dst, name).eq(getattr(src, name))
