"""Control and status: the register file of the core, reached by CONTROL messages.

CONTROL messages arrive only on the host-facing port (the network ports drop them in their
parsers). Each message carries ``element_count // 2`` operations of two 32-bit words,
``word0 = WRITE(bit 31) | address``, ``word1 = value`` (``wanreduce.wire``); the block executes
them in order, one every three cycles (a JOBj_PROBE_BITMAP read waits for the reducer's
``probe_ok``, about three more), and answers with a CONTROL_REPLY message whose ``word1`` holds each
register's value after the operation. Registers and their reset values come from
``wanreduce.regs`` (one definition for the RTL, the host and docs/registers.md).

Status counters are free-running 32-bit counters of the event strobes of the parsers
(frames in, drops by reason, per port), of the reducer (one outcome per contribution) and of the
egress (results out).
"""

from __future__ import annotations

import operator
from functools import reduce

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from wanreduce import regs, wire
from wanreduce.hdl.layouts import JobCfgLayout, ResetLayout, lanes, message_stream
from wanreduce.hdl.params import check_slot_memory
from wanreduce.model import Drop, Outcome

__all__ = ["ControlBlock"]


def record_counters_layout() -> data.StructLayout:
    """The record path's counters as the control block reads them (``wanreduce.regs``'
    ``RECORD_COUNTERS``, 32 bits each)."""
    return data.StructLayout({name: 32 for name in regs.RECORD_COUNTERS})


class ControlBlock(wiring.Component):
    """Register file + status counters + CONTROL message engine.

    Parameters: ``data_width`` (message stream width), ``ports`` (network ports; the host port's
    counters follow at index ``ports``), ``slots``, ``elements``, ``groups``, ``jobs``,
    ``slot_memory`` (the range of ``slots``). ``mem_error`` (STATUS.MEM_ERROR) and
    ``result_withheld`` (RESULTS_WITHHELD) come from a DRAM slot store; 0 otherwise. With
    ``slot_memory="records"`` also ``record_error`` (STATUS.RECORD_ERROR, sticky in the record
    path) and ``record_counters`` (the RECORD_ registers); the ports and the registers exist only
    there (the other cores' RTL unchanged). With ``slot_memory="dram"`` a PROBE_BITMAP read waits
    for ``probe_ok`` through a flip-flop (``probe_ok_r``) and reads the answer it vouched for
    (``probe_bm_r``): the FSM's next state reads no probe compare, one cycle more per such read
    (``registered_probe``; the other cores' RTL unchanged). Also with ``"dram"`` the read mux's
    selects are per group of 8 registers (``split_read``): each group's 3-bit select
    (``read_sel_r{g}``) is its own flip-flop, so no select net reaches every group (``ridx`` ->
    ``read_group2``, 10.34 ns at session 41's seed 3, docs/benchmarks.md session 42). The address
    is compared with every readable register's as it is loaded (``read_match``, one flip-flop per
    register, in place of ``addr_r`` / ``page_r``), and the selects and one hit flag per group (``read_hit{g}``)
    load ORs of their group's match flags: no decode from the registered address (``addr_r`` ->
    ``read_gidx`` / ``read_sel_r5``, 8.12-8.85 ns at session 42's seeds 1-3). A group's
    ``read_group`` register is 0 unless its hit flag is set and the reply ORs them: no group
    index (``read_gidx`` -> the reply, 8.29 ns at seed 2; docs/benchmarks.md session 43). The
    same cycles as the other cores (a read's value from the same registers, the same states).
    Also with ``"dram"`` the output ``cfg_written`` (``cfg_strobe``): a flip-flop, high in each
    cycle after EXEC wrote a GROUP or JOB_CFG register (the first cycle ``group_bitmap`` /
    ``job_cfg`` show the written value; a write of the value they hold too). The reducer's early
    decode holds a beat on it instead of comparing those 128+ bits with its registered copies
    (``InputStages(cfg_strobe=True)``, docs/benchmarks.md session 45). Also with ``"dram"``
    ``m_msg.valid`` is a flip-flop (``reply_valid``: high exactly in the REPLY state, set on the
    transition into it, cleared on the reply's take; ``reply_reg``), not a decode of the FSM state:
    the same cycles.
    Also with ``"dram"`` (``exec_regs``) the FSM's decisions are flip-flops, each equal in every
    cycle to the state decode it replaces: ``idle_r`` (== IDLE: ``s_msg.ready``, and with
    ``s_msg.valid`` the enable of IDLE's loads of ``beat`` / ``words_left`` / ``ops_done`` ...),
    ``wr_go`` (== EXEC's write cycle: EXEC & ~ops_done & ~head_write & ~probe_rd, the register
    writes' enable), ``reset_valid`` (== EXEC & ~ops_done & head_write: ``reset.valid``),
    ``probe_wait`` (== EXEC & ~ops_done & ~head_write & probe_rd), ``exec_go`` (== EXEC & (wr_go |
    probe_ok_r)), ``load_r`` / ``read_r`` / ``rb_r`` (== LOAD / READ / READBACK). LOAD and
    READBACK (which always go to EXEC) load the EXEC flags from the operation they load (and
    ``ops_done``'s next value); EXEC clears ``reset_valid`` on ``reset.ready`` and ``probe_wait``
    on ``probe_ok_r``, the cycles EXEC leaves. The states' loads and writes are enabled by the
    flags (``fsm_state`` feeds only its own next value, ``reply_valid`` and the EXEC -> REPLY
    case), and the next state reads no ``head_write`` / ``probe_rd`` / ``probe_ok_r``: the same
    cycles. LOAD and READBACK load those flags (and ``head_write`` / ``job_index`` / ``probe_rd``
    / ``probe_job``) from flip-flops decoded a cycle earlier, not from the held beat's address:
    the first operation's (``head_f{j}`` / ``probe_f{j}`` / ``head_f_any`` / ``probe_f_any``)
    from ``s_msg`` as IDLE takes the beat, the next one's (``head_n*`` / ``probe_n*``) every cycle
    from the beat's second 64 bits (which change only in IDLE and READBACK: in READBACK they hold
    the operation it loads), READBACK's ``ops_done`` value (``done_rb``) every cycle from
    ``words_left`` / ``op`` (the same argument): the same values in the same cycles (``beat.data``
    -> ``exec_go``, 8.33 ns at b7ad058's seed 1; docs/benchmarks.md session 48).
    """

    def __init__(
        self, data_width: int, *, ports: int, slots: int, elements: int, groups: int, jobs: int,
        slot_memory: str = "onchip",
    ) -> None:
        check_slot_memory(slot_memory, width=data_width, ports=ports, slots=slots, elements=elements,
                          groups=groups, jobs=jobs)
        self.records = slot_memory == "records"
        # the probe's key compare (probe_ok, in the reducer) off the FSM's next state: the DRAM
        # build's core clock (docs/benchmarks.md, session 38)
        self.registered_probe = slot_memory == "dram"
        # the read mux's select per group of 8 registers (class docstring): the DRAM build's core
        # clock (docs/benchmarks.md, session 42)
        self.split_read = slot_memory == "dram"
        # a GROUP / JOB_CFG write as a strobe (class docstring): the DRAM build's core clock
        # (`group_bitmap` -> the reducer's `inputs.cfg_changed`, 8.86 ns, main db90a43's seed 2)
        self.cfg_strobe = slot_memory == "dram"
        # the reply's valid a flip-flop (``reply_valid``, set on entering REPLY, cleared on its
        # take), not the FSM state's decode: the DRAM build's core clock (`control.fsm_state` ->
        # the egress merger's select -> the result gate's `valid_r`, 8.10 ns at 27983de's seed 5)
        self.reply_reg = slot_memory == "dram"
        # the FSM's decisions as flip-flops loaded on the way into the state that reads them
        # (class docstring, ``exec_regs``): the DRAM build's core clock (`control.ops_done` ->
        # `probe_rd` -> `probe_ok_r` -> `control.fsm_state` 9.31 ns, `control.fsm_state` -> ... ->
        # `we_max_el` -> `max_elements` 8.92 ns, `control.fsm_state` -> the control skid ->
        # `words_left` 8.25 ns at cbcf8ab's seeds 3 / 4 / 1)
        self.exec_regs = slot_memory == "dram"
        assert not self.exec_regs or (self.registered_probe and self.reply_reg)
        self.data_width, self.ports, self.slots = data_width, ports, slots
        self.elements, self.groups, self.jobs = elements, groups, jobs
        n = ports + 1
        super().__init__(
            {
                "s_msg": In(message_stream(data_width)),
                "m_msg": Out(message_stream(data_width)),
                # configuration outputs
                "release_on_completion": Out(1),
                "local_mac": Out(48),
                "local_ip": Out(32),
                "udp_port": Out(16),
                "max_elements": Out(16),
                "site_id": Out(8),
                "result_mac": Out(48),
                "result_ip": Out(32),
                "result_udp_port": Out(16),
                "group_bitmap": Out(data.ArrayLayout(32, groups)),
                "job_cfg": Out(data.ArrayLayout(JobCfgLayout, jobs)),
                "reset": Out(stream.Signature(ResetLayout(jobs))),
                **({"cfg_written": Out(1)} if self.cfg_strobe else {}),
                "head": In(data.ArrayLayout(32, jobs)),
                # JOBj_PROBE_BITMAP: the job and chunk to inspect, and the reducer's answer
                # (probe_ok: probe_bitmap is the answer for this job and chunk)
                "probe_job": Out(range(jobs)),
                "probe_chunk": Out(32),
                "probe_bitmap": In(32),
                "probe_ok": In(1),
                # status events
                "port_frame_in": In(n),
                "port_drop": In(n),
                "port_drop_reason": In(data.ArrayLayout(4, n)),
                "outcome": In(1),
                "outcome_code": In(4),
                "result_out": In(1),
                "mem_error": In(1),
                "result_withheld": In(1),
                **({"record_error": In(1), "record_counters": In(record_counters_layout())}
                   if self.records else {}),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        w = self.data_width
        n_ops = lanes(w) // 2
        reg_map = {
            r.addr: r
            for r in regs.register_map(
                ports=self.ports, groups=self.groups, jobs=self.jobs, elements=self.elements,
                width=w, slots=self.slots, records=self.records,
            )
        }

        def reset_of(addr: int) -> int:
            return reg_map[addr].reset

        # ---- configuration registers (reset values from wanreduce.regs) ----
        ctrl = Signal(32, init=reset_of(regs.CTRL))
        mac_hi = Signal(16, init=reset_of(regs.LOCAL_MAC_HI))
        mac_lo = Signal(32, init=reset_of(regs.LOCAL_MAC_LO))
        local_ip = Signal(32, init=reset_of(regs.LOCAL_IP))
        udp_port = Signal(16, init=reset_of(regs.UDP_PORT))
        max_el = Signal(16, init=reset_of(regs.MAX_ELEMENTS))
        site_id = Signal(8, init=reset_of(regs.SITE_ID))
        rmac_hi = Signal(16, init=reset_of(regs.RESULT_MAC_HI))
        rmac_lo = Signal(32, init=reset_of(regs.RESULT_MAC_LO))
        rip = Signal(32, init=reset_of(regs.RESULT_IP))
        rport = Signal(16, init=reset_of(regs.RESULT_UDP_PORT))
        groups = [Signal(32, name=f"group{g}") for g in range(self.groups)]
        jobs = [Signal(32, name=f"job_cfg{j}") for j in range(self.jobs)]
        probes = [Signal(32, name=f"job_probe{j}") for j in range(self.jobs)]
        probe_job = Signal(range(self.jobs))  # the job of the last PROBE_BITMAP read loaded
        probe_rd = Signal()  # the loaded operation reads a PROBE_BITMAP: wait for probe_ok
        m.d.comb += [self.probe_job.eq(probe_job),
                     self.probe_chunk.eq(Array(probes)[probe_job] if self.jobs > 1 else probes[0])]
        probe_ok, probe_bitmap = self.probe_ok, self.probe_bitmap
        if self.registered_probe:
            # probe_ok / probe_bitmap a cycle late, loaded only while EXEC waits for a probe (0
            # in any other state): the key (probe_job, probe_chunk) changes only in LOAD,
            # READBACK and EXEC's writes, never while EXEC waits, so probe_ok_r = 1 in EXEC says
            # the previous cycle answered this very key, and probe_bm_r holds an answer probe_ok
            # vouched for (the last one) when READ reads it. probe_bm_r loads every cycle EXEC
            # waits until probe_ok_r rises (no compare in its load enable: the session-38 placement's
            # 8.92 ns path), so the last load is the answer probe_ok_r vouches for
            probe_ok = Signal(name="probe_ok_r")
            probe_bitmap = Signal(32, name="probe_bm_r")
            probe_wait = Signal()  # EXEC waits for the probe (set in the FSM below)
            m.d.sync += probe_ok.eq(probe_wait & self.probe_ok)
            with m.If(probe_wait & ~probe_ok):
                m.d.sync += probe_bitmap.eq(self.probe_bitmap)

        m.d.comb += [
            self.release_on_completion.eq(ctrl & regs.CTRL_RELEASE_ON_COMPLETION != 0),
            self.local_mac.eq(Cat(mac_lo, mac_hi)),
            self.local_ip.eq(local_ip),
            self.udp_port.eq(udp_port),
            self.max_elements.eq(max_el),
            self.site_id.eq(site_id),
            self.result_mac.eq(Cat(rmac_lo, rmac_hi)),
            self.result_ip.eq(rip),
            self.result_udp_port.eq(rport),
        ]
        for g in range(self.groups):
            m.d.comb += self.group_bitmap[g].eq(groups[g])
        for j in range(self.jobs):
            m.d.comb += self.job_cfg[j].as_value().eq(jobs[j])

        # ---- status counters ----
        n = self.ports + 1
        frames_in = [Signal(32, name=f"port{p}_frames_in") for p in range(n)]
        drops = [[Signal(32, name=f"port{p}_drop_{r.name.lower()}") for r in Drop] for p in range(n)]
        outcomes = [Signal(32, name=f"outcome_{o.name.lower()}") for o in Outcome]
        results_out = Signal(32)
        control_in = Signal(32)
        for p in range(n):
            with m.If(self.port_frame_in[p]):
                m.d.sync += frames_in[p].eq(frames_in[p] + 1)
            for r in Drop:
                with m.If(self.port_drop[p] & (self.port_drop_reason[p] == int(r))):
                    m.d.sync += drops[p][int(r)].eq(drops[p][int(r)] + 1)
        for o in Outcome:
            with m.If(self.outcome & (self.outcome_code == int(o))):
                m.d.sync += outcomes[int(o)].eq(outcomes[int(o)] + 1)
        with m.If(self.result_out):
            m.d.sync += results_out.eq(results_out + 1)
        results_withheld = Signal(32)
        with m.If(self.result_withheld):
            m.d.sync += results_withheld.eq(results_withheld + 1)

        # ---- register read mux ----
        readable: dict[int, object] = {
            regs.ID: Const(regs.CORE_ID, 32),
            regs.PARAMS0: Const(reset_of(regs.PARAMS0), 32),
            regs.PARAMS1: Const(reset_of(regs.PARAMS1), 32),
            regs.CTRL: ctrl,
            regs.LOCAL_MAC_HI: mac_hi,
            regs.LOCAL_MAC_LO: mac_lo,
            regs.LOCAL_IP: local_ip,
            regs.UDP_PORT: udp_port,
            regs.MAX_ELEMENTS: max_el,
            regs.SITE_ID: site_id,
            regs.RESULT_MAC_HI: rmac_hi,
            regs.RESULT_MAC_LO: rmac_lo,
            regs.RESULT_IP: rip,
            regs.RESULT_UDP_PORT: rport,
            regs.RESULTS_OUT: results_out,
            regs.CONTROL_IN: control_in,
            regs.STATUS: (Cat(self.mem_error, self.record_error, Const(0, 30)) if self.records
                          else Cat(self.mem_error, Const(0, 31))),
            regs.RESULTS_WITHHELD: results_withheld,
        }
        for g in range(self.groups):
            readable[regs.group(g)] = groups[g]
        for j in range(self.jobs):
            readable[regs.job_cfg(j)] = jobs[j]
            readable[regs.job_head(j)] = self.head[j]
            readable[regs.job_probe(j)] = probes[j]
            readable[regs.job_probe_bitmap(j)] = probe_bitmap
        for p in range(n):
            readable[regs.port_frames_in(p)] = frames_in[p]
            for r in Drop:
                readable[regs.port_drops(p, r)] = drops[p][int(r)]
        for o in Outcome:
            readable[regs.outcome_counter(o)] = outcomes[int(o)]
        if self.records:  # the record path's counters (counted there)
            for name in regs.RECORD_COUNTERS:
                readable[regs.record_counter(name)] = self.record_counters[name]
        assert set(readable) == set(reg_map), "register map and RTL disagree"

        # ---- the operation engine: one operation every three cycles ----
        # An operation's two words are decoded from the held beat (in LOAD for its first
        # operation, in READBACK for the next one) into flip-flops: the address as a dense index
        # into the readable registers, one write-enable flag per writable register, the job of a
        # JOB_HEAD write, the value. EXEC (the write) and READ + READBACK (the read mux) start
        # from those flip-flops, with no address compare in front of them.
        beat = Signal(self.s_msg.payload.shape())
        op = Signal(range(max(n_ops, 1) + 1))
        words_left = Signal(16)  # words of the message not yet consumed
        ops_done = Signal()  # (words_left < 2) | (op == n_ops), registered with them
        reply = Signal(w)

        # Plain read/write registers: the map's RW registers except the two with side effects
        # (MAX_ELEMENTS is clamped to E; a JOB_HEAD write is a window reset in the reducer).
        special = {regs.MAX_ELEMENTS} | {regs.job_head(j) for j in range(self.jobs)}
        writable = {
            a: readable[a]
            for a, r in reg_map.items()
            if r.access == regs.Access.RW and a not in special
        }
        read_list = list(readable.values())

        # the operation being loaded (comb) and its decoded form (registers). LOAD decodes the
        # beat's first 64 bits, READBACK its second: two decoders, so the FSM state only
        # selects their results. The 70-way read index is decoded from the registered address
        # (low byte + upper-byte flag) in the cycle after (it is first used in READ); with
        # split_read the address is compared with each register's as it is loaded (read_match).
        def decode(words, tag: str) -> tuple:
            addr = Signal(16, name=f"next_addr_{tag}")
            m.d.comb += addr.eq(words[:32] & wire.CONTROL_ADDR_MASK)
            return words, addr, words[31]

        value = Signal(32)
        n_groups = (len(read_list) + 7) // 8
        groups_of_8 = [read_list[i:i + 8] for i in range(0, len(read_list), 8)]
        if self.split_read:
            # one match flag per readable register, loaded with the address (load_op), and from
            # them (loaded every cycle) per group of 8: its select (the register's place in the
            # group; 0 when the address is not in the group) and its hit flag (the address is in
            # the group). Each select bit and hit flag is an OR of at most 8 match flags; as
            # read_match changes only in LOAD and READBACK, in READ they hold the operation's.
            read_match = Signal(len(read_list), name="read_match")
            gsel = [Signal(3, name=f"read_sel_r{g}") for g in range(n_groups)]
            ghit = [Signal(name=f"read_hit{g}") for g in range(n_groups)]
            for g in range(n_groups):
                flags = read_match[8 * g:8 * g + len(groups_of_8[g])]
                gsel_n = Signal(3, name=f"read_sel_n{g}")
                ghit_n = Signal(name=f"read_hit_n{g}")
                m.d.comb += [ghit_n.eq(flags.any()),
                             *[gsel_n[k].eq(Cat(*[f for i, f in enumerate(flags) if i >> k & 1]).any())
                               for k in range(3)]]
                m.d.sync += [gsel[g].eq(gsel_n), ghit[g].eq(ghit_n)]
        else:
            addr_r = Signal(8)  # the loaded operation's register address, low byte
            # ... and its upper byte, decoded when it is loaded: one flag per upper byte in use,
            # so the read-index decode sees the low byte and one flag, not 16 address bits
            pages = sorted({a >> 8 for a in readable})
            page_r = Signal(len(pages))
            ridx = Signal(range(len(read_list) + 1))  # its read index (len(read_list): none)
            ridx_of_addr = Signal.like(ridx)
            with m.Switch(Cat(addr_r, page_r)):
                for i, a in enumerate(readable):
                    flag = "".join("1" if pg == a >> 8 else "-" for pg in reversed(pages))
                    with m.Case(flag + format(a & 0xFF, "08b")):
                        m.d.comb += ridx_of_addr.eq(i)
                with m.Default():
                    m.d.comb += ridx_of_addr.eq(len(read_list))
            # loaded every cycle (no FSM state in its enable): addr_r/page_r change only in LOAD
            # and READBACK, so in READ and READBACK ridx holds the index of the operation being
            # executed
            m.d.sync += ridx.eq(ridx_of_addr)
            gsel, gidx = [ridx[:3]] * n_groups, ridx[3:]
        # the operations of the held beat, decoded outside the FSM (LOAD loads the first, READBACK
        # the next)
        dec_first = decode(beat.data[:64], "first")
        dec_next = decode(beat.data[64:128] if n_ops > 1 else Const(0, 64), "next")
        # One write-enable flag per writable register, used in EXEC only (its first cycle, the
        # one that writes). Loaded every cycle from the held beat's decoded operations, with no
        # FSM state in their enable (it fed every flag's address compare): the beat changes only
        # in IDLE and READBACK, so in an EXEC after LOAD the first operation's flags (we_f) are
        # those of the beat LOAD decoded, and after READBACK the next operation's (we_n, beside
        # ``from_rb``) are those READBACK decoded. At W = 64 (one operation per beat) an EXEC
        # after READBACK always finds ``ops_done``, so only we_f is needed.
        def write_flags(dec: tuple, tag: str) -> dict:
            _, next_addr, next_write = dec
            flags = {a: Signal(name=f"we{tag}_{a:04x}") for a in writable}
            m.d.sync += [f.eq(next_write & (next_addr == a)) for a, f in flags.items()]
            return flags

        we_f = write_flags(dec_first, "")
        if n_ops > 1:
            we_n = write_flags(dec_next, "n")
            from_rb = Signal()  # the operation in EXEC was loaded by READBACK
            we = {a: Mux(from_rb, we_n[a], we_f[a]) for a in writable}
        else:
            we = we_f
        we_max_el = Signal()
        clamp = Signal()  # a MAX_ELEMENTS value above the core's E
        head_write = Signal()
        job_index = Signal(range(self.jobs))

        xr = self.exec_regs
        if xr:  # the FSM's decisions as flip-flops (class docstring)
            idle = Signal(init=1, name="idle_r")  # == (state == IDLE)
            wr_go = Signal(name="wr_go")  # == EXEC & ~ops_done & ~head_write & ~probe_rd
            reset_valid = Signal(name="reset_valid")  # == EXEC & ~ops_done & head_write
            exec_go = Signal(name="exec_go")  # == EXEC & (wr_go | probe_ok_r): EXEC -> READ
            load_r = Signal(name="load_r")  # == (state == LOAD)
            read_r = Signal(name="read_r")  # == (state == READ)
            rb_r = Signal(name="rb_r")  # == (state == READBACK)

        def specials(dec: tuple) -> tuple[list, list]:
            """The operation's side-effect addresses, per job: a JOB_HEAD write (a window reset)
            and a PROBE_BITMAP read. The one decode of them: ``head_write`` / ``job_index`` /
            ``probe_rd`` / ``probe_job`` and (exec_regs) the EXEC flags."""
            _, addr, write = dec
            return ([write & (addr == regs.job_head(j)) for j in range(self.jobs)],
                    [addr == regs.job_probe_bitmap(j) for j in range(self.jobs)])

        if xr:
            # ... decoded a cycle before LOAD / READBACK load them (class docstring): the first
            # operation's from ``s_msg`` as IDLE takes the beat (the flags then hold the
            # operation LOAD loads), the next one's every cycle from the held beat (its second
            # 64 bits change only in IDLE and READBACK, so in READBACK the flags hold the
            # operation READBACK loads), and READBACK's ``ops_done`` value every cycle (its
            # ``words_left`` / ``op`` change only in IDLE and READBACK). LOAD / READBACK load
            # the EXEC flags and ``head_write`` ... ``probe_job`` from these flip-flops: no
            # address compare (``beat.data`` -> ``exec_go``, 8.33 ns at b7ad058's seed 1)
            def pre_decoded(tag: str) -> tuple:
                heads = [Signal(name=f"head_{tag}{j}") for j in range(self.jobs)]
                probes_ = [Signal(name=f"probe_{tag}{j}") for j in range(self.jobs)]
                return heads, probes_, Signal(name=f"head_{tag}_any"), Signal(name=f"probe_{tag}_any")

            def pre_decode(flags: tuple, dec: tuple) -> list:
                heads, probes_ = specials(dec)
                return [*[f.eq(v) for f, v in zip(flags[0] + flags[1], heads + probes_, strict=True)],
                        flags[2].eq(Cat(*heads).any()), flags[3].eq(Cat(*probes_).any())]

            pre_f = pre_decoded("f")
            with m.If(idle & self.s_msg.valid):
                m.d.sync += pre_decode(pre_f, decode(self.s_msg.payload.data[:64], "in"))
            if n_ops > 1:
                pre_n = pre_decoded("n")
                m.d.sync += pre_decode(pre_n, dec_next)
            else:  # (dec_next is 0: constant flags)
                heads_0, probes_0 = specials(dec_next)
                pre_n = heads_0, probes_0, Cat(*heads_0).any(), Cat(*probes_0).any()
            done_rb = Signal(name="done_rb")  # == READBACK's next ops_done, in READBACK
            m.d.sync += done_rb.eq((words_left < 4) | (op + 1 == n_ops))

        def load_op(dec: tuple, done_n=None, pre=None) -> None:
            """``done_n``: ``ops_done`` in EXEC, ``pre``: the operation's pre-decoded flags
            (exec_regs: the decisions loaded from them)."""
            next_words, next_addr, next_write = dec
            if xr:  # entering EXEC with this operation: its decisions (class docstring)
                heads, probes_, head_n, probe_n = pre
                plain_n = ~done_n & ~head_n & ~probe_n
                m.d.sync += [wr_go.eq(plain_n), exec_go.eq(plain_n), reset_valid.eq(~done_n & head_n),
                             probe_wait.eq(~done_n & ~head_n & probe_n)]
            else:
                heads, probes_ = specials(dec)
            m.d.sync += [
                value.eq(next_words[32:64]),
                # split_read: the address compared with every readable register's as it is
                # registered (no decode from a registered address in front of the selects)
                *([read_match.eq(Cat(*[next_addr == a for a in readable]))] if self.split_read else
                  [addr_r.eq(next_addr[:8]), page_r.eq(Cat(*[next_addr[8:] == pg for pg in pages]))]),
                we_max_el.eq(next_write & (next_addr == regs.MAX_ELEMENTS)),
                clamp.eq(next_words[32:64] > self.elements),
                head_write.eq(0),
                job_index.eq(0),
                probe_rd.eq(0),
            ]
            for j in range(self.jobs):
                with m.If(heads[j]):
                    m.d.sync += [head_write.eq(1), job_index.eq(j)]
                with m.If(probes_[j]):
                    m.d.sync += [probe_rd.eq(1), probe_job.eq(j)]

        # The read mux in two registered levels: READ selects within groups of 8 registers by
        # ridx[:3] into ``read_group``, READBACK picks the group by ridx[3:] (split_read: by
        # the group's own select, each group's register 0 unless its hit flag is set, and
        # READBACK ORs the groups' registers: no group index).
        read_group = []
        for g, members in enumerate(groups_of_8):
            sel = Signal(32, name=f"read_sel{g}")
            with m.Switch(gsel[g]):
                for i, sig in enumerate(members):
                    with m.Case(i):
                        m.d.comb += sel.eq(sig)
            reg = Signal(32, name=f"read_group{g}")
            m.d.sync += reg.eq(Mux(ghit[g], sel, 0) if self.split_read else sel)
            read_group.append(reg)
        read_value = Signal(32)
        if self.split_read:  # one group's register holds the value, the others 0 (none: all 0)
            m.d.comb += read_value.eq(reduce(operator.or_, read_group))
        else:
            # the group is ridx[3:] (no case per register: that decoded all of ridx's bits in
            # front of the reply); "none" (ridx == len(read_list)) reads 0, its group's register
            # or no group
            with m.Switch(gidx):
                for g, reg in enumerate(read_group):
                    with m.Case(g):
                        m.d.comb += read_value.eq(reg)

        m.d.comb += [
            self.m_msg.payload.hdr.eq(beat.hdr),
            self.m_msg.payload.hdr.msg_type.eq(wire.MsgType.CONTROL_REPLY),
            self.m_msg.payload.first.eq(beat.first),
            self.m_msg.payload.last.eq(beat.last),
            self.m_msg.payload.data.eq(reply),
            self.reset.payload.job.eq(job_index),
            self.reset.payload.head.eq(value),
        ]

        # IDLE takes a beat, LOAD decodes its first operation (so nothing is decoded straight
        # from ``s_msg``, whose data comes from the host parser's block RAM). Each operation
        # takes three cycles: EXEC performs the write (or the window-reset handshake), READ the
        # first level of the read mux, READBACK stores the register's new value into the reply
        # and decodes the next operation of the beat (the beat's data is shifted by one
        # operation, so the next operation is always in its second 64 bits).
        if self.cfg_strobe:  # high only in the cycle after a write of one of them (EXEC, below)
            cfg_addrs = [regs.group(g) for g in range(self.groups)] + [regs.job_cfg(j) for j in range(self.jobs)]
            assert all(a in writable for a in cfg_addrs)
            m.d.sync += self.cfg_written.eq(0)
        reply_valid = Signal(name="reply_valid") if self.reply_reg else None  # == (state == REPLY)
        if reply_valid is not None:
            m.d.comb += self.m_msg.valid.eq(reply_valid)
        if xr:
            # each flag's value outside the cycles that load it (load_op in LOAD / READBACK, the
            # FSM below overrides): IDLE left on a beat, entered on the reply's take; wr_go for one
            # cycle; EXEC leaves a window reset on reset.ready, a probe read on probe_ok_r (and
            # exec_go == probe_ok_r in EXEC, loaded as probe_wait & ~probe_ok_r & probe_ok outside
            # LOAD / READBACK: 0 in the READ after it); LOAD, READ, READBACK last one cycle each
            with m.If(idle & self.s_msg.valid):
                m.d.sync += idle.eq(0)
            with m.If(reply_valid & self.m_msg.ready):
                m.d.sync += idle.eq(1)
            leave = exec_go | (reset_valid & self.reset.ready)  # EXEC -> READ (both 0 elsewhere)
            m.d.sync += [wr_go.eq(0), exec_go.eq(probe_wait & ~probe_ok & self.probe_ok),
                         load_r.eq(idle & self.s_msg.valid), read_r.eq(leave), rb_r.eq(read_r)]
            with m.If(self.reset.ready):
                m.d.sync += reset_valid.eq(0)
            with m.If(probe_ok):
                m.d.sync += probe_wait.eq(0)
            m.d.comb += [self.s_msg.ready.eq(idle), self.reset.valid.eq(reset_valid)]

        def idle_loads() -> None:  # IDLE takes a beat
            m.d.sync += [
                beat.eq(self.s_msg.payload),
                op.eq(0),
                reply.eq(self.s_msg.payload.data),
                ops_done.eq(words_left < 2),  # (op == 0 < n_ops)
            ]
            with m.If(self.s_msg.payload.first):
                m.d.sync += [
                    words_left.eq(self.s_msg.payload.hdr.element_count),
                    ops_done.eq(self.s_msg.payload.hdr.element_count < 2),
                    control_in.eq(control_in + 1),
                ]

        def writes() -> None:  # EXEC's write cycle
            for a, sig in writable.items():
                with m.If(we[a]):
                    m.d.sync += sig.eq(value)
            if self.cfg_strobe:  # the write enables of the GROUP / JOB_CFG registers
                m.d.sync += self.cfg_written.eq(Cat(*[we[a] for a in cfg_addrs]).any())
            with m.If(we_max_el):
                # clamp to the core's E: the parsers cannot take more
                m.d.sync += max_el.eq(Mux(clamp, self.elements, value))

        def load_body() -> None:  # LOAD decodes the beat's first operation
            load_op(dec_first, ops_done, pre_f if xr else None)
            if n_ops > 1:
                m.d.sync += from_rb.eq(0)

        def readback_body() -> None:
            if n_ops > 1:
                m.d.sync += [beat.data.eq(beat.data >> 64), from_rb.eq(1)]
            if xr:
                load_op(dec_next, done_rb, pre_n)
            else:
                load_op(dec_next)
            for k in range(n_ops):
                with m.If(op == k):
                    m.d.sync += reply.word_select(2 * k + 1, 32).eq(read_value)
            m.d.sync += [op.eq(op + 1), words_left.eq(words_left - 2),
                         ops_done.eq(done_rb if xr else (words_left < 4) | (op + 1 == n_ops))]

        if xr:  # the states' loads and EXEC's writes from the flags alone (no state decode)
            with m.If(idle & self.s_msg.valid):
                idle_loads()
            with m.If(load_r):
                load_body()
            with m.If(wr_go):
                writes()
            with m.If(rb_r):
                readback_body()
        with m.FSM():
            with m.State("IDLE"):
                if not xr:
                    m.d.comb += self.s_msg.ready.eq(1)
                with m.If(self.s_msg.valid):
                    if not xr:
                        idle_loads()
                    m.next = "LOAD"
            with m.State("LOAD"):  # decode the beat's first operation
                if not xr:
                    load_body()
                m.next = "EXEC"
            with m.State("EXEC"):
                with m.If(ops_done):
                    m.next = "REPLY"
                    if reply_valid is not None:
                        m.d.sync += reply_valid.eq(1)
                if xr:  # the decisions' flip-flops (the writes: under wr_go, above)
                    with m.Elif(leave):
                        m.next = "READ"
                else:
                    with m.Elif(head_write):
                        m.d.comb += self.reset.valid.eq(1)
                        with m.If(self.reset.ready):
                            m.next = "READ"
                    with m.Elif(probe_rd):  # a read: nothing to write (keeps probe_ok, a compare of
                        if self.registered_probe:  # the probed key, off the write enables' path)
                            m.d.comb += probe_wait.eq(1)
                        with m.If(probe_ok):
                            m.next = "READ"  # else the reducer is still reading the chunk's tag
                    with m.Else():
                        writes()
                        m.next = "READ"
            with m.State("READ"):
                m.next = "READBACK"
            with m.State("READBACK"):
                if not xr:
                    readback_body()
                m.next = "EXEC"
            with m.State("REPLY"):
                if reply_valid is None:
                    m.d.comb += self.m_msg.valid.eq(1)
                with m.If(self.m_msg.ready):
                    m.next = "IDLE"
                    if reply_valid is not None:
                        m.d.sync += reply_valid.eq(0)
        return m
