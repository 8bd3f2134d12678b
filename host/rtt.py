"""Retransmission timer of every request the host sends: RFC 6298 with Karn's rule and backoff.

One estimator per conversation (a driver toward its aggregator, a CONTROL client): round-trip
samples update the smoothed RTT (SRTT) and its variation (RTTVAR), the retransmission timeout is
``RTO = SRTT + max(min_rto, 4 * RTTVAR)``, at most ``max_rto``. ``min_rto`` plays the part of
RFC 6298's clock granularity G, as Linux's 200 ms floor does: with a steady RTT, RTTVAR decays
toward 0 and the RTO would sit just above SRTT, where scheduling jitter on a loaded host makes
every late answer a spurious resend. Karn's rule: the caller feeds
samples only from requests answered on their first transmission (the answer to a resent request
cannot be matched to one send). Each expiry doubles the RTO (exponential backoff, capped at
``max_rto``) until the next valid sample recomputes it, so an aggregator that became slow is
waited for instead of being resent to at the old rate (docs/host.md, "Timers").
"""

from __future__ import annotations

import math

# RFC 6298 gains (section 2) and the variance multiplier K.
ALPHA = 1 / 8
BETA = 1 / 4
K = 4


class RttEstimator:
    """RFC 6298 retransmission timeout: ``sample`` on each valid round trip, ``expired`` on each
    timer expiry; ``rto`` is the current timeout (backed off until the next sample)."""

    def __init__(self, initial_rto: float, *, min_rto: float, max_rto: float) -> None:
        for name, v in (("initial_rto", initial_rto), ("min_rto", min_rto), ("max_rto", max_rto)):
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0 s, got {v}")
        if max_rto < min_rto:
            raise ValueError(f"max_rto must be >= min_rto ({min_rto:g} s), got {max_rto:g}")
        self.min_rto, self.max_rto = min_rto, max_rto
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.samples = 0
        self.min_rtt: float | None = None  # smallest valid round trip seen (observe)
        self.backoffs = 0  # expiries since the last valid sample
        self._base = self._clamp(initial_rto)

    def _clamp(self, rto: float) -> float:
        return min(self.max_rto, max(self.min_rto, rto))

    @property
    def rto(self) -> float:
        """Timeout for a request sent now: the estimate, doubled per expiry since the last sample."""
        return min(self.max_rto, self._base * (1 << min(self.backoffs, 30)))

    def rto_at_most(self, max_rto: float) -> float:
        """``rto`` under a caller's own ceiling ``max_rto`` for this wait (not below ``min_rto``),
        on top of the instance's: e.g. a CONTROL message resent at least every eighth of its
        time budget (``host/control.py``), a send window's stall retried before it fails
        (``host/send_window.py``). The backoff itself is not capped: a later wait without the
        ceiling gets the whole backed-off timeout."""
        return min(self.rto, max(self.min_rto, max_rto))

    @property
    def estimate(self) -> float:
        """The timeout without backoff: SRTT + max(min_rto, 4 RTTVAR), or the initial guess
        before any sample (how long a silence must last to mean loss, not a slow path)."""
        return self._base

    def sample(self, rtt: float) -> None:
        """A round trip of a request answered on its first transmission (Karn's rule)."""
        rtt = max(0.0, rtt)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = (1 - BETA) * self.rttvar + BETA * abs(self.srtt - rtt)
            self.srtt = (1 - ALPHA) * self.srtt + ALPHA * rtt
        self.samples += 1
        self.backoffs = 0
        self._base = min(self.max_rto, self.srtt + max(self.min_rto, K * self.rttvar))

    def observe(self, rtt: float) -> None:
        """Any valid round trip (Karn's rule), also those not used as a sample: keeps the
        smallest, the latency of one request to an idle aggregator (loss recovery's pace)."""
        if self.min_rtt is None or rtt < self.min_rtt:
            self.min_rtt = max(0.0, rtt)

    def expired(self) -> None:
        """The timer of an outstanding request expired: back off (RFC 6298, 5.5)."""
        if self.rto < self.max_rto:
            self.backoffs += 1
