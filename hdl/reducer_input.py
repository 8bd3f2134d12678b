"""The reducer's input stages I and P (docs/reducer.md, "Input stages I and P").

Stage I: a skid buffer (``hdl/skid_buffer.py``: registered ready, registered output) taking
``s_msg`` and computing each beat's slot (for every job in parallel, then selected by the job),
so that the tag read the decision issues for the beat P loads has a flip-flop as its address.
Stage P: the same kind of skid buffer holding each beat with everything that depends only on its
header and the configuration, decoded on the way in, so the decision's stage 0 starts from
flip-flops. The decision reads the registers directly (``p``/``p_valid``, the skid register
``p_skid``/``p_skid_valid``, I's output ``i_out``/``i_valid``): only flip-flops drive them.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from wanreduce import wire

from .layouts import (
    AggHeaderLayout,
    JobCfgLayout,
    lanes,
    message_beat_layout,
    message_stream,
    payload_beats,
)
from .reducer_config import clamp_log2_window, config_signature, region_of, select_job_entry
from .reducer_layouts import bits_for
from .skid_buffer import SkidBuffer

__all__ = ["START_AT_P_MAX_SLOTS", "InputStages", "decoded_beat_layout", "input_beat_layout", "key_layout"]

# Up to this many slots the reducer's stage P computes the start slot (the slot of chunk + 1) from
# I's output register (pinned); above it stage I computes it at its input beside the slot and
# registers it (``InputStages(start_at_i=True)``), so P's 128 compares for ``lm`` start from
# flip-flops: at S 128 the start's two carry chains, a 3.2 ns hop and the compares into P were
# 10.9-12.1 ns placed (docs/benchmarks.md, sessions 37-38).
START_AT_P_MAX_SLOTS = 16


def _region_slot(base: Value, chunk: Value, wmask: Value, sb: int) -> Value:
    """The slot of ``chunk`` in its job's region: ``(base + (chunk & wmask)) mod S`` (``wmask``
    the job's registered window - 1; ``chunk`` already cut to ``sb`` bits)."""
    return (base[:sb] + (chunk & wmask))[:sb]


def _beat_bits(elements: int, width: int) -> int:
    return max(1, (payload_beats(elements, width) - 1).bit_length())


def input_beat_layout(width: int, slots: int, elements: int, start: bool = False) -> data.StructLayout:
    """A beat in stage I: the beat, its index in the message, its slot (``start``: and the start
    slot, the slot of chunk + 1)."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"beat": message_beat_layout(width), "idx": _beat_bits(elements, width),
                              "slot": sb, **({"start": sb} if start else {})})


def decoded_beat_layout(width: int, slots: int, elements: int, vectors: bool = True,
                        records: bool = False) -> data.StructLayout:
    """A beat in stage P with its decode (see the field comments in ``InputStages``);
    ``vectors``: with the S-bit ``region``, ``oh`` and ``lm`` of the reducer's S-wide release
    scan (not with its pending words); ``records``: with the beat's job's clamped
    ``log2_window`` and the release mode ``in_order`` (the record path's ``DecisionConfig``,
    hdl/record_request.py)."""
    S, sb = slots, (slots - 1).bit_length()
    vec = {"region": S, "oh": S, "lm": S} if vectors else {}
    rec = {"log2_window": range(sb + 1), "in_order": 1} if records else {}
    return data.StructLayout({
        "beat": message_beat_layout(width), "idx": _beat_bits(elements, width), "slot": sb,
        "start": sb, "wmask": sb, **vec, "members": 32, "bit": 32,
        "unconf": 1, "nonmem": 1, "cwrite": 1, "chunk_p1": 32, "cw": 32, "nbm1": 17, **rec,
    })


def key_layout(slots: int) -> data.StructLayout:
    """(``InputStages(key_copies=n)``) a copy of a P beat's job, chunk, ``cw`` and slot."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"job": AggHeaderLayout["job_id"].shape, "chunk": 32, "cw": 32, "slot": sb})


def _key_of(d: data.View) -> Value:
    """A decoded beat's key (:func:`key_layout`) as a value."""
    return Cat(d.beat.hdr.job_id, d.beat.hdr.chunk, d.cw, d.slot)


class InputStages(wiring.Component):
    """Stages I and P (see the module docstring).

    ``s_msg`` moves only while ``open`` (a window reset closes it); P's beat leaves when
    ``take``. ``in_msg``: a non-last beat of a message has been accepted (a window reset waits
    for the message's end); ``empty``: no beat in I or P. ``vectors``: decode the S-bit
    ``region``, ``oh`` and ``lm``; ``records``: register the job's ``log2_window`` and
    ``in_order`` into P too, for the record path's requests (:func:`decoded_beat_layout`; off in
    the reducer, whose RTL is then unchanged). ``start_at_i``: the start slot computed at I's
    input with the slot, from the same configuration, and registered in I (``START_AT_P_MAX_SLOTS``).
    ``region_at_cfg``: the region selected by the job from the configuration's registered
    per-job regions (``cfg.region``, ``REGION_AT_CONFIG_MAX_SLOTS``), not decoded in P; P takes
    no beat from I while its job's region is stale (``cfg.region_stale``: the cycle after the
    job's base or window was written; the beat waits in I a cycle and decodes as it would have).
    ``ready_copy``: stage I's skid register on its own copy of I's ready
    (``SkidBuffer(ready_copy=True)``, the DRAM reducer: ``stage_i.s__ready`` -> ``skid_data``,
    8.7 ns, docs/benchmarks.md session 42); its ``copy_error`` out (0 without it).
    ``slot_copy``: ``p_load_slot``, the slot of the beat P would load (its skid register's if that
    holds a beat, else I's output's), selected by a flip-flop copy of P's ``skid_valid`` that
    drives nothing else (the DRAM reducer's second tag read port, ``tag_rd_l``: from
    ``stage_p.skid_valid``, which selects P's ~250 output register bits, 8.94 ns placed,
    docs/benchmarks.md session 44). The copy resets to 1 (``skid_valid`` to 0: yosys does not
    merge them); in the cycle after a reset I is empty, so P loads no beat and the slot read for
    it is not used; from the next cycle on the two are equal (``copy_error``, ORed with the
    ready copy's: they differ while P's output register is full).
    ``early_decode``: the configuration look-ups of P's decode that were its deepest paths
    (the Versa DRAM build's ``inputs.m__payload`` from ``dec_in``, 9.54 ns placed, and
    ``p_skid.cwrite``: the group's member bit, a 128-way select, into ``nonmem`` / ``cwrite``;
    the job's window into ``cw``; docs/benchmarks.md session 44) made a cycle ahead, for the
    beat I's output register holds next cycle (``e_col``: each group's member bit of the
    sender, ``sender_ok`` included; ``e_cw``: chunk - 2**lw), from the configuration now; P
    selects ``e_col`` by the group and reads ``e_cw``. Exact: both are right in a cycle whose
    configuration equals the last cycle's; ``cfg_changed`` (a flip-flop: some group's bitmap or
    job's clamped window is written a new value at this edge, from ``job_cfg_in`` /
    ``group_bitmap_in``, what ``ReducerConfig`` registers) marks the others, and P takes no beat
    from I in them (the beat waits in I a cycle and decodes as it would have, the
    ``region_at_cfg`` hold). Inputs ``job_cfg_in`` / ``group_bitmap_in`` with it.
    ``cfg_strobe`` (with ``early_decode``): ``cfg_changed`` loads the input ``cfg_written``
    instead of that 128+-bit compare of the control block's registers, across the chip, with
    the configuration's copies (``group_bitmap`` -> ``cfg_changed``, 8.86 ns, main db90a43
    placed at seed 2; docs/benchmarks.md session 45). ``cfg_written`` is high in every cycle in
    which ``group_bitmap_in`` / ``job_cfg_in`` differ from the last cycle's (the control block's
    write strobe of those registers, ``ControlBlock.cfg_written``; it may be high in others: a
    hold a cycle longer, still exact). The compare stays as ``cfg_changed_cmp`` for
    ``copy_error`` alone (``cfg_changed_cmp & ~cfg_changed``: a change the strobe missed); no
    hardware reads it in the core.
    With ``early_decode`` stage I's skid buffer also keeps three flip-flop copies of its
    ``skid_valid`` (``SkidBuffer(valid_copies=1, mux_copies=2)``, reset and loaded like it, each
    compared in ``copy_error``): one selects the look-ahead's source (``e_col`` / ``e_cw``), two
    select I's output register's halves, so ``skid_valid`` drives neither (``stage_i.skid_valid``
    -> ``e_col``, 11.71 ns with an 8.7 ns route, and -> I's output register (``dec_in``), 9.18 ns,
    main 27983de at seed 1; docs/benchmarks.md session 46); the three member-bit look-ups are
    kept apart (``col_s`` / ``col_k`` / ``col_o``, like ``cw_*``) so the select is their last level.
    ``key_copies=n`` (the DRAM reducer: 2): ``p_key``, ``n`` flip-flop copies of P's output
    register's job, chunk, ``cw`` and slot (:func:`key_layout`), one per consumer group (the
    reducer's tag checks, ``ck_pre``, with the tag read at P's slot, and head checks, ``hc_r``), so P's ~250-bit register does not drive
    them across the chip (`inputs.m__payload` -> a ~3.5 ns route -> the tag sources' checks ->
    `ck_pre.same` / `ck_pre.older`, 8.6-9.14 ns at main 3a66ba7's seeds 1 / 3 / 5 / 6,
    -> `hc_r.at_head` 8.05 at seed 3; docs/benchmarks.md session 47). Copy i loads when P's
    output register does (``~m.valid | m.ready``) from the skid register or P's input, selected
    by P's ``skid_valid`` copy i (``SkidBuffer(valid_copies=n)``, loaded like it: a select of its
    own, so yosys does not merge the copy into P's register): the same value as P's fields in
    every cycle. ``copy_error``: a select copy differs from ``skid_valid``, or a key from P's
    fields while P holds a beat (never, if right).
    """

    def __init__(self, data_width: int, *, slots: int, elements: int, groups: int, jobs: int,
                 vectors: bool = True, records: bool = False, start_at_i: bool = False,
                 region_at_cfg: bool = False, ready_copy: bool = False, slot_copy: bool = False,
                 early_decode: bool = False, cfg_strobe: bool = False, key_copies: int = 0) -> None:
        self.data_width, self.slots, self.elements = data_width, slots, elements
        self.groups, self.jobs, self.vectors, self.records = groups, jobs, vectors, records
        self.start_at_i, self.region_at_cfg, self.ready_copy = start_at_i, region_at_cfg, bool(ready_copy)
        self.slot_copy, self.early_decode = bool(slot_copy), bool(early_decode)
        self.cfg_strobe, self.key_copies = bool(cfg_strobe), int(key_copies)
        if self.key_copies < 0:
            raise ValueError(f"key_copies >= 0, got {key_copies}")
        if self.cfg_strobe and not self.early_decode:
            raise ValueError("cfg_strobe is early_decode's hold")
        self.has_copy_error = self.ready_copy or self.slot_copy or self.early_decode or bool(self.key_copies)
        self.in_layout = input_beat_layout(data_width, slots, elements, start=start_at_i)
        self.dec_layout = decoded_beat_layout(data_width, slots, elements, vectors, records)
        super().__init__({
            "s_msg": In(message_stream(data_width)),
            "open": In(1),
            "take": In(1),
            "cfg": In(config_signature(slots=slots, groups=groups, jobs=jobs, regions=region_at_cfg)),
            **({"job_cfg_in": In(data.ArrayLayout(JobCfgLayout, jobs)),
                "group_bitmap_in": In(data.ArrayLayout(32, groups))} if self.early_decode else {}),
            **({"cfg_written": In(1)} if self.cfg_strobe else {}),
            "i_out": Out(self.in_layout),
            "i_valid": Out(1),
            "p": Out(self.dec_layout),
            "p_valid": Out(1),
            "p_skid": Out(self.dec_layout),
            "p_skid_valid": Out(1),
            "in_msg": Out(1),
            "empty": Out(1),
            **({"p_load_slot": Out((slots - 1).bit_length())} if self.slot_copy else {}),
            **({"p_key": Out(data.ArrayLayout(key_layout(slots), self.key_copies))} if self.key_copies else {}),
            **({"copy_error": Out(1)} if self.has_copy_error else {}),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        S, sb, jb, gb = self.slots, (self.slots - 1).bit_length(), bits_for(self.jobs), bits_for(self.groups)
        L = lanes(self.data_width)
        cf = self.cfg
        jc, wm_j = cf.job_cfg, cf.window_mask
        s = self.s_msg
        beat_cnt = Signal(_beat_bits(self.elements, self.data_width))
        # stage I (its output i_d feeds P's decode)
        # (early_decode) skid_valid's copies: one for the look-ahead's select, two for I's output
        # register's load select (SkidBuffer valid_copies / mux_copies; class docstring)
        m.submodules.stage_i = stage_i = SkidBuffer(self.in_layout, ready_copy=self.ready_copy,
                                                    **({"valid_copies": 1, "mux_copies": 2} if self.early_decode else {}))
        copy_err = stage_i.copy_error if self.ready_copy or self.early_decode else Const(0, 1)
        i_v, i_d = stage_i.m.valid, stage_i.m.payload  # its output register
        i_rdy = stage_i.s.ready  # == ~skid_valid, as its own flip-flop
        i_in = Signal(self.in_layout)
        hs = s.payload.hdr
        slot_s = Signal(sb)  # the slot, for every job in parallel, then selected by the job
        start_s = Signal(sb)  # (start_at_i) the start slot, likewise
        with m.Switch(hs.job_id[:jb]):
            for j in range(self.jobs):
                with m.Case(j):
                    m.d.comb += slot_s.eq(_region_slot(jc[j].base, hs.chunk[:sb], wm_j[j], sb))
                    if self.start_at_i:
                        m.d.comb += start_s.eq(_region_slot(jc[j].base, hs.chunk[:sb] + 1, wm_j[j], sb))
        m.d.comb += [i_in.beat.eq(s.payload), i_in.idx.eq(Mux(s.payload.first, 0, beat_cnt)),
                     i_in.slot.eq(slot_s), *([i_in.start.eq(start_s)] if self.start_at_i else [])]
        hi = i_d.beat.hdr
        cfg_i = select_job_entry(m, jc, self.jobs, hi.job_id[:jb], "cfg_i")
        lw_i = Signal(range(sb + 1))
        wm_i = Signal(sb)
        with m.Switch(hi.job_id[:jb]):
            for j in range(self.jobs):
                with m.Case(j):
                    m.d.comb += [lw_i.eq(cf.log2_window[j]), wm_i.eq(wm_j[j])]
        members_i = Signal(32)
        mem_i = Signal()  # the sender is a member
        single_i = Signal()
        nz_i = Signal()
        sender_ok = hi.sender_id < wire.MAX_SENDERS
        ok_mem = Signal() if self.early_decode else None  # (early_decode) sender_ok & mem_i
        if self.early_decode:
            e_col, e_cw, cfg_chg, cfg_miss = self._look_ahead(m, stage_i, s.payload.hdr, i_d.beat.hdr)
            copy_err = copy_err | cfg_miss
        with m.Switch(hi.group_id[:gb]):
            for g in range(self.groups):
                with m.Case(g):
                    gm = cf.members[g]
                    m.d.comb += [members_i.eq(gm), mem_i.eq(gm.bit_select(hi.sender_id[:5], 1)),
                                 single_i.eq(cf.single[g]), nz_i.eq(cf.configured[g])]
                    if self.early_decode:  # the group's member bit of the sender, looked up a cycle ahead
                        m.d.comb += ok_mem.eq(e_col[g])
        bit_i = Signal(32)
        m.d.comb += bit_i.eq(Mux(sender_ok, Const(1, 32) << hi.sender_id[:5], 0))
        if not self.early_decode:
            ok_mem = sender_ok & mem_i
        cw_i = e_cw if self.early_decode else hi.chunk - (Const(1, sb + 1) << lw_i)  # chunk - 2**lw
        dec_in = Signal(self.dec_layout)
        stale_i = Const(0, 1)  # (region_at_cfg) the beat's job's region is a cycle behind: hold it in I
        if self.region_at_cfg:  # the job's registered region (a job outside the table: cfg_i's zeros)
            region_i = Signal(S, name="region_i")
            stale_i = Signal(name="region_stale_i")
            with m.Switch(hi.job_id[:jb]):
                for j in range(self.jobs):
                    with m.Case(j):
                        m.d.comb += [region_i.eq(cf.region[j]), stale_i.eq(cf.region_stale[j])]
                with m.Default():
                    m.d.comb += region_i.eq(region_of(Const(0, sb), Const(0, 1), S))
        start_i = Signal(sb)
        if self.start_at_i:  # registered in I
            m.d.comb += start_i.eq(i_d.start)
        else:
            m.d.comb += start_i.eq(_region_slot(cfg_i.base, hi.chunk[:sb] + 1, wm_i, sb))
        m.d.comb += [
            dec_in.beat.eq(i_d.beat),
            dec_in.idx.eq(i_d.idx),
            dec_in.slot.eq(i_d.slot),
            # for the in-order release scan: the slot of chunk + 1 and the job's region
            dec_in.start.eq(start_i),
            # the slot one-hot and the slots below the start (thermometer), decoded here so the
            # release scan in stage 0 starts from flip-flops
            *([dec_in.oh.eq(Const(1, S) << i_d.slot),
               dec_in.lm.eq(Cat(*[start_i > i for i in range(S)]))] if self.vectors else []),
            dec_in.wmask.eq(wm_i),
            # slot i is in the job's region: (i - base) mod S < 2**lw
            *([dec_in.region.eq(region_i if self.region_at_cfg else region_of(cfg_i.base, lw_i, S))]
              if self.vectors else []),
            dec_in.members.eq(members_i),
            dec_in.bit.eq(bit_i),
            dec_in.unconf.eq(~((hi.job_id < self.jobs) & cfg_i.enable & (hi.group_id < self.groups)
                               & nz_i)),
            # (members & bit) == 0 and bit == members, without 32-bit reductions (cwrite only
            # matters for a configured group, members != 0)
            dec_in.nonmem.eq(~ok_mem),
            dec_in.cwrite.eq(ok_mem & single_i),  # a first contribution completes the chunk
            dec_in.chunk_p1.eq(hi.chunk + 1),
            # window check without a shifter: chunk - head >= 2**lw <=> (chunk - 2**lw) - head >= 0
            dec_in.cw.eq(cw_i),
            dec_in.nbm1.eq(((hi.element_count + L - 1) >> (L.bit_length() - 1)) - 1),
            # the record path's DecisionConfig: the job's window (clamped) and the release mode
            *([dec_in.log2_window.eq(lw_i), dec_in.in_order.eq(cf.in_order)] if self.records else []),
        ]
        held = self.region_at_cfg or self.early_decode  # P takes no beat from I while stale_i
        if self.early_decode:  # ... nor in a cycle after a configuration change
            stale_i = stale_i | cfg_chg if self.region_at_cfg else cfg_chg
        # (key_copies) skid_valid's copies, one per key copy's load select (class docstring)
        m.submodules.stage_p = stage_p = SkidBuffer(self.dec_layout, valid_copies=self.key_copies)
        accept = Signal()  # s_msg transfer
        m.d.comb += [
            s.ready.eq(i_rdy & self.open),
            accept.eq(s.valid & s.ready),
            stage_i.s.valid.eq(s.valid & self.open),
            stage_i.s.payload.eq(i_in),
            # I -> P (P's input: I's output register decoded), P -> stage 1 when it takes p
            stage_p.s.valid.eq(i_v & ~stale_i if held else i_v),
            stage_p.s.payload.eq(dec_in),
            stage_i.m.ready.eq(stage_p.s.ready & ~stale_i if held else stage_p.s.ready),
            stage_p.m.ready.eq(self.take),
            self.i_out.eq(i_d), self.i_valid.eq(i_v),
            self.p.eq(stage_p.m.payload), self.p_valid.eq(stage_p.m.valid),
            self.p_skid.eq(stage_p.skid), self.p_skid_valid.eq(stage_p.skid_valid),
            self.empty.eq(~i_v & ~stage_i.skid_valid & ~stage_p.m.valid & ~stage_p.skid_valid),
        ]
        if self.slot_copy:  # P's skid_valid, its next value as SkidBuffer works it out, reset to 1
            ps_vc = Signal(init=1, name="p_skid_valid_c")
            p_free = ~stage_p.m.valid | stage_p.m.ready  # P's output register loads
            m.d.sync += ps_vc.eq(~p_free & (stage_p.skid_valid | (stage_p.s.valid & stage_p.s.ready)))
            m.d.comb += self.p_load_slot.eq(Mux(ps_vc, stage_p.skid.slot, i_d.slot))
            copy_err = copy_err | (stage_p.m.valid & (ps_vc != stage_p.skid_valid))
        if self.key_copies:  # P's job / chunk / cw copies, loaded with P's output register
            p_out, p_sk = stage_p.m.payload, stage_p.skid
            with m.If(~stage_p.m.valid | stage_p.m.ready):
                for i in range(self.key_copies):
                    m.d.sync += self.p_key[i].eq(Mux(stage_p.skid_valid_c[i], _key_of(p_sk), _key_of(dec_in)))
            copy_err = copy_err | stage_p.copy_error | (stage_p.m.valid & Cat(
                *(self.p_key[i].as_value() != _key_of(p_out) for i in range(self.key_copies))).any())
        if self.has_copy_error:
            m.d.comb += self.copy_error.eq(copy_err)
        with m.If(accept):
            m.d.sync += [beat_cnt.eq(i_in.idx + 1), self.in_msg.eq(~s.payload.last)]
        return m

    def _look_ahead(self, m: Module, stage_i: SkidBuffer, hs: data.View,
                    hi: data.View) -> tuple[Value, Value, Value, Value]:
        """(early_decode) ``e_col`` / ``e_cw`` for the beat in I's output register next cycle (its
        skid register's, the input's, or its own, as it loads), ``cfg_changed`` and (cfg_strobe)
        the strobe's miss for ``copy_error``, else 0 (class docstring)."""
        sb, jb, G = (self.slots - 1).bit_length(), bits_for(self.jobs), self.groups
        cf = self.cfg

        def look(h: data.View, tag: str) -> tuple[Value, Value]:
            lw = select_job_entry(m, cf.log2_window, self.jobs, h.job_id[:jb], f"lw_{tag}")
            ok = h.sender_id < wire.MAX_SENDERS
            col = Signal(G, name=f"col_{tag}", attrs={"keep": 1})  # kept: opt_share would look up
            m.d.comb += col.eq(Cat(*[cf.members[g].bit_select(h.sender_id[:5], 1) & ok  # after the select
                                     for g in range(G)]))
            cw = Signal(32, name=f"cw_{tag}", attrs={"keep": 1})  # kept: yosys' opt_share would
            m.d.comb += cw.eq(h.chunk - (Const(1, sb + 1) << lw))  # subtract after the source's select
            return col, cw

        e_col, e_cw = Signal(G, name="e_col"), Signal(32, name="e_cw")
        (col_s, cw_s), (col_k, cw_k), (col_o, cw_o) = look(hs, "s"), look(stage_i.skid.beat.hdr, "k"), look(hi, "o")
        with m.If(~stage_i.m.valid | stage_i.m.ready):  # I's output register loads
            with m.If(stage_i.skid_valid_c[0]):  # skid_valid's copy for this select alone
                m.d.sync += [e_col.eq(col_k), e_cw.eq(cw_k)]
            with m.Else():
                m.d.sync += [e_col.eq(col_s), e_cw.eq(cw_s)]
        with m.Else():
            m.d.sync += [e_col.eq(col_o), e_cw.eq(cw_o)]
        cfg_chg = Signal(name="cfg_changed")
        lw_next = [clamp_log2_window(self.job_cfg_in[j].log2_window, sb) for j in range(self.jobs)]
        chg_next = Cat(*[self.group_bitmap_in[g] != cf.members[g] for g in range(G)],
                       *[lw_next[j] != cf.log2_window[j] for j in range(self.jobs)]).any()
        if not self.cfg_strobe:
            m.d.sync += cfg_chg.eq(chg_next)
            return e_col, e_cw, cfg_chg, Const(0, 1)
        cfg_cmp = Signal(name="cfg_changed_cmp")  # what cfg_changed stands for, checked only
        m.d.sync += [cfg_chg.eq(self.cfg_written), cfg_cmp.eq(chg_next)]
        return e_col, e_cw, cfg_chg, cfg_cmp & ~cfg_chg
