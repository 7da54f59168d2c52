"""`eval "$(sessionizer cluster up --secure)"`, then every command works unchanged, over TLS + SASL.

One secured cluster (1 ZooKeeper, 1 broker, started by the CLI exactly as a
user would) serves the module: its exports, the refusal of clients without
credentials, and the whole story (streams, the real apache log, 2 nodes, one
killed with `kill -9` while traffic flows, exact sessions, `aggregate --once`
equal to the pure-Python reference) with both Kafka clients.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError

from framework.cluster import stop_cluster_dir
from framework.cluster.process import pid_alive
from framework.kernel.client_settings import read_kafka_properties
from framework.kernel.config import ConnectionConfig
from framework.kernel.kafka_settings import kafka_python_settings
from framework.kernel.zookeeper import zookeeper_client
from framework.progress import read_states
from framework.sessions import read_sessions
from framework.testing.cli import DATA
from framework.testing.members import balanced, wait_for
from framework.testing.nodes import SESSIONIZER, NodeGroup, streams_of
from framework.verify import expected_sessions, verify_sessions
from router.formats import parse_file
from sessionizer.aggregation import aggregate_sessions
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
STREAMS = 8
WEBLOG = "sessionizer.examples.weblog:WebSessions"
EXPORTED = ("SESSIONIZER_CLUSTER_DIR", "SESSIONIZER_ZK", "SESSIONIZER_BOOTSTRAP",
            "SESSIONIZER_KAFKA_CONFIG", "SESSIONIZER_ZK_AUTH")  # fmt: skip
REFUSED_WITHIN = 60.0  # seconds a client without valid credentials may take to give up


@dataclass(frozen=True)
class Secured:
    """A cluster from `cluster up --secure`: its directory, what it printed, its exports."""

    directory: Path
    stdout: str
    stderr: str
    exports: dict[str, str]

    @property
    def properties(self) -> dict[str, str]:
        """The client properties file the exports name."""
        return read_kafka_properties(self.exports["SESSIONIZER_KAFKA_CONFIG"])

    @property
    def secrets(self) -> list[str]:
        """The SCRAM and ZooKeeper passwords a user was given."""
        zk_password = self.exports["SESSIONIZER_ZK_AUTH"].split(":", 2)[2]
        return [self.properties["sasl.password"], zk_password]

    def env(self, **extra: str) -> dict[str, str]:
        """A user's environment after `eval "$(sessionizer cluster up --secure)"`."""
        return {**_clean_env(), **self.exports, **extra}


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SESSIONIZER_")}


def _cluster_servers(directory: Path) -> list[tuple[int, str]]:
    state = json.loads((directory / "cluster.json").read_text())
    return [(s["pid"], s["directory"]) for s in state["servers"]]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """`sessionizer cluster up --secure` in a fresh directory; `cluster down` at the end."""
    directory = tmp_path_factory.mktemp("secure") / "cluster"
    try:
        up = subprocess.run(
            [SESSIONIZER, "cluster", "up", "--secure", "--dir", str(directory)],
            capture_output=True, text=True, env=_clean_env(), timeout=600,
        )  # fmt: skip
        assert up.returncode == 0, up.stderr[-3000:]
        # What `eval` makes of the printed lines, read back through bash itself.
        script = 'eval "$EXPORTS" && for v in "$@"; do printf "%s=%s\\n" "$v" "${!v}"; done'
        shown = subprocess.run(
            ["bash", "-c", script, "bash", *EXPORTED],
            capture_output=True, text=True, env={**_clean_env(), "EXPORTS": up.stdout}, timeout=30,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        exports = dict(line.split("=", 1) for line in shown.stdout.splitlines())
        yield Secured(directory, up.stdout, up.stderr, exports)
    finally:
        servers = _cluster_servers(directory) if (directory / "cluster.json").exists() else []
        down = subprocess.run(
            [SESSIONIZER, "cluster", "down", "--dir", str(directory)],
            capture_output=True, text=True, env=_clean_env(), timeout=120,
        )  # fmt: skip
        stop_cluster_dir(directory)  # whatever `down` could not stop (it reports, not raises)
        assert down.returncode == 0, down.stderr
        assert not any(pid_alive(pid, marker) for pid, marker in servers)


def _sessionizer(
    env: dict[str, str], *argv: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [SESSIONIZER, *argv], capture_output=True, text=True, env=env, timeout=timeout
    )
    assert done.returncode == 0, f"sessionizer {' '.join(argv)}: {done.stderr[-3000:]}"
    return done


# -- the exports ------------------------------------------------------------------------


def test_cluster_up_secure_prints_four_exports_and_keeps_secrets_private(
    secured: Secured,
) -> None:
    lines = secured.stdout.splitlines()
    assert [line.split("=", 1)[0] for line in lines] == [f"export {v}" for v in EXPORTED]
    exports = secured.exports
    assert exports["SESSIONIZER_BOOTSTRAP"].startswith("127.0.0.1:")
    assert re.fullmatch(r"digest:sessionizer:[0-9a-f]{32}", exports["SESSIONIZER_ZK_AUTH"])
    properties = secured.properties
    assert {k: v for k, v in properties.items() if k != "sasl.password"} == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "sessionizer",
        "ssl.ca.location": str(secured.directory.resolve() / "security" / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert Path(properties["ssl.ca.location"]).read_text().startswith("-----BEGIN CERTIFICATE")

    security = secured.directory / "security"
    assert security.stat().st_mode & 0o777 == 0o700
    files = sorted(p.name for p in security.iterdir())
    for name in ("ca.p12", "ca.pem", "broker.keystore.p12", "broker.truststore.p12",
                 "client.properties", "secrets.json"):  # fmt: skip
        assert name in files
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in security.iterdir())
    assert (secured.directory / "kafka1" / "server.properties").stat().st_mode & 0o777 == 0o600

    # The secrets are on stdout (for eval) and in the 0600 files, nowhere else.
    logs = [p.read_text(errors="replace") for p in secured.directory.glob("*/server.log")]
    for secret in secured.secrets:
        assert secret not in secured.stderr
        assert not any(secret in log for log in logs)

    # Asked again, it prints the same exports for the cluster already running.
    again = _sessionizer(
        _clean_env(), "cluster", "up", "--secure", "--dir", str(secured.directory), timeout=60
    )
    assert again.stdout == secured.stdout
    assert "secured cluster already running" in again.stderr


# -- refusal ----------------------------------------------------------------------------


def _refused(connect: Callable[[], object]) -> tuple[BaseException, float]:
    """Run `connect`; it must fail, within REFUSED_WITHIN seconds. Returns (error, seconds)."""
    started = time.monotonic()
    with pytest.raises((KafkaError, KafkaException)) as raised:
        connect()
    elapsed = time.monotonic() - started
    assert elapsed < REFUSED_WITHIN, f"took {elapsed:.0f} s to give up"
    return raised.value, elapsed


def _kafka_python_admin(bootstrap: str, properties: dict[str, str]) -> Callable[[], object]:
    def connect() -> object:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            request_timeout_ms=5000,
            bootstrap_timeout_ms=8000,
            client_id="sessionizer-test-refused",
            **kafka_python_settings(properties, KafkaAdminClient.DEFAULT_CONFIG),
        )
        try:
            return admin.list_topics()
        finally:
            admin.close()

    return connect


def _kafka_python_consumer(bootstrap: str, properties: dict[str, str]) -> Callable[[], object]:
    def connect() -> object:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            request_timeout_ms=5000,
            bootstrap_timeout_ms=8000,
            **kafka_python_settings(properties, KafkaConsumer.DEFAULT_CONFIG),
        )
        try:
            return consumer.topics()
        finally:
            consumer.close()

    return connect


def _confluent_admin(bootstrap: str, properties: dict[str, str]) -> Callable[[], object]:
    def connect() -> object:
        admin = AdminClient({"bootstrap.servers": bootstrap, **properties, "log_level": 0})
        return admin.list_topics(timeout=10)

    return connect


def _failed_authentications(secured: Secured) -> int:
    log = (secured.directory / "kafka1" / "server.log").read_text(errors="replace")
    return log.count("invalid credentials with SASL mechanism SCRAM-SHA-512")


def test_clients_without_valid_credentials_are_refused(secured: Secured) -> None:
    bootstrap = secured.exports["SESSIONIZER_BOOTSTRAP"]
    good = secured.properties
    # The same clients with the printed settings get in: a refusal below is the listener's.
    assert _kafka_python_admin(bootstrap, good)() is not None
    assert _confluent_admin(bootstrap, good)().brokers

    timings = {}
    for name, properties in {
        "plaintext": {},
        "tls-without-sasl": {
            "security.protocol": "SSL",
            "ssl.ca.location": good["ssl.ca.location"],
        },
    }.items():
        _, timings[f"{name} admin"] = _refused(_kafka_python_admin(bootstrap, properties))
        _, timings[f"{name} consumer"] = _refused(_kafka_python_consumer(bootstrap, properties))

    wrong = {**good, "sasl.password": good["sasl.password"][::-1]}
    failed_before = _failed_authentications(secured)
    _, timings["wrong-password kafka-python"] = _refused(_kafka_python_admin(bootstrap, wrong))
    _, timings["wrong-password confluent"] = _refused(_confluent_admin(bootstrap, wrong))
    # The broker says why: SCRAM authentication failed (not a network or TLS problem).
    wait_for(lambda: _failed_authentications(secured) > failed_before, 30, "the broker's log line")
    print("\nrefused after (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))


# -- the whole story --------------------------------------------------------------------


class SecuredEnds:
    """End offsets through one secured consumer (framework.progress.end_offsets takes no
    client properties yet, so `framework.testing.nodes.settled` cannot be used here)."""

    def __init__(self, bootstrap: str, properties: dict[str, str]) -> None:
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            client_id="sessionizer-test-ends",
            **kafka_python_settings(properties, KafkaConsumer.DEFAULT_CONFIG),
        )

    def __call__(self, streams: Sequence[str]) -> dict[str, int]:
        partitions = [TopicPartition(s, 0) for s in streams]
        ends = self._consumer.end_offsets(partitions, timeout_ms=10_000)
        return {tp.topic: offset for tp, offset in ends.items()}

    def close(self) -> None:
        self._consumer.close()


def _settled(
    zk: KazooClient,
    connection: ConnectionConfig,
    members: list[str],
    streams: list[str],
    ends: SecuredEnds,
) -> bool:
    """`framework.testing.nodes.settled`, with the end offsets read over SASL_SSL."""
    try:
        owned = balanced(zk, connection.paths, members, len(streams))
    except NoNodeError:
        return False
    if not owned:
        return False
    states = read_states(zk, connection.paths, streams)
    offsets = ends(streams)
    return all(states[s].committed_offset == offsets[s] for s in streams)


def _split_log(path: Path, directory: Path) -> tuple[Path, Path]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    half = len(lines) // 2
    first, rest = directory / "first.log", directory / "rest.log"
    first.write_text("".join(lines[:half]), encoding="utf-8")
    rest.write_text("".join(lines[half:]), encoding="utf-8")
    return first, rest


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_whole_story_over_tls_and_sasl(
    secured: Secured, app: str, client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = DATA / "apache_logs"
    fragments = parse_file(log, "apache")
    first, rest = _split_log(log, tmp_path)
    (tmp_path / "nodes").mkdir()
    env = secured.env(SESSIONIZER_APP=app, SESSIONIZER_KAFKA_CLIENT=client)
    exports, properties = secured.exports, secured.properties
    connection = ConnectionConfig(
        exports["SESSIONIZER_ZK"],
        exports["SESSIONIZER_BOOTSTRAP"],
        app,
        kafka_client=client,  # type: ignore[arg-type]
        kafka_config=properties,
        zk_auth=exports["SESSIONIZER_ZK_AUTH"],
    )
    streams = streams_of(app, STREAMS)
    timings: dict[str, float] = {}
    started = time.monotonic()

    _sessionizer(env, "streams", "create", "--count", str(STREAMS))
    timings["streams create"] = time.monotonic() - started
    # The app's znodes are the printed identity's: anonymous clients may not even read them.
    with zookeeper_client(connection.zk) as anonymous, pytest.raises(NoAuthError):
        anonymous.get_children(connection.paths.active_streams)

    # The nodes get --kafka-config and --zk-auth from the environment, as a user's shell gives.
    monkeypatch.setenv("SESSIONIZER_KAFKA_CONFIG", exports["SESSIONIZER_KAFKA_CONFIG"])
    monkeypatch.setenv("SESSIONIZER_ZK_AUTH", exports["SESSIONIZER_ZK_AUTH"])
    ends = SecuredEnds(connection.bootstrap, properties)
    with (
        NodeGroup(connection, tmp_path / "nodes", WEBLOG) as group,
        zookeeper_client(connection.zk, auth=connection.zk_auth) as zk,
    ):
        try:
            for node in ("n1", "n2"):
                group.start(node, "--kafka-client", client)
            mark = time.monotonic()
            _sessionizer(env, "produce", str(first), "--format", "apache", "--json")
            wait_for(lambda: _settled(zk, connection, ["n1", "n2"], streams, ends), 240,
                     "both nodes caught up", interval=0.5)  # fmt: skip
            timings["first half, caught up"] = time.monotonic() - mark
            written_before = sum(ends(streams).values())
            open_before = sum(
                s.open_sessions for s in read_states(zk, connection.paths, streams).values()
            )

            # The rest, with end of input; n2 is killed as soon as the new records flow.
            mark = time.monotonic()
            command = [SESSIONIZER, "produce", str(rest), "--format", "apache", "--end-of-input"]
            producer = subprocess.Popen(
                [*command, "--json"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            )  # fmt: skip
            try:
                wait_for(lambda: producer.poll() is not None
                         or sum(ends(streams).values()) > written_before, 120,
                         "the second half to flow", interval=0.1)  # fmt: skip
                during_traffic = producer.poll() is None
                group.nodes["n2"].send(signal.SIGKILL)
                out, err = producer.communicate(timeout=300)
            finally:
                if producer.poll() is None:
                    producer.kill()
                    producer.communicate()
            assert producer.returncode == 0, err[-3000:]
            produced = json.loads(out.strip().splitlines()[-1])
            wait_for(lambda: _settled(zk, connection, ["n1"], streams, ends), 240,
                     "n1 took over and caught up", interval=0.5)  # fmt: skip
            timings["second half + failover, caught up"] = time.monotonic() - mark
            resumed = [e for e in group.nodes["n1"].events("stream_resumed")
                       if e["committed_offset"] > 0]  # fmt: skip
        finally:
            ends.close()
        node_logs = [p.read_text(errors="replace") for p in (tmp_path / "nodes").iterdir()
                     if p.is_file()]  # fmt: skip

    written = read_sessions(connection.bootstrap, app, deduplicate=False, properties=properties)
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))

    mark = time.monotonic()
    out_dir = tmp_path / "aggregates"
    aggregated = _sessionizer(
        env, "aggregate", "--once", "--json", "--master", "local[2]", "--out", str(out_dir),
        timeout=600,
    )  # fmt: skip
    timings["aggregate --once"] = time.monotonic() - mark
    figures = json.loads(aggregated.stdout.strip().splitlines()[-1])
    reference = json.loads(json.dumps(aggregate_sessions(written).to_json()))

    print(
        f"\n{client}: {result.line()}; n2 killed {'while' if during_traffic else 'after'} "
        f"the second half flowed, open sessions before {open_before}, streams taken over "
        f"{len(resumed)}; produced {produced}; "
        + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
    )
    assert result.exact, result
    assert result.sessions_found > 0
    assert resumed, "n2's streams were never resumed by n1"
    assert figures == reference
    assert figures["rows"]
    for secret in secured.secrets:
        assert not any(secret in text for text in node_logs), "a secret reached a node's log"
        assert secret not in aggregated.stderr
