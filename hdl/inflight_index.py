"""The DRAM read-modify-write engine's in-flight table and the index of its rows: which entry, if
any, holds a command's row (issue 16; ``hdl/dram_rmw_engine.py``, "Look up and accept";
docs/benchmarks.md, "The in-flight table's cost, and cutting it (session 32)").

The table is a ring of ``entries`` (a power of two) that holds each command from acceptance
(``accepted``) until the engine frees it (``release``, in order). A command's row's newest entry
in the table is its *live* entry; the engine forwards from it instead of reading the row again.
No CAM (a row compared with every entry cost ~25-38 LUT4 and 15-23 flip-flops per entry): the
row's *key* (:func:`index_key`, a bijection of the row) picks a *set* of ``index``, a block RAM of
2**``set_bits`` sets of ``WAYS`` (2) pointers {valid, entry}, and ``keys`` (LUT RAM, one word
per entry) holds the key of the command in each entry. A way is *owned* while its pointer leads
to an entry in the table whose key is of that set; **a set holds a row in at most one way**, and
a row in the table is in its set.

Stages (one command per cycle, moving together): L0 reads the set (addressed from ``cmd``'s
payload, the engine's skid-buffer register), L1 registers it, L2 reads both ways' keys and
compares them with the row's (registering flags: a register right behind ``keys`` would make it
a block RAM), L3 combines them with the ``LOOKUP_STAGES`` commands accepted last (``recent``,
each with the way it wrote: the reads may have missed them; a pointer whose entry one of them
took is stale); A decides from flip-flops. A *hit* is the way holding the row, if its entry is
still in the table; a miss takes the row's own way (a stale pointer to it) or the first way not
owned by another row. With both ways owned by other rows (a *conflict*) the command waits in A
until one owner leaves the table, then takes that way: a pointer never leads to a wrong row, and
a row missing from its set is in no entry. ``index`` and ``keys`` are written at acceptance.
A command is accepted from A when it has a way and the table an entry. Conflicts are the price:
a wait of up to an entry's lifetime, which needs three rows of one set in the table at once (rows
of one set: their keys' low ``set_bits`` equal; consecutive rows never are, and a slot's own
bits land on the set's high bits, above the first rows of the slot that a message fills).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["LOOKUP_STAGES", "SET_WAITS_BITS", "WAYS", "InflightIndex", "index_key"]

LOOKUP_STAGES = 4  # L1, L2, L3 and A: commands taken from ``cmd`` before they take a table entry
WAYS = 2  # pointers per set of the index
SET_WAITS_BITS = 32  # ``set_waits``: saturating


def index_key(row: Value, set_bits: int, row_bits: int) -> Value:
    """``row`` as the index's key: its low ``set_bits`` (the set) XOR the rest folded onto them
    bit-reversed, from the top of a slot's first rows down (a row is ``slot << row_bits | i``: the
    slot's bits in the set's low bits land above the few rows a message fills, where the folded
    ones would cancel them), then the rest as it is (a bijection: two rows are equal iff their
    keys are)."""
    hb = set_bits
    top = row_bits if 0 < row_bits < hb else hb  # fold into bits top-1 .. 0
    low = row[:hb]
    for i in range(hb, len(row), top):
        chunk = row[i:min(i + top, len(row))]
        low = low ^ Cat(Const(0, top - len(chunk)), *reversed([chunk[b] for b in range(len(chunk))]))
    return Cat(low[:hb], row[hb:])


def accepted_layout(cmd_shape: data.StructLayout, entries: int) -> data.StructLayout:
    """What A hands on with an accepted command: the command, the entry it took, ``hit`` /
    ``src``: its row's live entry (``hit`` only if that entry is still in the table), and the way
    of its set it wrote (for tests: the engine needs no more than the entries)."""
    ib = entries.bit_length() - 1
    return data.StructLayout({"cmd": cmd_shape, "entry": ib, "hit": 1, "src": ib, "way": range(WAYS)})


class InflightIndex(wiring.Component):
    """The in-flight table of ``entries`` and its two-way set-associative row index; see the
    module docstring.

    Parameters: ``cmd_shape`` (a ``StructLayout`` with a ``row`` field of ``address_bits``: the
    command, carried through the lookup stages), ``entries`` (a power of two), ``index_bits``
    (2**index_bits sets; ``set_bits`` = fewer if the rows are fewer), ``row_bits`` (a slot's rows:
    :func:`index_key`'s fold).
    Ports: ``cmd`` (in), ``accepted`` (out, always ready: :func:`accepted_layout`), ``release``
    (in: the oldest entry leaves the table this cycle), ``set_waits`` (out: the cycles a command
    waited in A for a conflict, as the lookup saw it, including those in which the table was
    full as well; saturating).
    """

    def __init__(self, cmd_shape: data.StructLayout, *, entries: int, index_bits: int, row_bits: int) -> None:
        if not isinstance(cmd_shape, data.StructLayout) or "row" not in cmd_shape.members:
            raise ValueError(f"cmd_shape must be a StructLayout with a row field, got {cmd_shape!r}")
        if entries < 2 or entries & (entries - 1):
            raise ValueError(f"entries must be a power of two from 2, got {entries}")
        self.cmd_shape, self.entries, self.row_bits = cmd_shape, entries, row_bits
        self.address_bits = Shape.cast(cmd_shape.members["row"]).width
        self.set_bits = min(index_bits, self.address_bits)
        super().__init__({"cmd": In(stream.Signature(cmd_shape)),
                          "accepted": Out(stream.Signature(accepted_layout(cmd_shape, entries), always_ready=True)),
                          "release": In(1), "set_waits": Out(SET_WAITS_BITS)})

    def key(self, row: Value) -> Value:
        """``row``'s key in this index (:func:`index_key`)."""
        return index_key(row, self.set_bits, self.row_bits)

    def elaborate(self, platform: object) -> Module:  # noqa: PLR0915 - one pipeline, read top-down
        m = Module()
        n, ab, ib, hb, nw = self.entries, self.address_bits, self.entries.bit_length() - 1, self.set_bits, WAYS
        cmd_shape = self.cmd_shape
        c = self.cmd.payload

        # every register named (Amaranth leaves a name in a tuple unset: `index.$signal$40` in an SDF)
        tail, free = Signal(ib + 1, name="tail"), Signal(ib + 1, name="free")
        used = Signal(ib + 1)  # entries in the table (tail - free), counted to register `full`
        full = Signal()  # == (used == n), a flip-flop
        ptr_layout = data.StructLayout({"entry": ib, "valid": 1})
        set_layout = data.ArrayLayout(ptr_layout, nw)
        m.submodules.index = index = memory.Memory(shape=set_layout, depth=1 << hb, init=[])
        ix_r, ix_w = index.read_port(), index.write_port()  # read not transparent: `recent` covers it
        m.submodules.keys = keys = memory.Memory(shape=ab, depth=n, init=[])
        key_rs, key_w = [keys.read_port(domain="comb") for _ in range(nw)], keys.write_port()

        def in_table(e):  # entry e is among the `used` entries from `free` on
            return (e - free[:ib])[:ib] < used

        accept = Signal()
        a_valid = Signal()
        adv = ~a_valid | accept  # the lookup stages move together
        m.d.comb += [self.cmd.ready.eq(adv), ix_r.addr.eq(self.key(c.row)[:hb]), ix_r.en.eq(adv)]
        l1_valid, l1_cmd, l1_key = Signal(name="l1_valid"), Signal(cmd_shape, name="l1_cmd"), Signal(ab, name="l1_key")
        l2_valid, l2_cmd, l2_key, l2_set = (Signal(name="l2_valid"), Signal(cmd_shape, name="l2_cmd"),
                                            Signal(ab, name="l2_key"), Signal(set_layout, name="l2_set"))
        l3_valid, l3_cmd, l3_key, l3_set = (Signal(name="l3_valid"), Signal(cmd_shape, name="l3_cmd"),
                                            Signal(ab, name="l3_key"), Signal(set_layout, name="l3_set"))
        # the key now in each way's entry against the row's: same set (low bits), same row (the rest);
        # flags, not the keys, are registered (a register right behind `keys` would make it a block RAM)
        l3_lo = [Signal(name=f"l3_lo{way}") for way in range(nw)]
        l3_hi = [Signal(name=f"l3_hi{way}") for way in range(nw)]
        a_cmd, a_key = Signal(cmd_shape, name="a_cmd"), Signal(ab, name="a_key")
        a_view = Signal(set_layout, name="a_view")  # the set as A sees it
        a_hit, a_src = Signal(name="a_hit"), Signal(ib, name="a_src")  # the row's newest entry, if still in the table
        a_way = Signal(range(nw))  # the way A writes: the row's, or the one it takes
        a_conf = Signal()  # every way owned by another row
        a_gone = Signal()  # ... and one owner has left the table since (registered while A waits)
        with m.If(adv):
            m.d.sync += [l1_valid.eq(self.cmd.valid), l1_cmd.eq(c), l1_key.eq(self.key(c.row)),
                         l2_valid.eq(l1_valid), l2_cmd.eq(l1_cmd), l2_key.eq(l1_key), l2_set.eq(ix_r.data),
                         l3_valid.eq(l2_valid), l3_cmd.eq(l2_cmd), l3_key.eq(l2_key), l3_set.eq(l2_set),
                         *(l3_lo[way].eq(key_rs[way].data[:hb] == l2_key[:hb]) for way in range(nw)),
                         *(l3_hi[way].eq(key_rs[way].data[hb:] == l2_key[hb:]) for way in range(nw)),
                         a_valid.eq(l3_valid), a_cmd.eq(l3_cmd), a_key.eq(l3_key), a_gone.eq(0)]
        m.d.comb += [key_rs[way].addr.eq(l2_set[way].entry) for way in range(nw)]

        # L3: the commands accepted after L0's read are the LOOKUP_STAGES (nr) accepted last, as
        # of A's cycle: with a command in A (it is accepted when this one moves) A's and
        # `recent`'s nr - 1 newest, else `recent`'s nr. Each way is the newest of them that wrote
        # it, else the pointer read, unless one of them took its entry since (then it is stale).
        # The lookup is built for both windows and `a_valid` picks the result (its fanout into
        # the window's multiplexers ran on through the whole lookup: the Versa DRAM build's
        # core path, 9.71 ns, docs/benchmarks.md, session 36).
        nr = LOOKUP_STAGES
        fields = {"valid": 1, "key": ab, "entry": ib, "way": range(nw)}
        recent = [{f: Signal(s, name=f"recent{j}_{f}") for f, s in fields.items()} for j in range(nr)]
        cands = [{"valid": Const(1), "key": a_key, "entry": tail[:ib], "way": a_way}, *recent]

        # The window's compares a stage early (L2 -> L3, session 37: `recent1_key` -> the compares
        # -> the priority chain -> A was the Versa DRAM build's core path, 9.1-9.75 ns): for each
        # candidate (A, recent[0..nr-1]) as it will be in L3's first cycle, whether it is valid in
        # L3's set (`c_in_set`), the same row (`c_same`), and holds the entry each way's pointer
        # leads to (`c_ret`). L3's candidates are those of now shifted by one if A is accepted now
        # (A becomes recent[0]; the command in L3 becomes A, its entry `tail` + 1), else now's. The
        # window changes only at an accept, which moves L3: the flags hold while L3 waits. Only the
        # ways (`a_way` may change while A waits) are read in L3.
        def flags(valid: Value, key: Value, entry: Value) -> tuple[Value, Value, list[Value]]:
            return (valid & (key[:hb] == l2_key[:hb]), key[hb:] == l2_key[hb:],
                    [valid & (entry == l2_set[way].entry) for way in range(nw)])

        now = [flags(cd["valid"], cd["key"], cd["entry"]) for cd in cands]
        a_next = (Const(1), l3_key[:hb] == l2_key[:hb], l3_key[hb:] == l2_key[hb:],
                  [Mux(accept, (tail[:ib] + 1)[:ib] == l2_set[way].entry, tail[:ib] == l2_set[way].entry)
                   for way in range(nw)])
        c_in_set = [Signal(name=f"c{k}_in_set") for k in range(nr + 1)]
        c_same = [Signal(name=f"c{k}_same") for k in range(nr + 1)]
        c_ret = [[Signal(name=f"c{k}_ret{way}") for way in range(nw)] for k in range(nr + 1)]
        with m.If(adv):
            m.d.sync += [c_in_set[0].eq(a_next[1]), c_same[0].eq(a_next[2]),
                         *(c_ret[0][way].eq(a_next[3][way]) for way in range(nw))]
            for k in range(1, nr + 1):
                (i0, s0, r0), (i1, s1, r1) = now[k], now[k - 1]
                m.d.sync += [c_in_set[k].eq(Mux(accept, i1, i0)), c_same[k].eq(Mux(accept, s1, s0)),
                             *(c_ret[k][way].eq(Mux(accept, r1[way], r0[way])) for way in range(nw))]
        for k, cd in enumerate(cands):
            cd.update(in_set=c_in_set[k], same=c_same[k], ret=c_ret[k])

        def lookup(window: list[dict]) -> tuple[Value, Value, Value, Value, Value]:
            """hit, src, the way to write, conflict and the set as A sees it, against ``window``."""
            in_set = [w["in_set"] for w in window]
            same = [w["same"] for w in window]
            hit, src, hway, found = Const(0), l3_set[0].entry, Const(0, range(nw)), Const(0)
            view, owned = [], []  # per way: pointer, owned by another row
            for way in range(nw):
                read = l3_set[way]
                retaken = Cat(*(w["ret"][way] for w in window)).any()
                p_in = read.valid & ~retaken & l3_lo[way]
                p_mine, p_owned = p_in & l3_hi[way], p_in & ~l3_hi[way] & in_table(read.entry)
                p = Cat(read.entry, read.valid & ~retaken)  # a pointer into an entry taken since: stale
                for j in reversed(range(nr)):  # the newest writer of this way (j = 0) last: it wins
                    wrote = in_set[j] & (window[j]["way"] == way)
                    p_mine, p_owned = Mux(wrote, same[j], p_mine), Mux(wrote, ~same[j], p_owned)
                    p = Mux(wrote, Cat(window[j]["entry"], Const(1, 1)), p)
                view.append(p)
                owned.append(p_owned)
                hit, src, hway = Mux(p_mine, 1, hit), Mux(p_mine, p[:ib], src), Mux(p_mine, way, hway)
                found = found | p_mine
            # the way to write: the row's own, else the first not owned by another row
            take = Const(nw - 1, range(nw))
            for way in reversed(range(nw)):
                take = Mux(~owned[way], way, take)
            conf = ~found & Cat(*owned).all()
            return hit, src, Mux(found, hway, take), conf, Cat(*view)

        looks = [lookup(cands[1:]), lookup(cands[:nr])]  # without / with a command in A
        with m.If(adv):
            m.d.sync += [reg.eq(Mux(a_valid, with_a, without_a))
                         for reg, without_a, with_a in zip((a_hit, a_src, a_way, a_conf, a_view), *looks, strict=True)]

        # A: a conflicting command waits until an owner leaves (no command is accepted meanwhile,
        # so an owner that left stays gone), then takes that way
        m.d.comb += accept.eq(a_valid & ~full & (~a_conf | a_gone))
        with m.If(a_valid & a_conf & ~a_gone & (self.set_waits != (1 << SET_WAITS_BITS) - 1)):
            m.d.sync += self.set_waits.eq(self.set_waits + 1)
        with m.If(a_valid & a_conf & ~accept):
            for way in reversed(range(nw)):
                with m.If(~in_table(a_view[way].entry)):
                    m.d.sync += [a_gone.eq(1), a_way.eq(way)]
        # the command's way leads to the entry it takes; another way of the set that leads there
        # (a stale pointer: the entry was free) is cleared, as L3 clears a pointer into an entry
        # the window took (else the set writes it back): two ways leading to one row may lead to
        # two of its entries, and the lookup may take the older one (forward a stale row, or
        # miss a row in the table once that entry is freed)
        new_set = Signal(set_layout)
        m.d.comb += new_set.eq(a_view)
        for way in range(nw):
            with m.If(a_view[way].entry == tail[:ib]):
                m.d.comb += new_set[way].valid.eq(0)
        with m.Switch(a_way):
            for way in range(nw):
                with m.Case(way):
                    m.d.comb += [new_set[way].entry.eq(tail[:ib]), new_set[way].valid.eq(1)]
        m.d.comb += [ix_w.addr.eq(a_key[:hb]), ix_w.data.eq(new_set), ix_w.en.eq(accept),
                     key_w.addr.eq(tail[:ib]), key_w.data.eq(a_key), key_w.en.eq(accept)]
        with m.If(accept):
            m.d.sync += [recent[0][f].eq(v) for f, v in (("valid", 1), ("key", a_key), ("entry", tail[:ib]),
                                                         ("way", a_way))]
            for j in range(1, nr):
                m.d.sync += [recent[j][f].eq(recent[j - 1][f]) for f in fields]

        # the accepted command: a hit forwards only from an entry still in the table (a freed
        # one's row is read again)
        out = self.accepted.payload
        m.d.comb += [self.accepted.valid.eq(accept), out.cmd.eq(a_cmd), out.entry.eq(tail[:ib]),
                     out.hit.eq(a_hit & in_table(a_src)), out.src.eq(a_src), out.way.eq(a_way)]

        # ---- table update -------------------------------------------------------------------
        with m.If(self.release):
            m.d.sync += free.eq(free + 1)
        m.d.sync += [used.eq(used + accept - self.release),
                     full.eq(Mux(accept, used + 1, used) - self.release == n)]
        with m.If(accept):
            m.d.sync += tail.eq(tail + 1)
        return m
