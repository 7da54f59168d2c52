"""Errors raised by the router: bad input lines, undecodable records, misconfigured streams."""

from __future__ import annotations

from typing import Final, Literal, TypeAlias, get_args

from framework.kernel.errors import AppError, ConfigError, SessionizerError

__all__ = [
    "BUILTIN_REASONS",
    "BuiltinReason",
    "FormatError",
    "MalformedLine",
    "MalformedReason",
    "NothingParsed",
    "ProduceFailed",
    "ProvisioningError",
    "RouterError",
    "StreamCountMismatch",
    "StreamsNotCreated",
    "UndecodableReason",
    "UndecodableRecord",
]

# The reason codes are counted per reason in `produce --json`; keep them short and stable.
BuiltinReason = Literal[
    "empty",
    "unparseable",
    "bad-timestamp",
    "bad-request",
    "not-sshd",
    "bad-json",
    "missing-key",
    "unencodable",
]
BUILTIN_REASONS: Final[tuple[BuiltinReason, ...]] = get_args(BuiltinReason)
"""The codes of the built-in formats and the producer (docs/routing.md, "Input formats")."""
MalformedReason: TypeAlias = str
"""Open: a custom format's reasons are its own (by convention short, lower-case, hyphenated)."""

# Why a Kafka record went to the dead-letter topic (docs/routing.md lists them); the node
# writes the code in the dead letter's `reason` header, so keep them short and stable.
UndecodableReason = Literal[
    "bad-headers",
    "unknown-kind",
    "missing-value",
    "not-msgpack",
    "unhashable-key",
    "bad-watermark",
    "missing-key",
    "key-not-utf8",
    "key-too-long",
    "bad-timestamp",
    "not-a-map",
    "bad-field-name",
    "bad-fragment",
]


class RouterError(SessionizerError):
    """Base class of the errors raised by `router`."""


class MalformedLine(RouterError):
    """An input line cannot become a fragment; `reason` is a short stable code."""

    def __init__(self, reason: MalformedReason, detail: str = "") -> None:
        self.reason: MalformedReason = reason
        self.detail = detail
        super().__init__(f"malformed line ({reason}): {detail}" if detail else reason)


class FormatError(RouterError, ConfigError):
    """An input format (`--format NAME` or `MODULE:NAME`) cannot be found, loaded or set up
    as asked (`--time-unit` for a format without one)."""


class UndecodableRecord(RouterError):
    """A Kafka record is not a fragment or watermark; it goes to the dead-letter topic."""

    def __init__(
        self, reason: UndecodableReason, detail: str = "", *, offset: int | None = None
    ) -> None:
        self.reason: UndecodableReason = reason
        self.detail = detail
        self.offset = offset
        where = "record" if offset is None else f"record at offset {offset}"
        text = f"{where} cannot be decoded ({reason})"
        super().__init__(f"{text}: {detail}" if detail else text)


class StreamCountMismatch(RouterError, ConfigError, AppError):
    """The stream count this process was given differs from the one recorded in ZooKeeper."""

    def __init__(self, app: str, *, expected: int, configured: int) -> None:
        self.expected = expected
        self.configured = configured
        # Routing with a different count would send keys to the wrong streams, so refuse
        # and tell the operator both numbers and the two ways out.
        super().__init__(
            app,
            f"app {app!r} has {expected} streams recorded in ZooKeeper, but this process is "
            f"configured for {configured}; configure {expected} streams, or use a new app "
            f"name and run `sessionizer streams create --count {configured}` for it",
        )


class StreamsNotCreated(RouterError, ConfigError, AppError):
    """No stream count is recorded in ZooKeeper for the app: its streams were never created."""

    def __init__(self, app: str) -> None:
        super().__init__(
            app, f"app {app!r} has no streams; run `sessionizer streams create --count N`"
        )


class NothingParsed(RouterError, ConfigError):
    """Every input line was rejected: almost always the wrong --format."""

    def __init__(
        self, fmt: str, read: int, reasons: dict[str, int], would_parse: list[str]
    ) -> None:
        self.format = fmt
        self.would_parse = would_parse
        counts = ", ".join(f"{r}={n:,}" for r, n in sorted(reasons.items()))
        hint = (
            f"the first lines parse with --format {' or '.join(would_parse)}"
            if would_parse
            else "check --format (docs/routing.md)"
        )
        super().__init__(
            f"none of the {read:,} lines parsed as {fmt} ({counts}); {hint}; nothing was sent"
        )


class ProduceFailed(RouterError, AppError):
    """Kafka did not acknowledge some records; they must be treated as not delivered."""

    HINT = (
        "check that the brokers are up and the stream topics exist (`sessionizer streams "
        "create`), then produce again"
    )

    def __init__(self, app: str, detail: str, hint: str = HINT) -> None:
        super().__init__(app, f"producing for app {app!r} failed: {detail}; {hint}")


class ProvisioningError(RouterError):
    """The stream topics could not be created or do not match the configuration."""
