"""`DeadLetterLog`: dead letters the operator hears about, not only counters that move.

A processor whose hook raises, or a `grace` too small for the input, can turn a
whole stream into dead letters; the node still works, so nothing else would say
so. This log says it three ways (docs/deadletters.md):

- the first hook failure of each stream, at once, with its exception and the
  traceback where the hook raised (`hook_failed`, an error);
- then, once per stats interval, one summary per stream and reason: how many,
  and an example key and offset (`dead_letters`, a warning);
- once per stream, a warning when the share of its fragments that were late,
  or else that became dead letters at all, crosses `warn_share`
  (`dead_letter_share`, `kind` `late` or `all`), naming `grace`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from framework.node.task import StreamTask
from sessionizer.sinks import DeadLetter

__all__ = ["DEFAULT_WARN_SHARE", "MIN_FRAGMENTS", "DeadLetterLog"]

DEFAULT_WARN_SHARE: Final = 0.05
"""Warn when more than this share of a stream's fragments are late or dead letters."""
MIN_FRAGMENTS: Final = 100
"""A share is judged only once a stream has read this many fragments (no warning on noise)."""


@dataclass
class _Tally:
    """Dead letters of one stream and reason since the last summary, with an example."""

    count: int
    key: str | None
    offset: int


class DeadLetterLog:
    """Logs the first hook failure per stream, summaries per interval, and high shares."""

    def __init__(
        self,
        log: Any,
        *,
        interval: float,
        warn_share: float = DEFAULT_WARN_SHARE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._interval = interval
        self._warn_share = warn_share
        self._clock = clock
        self._last_summary = clock()
        self._tallies: dict[tuple[str, str], _Tally] = {}
        self._first_failure_logged: set[str] = set()
        self._share_warned: set[str] = set()

    def record(self, letter: DeadLetter) -> None:
        """Count one dead letter handed to the sink; log it if it is its stream's first failure."""
        if letter.reason.startswith("hook:") and letter.stream not in self._first_failure_logged:
            self._first_failure_logged.add(letter.stream)
            self._log.error(
                "hook_failed",
                stream=letter.stream,
                offset=letter.offset,
                key=letter.session_key,
                reason=letter.reason,
                error=letter.error,
                session_id=letter.session_id,
                traceback=letter.traceback or "(none: the hook returned something unusable)",
                note="the fragments concerned go to the dead-letter topic; fix the processor, "
                "then `sessionizer deadletters replay` (further failures are summarized)",
            )
        tally = self._tallies.get((letter.stream, letter.reason))
        if tally is None:
            key = letter.session_key
            if key is None and letter.key is not None:
                key = letter.key.decode("utf-8", "replace")
            self._tallies[letter.stream, letter.reason] = _Tally(1, key, letter.offset)
        else:
            tally.count += 1

    def maybe_report(self, tasks: Iterable[StreamTask]) -> None:
        """Once per interval: log the summaries of what was counted, and check the shares."""
        now = self._clock()
        if now - self._last_summary < self._interval:
            return
        self._last_summary = now
        for (stream, reason), tally in sorted(self._tallies.items()):
            self._log.warning(
                "dead_letters",
                stream=stream,
                reason=_reason_class(reason),
                count=tally.count,
                example_key=tally.key,
                example_offset=tally.offset,
                interval_s=self._interval,
            )
        self._tallies.clear()
        for task in tasks:
            self._check_share(task)

    def _check_share(self, task: StreamTask) -> None:
        counters = task.engine.counters
        if counters.fragments < MIN_FRAGMENTS or task.stream in self._share_warned:
            return
        late_share = counters.late / counters.fragments
        dead_share = task.dead_letters / counters.fragments
        if late_share > self._warn_share:
            self._warn_share_of(
                task,
                "late",
                late_share,
                "more fragments arrive later than the processor's `grace` allows: raise "
                "`grace` to cover how far out of order the input is (docs/deadletters.md)",
                late=counters.late,
            )
        elif dead_share > self._warn_share:
            self._warn_share_of(
                task,
                "all",
                dead_share,
                "a large share of the stream is dead-lettered: see `sessionizer deadletters "
                "--stream` for the reasons (late ones: raise `grace`; hook:*: fix the processor)",
                dead_letters=task.dead_letters,
            )

    def _warn_share_of(
        self, task: StreamTask, kind: str, share: float, note: str, **count: int
    ) -> None:
        """Warn once per stream that `share` of its fragments are late (`kind`) or dead."""
        self._share_warned.add(task.stream)
        self._log.warning(
            "dead_letter_share",
            stream=task.stream,
            kind=kind,
            share=round(share, 4),
            **count,
            fragments=task.engine.counters.fragments,
            grace_s=task.engine.timing.grace_ms / 1000,
            note=note,
        )


def _reason_class(reason: str) -> str:
    """A reason without its details: `late`, `future`, `hook:update`, `bad-fragment`..."""
    return reason if reason.startswith("hook:") else reason.split(":", 1)[0]
