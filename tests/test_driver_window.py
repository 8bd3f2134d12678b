"""The driver's window default: rate x RTT, capped at W/2, with one warning per job when the
aggregator's window cannot cover it (naming the option to change)."""

from __future__ import annotations

import warnings

import pytest

from wanreduce import wire
from wanreduce.host.driver import AggregatorClient, WindowWarning


def test_window_too_small_warns_once_per_job_and_names_the_fix():
    kw = {"job_windows": {0: 64, 1: 64}, "use_control": False}
    with AggregatorClient(("127.0.0.1", 9), sender_id=0, **kw) as c:  # 10 Gb/s x 150 ms
        with pytest.warns(WindowWarning, match=r"window of 64 slots .*wanreduce serve --slots"):
            assert c.effective_window(0) == 32
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert c.effective_window(0) == 32  # once per job
        with pytest.warns(WindowWarning, match="job 1"):
            c.effective_window(1)


def test_window_that_fits_does_not_warn():
    bdp = -(-int(1e9 * 0.001) // (8 * wire.datagram_bytes(256)))  # 1 Gb/s x 1 ms: 120 chunks
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with AggregatorClient(("127.0.0.1", 9), sender_id=0, job_windows={0: 4096},
                              rate_bps=1e9, rtt=0.001, use_control=False) as c:
            assert c.effective_window(0) == bdp
        with AggregatorClient(("127.0.0.1", 9), sender_id=0, job_windows={0: 64}, window=16,
                              use_control=False) as c:
            assert c.effective_window(0) == 16
