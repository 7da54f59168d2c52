"""`StreamProcessor`, the class users subclass to define their sessions."""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from sessionizer.errors import ProcessorError
from sessionizer.producer_clocks import DEFAULT_MAX_PRODUCER_SKEW, skew_ms

__all__ = ["Session", "StreamProcessor", "Timing"]

Session = TypeVar("Session")
"""The type of a processor's session object (what `open` returns and `update` folds into)."""


class StreamProcessor(ABC, Generic[Session]):
    """Defines what a session is and what a finished session yields.

    Generic over the session object: `class Visits(StreamProcessor[dict[str, int]])`
    lets a type checker hold `open`, `update` and `close` to one type.

    Class attributes (seconds of event time; validated when the class is defined
    and again when an engine is built):

    - ``timeout``: inactivity gap that ends a session (default 30 minutes);
    - ``grace``: how far behind stream time a fragment may arrive and still count
      (default 60 s: the real logs' out-of-order lines, docs/sessions.md);
    - ``max_session_duration``: split sessions longer than this (default 24 hours;
      None: never split);
    - ``max_lead``: how far ahead of stream time a record may jump without a second
      record to confirm it (default 1 day; None: any jump is taken at once).

    Each hook receives the fragment's decoded fields (a dict).  Call order:

    1. On arrival, in offset order, for every fragment:
       ``timestamp(fragment, record_timestamp_ms)`` gives its event time (ms; a
       finite number within ``framework.kernel.limits``' range, else a dead letter).
    2. Then, unless the fragment is late, refuted as dated too far ahead, or skipped
       on resume: ``is_end(fragment)`` says whether it ends its session.
    3. In event-time order within each session, as soon as a fragment's event time
       is below ``stream time - grace`` (no on-time fragment can sort before it any
       more) or its session ends: ``open(key, first_fragment)`` returns the session
       object; ``update(session, fragment)`` is called for *every* fragment, the
       first one included (returning a new object replaces the session, None keeps
       it).
    4. Once a session can no longer change (see docs/sessions.md):
       ``close(key, session)`` returns the result dict.

    Hooks must be deterministic: a replay after a crash calls them again on the
    same fragments and must produce the same results.  If a hook raises, the
    stream goes on and the fragments concerned go to the dead-letter topic.

    On a planned move the open sessions are handed to the next owner
    (docs/sessions.md, "Handover"): msgpack carries dicts, lists, str, bytes,
    int, float, bool and None as they are; for any other session object define
    ``dump_session`` / ``load_session``.  The optional class attribute
    ``version`` names the processor's state format: a handover written by
    another ``module:qualname`` or ``version`` is not used (the stream replays).
    """

    timeout: float = 30 * 60
    grace: float = 60
    max_session_duration: float | None = 24 * 60 * 60
    max_lead: float | None = 24 * 60 * 60

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Timing.of(cls)  # a bad attribute fails at class definition, naming the class
        _check_hooks(cls)

    def timestamp(self, fragment: Mapping[str, Any], record_timestamp_ms: int) -> int:
        """Return the fragment's event time in epoch ms (default: the record's timestamp)."""
        return record_timestamp_ms

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        """Return True if this fragment ends its session (default: never)."""
        return False

    @abstractmethod
    def open(self, key: str, fragment: Mapping[str, Any]) -> Session:
        """Return a new session object for `key`, given its first fragment."""

    @abstractmethod
    def update(self, session: Session, fragment: Mapping[str, Any]) -> Session | None:
        """Fold one fragment into the session; return a replacement session or None."""

    @abstractmethod
    def close(self, key: str, session: Session) -> Mapping[str, Any]:
        """Return the finished session's result: a JSON-able dict."""

    def dump_session(self, session: Session) -> Any:
        """Return the session object as msgpack-able data, for a handover (default: itself).

        The default accepts exactly dict, list, str, bytes, int, float, bool and None
        (no tuples, sets or subclasses: they would not come back as they were); a
        session it cannot carry makes the stream's next owner replay instead.
        """
        return session

    def load_session(self, data: Any) -> Session:
        """Rebuild a session object from what `dump_session` returned (default: the data)."""
        return cast(Session, data)


_HOOK_PARAMETERS = {
    "timestamp": ("fragment", "record_timestamp_ms"),
    "is_end": ("fragment",),
    "open": ("key", "fragment"),
    "update": ("session", "fragment"),
    "close": ("key", "session"),
    "dump_session": ("session",),
    "load_session": ("data",),
}
"""The arguments the engine passes each hook, positionally, after `self`."""


def _check_hooks(cls: type) -> None:
    """A hook defined on `cls` that cannot take its arguments fails now, naming it: called,
    it would raise on every fragment, each then a dead letter."""
    for name, parameters in _HOOK_PARAMETERS.items():
        hook = cls.__dict__.get(name)
        if not inspect.isfunction(hook):
            continue  # inherited, or not a plain function (a callable object, a partial)
        signature = inspect.signature(hook)
        try:
            signature.bind(None, *parameters)
        except TypeError:
            raise ProcessorError(
                f"{cls.__name__}.{name} must take ({', '.join(parameters)}) after self, as "
                f"the engine calls it; it is defined as {name}{signature}"
            ) from None


@dataclass(frozen=True, slots=True)
class Timing:
    """A processor's time settings in integer milliseconds, validated.

    Every attribute of the processor the engine reads, besides its hooks, is here:
    a handover is used only by an owner whose `Timing` equals the writer's
    (`sessionizer.handover`), so a setting that can change the output must be a field.
    """

    timeout_ms: int
    grace_ms: int
    max_duration_ms: int | None
    max_lead_ms: int | None = None
    max_producer_skew_ms: int | None = DEFAULT_MAX_PRODUCER_SKEW * 1000
    """`max_producer_skew` (several producers; None: unbounded), see `producer_clocks`."""

    @classmethod
    def of(cls, processor: StreamProcessor[Any] | type[StreamProcessor[Any]]) -> Timing:
        """Read and validate the time attributes of a processor (class or instance)."""
        owner = processor.__name__ if isinstance(processor, type) else type(processor).__name__
        timeout = _to_ms(owner, "timeout", processor.timeout, allow_zero=False)
        grace = _to_ms(owner, "grace", processor.grace, allow_zero=True)
        maximum = _optional_ms(owner, "max_session_duration", processor.max_session_duration)
        lead = _optional_ms(owner, "max_lead", processor.max_lead)
        return cls(timeout, grace, maximum, lead, skew_ms(processor))


def _optional_ms(owner: str, name: str, seconds: object) -> int | None:
    """Validate a positive number of seconds that may be None (the feature is off)."""
    return None if seconds is None else _to_ms(owner, name, seconds, allow_zero=False)


def _to_ms(owner: str, name: str, seconds: object, *, allow_zero: bool) -> int:
    wanted = "a number of seconds >= 0" if allow_zero else "a positive number of seconds"
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise ProcessorError(f"{owner}.{name} must be {wanted}, got {seconds!r}")
    millis = round(seconds * 1000)
    if millis == 0 and not allow_zero:
        raise ProcessorError(f"{owner}.{name} must be at least 1 ms, got {seconds!r} s")
    return millis
