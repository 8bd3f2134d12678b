"""The reducer's copy of its configuration, registered (the control block sits across the chip):
the job and group tables, the release mode, and what is derived from them per job (the log2
window clamped to the slot memory, the window mask) and per group ("configured", "one member").
Configuration therefore takes effect one cycle after it is written (it may only change while
the job is idle anyway).

Also the job-table helpers every part of the reducer uses: :func:`select_job_entry` (an
explicit multiplexer of a registered per-job array: the job table, the clamped log2 windows)
and :func:`slot_of` (a chunk's slot).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import JobCfgLayout

__all__ = ["REGION_AT_CONFIG_MAX_SLOTS", "ReducerConfig", "config_signature", "region_of", "select_job_entry",
           "slot_ahead", "slot_of", "window_mask"]

# Up to this many slots (the default core's 16, pinned) the reducer's stage P decodes the beat's
# job's region (S compares of the slot index with its base and window) from the job table; above
# it each job's region is registered with the configuration (``ReducerConfig(regions=True)``) and
# P selects it by the job: at S 128 the decode from ``job_cfg`` into P's ``region`` was 10.21 ns
# placed (docs/benchmarks.md, session 38). The region loads a cycle after the job table, from its
# registers (in one cycle from the control block's ``job_cfg_in`` it was 11.42 ns placed, session
# 39), and ``region_stale`` marks that cycle: stage P takes no beat of the job in it.
REGION_AT_CONFIG_MAX_SLOTS = 16


def region_of(base: Value, lw: Value, slots: int) -> Value:
    """A job's region as S bits: slot i is in it when ``(i - base) mod S < 2**lw`` (``base``
    the job's base, ``lw`` its log2 window clamped to log2 S)."""
    sb = (slots - 1).bit_length()
    return Cat(*[(((Const(i, sb + 1) - base[:sb])[:sb] >> lw) == 0) if sb else Const(1) for i in range(slots)])


def config_signature(*, slots: int, groups: int, jobs: int, regions: bool = False) -> wiring.Signature:
    """The registered configuration as the reducer's parts read it: ``job_cfg``,
    ``log2_window`` (clamped to log2 S), ``window_mask`` per job; ``members``, ``single`` (one
    member), ``configured`` (members != 0) per group; ``in_order``; with ``regions`` each job's
    ``region`` (``region_of``; reset: base 0, window 1, so slot 0), a cycle behind the job table,
    and ``region_stale`` (per job: ``region`` is that cycle behind now, i.e. differs from
    ``region_of`` of the registered base and window; no reader may use it then)."""
    sb = (slots - 1).bit_length()
    return wiring.Signature({
        "job_cfg": Out(data.ArrayLayout(JobCfgLayout, jobs)),
        "log2_window": Out(data.ArrayLayout(range(sb + 1), jobs)),
        "window_mask": Out(data.ArrayLayout(sb, jobs)),
        "members": Out(data.ArrayLayout(32, groups)),
        "single": Out(groups),
        "configured": Out(groups),
        "in_order": Out(1, init=1),
        **({"region": Out(data.ArrayLayout(slots, jobs), init=[1] * jobs),
            "region_stale": Out(jobs)} if regions else {}),
    })


def select_job_entry(m: Module, table: Value, jobs: int, idx: Value, name: str) -> Value:
    """Explicit mux of a (registered) per-job array: ``table[idx]``, zero for an index outside it."""
    out = Signal(table.shape().elem_shape, name=name)
    with m.Switch(idx):
        for j in range(jobs):
            with m.Case(j):
                m.d.comb += out.eq(table[j])
    return out


def clamp_log2_window(log2_window: Value, slot_bits: int) -> Value:
    """A job's log2 window clamped to log2 S (``slot_bits``), as the configuration registers it."""
    return Mux(log2_window > slot_bits, slot_bits, log2_window)


def window_mask(log2_window: Value, slot_bits: int) -> Value:
    """``window - 1`` (``slot_bits`` bits) from ``log2_window``: bit i is ``log2_window > i``."""
    return Cat(*[log2_window > i for i in range(slot_bits)])


def slot_of(cfg: Value, chunk: Value, slot_bits: int) -> Value:
    """``(base + (chunk & (window - 1))) & (S - 1)``."""
    wmask = window_mask(cfg.log2_window, slot_bits)
    return (cfg.base[:slot_bits] + (chunk[:slot_bits] & wmask))[:slot_bits]


def slot_ahead(slot: Value, chunk: Value, wmask: Value, k: int) -> Value:
    """The slot of ``chunk + k`` from ``chunk``'s ``slot`` (``slot_of``'s ``base + (chunk &
    wmask)``) and its job's ``wmask`` (window - 1, ``len(slot)`` bits): ``slot - (chunk & wmask)``
    is the base, so no job table is read (the DRAM reducer's held next slots)."""
    sb = len(slot)
    return (slot - (chunk[:sb] & wmask) + ((chunk[:sb] + k)[:sb] & wmask))[:sb]


class ReducerConfig(wiring.Component):
    """Configuration registers of the reducer (see the module docstring).

    In: ``job_cfg_in``, ``group_bitmap_in``, ``release_on_completion``. Out: ``cfg``
    (:func:`config_signature`, all flip-flops; ``regions``: with each job's region a cycle
    behind the table and its ``region_stale`` flag, ``REGION_AT_CONFIG_MAX_SLOTS``).
    """

    def __init__(self, *, slots: int, groups: int, jobs: int, regions: bool = False) -> None:
        self.slots, self.groups, self.jobs, self.regions = slots, groups, jobs, regions
        sb = (slots - 1).bit_length()
        self.slot_bits = sb
        super().__init__({
            "job_cfg_in": In(data.ArrayLayout(JobCfgLayout, jobs)),
            "group_bitmap_in": In(data.ArrayLayout(32, groups)),
            "release_on_completion": In(1),
            "cfg": Out(config_signature(slots=slots, groups=groups, jobs=jobs, regions=regions)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb, c = self.slot_bits, self.cfg
        for j in range(self.jobs):
            lw_in = self.job_cfg_in[j].log2_window
            lw_next = clamp_log2_window(lw_in, sb)
            m.d.sync += [c.job_cfg[j].eq(self.job_cfg_in[j]),
                         c.log2_window[j].eq(lw_next),
                         c.window_mask[j].eq(window_mask(lw_in, sb))]
            if self.regions:
                # what P would decode from the two registers above, loaded from them a cycle after
                # them; stale in that cycle (the base or window they load now is another)
                lw_c = c.log2_window[j]
                m.d.sync += [c.region[j].eq(region_of(c.job_cfg[j].base, lw_c, self.slots)),
                             c.region_stale[j].eq((lw_next != lw_c)
                                                  | (self.job_cfg_in[j].base[:sb] != c.job_cfg[j].base[:sb]))]
        for g in range(self.groups):
            gin = self.group_bitmap_in[g]
            m.d.sync += [c.members[g].eq(gin),
                         c.single[g].eq((gin != 0) & ((gin & (gin - 1)) == 0)),
                         c.configured[g].eq(gin != 0)]
        m.d.sync += c.in_order.eq(~self.release_on_completion)
        return m
