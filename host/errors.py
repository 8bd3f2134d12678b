"""The host driver's errors (raised by ``AggregatorClient`` and its parts)."""

from __future__ import annotations


class DriverError(RuntimeError):
    """Base class of the driver's errors."""


class AggregatorUnreachable(DriverError):
    """Nothing came back from the aggregator within the configured timeout."""


class ChunksMissing(DriverError):
    """Some chunks got no result after the configured retries/timeout."""

    def __init__(self, message: str, *, job: int, chunks: list[int]) -> None:
        super().__init__(message)
        self.job, self.chunks = job, chunks


class ConfigMismatch(DriverError):
    """The aggregator's configuration or a result disagrees with what this site sent."""


class WindowWarning(UserWarning):
    """The aggregator's job window cannot hold the chunks in flight the path needs (once per job)."""


class OverflowReported(DriverError):
    """Results carried the OVERFLOW flag and redoing them was disabled or did not help."""

    def __init__(self, message: str, *, job: int, chunks: list[int]) -> None:
        super().__init__(message)
        self.job, self.chunks = job, chunks
