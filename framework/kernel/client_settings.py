"""Client settings for secured clusters: `--kafka-config FILE` and `--zk-auth SCHEME:CREDENTIALS`.

A Kafka client properties file uses the standard property names
(`security.protocol`, `sasl.mechanism`, `sasl.username`, `sasl.password`,
`ssl.ca.location`, ...), one `name=value` per line, `#` comments; every
property is passed through to the client and wins over the project's default
(`client.id`, `linger.ms`, timeouts, ...), except the few the delivery
guarantee rests on (`RESERVED_PROPERTIES`), which the file may not set.
Secrets never reach logs, `status` output or process titles: `redacted` is
what may be shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from framework.kernel.errors import ConfigError

__all__ = [
    "RESERVED_PROPERTIES",
    "SECRET_FLAGS",
    "SECRET_MARKERS",
    "check_client_properties",
    "hide_secret_arguments",
    "parse_zk_auth",
    "read_kafka_properties",
    "read_zk_auth",
    "redacted",
]

SECRET_MARKERS = ("password", "secret", "token", "sasl.jaas.config", "key.pem", "credentials")
"""A property whose name contains one of these is a secret."""

RESERVED_PROPERTIES = frozenset(
    {
        "bootstrap.servers",  # --bootstrap / SESSIONIZER_BOOTSTRAP says where
        "group.id",  # streams are assigned by ZooKeeper claims, never by a consumer group
        "enable.auto.commit",
        "enable.auto.offset.store",
        "auto.offset.reset",  # a position outside the log must quarantine, not jump
        "acks",  # at-least-once output needs acks=all and idempotence
        "enable.idempotence",
        "isolation.level",
    }
)
"""Client properties the project sets itself because its guarantees rest on them."""


def read_kafka_properties(path: str | Path) -> dict[str, str]:
    """Read a client properties file; a missing file or a malformed line is a clear error."""
    file = Path(path)
    text = _read_text(
        file, "--kafka-config ", "pass a properties file or unset SESSIONIZER_KAFKA_CONFIG"
    )
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        name, separator, value = line.partition("=")
        if not separator or not name.strip():
            raise ConfigError(f"--kafka-config {file}, line {number}: expected name=value")
        check_client_properties([name.strip()], f"--kafka-config {file}, line {number}")
        properties[name.strip()] = value.strip()
    return properties


def check_client_properties(names: Iterable[str], where: str) -> None:
    """Refuse the properties the project must set itself (`RESERVED_PROPERTIES`)."""
    for name in names:
        if name in RESERVED_PROPERTIES:
            raise ConfigError(
                f"{where}: {name!r} is set by sessionizer itself (assignment, offsets and "
                "delivery guarantees rest on it); remove it"
            )


def redacted(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties with every secret's value replaced, for logs and status."""
    return {
        name: "***" if any(marker in name.lower() for marker in SECRET_MARKERS) else value
        for name, value in properties.items()
    }


SECRET_FLAGS = ("--zk-auth",)
"""Command-line flags whose value is a secret (prefer their environment variables)."""


def hide_secret_arguments(argv: Sequence[str]) -> list[str] | None:
    """`argv` with the values of `SECRET_FLAGS` masked, or None if it holds none."""
    shown, hidden = list(argv), False
    for index, argument in enumerate(shown):
        for flag in SECRET_FLAGS:
            if argument == flag and index + 1 < len(shown):
                shown[index + 1] = "***"
                hidden = True
            elif argument.startswith(flag + "="):
                shown[index] = flag + "=***"
                hidden = True
    return shown if hidden else None


def read_zk_auth(value: str | None) -> str | None:
    """`--zk-auth` as given, or for `@FILE` the identity FILE holds (a mounted secret).

    In FILE, blank lines and lines starting with `#` are skipped and the one
    other line is the identity; a file with none means no authentication (the
    default secret of deploy/). None or "" is no authentication too.
    """
    if not value or not value.startswith("@"):
        return value or None
    file = Path(value[1:])
    text = _read_text(
        file,
        "--zk-auth @",
        "pass SCHEME:CREDENTIALS or @FILE of a readable file (env SESSIONIZER_ZK_AUTH)",
    )
    lines = [line.strip() for line in text.splitlines()]
    identities = [line for line in lines if line and not line.startswith("#")]
    if len(identities) > 1:
        raise ConfigError(f"--zk-auth @{file}: {len(identities)} identities; keep one line")
    return identities[0] if identities else None


def parse_zk_auth(value: str) -> tuple[str, str]:
    """`digest:user:password` -> ("digest", "user:password"), validated."""
    scheme, separator, credentials = value.partition(":")
    if not separator or not scheme or not credentials:
        raise ConfigError(
            "--zk-auth must be SCHEME:CREDENTIALS, e.g. digest:user:password "
            "(env SESSIONIZER_ZK_AUTH)"
        )
    if scheme == "digest" and ":" not in credentials:
        raise ConfigError("--zk-auth digest credentials must be user:password")
    return scheme, credentials


def _read_text(file: Path, flag: str, remedy: str) -> str:
    """The text of a settings file named by `flag`; unreadable is a `ConfigError` naming it."""
    try:
        return file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{flag}{file}: cannot read it ({exc.strerror or exc}); {remedy}"
        ) from exc
