"""Multicast-receive stream merger: N message streams into one, packet-atomic and round-robin.

The ingress parsers (one per network port, plus the host port) each produce a message stream;
the reduction pipeline takes one. This component merges them:

- **packet-atomic**: once the first beat of a message is sent, only that input is served until
  its ``last`` beat transfers; two messages are never interleaved;
- **round-robin fair**: after a message from input *i*, the next message comes from the first
  requesting input after *i* (cyclically, *i* itself last), so under saturation every input gets
  one message per turn and none starves;
- **no idle cycle** between back-to-back messages, whichever input the next one comes from and
  however short (single-beat) messages are: one beat per cycle sustained.

Structure (why it meets both the throughput and the timing goal):

- a *combinational* round-robin arbiter picks the input at a message boundary from the inputs'
  ``valid`` bits and a registered pointer (the last input served). Inside a message a registered
  ``locked`` bit holds the grant on the pointer. So the grant for the next message is ready in
  the very cycle after a ``last`` beat; no arbitration cycle is lost;
- the chosen beat is loaded into an **output register**: ``m_msg.valid``, ``m_msg.payload`` and
  ``grant`` come straight from flip-flops. There is no combinational path from ``m_msg.ready``
  (or from any input) to ``m_msg.valid``/``payload``; the arbiter and the N:1 payload mux end at
  that register. The register advances when it is empty or being drained
  (``~m_msg.valid | m_msg.ready``), so ``s_msg[i].ready`` = that condition AND "input *i* is
  granted": the only combinational path through the component is ``m_msg.ready`` -> one AND
  gate -> ``s_msg[i].ready`` (the usual pipeline-register ready path), plus ``s_msg[j].valid``
  -> arbiter -> ``s_msg[i].ready`` (ready may depend on valid under the stream rules).

Latency: one cycle (a beat accepted on an input in cycle t is on ``m_msg`` in cycle t+1).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .layouts import message_beat_layout, message_stream
from .params import check_data_width

__all__ = ["StreamMerger", "MAX_INPUTS"]

MAX_INPUTS = 9  # 8 network ports + the host port


class StreamMerger(wiring.Component):
    """Merge ``n_inputs`` message streams into one; packet-atomic, round-robin, 1 beat/cycle.

    Ports:
      - ``s_msg``: ``In(message_stream(data_width)).array(n_inputs)`` — the input streams;
      - ``m_msg``: ``Out(message_stream(data_width))`` — the merged stream (registered outputs);
      - ``grant``: ``Out(range(n_inputs))`` — index of the input the beat on ``m_msg`` came from
        (valid with ``m_msg.valid``; for debugging and per-port counters).
    """

    def __init__(self, data_width: int, n_inputs: int) -> None:
        check_data_width(data_width)
        if not isinstance(n_inputs, int) or isinstance(n_inputs, bool) or not (
            1 <= n_inputs <= MAX_INPUTS
        ):
            raise ValueError(f"n_inputs must be an integer from 1 to {MAX_INPUTS}, got {n_inputs!r}")
        self.data_width = data_width
        self.n_inputs = n_inputs
        super().__init__(
            {
                "s_msg": In(message_stream(data_width)).array(n_inputs),
                "m_msg": Out(message_stream(data_width)),
                "grant": Out(range(n_inputs)),
            }
        )

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = self.n_inputs
        layout = message_beat_layout(self.data_width)

        # Arbitration state: the last input served (a message in progress stays on it).
        ptr = Signal(range(n))
        locked = Signal()  # inside a message: the grant is held on ``ptr``

        # Combinational round-robin pick at a message boundary: first valid input after ptr.
        pick = Signal(range(n))
        if n > 1:  # (one input: nothing to choose, every index is 0)
            with m.Switch(ptr):
                for p in range(n):
                    with m.Case(p):
                        # Lowest priority first: the last assignment (highest priority) wins.
                        for k in reversed(range(1, n + 1)):
                            idx = (p + k) % n
                            with m.If(self.s_msg[idx].valid):
                                m.d.comb += pick.eq(idx)
        sel = Signal(range(n))
        m.d.comb += sel.eq(ptr)
        with m.If(~locked):
            m.d.comb += sel.eq(pick)

        # The selected input's valid and payload (explicit Switch, no wide Array mux).
        sel_valid = Signal()
        sel_payload = Signal(layout)
        if n == 1:
            m.d.comb += [sel_valid.eq(self.s_msg[0].valid), sel_payload.eq(self.s_msg[0].payload)]
        else:
            with m.Switch(sel):
                for i in range(n):
                    with m.Case(i):
                        m.d.comb += [
                            sel_valid.eq(self.s_msg[i].valid),
                            sel_payload.eq(self.s_msg[i].payload),
                        ]

        # Output register.
        out_valid = Signal()
        out_payload = Signal(layout, reset_less=True)
        out_grant = Signal(range(n), reset_less=True)
        m.d.comb += [
            self.m_msg.valid.eq(out_valid),
            self.m_msg.payload.eq(out_payload),
            self.grant.eq(out_grant),
        ]
        advance = Signal()
        m.d.comb += advance.eq(~out_valid | self.m_msg.ready)
        for i in range(n):
            m.d.comb += self.s_msg[i].ready.eq(advance & (sel == i))

        # The payload and grant registers load whenever the output register advances, valid
        # or not (they are looked at only with m_msg.valid): their wide enable is ``advance``
        # alone, without the arbiter's ``sel_valid``.
        with m.If(advance):
            m.d.sync += [out_valid.eq(sel_valid), out_payload.eq(sel_payload), out_grant.eq(sel)]
            with m.If(sel_valid):
                m.d.sync += [ptr.eq(sel), locked.eq(~sel_payload.last)]
        return m
