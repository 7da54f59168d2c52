"""The client layer's errors: both clients' failures mapped to the project's exceptions here.

kafka-python raises `KafkaError` subclasses, confluent-kafka raises
`KafkaException` (and `BufferError` for a full local queue) and reports
`KafkaError` values; the producer, the assigned reader and the keyed log raise
only these classes. (The admin client and the whole-topic readers still raise
kafka-python's own: `framework.kafka.admin.KafkaPythonError`.)
"""

from __future__ import annotations

from framework.kernel.errors import SessionizerError

__all__ = ["ClientError", "FlushIncomplete", "RecordTooLarge", "SendFailed"]


class ClientError(SessionizerError):
    """A Kafka client could not be created or did not do what was asked."""

    def __init__(self, text: str, detail: str | None = None) -> None:
        super().__init__(text)
        self.detail = text if detail is None else detail
        """The client's own description (kafka-python: the error's repr)."""


class SendFailed(ClientError):
    """A record was refused before it was queued (no metadata, no buffer space...)."""


class RecordTooLarge(SendFailed):
    """The record is larger than the producer or the broker accepts: sending it again fails too."""


class FlushIncomplete(ClientError):
    """Not everything queued was acknowledged or failed within the flush's timeout."""

    def __init__(self, text: str, detail: str | None = None, *, left: int | None = None) -> None:
        super().__init__(text, detail)
        self.left = left
        """How many records were still queued, when the client says."""
