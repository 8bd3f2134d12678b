"""Read-modify-write engine on DRAM: rows behind an AXI4 burst master, each command's new row a
function of the row before and the command (issue 16; docs/slot_store.md, docs/large_slots.md
"The record store").

The engine is the DRAM slot store's (``DramSlotStore`` is this engine with the saturating adder,
``hdl/dram_slot_store.py``) with its modify stage (C2) and AXI ID as parameters, so the record
store (tag records, AXI ID 1) is the same engine with another modify function, not a copy.

Row ``r`` lives at ``base_address + r * R/8`` on ``m_axi_mem`` (data width W; the row width R =
``row_width``, default W, is a power of two from W up: a row is R/W consecutive beats, a burst of
rows a burst of R/W beats each; further width conversion is the interconnect's job): the
*dense* map. With ``row_stride`` (bytes, a power of two >= R/8) row ``r`` is at
``base_address + r * row_stride + row_offset`` (``row_offset`` a multiple of R/8 up to
``row_stride`` - R/8): the record store's map, each record in its slot's own stride of the sums'
region (docs/large_slots.md, "The record store"). Rows of a wider stride are never adjacent, so
each is a burst of its own (R/W beats, inside its 4 KiB page); only dense rows coalesce. Rows,
commands, responses, the modify and every buffer are R bits; only the AXI data channels are W
(R: the beats of a row gathered in a shift register; W: a row sent a beat at a time). One AXI
ID (``axi_id``, default 0): reads return, and writes are acknowledged, in order.

**The modify** (``modify``: a factory ``modify(R)`` of a ``wiring.Component`` with
:func:`modify_signature`'s members, called once, at construction): a
combinational function of registered operands, ``a`` = the row before the command (0 for
WRITE), ``b`` = the command's data (0 for READ) and, if the component has it, ``op``; it drives
``sum``, the row after, and ``overflow``, one flag per 32-bit lane. With ``side_shape`` every
command carries ``side`` (any shape: the operands the modify needs besides the row and the data,
e.g. a message header), the modify has the member ``side`` (``In(side_shape)``), and the
response echoes the command's ``side``. The side belongs to the command: it travels with it
through the command queue to C2 (never forwarded; only the row is) and on to the response, so
the owner gets each result with what it was computed from, without a queue of its own. The
engine needs
``sum = b`` for WRITE and ``sum = a`` for READ (the response is the row, and a later command may
forward it); the modify decides what ADD does. The response's ``overflow`` is set for an ADD
whose ``overflow`` has a bit in the command's ``lanes``.

**Late operand** (``late_shape`` / ``effect_shape``, default None: no such ports, the RTL as
without): state of the owner that every command's modify reads and changes (the record store's
decision: the job's head and the slot's pending bit, ``hdl/decision_state.py``). Unlike ``side``
it cannot be taken at acceptance: up to ``outstanding`` commands complete between a command's
acceptance and its C2, each changing it. So the owner drives ``late`` at C2 and learns what the
modify did from ``effect``. The contract, cycle by cycle:

- ``ahead_valid`` (with ``ahead_row`` and, with ``side_shape``, ``ahead_side``) in cycle t: the
  command in C1, which **is in C2 in cycle t + 1, always**: C1, C2 and C3 never hold (C0 is the
  only stage that waits: for the read data, the response credit, ``adj``; a command it fires
  moves one stage per cycle from then on). An owner with one-cycle block-RAM reads addresses
  them with the look-ahead in t and has the data in t + 1.
- ``late`` is sampled in t + 1, the cycle of ``effect_valid``: the modify reads it
  combinationally in C2, as ``a``, ``b``, ``op`` and ``side``. ``effect_valid`` is high exactly
  in the cycles some command is in C2 (one per command, in command order), so "``effect_valid``
  now" == "``ahead_valid`` last cycle": the owner's check that its late operand was the C2
  command's (``DecisionState.error``).
- ``effect`` (the modify's output) in that cycle: the consequence of this command for the
  owner's state, which the owner must make visible to the command in C2 in t + 2 (whose
  look-ahead read happened in t + 1, before it could write): a bypass, as the reducer's ``fx_c`` /
  ``fx_s``.

- ``c0_valid`` / ``c0_row`` / ``c0_side``: the command waiting in C0 (the oldest not fired; a
  command fired in t is the look-ahead in t + 1), and ``c0_hold``
  (in): the owner keeps it there this cycle. C0 is the only stage that can wait, so a hold
  affects the commands not yet fired only: an owner that must see a state quiet before some
  command reads it (``DecisionState``: the pending words peeked for a release at the head) holds
  that command in C0 until the commands already fired (C1, C2) are gone.

If C2 ever gains a hold, the look-ahead must be qualified by it (an owner reading one cycle
ahead needs to know the command moves).

Pipeline (one command per cycle):

- **Look up** (L0..L3) and **accept** (A), :class:`~.inflight_index.InflightIndex`
  (``hdl/inflight_index.py``, ``index``): the command takes the next entry of the *in-flight
  table*, a ring of ``outstanding`` entries that holds each command from acceptance until its
  write is acknowledged (B), and learns whether its row is in the table: the row's newest entry
  there (its *live* entry), if any. No CAM: a two-way set-associative index of the rows in the
  table (2**``index_bits`` sets in block RAM, each entry's row key in LUT RAM) read over three
  stages and checked against the ``LOOKUP_STAGES`` commands accepted last; a command whose set's
  two ways both hold other rows in the table (a *conflict*) waits in A until one of them leaves.
- **Queue** (Q): on a hit the command **forwards**: it reads nothing from memory and takes the
  live entry's result (the row value after that command) when it completes. On a miss ADD/READ
  queue a memory read; WRITE never reads. Rows to read go through a :class:`BurstCoalescer` to
  AR; the command goes to the command queue.
- **Complete** (in command order, four stages): C0 takes the oldest command (the command
  queue's registered head) once its data is there (read data FIFO, or forwarded), reading the
  forwarded entry's result; C1 registers the row before the command (read data, or the
  forwarded result: from the result buffer, or bypassed from the registers after C2 for the
  three commands right before); C2 computes the new row (the modify; the slot store's
  ``SaturatingAdder``: WRITE data, ADD saturating sum, READ the row) into a register and queues,
  for WRITE/ADD, the write's row (a second :class:`BurstCoalescer` to AW); C3 stores the registered row in the entry's result
  buffer and queues the response and the write data (W). Both coalescers keep a burst open for up
  to ``burst_hold`` idle cycles while the command's ``more`` says its message goes on, but only
  while it has fewer than ``outstanding``/4 beats: the two held bursts then tie up at most half
  the table, the rest keeps reads in flight (a table filled by held bursts waits for the timer).
- **Free** (in order): completed entries queue with whether they wrote; an entry leaves the
  table at once if it only read, else with the next acknowledged write (B); so a row is read
  from memory only when every write to it has been acknowledged.

Timing (ECP5, docs/benchmarks.md): every per-cycle decision is taken from flip-flops: queue
heads are :class:`RegisteredFIFO` outputs (no block-RAM clock-to-output in front of logic),
``full``, the lookup's hit / way / conflict flags and the response credit are registers (the
LUT-RAM key read and its compares have a cycle of their own, L2, after the block-RAM read's
L1, and their combination with the recent commands another, L3: at 121 MHz when L2 did both),
and the burst coalescers decide a close from flip-flops (their compares run a cycle early, on
the row's source register: ``a_cmd`` for AR, ``c1`` for AW; session 44) and write a closed
burst into their queues from flip-flops, a cycle after it closes (AR / AW one cycle later;
session 43).

Capacity: the table holds a command from acceptance to its write's B, so full rate needs
``outstanding`` >= (read latency + write-response latency + a burst on each side + ~8) cycles of
commands. Every internal queue holds at most ``outstanding`` entries (each entry is in it at most
once), so none of them can overflow: RREADY is always 1 (the read-data FIFO has room for every
row read). ``mem_error`` (sticky) is set by any RRESP/BRESP other than OKAY, and by an R beat
meeting a full read-data FIFO (never, if the above holds): the data of such a row is not to be
trusted, the owner must report it.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Cat, Const, Module, Mux, Shape, ShapeLike, Signal
from amaranth.lib import data, fifo, memory, wiring
from amaranth.lib.wiring import In, Out

from .axi4 import AxiBurst, AxiResp, axi4_master_members, axi4_port
from .burst_coalescer import BurstCoalescer
from .inflight_index import LOOKUP_STAGES, SET_WAITS_BITS, InflightIndex
from .layouts import lanes
from .params import AXI4_PAGE, DRAM_STORE_DEFAULTS, check_dram_store_params
from .registered_fifo import RegisteredFIFO
from .skid_buffer import SkidBuffer
from .slot_store_signature import TAG_BITS, Op, cmd_layout, row_address_bits, slot_store_signature

__all__ = ["AXI_PREFIX", "LATE_PORTS", "DramRmwEngine", "late_members", "modify_signature", "unanswered_max"]

AXI_PREFIX = "m_axi_mem"


RSP_DEPTH = 8  # response FIFO: C0 fires only with room for what C1..C3 will push


def unanswered_max(outstanding: int) -> int:
    """The most commands an engine of ``outstanding`` table entries holds taken on ``cmd`` and
    not yet answered on ``rsp``: the ``cmd`` skid buffer's two, the lookup's ``LOOKUP_STAGES``,
    the table's, and the response FIFO's ``RSP_DEPTH`` (a command that only read leaves the
    table once its response is queued). A queue beside the engine with one entry per such command (``StoreReadSplit``'s)
    needs this many never to throttle it."""
    return 2 + LOOKUP_STAGES + outstanding + RSP_DEPTH
AXCACHE = 0b0011  # normal non-cacheable bufferable (AXI4 A4.4)
# The members an owner of a late operand wires (``late_shape`` / ``effect_shape``, see the module
# docstring); a harness that owns them hides them from its own ports.
LATE_PORTS = ("c0_valid", "c0_row", "c0_side", "c0_hold", "ahead_valid", "ahead_row", "ahead_side", "late", "effect",
              "effect_valid")


def modify_signature(data_width: int) -> dict[str, wiring.Member]:
    """The members a modify component must have (``op``: In(2), ``side``: In(side_shape),
    ``late``: In(late_shape) and ``effect``: Out(effect_shape) are optional); see the module
    docstring."""
    return {"a": In(data_width), "b": In(data_width), "sum": Out(data_width),
            "overflow": Out(lanes(data_width))}


def _shape(shape: ShapeLike) -> ShapeLike:
    """``shape`` for comparing: a layout as it is, anything else as a ``Shape`` (32 == unsigned(32))."""
    return shape if isinstance(shape, data.Layout) else Shape.cast(shape)


def check_modify(modify: wiring.Component, data_width: int, side_shape: ShapeLike | None = None,
                 late_shape: ShapeLike | None = None, effect_shape: ShapeLike | None = None) -> None:
    """One-line error naming the member when ``modify``'s signature does not fit W and the
    engine's optional operands: the modify has ``side`` / ``late`` (inputs) and ``effect`` (an
    output) exactly when the engine is given ``side_shape`` / ``late_shape`` / ``effect_shape``,
    each of that shape."""
    members = dict(modify.signature.members)
    for name, flow, shape in (("side", In, side_shape), ("late", In, late_shape), ("effect", Out, effect_shape)):
        if name in members and shape is None:
            raise ValueError(f"modify: member {name} needs the engine's {name}_shape (None), got {members[name]}")
        if shape is not None:
            got = members.pop(name, None)
            want = flow(_shape(shape))
            if got is None or got.flow != flow or got.is_signature or _shape(got.shape) != want.shape:
                raise ValueError(f"modify: member {name} must be {want} ({name}_shape), got {got or 'nothing'}")
    want = {**modify_signature(data_width), "op": In(2)}
    for name, member in want.items():
        if name == "op" and name not in members:
            continue
        if name not in members or members[name] != member:
            got = members[name] if name in members else "nothing"
            raise ValueError(f"modify: member {name} must be {member}, got {got}")
    extra = sorted(set(members) - set(want))
    if extra:
        raise ValueError(f"modify: members must be among a, b, sum, overflow, op, side, late, effect, got {extra}")


def late_members(address_bits: int, side_shape: ShapeLike | None, late_shape: ShapeLike | None,
                 effect_shape: ShapeLike | None) -> dict[str, wiring.Member]:
    """The engine's members for an owner's late operand (:data:`LATE_PORTS`; none without
    ``late_shape`` and ``effect_shape``): C0's command (its row too: an owner may read its
    state a cycle earlier still) and its hold, the look-ahead at C1, ``late`` in, ``effect`` out."""
    if late_shape is None and effect_shape is None:
        return {}
    return {"c0_valid": Out(1), "c0_row": Out(address_bits), **({} if side_shape is None else {"c0_side": Out(side_shape)}), "c0_hold": In(1),
            "ahead_valid": Out(1), "ahead_row": Out(address_bits),
            **({} if side_shape is None else {"ahead_side": Out(side_shape)}),
            **({} if late_shape is None else {"late": In(late_shape)}),
            **({} if effect_shape is None else {"effect": Out(effect_shape), "effect_valid": Out(1)})}


class DramRmwEngine(wiring.Component):
    """Read-modify-write engine on an AXI4 master (``m_axi_mem_*``); see the module docstring.

    Parameters: ``data_width`` W (64..512, the AXI data), ``row_width`` R (a power of two >= W,
    default W), ``slots`` S and ``row_bits`` (rows = S << row_bits), ``modify`` (factory of the
    modify component, given R), ``axi_id`` (the ID of every request, 0 or 1),
    ``base_address`` (4 KiB-aligned), ``address_width`` (AXI), ``outstanding`` (in-flight table
    entries), ``burst_beats`` (longest burst, in W beats, of whole rows), ``burst_hold`` (idle cycles a burst waits for the
    next row of a message whose commands say ``more``; 0 = a pause closes it), ``index_bits``
    (2**index_bits sets of the in-flight table's index; fewer if the rows are fewer), ``tag_bits``,
    ``side_shape`` (None: no side input; else ``cmd.side`` / ``rsp.side`` and the modify's
    ``side`` of that shape), ``row_stride`` / ``row_offset`` (None / 0: dense rows; else row r at
    ``base_address + r * row_stride + row_offset``), ``late_shape`` / ``effect_shape`` (None:
    none; else the modify's ``late`` input / ``effect`` output of that shape and the look-ahead,
    module docstring "Late operand").
    Ports: ``cmd``, ``rsp`` (the slot-store signature, with ``side`` if ``side_shape``),
    ``m_axi_mem_*``, ``mem_error``, ``set_waits`` (cycles commands waited for a conflict in the
    in-flight index, ``InflightIndex``); with a late operand or effect ``c0_valid``, ``c0_row``, ``c0_side`` (with
    ``side_shape``), ``c0_hold`` (in), ``ahead_valid``, ``ahead_row``, ``ahead_side`` (with
    ``side_shape``), ``late``, ``effect`` / ``effect_valid``.
    ``cmd_ready_copy`` (the DRAM reducer's store): the command input's skid buffer with
    ``SkidBuffer(ready_copy=True)``, so ``cmd.ready`` (a flip-flop the reducer's emitter start and
    command FIFO read) does not also drive every command bit's skid enable; ``copy_error`` (an
    output with it): the copy differs from the ready while it is used, or a burst coalescer's
    ``row_next`` was not the next cycle's row (``next_error``; never, if right). With it also
    C2's choice of the row before is a 2-bit register worked out at C0 (``c1_base_sel``; its
    check against the choice from C1's bits is in ``copy_error`` too; session 46). And the command
    skid is a ping-pong pair (the index's ready reaches no command bit's enable) and the W / B
    length queues are written through flip-flops (AWREADY reaches no LUT-RAM write enable); the
    same outputs in the same cycles (session 47).
    """

    def __init__(self, data_width: int, *, slots: int, row_bits: int,
                 modify: Callable[[int], wiring.Component], axi_id: int = 0,
                 row_width: int | None = None,
                 base_address: int = DRAM_STORE_DEFAULTS["base_address"],
                 address_width: int = DRAM_STORE_DEFAULTS["address_width"],
                 outstanding: int = DRAM_STORE_DEFAULTS["outstanding"],
                 burst_beats: int = DRAM_STORE_DEFAULTS["burst_beats"],
                 burst_hold: int = DRAM_STORE_DEFAULTS["burst_hold"],
                 index_bits: int = DRAM_STORE_DEFAULTS["index_bits"], tag_bits: int = TAG_BITS,
                 side_shape: ShapeLike | None = None, row_stride: int | None = None,
                 row_offset: int = 0, late_shape: ShapeLike | None = None,
                 effect_shape: ShapeLike | None = None, cmd_ready_copy: bool = False) -> None:
        check_dram_store_params(width=data_width, slots=slots, row_bits=row_bits,
                                address_width=address_width, base_address=base_address,
                                outstanding=outstanding, burst_beats=burst_beats,
                                burst_hold=burst_hold, row_width=row_width, axi_id=axi_id,
                                row_stride=row_stride, row_offset=row_offset, index_bits=index_bits)
        self.row_width = data_width if row_width is None else row_width
        self.modify = modify(self.row_width)
        check_modify(self.modify, self.row_width, side_shape, late_shape, effect_shape)
        self.side_shape, self.late_shape, self.effect_shape = side_shape, late_shape, effect_shape
        # None: dense (row r at base + r * R/8); else row r at base + r * row_stride + row_offset
        self.row_stride, self.row_offset = row_stride, row_offset
        self.axi_id = axi_id
        self.data_width, self.base_address, self.address_width = data_width, base_address, address_width
        self.outstanding, self.burst_beats, self.tag_bits = outstanding, burst_beats, tag_bits
        self.burst_hold, self.index_bits = burst_hold, index_bits
        self.cmd_ready_copy = cmd_ready_copy
        self.address_bits = row_address_bits(slots, row_bits)
        self.rows, self.row_bits = slots << row_bits, row_bits
        self.index = InflightIndex(cmd_layout(self.row_width, self.address_bits, tag_bits, side_shape),
                                   entries=outstanding, index_bits=index_bits, row_bits=row_bits)
        super().__init__({
            **slot_store_signature(self.row_width, self.address_bits, tag_bits, side_shape),
            **axi4_master_members(AXI_PREFIX, addr_width=address_width, data_width=data_width),
            "mem_error": Out(1), "set_waits": Out(SET_WAITS_BITS),
            **late_members(self.address_bits, side_shape, late_shape, effect_shape),
            **({"copy_error": Out(1)} if cmd_ready_copy else {}),
        })

    @property
    def dense(self) -> bool:
        """Rows back to back (no ``row_stride`` wider than a row): consecutive rows share bursts."""
        return self.stride == self.row_width // 8

    @property
    def stride(self) -> int:
        """Bytes from one row's address to the next: ``row_stride``, or R/8 when dense."""
        return self.row_width // 8 if self.row_stride is None else self.row_stride

    @property
    def region_end(self) -> int:
        """The byte after the engine's region: ``base_address + rows * stride``."""
        return self.base_address + self.rows * self.stride

    def _address(self, row) -> Signal:
        """Byte address of ``row``: ``base_address + row * stride + row_offset``, the offset
        below the power-of-two stride filling its low bits."""
        shift = self.stride.bit_length() - 1
        low = Const(self.row_offset, shift)
        return (Const(self.base_address, self.address_width) + Cat(low, row))[:self.address_width]

    def _beats_m1(self, rows_m1):
        """A burst's AXI length - 1 from its rows - 1: (rows * R/W) - 1 (R/W a power of two)."""
        k = self.row_width // self.data_width
        return rows_m1 if k == 1 else Cat(Const(k - 1, k.bit_length() - 1), rows_m1)[:8]

    def elaborate(self, platform: object) -> Module:  # noqa: PLR0915 - one pipeline, read top-down
        m = Module()
        w, n, ab = self.row_width, self.outstanding, self.address_bits
        bw, k = self.data_width, self.row_width // self.data_width  # the bus, beats per row
        ib = n.bit_length() - 1
        axi = axi4_port(self, AXI_PREFIX)
        # The coalescers merge rows whose addresses are adjacent: only dense rows. With a wider
        # stride every row is a burst of its own (R/W beats, inside its 4 KiB page).
        page_beats = AXI4_PAGE // (w // 8) if self.dense else max(1, AXI4_PAGE // self.row_stride)  # rows in a page
        burst_rows = self.burst_beats // k if self.dense else 1
        side = {} if self.side_shape is None else {"side": self.side_shape}
        entry_layout = data.StructLayout({
            "op": 2, "row": ab, "data": w, "lanes": lanes(w), "tag": self.tag_bits,
            "fwd": 1, "src": ib, "adj": 1, "mem": 1, "more": 1, **side})

        # ---- lookup (L0..L3) and accept (A): the in-flight table and its row index ----------
        # (``InflightIndex``, hdl/inflight_index.py): the command's row's live entry, if any, and
        # the entry it takes; a command whose set has no way for it waits there (a conflict).
        cmd_shape = self.index.cmd_shape
        # (cmd_ready_copy: also ping_pong, so the index's ready `adv`, from A's flags, drives no
        # command bit's enable: `index.a_valid` -> `store.cmd__payload`, 30 endpoints, 8.96 ns at
        # the Versa DRAM build's seed 6; the same beats in the same cycles, session 47)
        m.submodules.cmd_in = cmd_in = SkidBuffer(cmd_shape, ready_copy=self.cmd_ready_copy,
                                                  ping_pong=self.cmd_ready_copy)
        wiring.connect(m, wiring.flipped(self.cmd), cmd_in.s)
        m.submodules.index = ix = self.index
        wiring.connect(m, cmd_in.m, ix.cmd)
        m.d.comb += self.set_waits.eq(ix.set_waits)
        done = Signal(ib + 1)  # commands through C2: the entry C3 writes

        # ---- Q: queue the command (to completion) and its read (to AR) ------------------------
        # A hit forwards only from an entry still in the table (a freed one's row is read again).
        q_valid, q_cmd, q_hit, q_idx, q_own = Signal(), Signal(cmd_shape), Signal(), Signal(ib), Signal(ib)
        acc = ix.accepted.payload
        m.d.sync += [q_valid.eq(ix.accepted.valid), q_cmd.eq(acc.cmd), q_hit.eq(acc.hit), q_idx.eq(acc.src),
                     q_own.eq(acc.entry)]
        needs_read = q_valid & (q_cmd.op != Op.WRITE) & ~q_hit
        q_fwd = q_hit & (q_cmd.op != Op.WRITE)

        m.submodules.cmds = cmds = RegisteredFIFO(entry_layout, n)
        entry = Signal(entry_layout)
        m.d.comb += [entry.op.eq(q_cmd.op), entry.row.eq(q_cmd.row), entry.data.eq(q_cmd.data),
                     entry.lanes.eq(q_cmd.lanes), entry.tag.eq(q_cmd.tag),
                     entry.fwd.eq(q_fwd), entry.src.eq(q_idx),
                     # forwards from the command accepted right before it (entries are taken
                     # in order): C0 then waits a cycle if that one is in C1 (see C1)
                     entry.adj.eq(q_fwd & (q_idx == (q_own - 1)[:ib])),
                     entry.mem.eq(needs_read), entry.more.eq(q_cmd.more),
                     cmds.w_data.eq(entry), cmds.w_en.eq(q_valid)]
        if side:  # the side input travels with its command (never forwarded: only the row is)
            m.d.comb += entry.side.eq(q_cmd.side)

        m.submodules.ar_bursts = ar_bursts = BurstCoalescer(
            ab, max_beats=burst_rows, page_beats=page_beats, depth=n, hold=self.burst_hold,
            hold_beats=n // 4)
        m.d.comb += [ar_bursts.row.eq(q_cmd.row), ar_bursts.push.eq(needs_read),
                     ar_bursts.row_next.eq(acc.cmd.row),  # q_cmd's input: the next cycle's row
                     ar_bursts.more.eq(q_cmd.more)]

        # ---- memory reads -------------------------------------------------------------------
        rb = ar_bursts.m.payload
        m.d.comb += [
            axi.arvalid.eq(ar_bursts.m.valid), ar_bursts.m.ready.eq(axi.arready),
            axi.araddr.eq(self._address(rb.start)), axi.arlen.eq(self._beats_m1(rb.len_m1)),
            axi.arsize.eq((bw // 8).bit_length() - 1), axi.arburst.eq(AxiBurst.INCR),
            axi.arcache.eq(AXCACHE), axi.arid.eq(self.axi_id), axi.arlock.eq(0), axi.arprot.eq(0), axi.arqos.eq(0),
        ]
        # RREADY is always 1: every row in the read-data FIFO belongs to a table entry (read once,
        # popped at C0 before the entry is freed), so it never holds more than n rows and never
        # refuses one; a beat meeting a full FIFO (never, if right) sets ``mem_error``. RREADY
        # from the FIFO's level ran on into the upsizer's R unpacking and its input register's
        # enables (the Versa DRAM build's core path, 9.05 ns, docs/benchmarks.md)
        m.submodules.rdata = rdata = fifo.SyncFIFOBuffered(width=w, depth=n)
        r_overflow = axi.rvalid & ~rdata.w_rdy
        m.d.comb += axi.rready.eq(1)
        if k == 1:
            m.d.comb += [rdata.w_data.eq(axi.rdata), rdata.w_en.eq(axi.rvalid)]
        else:  # a row's first k - 1 beats into a shift register, the row queued with its last
            r_beat, r_lower = Signal(range(k)), Signal(w - bw)
            r_go = axi.rvalid
            r_overflow = r_overflow & (r_beat == k - 1)
            m.d.comb += [rdata.w_data.eq(Cat(r_lower, axi.rdata)), rdata.w_en.eq(r_go & (r_beat == k - 1))]
            with m.If(r_go):
                m.d.sync += [r_beat.eq(r_beat + 1), r_lower.eq(Cat(r_lower, axi.rdata)[bw:])]

        # ---- complete, stage C0 -------------------------------------------------------------
        # The oldest command is the command queue's registered head, so `fire` is decided from
        # flip-flops (head flags, the read-data FIFO's r_rdy, the response credit), not from a
        # block-RAM output.
        head = cmds.m.payload
        m.submodules.results = results = memory.Memory(shape=w, depth=n, init=[])
        res_w = results.write_port()
        res_r = results.read_port()  # not transparent: the C2 results it misses are bypassed
        m.submodules.rsp_out = rsp_out = fifo.SyncFIFOBuffered(
            width=len(self.rsp.payload.as_value()), depth=RSP_DEPTH)
        owed = Signal(range(RSP_DEPTH + 1))  # fired, response not yet taken: C1..C3 + rsp_out
        c1_valid, c2_valid = Signal(), Signal()
        fire = Signal()
        # A command that forwards from the one right before waits while that one is in C1
        # (`c1_valid`: C0 fired it in the last cycle), so its row is never C2's own output of
        # the cycle before: C2's input is one register (see C1).
        # ``credit`` == (owed != RSP_DEPTH), a flip-flop worked out from owed's next value: the
        # compare sat between ``owed`` and ``fire`` -> the read-data FIFO's level (the Versa DRAM
        # build's core path, 9.63 ns at s36b's seed 1, docs/benchmarks.md, session 36)
        owed_n, credit = Signal.like(owed), Signal(init=1)
        can_fire = cmds.m.valid & (~head.mem | rdata.r_rdy) & credit & ~(head.adj & c1_valid)
        if self.late_shape is not None or self.effect_shape is not None:
            # the owner sees C0's command and may hold it (the release run at the head)
            m.d.comb += [self.c0_valid.eq(cmds.m.valid), self.c0_row.eq(head.row)]
            if side:
                m.d.comb += self.c0_side.eq(head.side)
            can_fire = can_fire & ~self.c0_hold
        m.d.comb += [
            fire.eq(can_fire),
            cmds.m.ready.eq(fire), rdata.r_en.eq(fire & head.mem), res_r.addr.eq(head.src),
        ]
        m.d.comb += owed_n.eq(owed + fire - (self.rsp.valid & self.rsp.ready))
        m.d.sync += [owed.eq(owed_n), credit.eq(owed_n != RSP_DEPTH)]
        c1 = Signal(entry_layout)
        c1_rdata = Signal(w)
        # The forwarded result is still in C2 (two back) or being written by C3 (three back):
        # the buffer read misses it.
        c1_two_back, c1_three_back = Signal(), Signal()
        c3_valid, c3_idx = Signal(), Signal(ib)  # C3's command and its entry (C2's `done`)
        m.d.sync += c1_valid.eq(fire)
        two_back_n, three_back_n = c2_valid & (head.src == done[:ib]), c3_valid & (head.src == c3_idx)
        with m.If(fire):
            m.d.sync += [c1.eq(head), c1_two_back.eq(two_back_n), c1_three_back.eq(three_back_n)]
            if not self.cmd_ready_copy:
                m.d.sync += c1_rdata.eq(rdata.r_data)
        if self.cmd_ready_copy:
            # C2's choice of the row before, worked out at C0 into its own two flip-flops
            # (`c1_base_sel`: 0 `c1_rdata`, 1 the result buffer, 2 `new_r`, 3 `new_rr`) and
            # `c1_rdata` loaded 0 for a WRITE (it is read for nothing else), so `c2_base` is one
            # 4:1 per bit from flip-flops; the choice from `c1.fwd` / `c1.op` / the two compares
            # was three LUT levels (`store.c1.fwd` -> `store.a`, 13 endpoints, 8.80 ns at main
            # 193bd2d's seed 1). `base_sel_error`: it differs from that choice (never, if right).
            def base_sel(fwd, op, two_back, three_back):
                return Mux(fwd & ~two_back & ~three_back, 1,
                           Mux((op == Op.WRITE) | ~fwd, 0, Mux(two_back, 2, 3)))
            c1_base_sel = Signal(2, name="c1_base_sel")  # reset: c1 = 0 (WRITE, no fwd) -> 0
            with m.If(fire):
                m.d.sync += [c1_base_sel.eq(base_sel(head.fwd, head.op, two_back_n, three_back_n)),
                             c1_rdata.eq(Mux(head.op == Op.WRITE, 0, rdata.r_data))]
            base_sel_error = c1_base_sel != base_sel(c1.fwd, c1.op, c1_two_back, c1_three_back)

        # ---- complete, stage C1: register C2's operands -------------------------------------
        # C2's modify takes two registers: `c2_base` (the row before this command) and `c2_b`
        # (the command's data; 0 for READ), so the slot store's loop is one adder and the clamp.
        # The row before is chosen here: 0 for WRITE (0 + data = data: the adder never
        # saturates it), the read
        # data, or the forwarded entry's result: from the result buffer (read at C0, written by
        # C3 from the register `new_r`), or bypassed from C2's registers for the two results the
        # buffer read cannot see: the one in C2 in C0's cycle (now in `new_r`) and the one C3
        # wrote in C0's cycle (now in `new_rr`). The command right before cannot be in C2 now:
        # C0 held this one back a cycle (`adj`), where C2 used to choose 3:1 (one back / result
        # buffer / early) in front of its adder (the Versa DRAM build's core path, 98.3 MHz).
        c2 = Signal(entry_layout)
        c2_base, c2_b = Signal(w), Signal(w)
        new, new_r, new_rr = Signal(w), Signal(w), Signal(w)
        if self.cmd_ready_copy:
            base_n = Mux(c1_base_sel[1], Mux(c1_base_sel[0], new_rr, new_r),
                         Mux(c1_base_sel[0], res_r.data, c1_rdata))
        else:
            early = Mux(c1.op == Op.WRITE, 0, Mux(~c1.fwd, c1_rdata, Mux(c1_two_back, new_r, new_rr)))
            base_n = Mux(c1.fwd & ~c1_two_back & ~c1_three_back, res_r.data, early)
        m.d.sync += [c2_valid.eq(c1_valid), c2.eq(c1),
                     c2_base.eq(base_n),
                     c2_b.eq(Mux(c1.op == Op.READ, 0, c1.data)),
                     new_r.eq(new), new_rr.eq(new_r)]

        # ---- complete, stage C2: the new row, the modify on two registers --------------------
        # (the slot store's adder: WRITE 0 + data, ADD row + data, READ row + 0)
        m.submodules.modify = modify = self.modify
        m.d.comb += [modify.a.eq(c2_base), modify.b.eq(c2_b), new.eq(modify.sum)]
        if "op" in modify.signature.members:
            m.d.comb += modify.op.eq(c2.op)
        if side:
            m.d.comb += modify.side.eq(c2.side)
        if self.late_shape is not None or self.effect_shape is not None:
            # the look-ahead: C1's command is C2's in the next cycle (C1..C3 never hold)
            m.d.comb += [self.ahead_valid.eq(c1_valid), self.ahead_row.eq(c1.row)]
            if side:
                m.d.comb += self.ahead_side.eq(c1.side)
        if self.late_shape is not None:  # sampled by the modify in C2's cycle
            m.d.comb += modify.late.eq(self.late)
        if self.effect_shape is not None:
            m.d.comb += [self.effect.eq(modify.effect), self.effect_valid.eq(c2_valid)]
        with m.If(c2_valid):
            m.d.sync += done.eq(done + 1)

        # ---- C3: the new row (`new_r`) goes to the result buffer, the response, the write data
        # Only `new_r` takes `new` combinationally; the result buffer's and the FIFOs' write
        # data come from registers.
        c3_writes, c3_overflow, c3_tag = Signal(), Signal(), Signal(self.tag_bits)
        rsp = Signal(self.rsp.payload.shape())
        c2_writes = c2_valid & (c2.op != Op.READ)
        m.d.comb += [res_w.addr.eq(c3_idx), res_w.data.eq(new_r), res_w.en.eq(c3_valid)]
        m.d.sync += [c3_valid.eq(c2_valid), c3_idx.eq(done[:ib]), c3_writes.eq(c2_writes), c3_tag.eq(c2.tag),
                     c3_overflow.eq((c2.op == Op.ADD) & (modify.overflow & c2.lanes).any())]
        if side:  # the response echoes the command's side (the owner acts on both together)
            c3_side = Signal(self.side_shape)
            m.d.sync += c3_side.eq(c2.side)
            m.d.comb += rsp.side.eq(c3_side)
        m.d.comb += [
            rsp.data.eq(new_r), rsp.tag.eq(c3_tag), rsp.overflow.eq(c3_overflow), rsp_out.w_data.eq(rsp), rsp_out.w_en.eq(c3_valid),
            self.rsp.payload.eq(rsp_out.r_data), self.rsp.valid.eq(rsp_out.r_rdy),
            rsp_out.r_en.eq(self.rsp.ready),
        ]

        # ---- memory writes ------------------------------------------------------------------
        m.submodules.aw_bursts = aw_bursts = BurstCoalescer(
            ab, max_beats=burst_rows, page_beats=page_beats, depth=n, hold=self.burst_hold,
            hold_beats=n // 4)
        m.submodules.wdata = wdata = fifo.SyncFIFOBuffered(width=w, depth=n)
        m.d.comb += [aw_bursts.row.eq(c2.row), aw_bursts.push.eq(c2_writes), aw_bursts.more.eq(c2.more),
                     aw_bursts.row_next.eq(c1.row),  # c2's input: the next cycle's row
                     wdata.w_data.eq(new_r), wdata.w_en.eq(c3_writes)]
        if self.cmd_ready_copy:  # the copies' checks (never, if right): the skid's ready, the coalescers' row_next
            m.d.comb += self.copy_error.eq(cmd_in.copy_error | ar_bursts.next_error | aw_bursts.next_error
                                           | base_sel_error)

        # (cmd_ready_copy: both written through flip-flops, so AWREADY, from the upsizer across
        # the chip, reaches no LUT-RAM write enable: `mem_upsizer.aw_out.s__ready` ->
        # `store.wlen.queue.storage`, 8.85 ns at the Versa DRAM build's seed 2; the same heads in
        # the same cycles, RegisteredFIFO's `registered_write`, session 47)
        rw = self.cmd_ready_copy
        m.submodules.wlen = wlen = RegisteredFIFO(8, n, registered_write=rw)  # bursts AW sent, W not
        m.submodules.blen = blen = RegisteredFIFO(8, n, registered_write=rw)  # bursts AW sent, B not
        wb = aw_bursts.m.payload
        aw_go = aw_bursts.m.valid & axi.awready
        m.d.comb += [
            axi.awvalid.eq(aw_bursts.m.valid), aw_bursts.m.ready.eq(axi.awready),
            axi.awaddr.eq(self._address(wb.start)), axi.awlen.eq(self._beats_m1(wb.len_m1)),
            axi.awsize.eq((bw // 8).bit_length() - 1), axi.awburst.eq(AxiBurst.INCR),
            axi.awcache.eq(AXCACHE), axi.awid.eq(self.axi_id), axi.awlock.eq(0), axi.awprot.eq(0), axi.awqos.eq(0),
            wlen.w_data.eq(self._beats_m1(wb.len_m1)), wlen.w_en.eq(aw_go),
            blen.w_data.eq(wb.len_m1), blen.w_en.eq(aw_go),
        ]
        beat = Signal(8)
        last = beat == wlen.m.payload
        w_go = axi.wvalid & axi.wready
        # A row leaves a beat at a time, lowest first; the queue moves on with its last.
        w_beat = Signal(range(k)) if k > 1 else None
        m.d.comb += [
            axi.wvalid.eq(wlen.m.valid & wdata.r_rdy),
            axi.wdata.eq(wdata.r_data if k == 1 else wdata.r_data.word_select(w_beat, bw)),
            axi.wstrb.eq((1 << (bw // 8)) - 1), axi.wlast.eq(last),
            wdata.r_en.eq(w_go if k == 1 else w_go & (w_beat == k - 1)), wlen.m.ready.eq(w_go & last),
        ]
        if k > 1:
            with m.If(w_go):
                m.d.sync += w_beat.eq(w_beat + 1)
        with m.If(w_go):
            m.d.sync += beat.eq(Mux(last, 0, beat + 1))

        # ---- free ---------------------------------------------------------------------------
        # Completed entries queue in order with whether they wrote; the oldest leaves the table
        # at once if it only read, or with the next acknowledged write. The queue's head sits in
        # flip-flops, so `can_free` is two gates from flip-flops.
        m.submodules.freeq = free_head = RegisteredFIFO(1, n)
        m.d.comb += [free_head.w_data.eq(c2.op != Op.READ), free_head.w_en.eq(c2_valid)]
        acked = Signal(ib + 2)  # acknowledged writes not yet freed
        b_go = axi.bvalid & blen.m.valid
        m.d.comb += [axi.bready.eq(blen.m.valid), blen.m.ready.eq(b_go)]
        acked_any = Signal()  # == (acked != 0), a flip-flop
        free_writes = free_head.m.payload
        can_free = free_head.m.valid & (~free_writes | acked_any)
        acked_next = acked + Mux(b_go, blen.m.payload + 1, 0) - (can_free & free_writes)
        m.d.comb += [free_head.m.ready.eq(can_free), ix.release.eq(can_free)]
        m.d.sync += [acked.eq(acked_next), acked_any.eq(acked_next != 0)]

        # ---- errors -------------------------------------------------------------------------
        with m.If((axi.rvalid & (axi.rresp != AxiResp.OKAY)) | r_overflow
                  | (b_go & (axi.bresp != AxiResp.OKAY))):
            m.d.sync += self.mem_error.eq(1)
        return m
