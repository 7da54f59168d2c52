"""A `--kafka-config` file's properties reach every client and win; reserved ones are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.testing.cli import DATA, cli, cli_json

pytestmark = pytest.mark.integration
STREAMS = 4


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_client_id_of_the_users_own_works_in_every_command(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, client: str
) -> None:
    """`client.id` is a property the project sets too: the user's must replace it, not clash."""
    path = DATA / "apache_logs"
    head = tmp_path / "head.log"
    head.write_text("".join(path.read_text(encoding="utf-8").splitlines(True)[:200]))
    config = tmp_path / "client.properties"
    config.write_text("client.id=team-a-sessionizer\nrequest.timeout.ms=40000\n")
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    common = ["--kafka-config", str(config), "--kafka-client", client]

    cli_json("streams", "create", "--count", str(STREAMS), *common, **conn)
    stats = cli_json("produce", str(head), "--format", "apache", "--json", *common, **conn)
    assert stats["sent"] == 200
    rows = cli_json("status", "--json", *common, **conn)["streams"]
    assert sum(row["end_offset"] for row in rows) >= 200  # fragments, plus any watermarks
    code, _, err = cli("sessions", "--json", *common, **conn)
    assert code == 0, err[-2000:]


def test_a_reserved_property_is_refused_with_one_line_naming_it(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=PLAINTEXT\nenable.auto.commit=true\n")
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    code, out, err = cli("streams", "create", "--count", "2", "--kafka-config", str(config), **conn)
    assert (code, out) == (2, "")
    assert "line 2: 'enable.auto.commit' is set by sessionizer itself" in err
    assert len(err.strip().splitlines()) == 1
