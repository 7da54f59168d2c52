"""Errors raised by the aggregation job."""

from __future__ import annotations

from framework.kernel.errors import SessionizerError

__all__ = ["AggregationError", "SessionsTopicError", "SparkSetupError"]


class AggregationError(SessionizerError):
    """Base class of the errors raised by `sessionizer.aggregation`."""


class SparkSetupError(AggregationError):
    """Spark cannot be started as needed: its Kafka source jars are missing or mismatched."""


class SessionsTopicError(AggregationError):
    """`<app>.sessions` cannot be read: Kafka is unreachable or the topic does not exist."""
