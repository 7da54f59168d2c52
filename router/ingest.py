"""Feed lines or generated fragments through a `StreamProducer`, counting as the thesis did."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import structlog

from router.errors import MalformedLine
from router.formats import FormatSpec, line_parser
from router.fragment import ParsedFragment
from router.producer import EncodedFragment, ProducerStats, StreamProducer

__all__ = ["Progress", "produce_fragments", "produce_lines"]

Progress = Callable[[ProducerStats], None]
T = TypeVar("T")
_log = structlog.get_logger("sessionizer.ingest")
_PROGRESS_EVERY = 50_000


def produce_lines(
    producer: StreamProducer,
    lines: Iterable[str],
    fmt: FormatSpec,
    *,
    year: int | None = None,
    end_of_input: bool = False,
    progress: Progress | None = None,
) -> ProducerStats:
    """Parse and send every line; a malformed line is counted with its reason, never raised.

    `fmt` is a `Format`, a built-in name or MODULE:NAME; `year` as for `parse_line`.
    """
    encoded = _encoded(producer, lines, line_parser(fmt, year=year))
    return _send_all(producer, encoded, end_of_input, progress)


def produce_fragments(
    producer: StreamProducer,
    fragments: Iterable[ParsedFragment],
    *,
    end_of_input: bool = False,
    progress: Progress | None = None,
) -> ProducerStats:
    """Send already-parsed fragments (e.g. generated traffic); unencodable ones are rejected."""
    encoded = _encoded(producer, fragments, lambda fragment: fragment)
    return _send_all(producer, encoded, end_of_input, progress)


def _encoded(
    producer: StreamProducer, inputs: Iterable[T], to_fragment: Callable[[T], ParsedFragment]
) -> Iterator[EncodedFragment]:
    """Count, parse and encode each input; a malformed one is counted by reason and skipped."""
    stats = producer.stats
    for number, item in enumerate(inputs, start=1):
        stats.read += 1
        try:
            encoded = producer.encode(to_fragment(item))
        except MalformedLine as exc:
            stats.reject(exc.reason)
            _log.info("line_rejected", line=number, reason=exc.reason, detail=exc.detail[:200])
            continue
        stats.parsed += 1
        yield encoded


def _send_all(
    producer: StreamProducer,
    fragments: Iterable[EncodedFragment],
    end_of_input: bool,
    progress: Progress | None,
) -> ProducerStats:
    for fragment in fragments:
        producer.send_encoded(fragment)
        if progress is not None and producer.stats.read % _PROGRESS_EVERY == 0:
            progress(producer.stats)
    if end_of_input:
        producer.end_of_input()
    else:
        producer.flush()
    return producer.stats
