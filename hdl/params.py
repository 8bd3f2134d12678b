"""Core parameters — ports P, width W, slots S, elements E, groups G, jobs J — their defaults and
allowed ranges, checked here and nowhere else (the core, the reducer and the control block all
call :func:`check_core_params`). Each error is one line naming the field and its range.
The slot stores' parameters (``row_bits``; the DRAM store's AXI4 ``address_width``,
``base_address``, ``outstanding``, ``burst_beats``, ``burst_hold``) and the reducer's parts'
(``run_bits``) are checked here too (:func:`check_dram_store_params` adds the checks that
involve two of them).
Pure Python (no Amaranth), so the planner can read the limits without the HDL stack."""

from __future__ import annotations

from wanreduce import wire

__all__ = ["DEFAULTS", "DRAM_STORE_DEFAULTS", "MAX_BURST_HOLD", "MAX_SLOTS", "MAX_SLOTS_DRAM", "MAX_SLOTS_LARGE", "PENDING_STORES", "SLOT_LIMIT_WHY", "SLOT_MEMORIES", "UNWIRED_SLOT_MEMORIES", "CoreParams",
           "check_core_params", "check_data_width", "check_dram_store_params", "check_large_slots",
           "check_pending", "check_slot_memory", "check_wired", "max_slots"]

DEFAULTS = {"ports": 2, "width": 64, "slots": 16, "elements": wire.DEFAULT_ELEMENTS, "groups": 4, "jobs": 2}

MAX_SLOTS = 4096  # the reducer's in-order release search grows with S; see docs/reducer.md
# Where the slots' sums live: block RAM in the core, or DRAM behind the core's AXI4 port; with
# "records" the per-slot state (tag, bitmap) too, as 256-bit records in DRAM (the record path,
# docs/large_slots.md, "The core wiring").
SLOT_MEMORIES = ("onchip", "dram", "records")
# Slot memories whose parameters are checked and planned but which the core does not build yet
# (none since the record path was wired in: docs/large_slots.md, "The core wiring", step 5).
UNWIRED_SLOT_MEMORIES: tuple[str, ...] = ()
# DRAM slots: the sums of any S fit the boards' DDR3 (docs/boards.md, "Slot capacity"), but
# the reducer keeps every slot's tag, pending bit and scan bits on chip, so with DRAM the core
# takes the same S as on chip; the design that lifts it (per-slot records in DRAM, pending bits
# as block-RAM words) is docs/large_slots.md. One limit: the planner, the CLI, the core and the
# DRAM store all read this one.
MAX_SLOTS_DRAM = MAX_SLOTS
# The slot range the large-S parts are built for (``PendingWords``, the record path;
# docs/large_slots.md): 2**20 slot indices, the AX7325B's 2 GiB in 2 KiB slots. The S limit of
# ``slot_memory="records"``.
MAX_SLOTS_LARGE = 1 << 20
# Where the reducer keeps its pending bits (a slot is COMPLETE, waiting for in-order release):
# "vector", S flip-flops scanned in one cycle (the default); "words", ``PendingWords``' 64-bit
# block-RAM words with the two-word scan (docs/large_slots.md: for large S).
PENDING_STORES = ("vector", "words")
MAX_ROW_WIDTH = 1024  # the read-modify-write engine's widest row (hdl/dram_rmw_engine.py)

# The DRAM slot store's own parameters and their defaults (``DramSlotStore``, and the core with
# ``slot_memory="dram"``): a 32-bit AXI address space from 0, 256 commands in flight (full rate
# up to ~100 cycles of memory latency, docs/slot_store.md), 16-beat bursts held open 128 idle
# cycles for the rest of a message.
DRAM_STORE_DEFAULTS = {"address_width": 32, "base_address": 0, "outstanding": 256,
                       "burst_beats": 16, "burst_hold": 128, "index_bits": 11}


def check_data_width(width: int) -> int:
    """Core datapath widths: a multiple of 32 (whole int32 lanes), 64..512 bits."""
    if not isinstance(width, int) or width % 32 or not 64 <= width <= 512 or width & (width - 1):
        raise ValueError(f"data width must be a power of two from 64 to 512 bits, got {width!r}")
    return width


AXI4_PAGE = 4096  # an AXI4 burst never crosses a 4 KiB boundary
AXI4_MAX_BEATS = 256  # AXI4 INCR burst: awlen/arlen 0..255
MAX_BURST_HOLD = 4096  # idle cycles a DRAM store's burst may wait for its message's next row


def _range(name: str, lo: int, hi: int, note: str = ""):
    def check(v: int) -> None:
        if not lo <= v <= hi:
            raise ValueError(f"{name} must be {lo}..{hi}{note}, got {v}")
    return check


def _slots(v: int, hi: int = MAX_SLOTS, note: str = "") -> None:
    if not 2 <= v <= hi or v & (v - 1):
        raise ValueError(f"slots must be a power of two from 2 to {hi}{note}, got {v}")


def _slot_count(v: int, hi: int, note: str = "") -> int:
    """An integer S, a power of two from 2 to ``hi``."""
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"slots must be an integer, got {v!r}")
    _slots(v, hi, note)
    return v


def check_large_slots(slots: int) -> int:
    """S for the large-S parts (up to :data:`MAX_SLOTS_LARGE`, a power of two)."""
    return _slot_count(slots, MAX_SLOTS_LARGE)


def check_pending(pending: str) -> str:
    """The reducer's pending store: one of :data:`PENDING_STORES`."""
    if pending not in PENDING_STORES:
        raise ValueError(f"pending must be one of {', '.join(PENDING_STORES)}, got {pending!r}")
    return pending


# Per slot memory: the core's S limit and the note its error carries.
_SLOT_LIMITS = {"onchip": (MAX_SLOTS, ""), "dram": (MAX_SLOTS_DRAM, " (DRAM slot memory)"),
                "records": (MAX_SLOTS_LARGE, " (DRAM records slot memory)")}
# ... and why S stops there (the planner says it when the limit, not the memory, sets S).
SLOT_LIMIT_WHY = {"onchip": "its per-slot state is on chip", "dram": "its per-slot state is on chip",
                  "records": "the record path's slot indices are 20 bits"}


def _check_memory_name(slot_memory: str) -> str:
    if slot_memory not in SLOT_MEMORIES:
        raise ValueError(f"slot memory must be one of {', '.join(SLOT_MEMORIES)}, got {slot_memory!r}")
    return slot_memory


def max_slots(slot_memory: str) -> int:
    """The largest S the core takes with its slots in ``slot_memory`` (the planner, the board
    capacity and :func:`check_slot_memory` all read it here)."""
    return _SLOT_LIMITS[_check_memory_name(slot_memory)][0]


def check_slot_memory(slot_memory: str, **params: int) -> dict[str, int]:
    """Core parameters for slots in ``slot_memory`` (one of :data:`SLOT_MEMORIES`): as
    :func:`check_core_params`, except that S is checked against :func:`max_slots`
    (``dram`` :data:`MAX_SLOTS_DRAM`, ``records`` :data:`MAX_SLOTS_LARGE`)."""
    if _check_memory_name(slot_memory) != "onchip" and "slots" in params:
        rest = {k: v for k, v in params.items() if k != "slots"}
        check_core_params(**rest)
        _slot_count(params["slots"], *_SLOT_LIMITS[slot_memory])
        return params
    return check_core_params(**params)


def check_wired(slot_memory: str) -> str:
    """``slot_memory`` if the core builds it; a one-line ValueError naming ``slot_memory`` for
    one of :data:`UNWIRED_SLOT_MEMORIES` (checked and planned, not yet in the core), so no
    command prints or builds a core the generator would refuse without saying so."""
    if _check_memory_name(slot_memory) in UNWIRED_SLOT_MEMORIES:
        built = ", ".join(k for k in SLOT_MEMORIES if k not in UNWIRED_SLOT_MEMORIES)
        raise ValueError(f"slot_memory: {slot_memory!r} is not wired into the core yet (the record path, "
                         f"docs/large_slots.md \"The core wiring\", step 5); the core builds {built}")
    return slot_memory


def _power_of_two(name: str, lo: int, hi: int):
    def check(v: int) -> None:
        if not lo <= v <= hi or v & (v - 1):
            raise ValueError(f"{name} must be a power of two from {lo} to {hi}, got {v}")
    return check


def _base_address(v: int) -> None:
    if v < 0 or v % AXI4_PAGE:
        raise ValueError(f"base_address must be a non-negative multiple of {AXI4_PAGE} (4 KiB), got {v:#x}")


_CHECKS = {
    "ports": _range("ports", 1, 8),
    "width": check_data_width,
    "slots": _slots,
    "elements": _range("elements", 1, wire.MAX_ELEMENTS_JUMBO, " (jumbo-frame limit)"),
    "groups": _range("groups", 1, 32),
    "jobs": _range("jobs", 1, 16),
    # slot stores: rows = slots << row_bits (up to 2**12 rows per slot: E = 2237 needs 2**11 at W 64)
    "row_bits": _range("row_bits", 0, 12),
    "address_width": _range("address_width", 12, 64),
    "base_address": _base_address,
    "outstanding": _power_of_two("outstanding", 4, 1024),
    "burst_beats": _power_of_two("burst_beats", 1, AXI4_MAX_BEATS),
    "burst_hold": _range("burst_hold", 0, MAX_BURST_HOLD, " idle cycles"),
    # the read-modify-write engine's in-flight index: 2**index_bits sets of two ways (hdl/dram_rmw_engine.py)
    "index_bits": _range("index_bits", 1, 16),
    # the reducer's parts: a release run / slot index of run_bits bits (``HeadCheck``'s forwarded head)
    "run_bits": _range("run_bits", 1, 32),
}


def check_core_params(**params: int) -> dict[str, int]:
    """Check the given core parameters (any subset of :data:`DEFAULTS`); returns them."""
    for name, v in params.items():
        if name not in _CHECKS:
            raise ValueError(f"unknown core parameter: {name} (one of {', '.join(_CHECKS)})")
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{name} must be an integer, got {v!r}")
        _CHECKS[name](v)
    return params


class CoreParams(dict):
    """All core parameters, defaults filled in, checked (slots against ``slot_memory``'s limit)."""

    def __init__(self, slot_memory: str = "onchip", **kw: int) -> None:
        unknown = set(kw) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown core parameter(s): {', '.join(sorted(unknown))}")
        super().__init__(check_slot_memory(slot_memory, **{**DEFAULTS, **kw}))
        self.slot_memory = slot_memory  # SLOT_MEMORIES: not an item, the dict holds the integers


def check_dram_store_params(*, width: int, slots: int, row_bits: int, address_width: int,
                            base_address: int, outstanding: int, burst_beats: int,
                            burst_hold: int = 0, row_width: int | None = None, axi_id: int = 0,
                            row_stride: int | None = None, row_offset: int = 0,
                            index_bits: int = DRAM_STORE_DEFAULTS["index_bits"]) -> None:
    """The DRAM slot store's parameters, each on its own and together: its rows fit the AXI
    address space from ``base_address`` on, and a burst of ``burst_beats`` fits in 4 KiB.
    ``row_width`` (the read-modify-write engine's, default ``width``): a row of that many bits
    is ``row_width / width`` consecutive beats of the ``width``-bit bus, so a burst holds
    ``burst_beats`` beats of whole rows. ``axi_id``: the engine's AXI ID on the 1-bit ID port.
    ``row_stride`` (bytes; None: dense, a row every ``row_width / 8`` bytes) and ``row_offset``:
    row r at ``base_address + r * row_stride + row_offset``, the stride a power of two, the
    offset a multiple of the row's bytes inside it (so a row never crosses 4 KiB)."""
    if axi_id not in (0, 1):
        raise ValueError(f"axi_id must be 0..1 (the port's 1-bit ID), got {axi_id}")
    # S: any the large-S parts take (the store keeps no per-slot state; the core's S limit per
    # slot memory is check_slot_memory's)
    check_large_slots(slots)
    check_core_params(width=width, row_bits=row_bits, address_width=address_width,
                      base_address=base_address, outstanding=outstanding, burst_beats=burst_beats,
                      burst_hold=burst_hold, index_bits=index_bits)
    row_width = width if row_width is None else row_width
    if row_width < width or row_width > MAX_ROW_WIDTH or row_width & (row_width - 1):
        raise ValueError(f"row_width must be a power of two from {width} (the data width) to "
                         f"{MAX_ROW_WIDTH}, got {row_width}")
    if burst_beats < row_width // width:
        raise ValueError(f"burst_beats must be >= {row_width // width} (a {row_width}-bit row is "
                         f"{row_width // width} beats of {width}), got {burst_beats}")
    row_bytes = row_width // 8
    if row_stride is None:
        if row_offset:
            raise ValueError(f"row_offset must be 0 without row_stride (dense rows), got {row_offset}")
    elif row_stride < row_bytes or row_stride & (row_stride - 1):
        raise ValueError(f"row_stride must be a power of two from {row_bytes} (a {row_width}-bit row), "
                         f"got {row_stride}")
    elif not 0 <= row_offset <= row_stride - row_bytes or row_offset % row_bytes:
        raise ValueError(f"row_offset must be a multiple of {row_bytes} from 0 to {row_stride - row_bytes} "
                         f"(a row inside its stride of {row_stride}), got {row_offset}")
    stride = row_bytes if row_stride is None else row_stride
    end = base_address + (slots << row_bits) * stride
    if end > 1 << address_width:
        raise ValueError(f"base_address + rows * {stride} bytes must be <= 2**address_width "
                         f"= {1 << address_width:#x}, got {end:#x}")
    page_beats = AXI4_PAGE // (width // 8)
    if burst_beats > page_beats:
        raise ValueError(f"burst_beats must be 1..{page_beats} at width {width} (a burst stays "
                         f"within 4 KiB), got {burst_beats}")
