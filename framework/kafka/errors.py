"""The client layer's errors: both clients' failures mapped to the project's exceptions here.

kafka-python raises `KafkaError` subclasses; confluent-kafka raises
`KafkaException` (carrying a `KafkaError` value) and `BufferError` for a full
local queue.  This module is the one place those classes are caught: every
call into a client runs inside one of the context managers below
(`KafkaPythonErrors`, `ConfluentErrors`), which raise the project's class for
what the client raised (`kafka_python_error`, `confluent_error` say which), and
so no other module names a client's exception class.  The clients' modules are
looked up in `sys.modules` only when something was raised: a client that was
never imported raised nothing, and importing this module imports neither.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from framework.kernel.errors import SessionizerError

__all__ = [
    "CLIENT",
    "CONFLUENT",
    "CONFLUENT_SENDING",
    "FLUSHING",
    "SENDING",
    "ClientError",
    "ClientTimeout",
    "ConfluentErrors",
    "FlushIncomplete",
    "InvalidReplication",
    "KafkaPythonErrors",
    "MappedClient",
    "PositionOutside",
    "RecordTooLarge",
    "SendFailed",
    "TimestampRefused",
    "TopicExists",
    "confluent_error",
    "kafka_python_error",
]


class ClientError(SessionizerError):
    """A Kafka client could not be created or did not do what was asked."""

    def __init__(self, text: str, detail: str | None = None, *, client_class: str = "") -> None:
        super().__init__(text)
        self.detail = text if detail is None else detail
        """The client's own description (kafka-python: the error's repr)."""
        self.client_class = client_class
        """The class name of the client's exception this stands for ("" if none)."""


class SendFailed(ClientError):
    """A record was refused before it was queued (no metadata, no buffer space...)."""


class RecordTooLarge(SendFailed):
    """The record is larger than the producer or the broker accepts: sending it again fails too."""


class TimestampRefused(SendFailed):
    """The broker refused the record's timestamp, its event time, as too far from the broker's
    own clock (`message.timestamp.after.max.ms`: an hour ahead by default since Kafka 4):
    sending it again fails too."""


class FlushIncomplete(ClientError):
    """Not everything queued was acknowledged or failed within the flush's timeout."""

    def __init__(
        self,
        text: str,
        detail: str | None = None,
        *,
        left: int | None = None,
        client_class: str = "",
    ) -> None:
        super().__init__(text, detail, client_class=client_class)
        self.left = left
        """How many records were still queued, when the client says."""


class ClientTimeout(ClientError):
    """The client gave up waiting (for metadata, a response, a flush)."""


class PositionOutside(ClientError):
    """Read positions outside their logs (kafka-python's `OffsetOutOfRangeError`)."""

    def __init__(
        self,
        text: str,
        detail: str | None = None,
        *,
        positions: Mapping[str, int],
        client_class: str = "",
    ) -> None:
        super().__init__(text, detail, client_class=client_class)
        self.positions = dict(positions)
        """Topic -> the read position outside its log (empty: the client named none)."""


class TopicExists(ClientError):
    """A topic to be created exists already."""


class InvalidReplication(ClientError):
    """A replication factor the cluster cannot give (more than its brokers)."""


_Mapper = Callable[[BaseException, type[ClientError]], ClientError | None]
"""What a client's exception maps to (None: not that client's)."""


def kafka_python_error(
    exc: BaseException, default: type[ClientError] = ClientError
) -> ClientError | None:
    """The project's exception for a kafka-python one (`default` for the generic ones).

    None when `exc` is not kafka-python's.
    """
    errors: Any = sys.modules.get("kafka.errors")
    if errors is None or not isinstance(exc, errors.KafkaError):
        return None
    text, detail, name = str(exc), repr(exc), type(exc).__name__
    if isinstance(exc, errors.MessageSizeTooLargeError | errors.RecordListTooLargeError):
        return RecordTooLarge(text, detail, client_class=name)
    if isinstance(exc, errors.InvalidTimestampError):
        return TimestampRefused(text, detail, client_class=name)
    if isinstance(exc, errors.OffsetOutOfRangeError):
        raw = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
        positions = {partition.topic: int(offset) for partition, offset in raw.items()}
        return PositionOutside(text, detail, positions=positions, client_class=name)
    if isinstance(exc, errors.TopicAlreadyExistsError):
        return TopicExists(text, detail, client_class=name)
    if isinstance(exc, errors.InvalidReplicationFactorError):
        return InvalidReplication(text, detail, client_class=name)
    if isinstance(exc, errors.KafkaTimeoutError) and default is ClientError:
        return ClientTimeout(text, detail, client_class=name)
    return default(text, detail, client_class=name)


def confluent_error(
    exc: BaseException, default: type[ClientError] = ClientError
) -> ClientError | None:
    """The project's exception for a confluent-kafka one (`default` for the generic ones).

    None when `exc` is not confluent-kafka's (`BufferError`, a full local queue, counts
    as its own: the layer calls nothing else that raises it).
    """
    if isinstance(exc, BufferError):
        return SendFailed(f"the local queue is full ({exc})", repr(exc), client_class="BufferError")
    client: Any = sys.modules.get("confluent_kafka")
    if client is None or not isinstance(exc, client.KafkaException):
        return None
    error = exc.args[0] if exc.args else None
    code = error.code() if isinstance(error, client.KafkaError) else None
    text, name = str(exc), type(exc).__name__
    if code == client.KafkaError.MSG_SIZE_TOO_LARGE:
        return RecordTooLarge(text, client_class=name)
    if code == client.KafkaError.INVALID_TIMESTAMP:
        return TimestampRefused(text, client_class=name)
    if code == client.KafkaError.TOPIC_ALREADY_EXISTS:
        return TopicExists(text, client_class=name)
    timed_out = code in (client.KafkaError._TIMED_OUT, client.KafkaError.REQUEST_TIMED_OUT)
    return (ClientTimeout if timed_out and default is ClientError else default)(
        text, client_class=name
    )


class _MappedErrors:
    """`with` this around calls into a client: what `mapper` maps comes out as the project's.

    One instance is reused (no state), so a hot path pays for no allocation.
    """

    __slots__ = ("_default", "_mapper")

    def __init__(self, mapper: _Mapper, default: type[ClientError]) -> None:
        self._mapper = mapper
        self._default = default

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is not None:
            mapped = self.mapped(exc)
            if mapped is not None:
                raise mapped from exc

    def mapped(self, exc: BaseException) -> ClientError | None:
        """What `exc` comes out of the `with` as (None: it is no client's, it passes as it is).

        For a hot path's `except` clause: a `with` costs two calls per use, a `try` none.
        """
        return self._mapper(exc, self._default)


class KafkaPythonErrors(_MappedErrors):
    """`with` this around calls into kafka-python: its exceptions come out as the project's."""

    __slots__ = ()

    def __init__(self, default: type[ClientError] = ClientError) -> None:
        super().__init__(kafka_python_error, default)


class ConfluentErrors(_MappedErrors):
    """`with` this around calls into confluent-kafka: its exceptions come out as the project's."""

    __slots__ = ()

    def __init__(self, default: type[ClientError] = ClientError) -> None:
        super().__init__(confluent_error, default)


class MappedClient:
    """A kafka-python client object whose method calls raise the project's exceptions.

    What `framework.kafka.admin.admin_client` and `framework.kafka.consumer.assigned_consumer`
    return: their callers (status, provisioning, read-back...) catch `ClientError` and never
    kafka-python's classes.  Attributes that are not methods are handed out as they are.
    """

    __slots__ = ("_client", "_errors")

    def __init__(self, client: Any, errors: KafkaPythonErrors | None = None) -> None:
        self._client = client
        self._errors = CLIENT if errors is None else errors

    @property
    def client(self) -> Any:
        """The client object itself (for the layer's own modules)."""
        return self._client

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._client, name)
        if not callable(found):
            return found
        errors = self._errors

        def mapped(*args: Any, **kwargs: Any) -> Any:
            with errors:
                return found(*args, **kwargs)

        return mapped


CLIENT = KafkaPythonErrors()
"""kafka-python calls: `ClientError` (or the specific class of `kafka_python_error`)."""
SENDING = KafkaPythonErrors(SendFailed)
"""kafka-python sends: `SendFailed` (`RecordTooLarge` when it is permanent)."""
FLUSHING = KafkaPythonErrors(FlushIncomplete)
"""kafka-python flushes: `FlushIncomplete`."""
CONFLUENT = ConfluentErrors()
"""confluent-kafka calls: `ClientError` (or the specific class of `confluent_error`)."""
CONFLUENT_SENDING = ConfluentErrors(SendFailed)
"""confluent-kafka sends: `SendFailed` (`RecordTooLarge` when it is permanent; a full local
queue is a `SendFailed` whose `client_class` is "BufferError")."""
