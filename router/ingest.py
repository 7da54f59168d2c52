"""Feed lines or generated fragments through a `StreamProducer`, counting as the thesis did."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import structlog

from router.errors import MalformedLine
from router.formats import DEFAULT_SYSLOG_YEAR, Format, parse_line
from router.fragment import ParsedFragment
from router.producer import ProducerStats, StreamProducer

__all__ = ["Progress", "produce_fragments", "produce_lines"]

Progress = Callable[[ProducerStats], None]
_log = structlog.get_logger("sessionizer.ingest")
_PROGRESS_EVERY = 50_000


def produce_lines(
    producer: StreamProducer,
    lines: Iterable[str],
    fmt: Format,
    *,
    year: int = DEFAULT_SYSLOG_YEAR,
    end_of_input: bool = False,
    progress: Progress | None = None,
) -> ProducerStats:
    """Parse and send every line; a malformed line is counted with its reason, never raised."""
    parsed = _parse(lines, fmt, year, producer.stats)
    return _send_all(producer, parsed, end_of_input, progress)


def produce_fragments(
    producer: StreamProducer,
    fragments: Iterable[ParsedFragment],
    *,
    end_of_input: bool = False,
    progress: Progress | None = None,
) -> ProducerStats:
    """Send already-parsed fragments (e.g. generated traffic)."""
    return _send_all(producer, _count(fragments, producer.stats), end_of_input, progress)


def _parse(
    lines: Iterable[str], fmt: Format, year: int, stats: ProducerStats
) -> Iterator[ParsedFragment]:
    for number, line in enumerate(lines, start=1):
        stats.read += 1
        try:
            fragment = parse_line(fmt, line, year=year)
        except MalformedLine as exc:
            stats.reject(exc.reason)
            _log.info("line_rejected", line=number, reason=exc.reason, detail=exc.detail[:200])
            continue
        stats.parsed += 1
        yield fragment


def _count(fragments: Iterable[ParsedFragment], stats: ProducerStats) -> Iterator[ParsedFragment]:
    for fragment in fragments:
        stats.read += 1
        stats.parsed += 1
        yield fragment


def _send_all(
    producer: StreamProducer,
    fragments: Iterable[ParsedFragment],
    end_of_input: bool,
    progress: Progress | None,
) -> ProducerStats:
    for fragment in fragments:
        producer.send(fragment)
        if progress is not None and producer.stats.read % _PROGRESS_EVERY == 0:
            progress(producer.stats)
    if end_of_input:
        producer.end_of_input()
    else:
        producer.flush()
    return producer.stats
