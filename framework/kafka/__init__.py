"""The Kafka client layer: the one place that imports kafka-python or confluent-kafka.

It imports only `framework.kernel` (and the two client libraries), and every
layer may import it. `open_producer`, `open_reader`, `open_keyed_log`,
`open_transactional_producer` and `open_committed_log` (exactly-once) choose the
client; the errors of both clients are mapped to the project's exceptions in one
module, `framework.kafka.errors`.
"""

from framework.kafka.errors import ClientError, FlushIncomplete, RecordTooLarge, SendFailed
from framework.kafka.keyed_log import KeyedLog, Unwritten, open_keyed_log
from framework.kafka.producer import DeliveryFailure, Headers, RecordProducer, open_producer
from framework.kafka.reader import AssignedReader, ReaderFetch, open_reader
from framework.kafka.transactional import (
    CommittedLog,
    ProducerFenced,
    TransactionAborted,
    TransactionalProducer,
    TransactionRetriable,
    open_committed_log,
    open_transactional_producer,
)

__all__ = [
    "AssignedReader",
    "ClientError",
    "CommittedLog",
    "DeliveryFailure",
    "FlushIncomplete",
    "Headers",
    "KeyedLog",
    "ProducerFenced",
    "ReaderFetch",
    "RecordProducer",
    "RecordTooLarge",
    "SendFailed",
    "TransactionAborted",
    "TransactionRetriable",
    "TransactionalProducer",
    "Unwritten",
    "open_committed_log",
    "open_keyed_log",
    "open_producer",
    "open_reader",
    "open_transactional_producer",
]
