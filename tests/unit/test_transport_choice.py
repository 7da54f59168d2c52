"""Which Kafka client a command gets: a confluent-kafka that aborts on reassignment is refused."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from structlog.testing import capture_logs

from framework.kernel import transport
from framework.kernel.errors import ConfigError
from framework.kernel.transport import resolve_transport

Installed = Callable[[str | None], None]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str | None], None]]:
    """Pretend confluent-kafka of a chosen version is installed (each test sets it)."""

    def pretend(version: str | None) -> None:
        monkeypatch.setattr(transport, "installed_confluent_version", lambda: version)
        transport._warn_falling_back.cache_clear()

    yield pretend
    transport._warn_falling_back.cache_clear()


def test_a_confluent_kafka_from_2_16_on_is_taken(installed: Installed) -> None:
    installed("2.16.1")
    assert resolve_transport("auto") == "confluent"
    assert resolve_transport("confluent") == "confluent"
    assert resolve_transport("kafka-python") == "kafka-python"


def test_an_older_confluent_kafka_is_refused_when_asked_for_by_name(installed: Installed) -> None:
    installed("2.12.2")
    with pytest.raises(ConfigError) as refused:
        resolve_transport("confluent")
    message = str(refused.value)
    assert "confluent-kafka 2.12.2 is installed" in message
    assert "pip install 'confluent-kafka>=2.16'" in message
    assert "--kafka-client kafka-python" in message


def test_auto_falls_back_to_kafka_python_over_an_older_one_and_says_so_once(
    installed: Installed,
) -> None:
    installed("2.15.1")
    with capture_logs() as logs:
        assert resolve_transport("auto") == "kafka-python"
        assert resolve_transport("auto") == "kafka-python"
    fallbacks = [e for e in logs if e["event"] == "kafka_client_fallback"]
    assert len(fallbacks) == 1
    assert fallbacks[0]["chosen"] == "kafka-python"
    assert "confluent-kafka 2.15.1" in fallbacks[0]["reason"]


def test_a_confluent_kafka_without_package_metadata_is_taken(installed: Installed) -> None:
    installed(None)
    assert resolve_transport("auto") == "confluent"
