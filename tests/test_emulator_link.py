"""LinkQueue: delay, rate, bounded FIFO and seeded loss, on an injected clock (emulator/link.py)."""

import random

import pytest

from wanreduce.emulator.link import LinkQueue


def test_a_datagram_arrives_after_its_serialisation_and_delay():
    q = LinkQueue(rate=1000.0, delay=0.25)
    assert q.offer(10.0, 100) == pytest.approx(10.0 + 0.1 + 0.25)


def test_back_to_back_datagrams_leave_at_the_rate_in_fifo_order():
    q = LinkQueue(rate=1000.0, delay=0.5)
    arrivals = [q.offer(0.0, 100) for _ in range(10)]
    assert arrivals == pytest.approx([0.5 + 0.1 * (k + 1) for k in range(10)])
    # a datagram entering after the link went idle is not held by the earlier burst
    assert q.offer(5.0, 100) == pytest.approx(5.0 + 0.1 + 0.5)
    assert q.carried == 1100 and q.packets == 11


def test_a_full_queue_drops_and_counts():
    q = LinkQueue(rate=1000.0, queue_bytes=350)
    got = [q.offer(0.0, 100) for _ in range(5)]
    assert got[:3] == pytest.approx([0.1, 0.2, 0.3]) and got[3:] == [None, None]
    assert q.dropped == 2 and q.carried == 300
    assert q.offer(0.25, 100) is not None  # drained enough by then


def test_random_loss_is_seeded_and_counted():
    def run(seed):
        q = LinkQueue(rate=1e9, loss=0.3, rng=random.Random(seed))
        kept = [q.offer(float(i), 10) is not None for i in range(2000)]
        return kept, q

    kept, q = run(7)
    assert q.lost == kept.count(False) and q.packets == kept.count(True)
    assert 500 < q.lost < 700  # 30 % of 2000
    assert run(7)[0] == kept and run(8)[0] != kept


@pytest.mark.parametrize("kw, name", [({"rate": 0.0}, "rate"), ({"rate": 1.0, "delay": -1.0}, "delay"),
                                      ({"rate": 1.0, "loss": 1.5}, "loss")])
def test_bad_parameters_name_the_field(kw, name):
    with pytest.raises(ValueError, match=f"^{name}: "):
        LinkQueue(**kw)
