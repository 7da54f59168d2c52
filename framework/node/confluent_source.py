"""`ConfluentRecordSource`: the node's `RecordSource` over confluent-kafka (librdkafka).

The `KafkaRecordSource` adapter over the client layer's confluent-kafka reader
(`framework.kafka.confluent_reader`): same contract, and every record
`consume()` handed out goes to the node with the errors beside them.
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.node.kafka_source import KafkaRecordSource

__all__ = ["ConfluentRecordSource"]


class ConfluentRecordSource(KafkaRecordSource):
    """Reads single-partition streams from chosen offsets, through confluent-kafka."""

    def __init__(
        self, bootstrap: str, *, client_id: str, properties: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(bootstrap, client_id=client_id, properties=properties, client="confluent")
