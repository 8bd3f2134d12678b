"""The host driver's errors (raised by ``AggregatorClient`` and its parts)."""

from __future__ import annotations


class DriverError(RuntimeError):
    """Base class of the driver's errors."""


class ChunkError(DriverError):
    """An error about some chunks of one job: ``job`` and ``chunks`` (their numbers)."""

    def __init__(self, message: str, *, job: int, chunks: list[int]) -> None:
        super().__init__(message)
        self.job, self.chunks = job, chunks


class AggregatorUnreachable(DriverError):
    """Nothing came back from the aggregator within the configured timeout."""


class ChunksMissing(ChunkError):
    """Some chunks got no result after the configured retries/timeout."""


class ConfigMismatch(DriverError):
    """The aggregator's configuration or a result disagrees with what this site sent."""


class WindowWarning(UserWarning):
    """The aggregator's job window cannot hold the chunks in flight the path needs (once per job)."""


class OverflowReported(ChunkError):
    """Results carried the OVERFLOW flag and redoing them was disabled or did not help."""
