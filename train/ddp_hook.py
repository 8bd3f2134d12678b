"""DDP communication hook: gradient buckets all-reduced through the site's aggregator.

``DistributedDataParallel.register_comm_hook(state, aggregator_hook)``: each bucket's flat
gradient buffer is summed over every rank with ``AggregatorClient.allreduce`` (job 0, the group
of all ranks) in place and divided by the world size, as DDP's default gloo hook does; the
returned Future is already complete. The process group (gloo) does everything else.

Scale: the driver's own agreement (docs/host.md, "Scale exponent agreement"): before each bucket
the members all-reduce the exponent of their max|g|, so every rank quantises with the exponent
of the global max (< 1 bit from the exact max) and safe headroom (the sum cannot overflow). No
extra gloo all-reduce, no clipping bound to tune, and a NaN/Inf raises at every rank.
The driver's ``round`` is the training step, counted here (one step per DDP iteration).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from wanreduce.host.driver import AggregatorClient

DDP_JOB = 0
SESSION_KEY = "wanreduce/session"


@dataclass
class HookState:
    """What the hook needs: the rank's client, the group of all ranks, the step counter."""

    client: AggregatorClient
    group: int
    world_size: int
    job: int = DDP_JOB
    step: int = 0


def aggregator_hook(state: HookState, bucket):  # noqa: ANN001, ANN201 - see below
    """Sum the bucket (a ``dist.GradBucket``) over all ranks through the aggregator, divide by
    the world size; returns a completed ``torch.futures.Future[torch.Tensor]``. (Unannotated:
    DDP refuses a hook whose annotations are not exactly GradBucket / Future[Tensor], and torch
    is not imported here at module level.)"""
    import torch

    t = bucket.buffer()
    x = t.detach().numpy()  # a view: the driver writes the sum into the bucket itself
    state.client.allreduce(x, job=state.job, group=state.group, round=state.step & 0xFFFFFFFF,
                           out=x)
    t.div_(state.world_size)
    if bucket.is_last():
        state.step += 1
    fut: torch.futures.Future = torch.futures.Future()
    fut.set_result(t)
    return fut


def session_from_store(store: Any, rank: int) -> int:
    """The run's 16-bit session: drawn by rank 0 and published in the rendezvous store, so a
    restarted run (new store) never mixes with the old one's chunks."""
    if rank == 0:
        store.set(SESSION_KEY, str(secrets.randbelow(1 << 16)))
    return int(store.get(SESSION_KEY))
