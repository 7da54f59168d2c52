"""Feed lines or generated fragments through a `StreamProducer`, counting as the thesis did.

A rejected line is logged at debug level (`line_rejected`), and each reason's
count once at info level when the input ends (`lines_rejected`). Input of which
no line parses is refused (`NothingParsed`) before the end-of-input watermark
is written, naming the built-in formats its first lines do parse with. The first
event time before 1971 is warned of once (`event_time_near_epoch`): read as
milliseconds, epoch seconds land there, and their sessions would silently span
a thousand times their gaps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import structlog

from router.errors import MalformedLine, NothingParsed
from router.format_registry import FORMATS, FormatSpec, load_format
from router.formats import line_parser
from router.fragment import ParsedFragment
from router.producer import ProducerStats, StreamProducer

__all__ = ["Progress", "formats_that_parse", "produce_fragments", "produce_lines"]

Progress = Callable[[ProducerStats], None]
T = TypeVar("T")
_log = structlog.get_logger("sessionizer.ingest")
_PROGRESS_EVERY = 50_000
_SAMPLE_LINES = 20  # non-blank lines kept from the start, to suggest a --format
# 1971-01-01 in epoch ms. Epoch seconds of any year from 2001 to 2969 read as ms fall
# before it, and no log of this century has a genuine time there.
_NEAR_EPOCH_MS = 31_536_000_000


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
    Raises `NothingParsed` (and writes no end-of-input watermark) when lines were
    read and none of them parsed.
    """
    parse = line_parser(fmt, year=year)
    sample: list[str] = []
    stats = producer.stats
    warned = False

    def parse_and_sample(line: str) -> ParsedFragment:
        nonlocal warned
        if len(sample) < _SAMPLE_LINES and line.strip():
            sample.append(line)
        fragment = parse(line)
        if fragment.timestamp_ms < _NEAR_EPOCH_MS and not warned:
            warned = True
            _warn_near_epoch(stats.read, fragment.timestamp_ms)
        return fragment

    _send_each(producer, lines, parse_and_sample, progress)
    _log_reasons(stats)
    if stats.read and not stats.parsed:
        name = load_format(fmt).name
        others = [f for f in formats_that_parse(sample, year=year) if f != name]
        raise NothingParsed(name, stats.read, dict(stats.reasons), others)
    _finish(producer, end_of_input)
    return stats


def produce_fragments(
    producer: StreamProducer,
    fragments: Iterable[ParsedFragment],
    *,
    end_of_input: bool = False,
    progress: Progress | None = None,
) -> ProducerStats:
    """Send already-parsed fragments (e.g. generated traffic); unencodable ones are rejected."""
    _send_each(producer, fragments, lambda fragment: fragment, progress)
    _log_reasons(producer.stats)
    _finish(producer, end_of_input)
    return producer.stats


def formats_that_parse(lines: Sequence[str], *, year: int | None = None) -> list[str]:
    """The built-in formats that parse at least one of `lines`, the most lines first."""
    parsed: dict[str, int] = {}
    for name in FORMATS:
        parse = line_parser(name, year=year)
        count = 0
        for line in lines:
            try:
                parse(line)
            except MalformedLine:
                continue
            count += 1
        if count:
            parsed[name] = count
    return sorted(parsed, key=lambda name: -parsed[name])


def _send_each(
    producer: StreamProducer,
    inputs: Iterable[T],
    to_fragment: Callable[[T], ParsedFragment],
    progress: Progress | None,
) -> None:
    """Count, parse and send each input; a malformed one is counted by reason and skipped."""
    stats = producer.stats
    for number, item in enumerate(inputs, start=1):
        stats.read += 1
        try:
            # One call routes, encodes and queues (`FragmentPath.send`, compiled). Looked up
            # for every fragment: a live resize gives the producer a new path.
            producer.send(to_fragment(item))
        except MalformedLine as exc:
            stats.reject(exc.reason)
            _log.debug("line_rejected", line=number, reason=exc.reason, detail=exc.detail[:200])
            continue
        stats.parsed += 1
        if progress is not None and stats.read % _PROGRESS_EVERY == 0:
            progress(stats)


def _warn_near_epoch(line: int, timestamp_ms: int) -> None:
    moment = datetime.fromtimestamp(timestamp_ms / 1000, UTC)
    _log.warning(
        "event_time_near_epoch",
        line=line,
        timestamp_ms=timestamp_ms,
        time=moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        note="event times are epoch milliseconds; a time in 1970 usually means the input "
        "gives seconds: multiply them by 1000 (jsonl: --time-unit s, or ISO-8601); sent as "
        "they are",
    )


def _log_reasons(stats: ProducerStats) -> None:
    """One info line per rejection reason (the lines themselves are logged at debug)."""
    for reason, count in sorted(stats.reasons.items()):
        _log.info("lines_rejected", reason=reason, lines=count, of_read=stats.read)


def _finish(producer: StreamProducer, end_of_input: bool) -> None:
    if end_of_input:
        producer.end_of_input()
    else:
        producer.flush()
