"""`sessionizer streams resize --count M`: its arguments, its refusals (one line each, exit 2,
nothing started) and what it prints. The cluster is faked at the command's seams; the real
servers are tests/integration/test_resize_live.py's."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

import framework.commands.streams as streams_command
from framework.cli import build_parser, main
from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from router.errors import ProvisioningError, StreamsNotCreated
from router.resize_wire import Epoch

SERVERS = ["--zk", "z:1", "--bootstrap", "b:1", "--app", "web"]


class Cluster:
    """What the command sees: the recorded count, the previous resize, and the calls."""

    def __init__(self, count: int | None = 8, previous: dict[str, Any] | None = None) -> None:
        self.count, self.previous = count, previous
        self.started: list[tuple[str, int, int]] = []
        self.unreachable: Exception | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(streams_command, "app_client", self.app_client)
        monkeypatch.setattr(streams_command, "streams_for", self.streams_for)
        monkeypatch.setattr(streams_command, "resize_progress", lambda c, p: self.previous)
        monkeypatch.setattr(streams_command, "start_resize", self.start_resize)

    @contextlib.contextmanager
    def app_client(self, connection: ConnectionConfig) -> Iterator[object]:
        if self.unreachable is not None:
            raise self.unreachable
        yield object()

    def streams_for(self, client: object, parent: str, app: str) -> int:
        if self.count is None:
            raise StreamsNotCreated(app)
        return self.count

    def start_resize(self, connection: ConnectionConfig, count: int, replication: int) -> Epoch:
        assert self.count is not None
        self.started.append((connection.app, count, replication))
        return Epoch(2 if self.previous else 1, self.count, count)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Cluster:
    fake = Cluster()
    fake.install(monkeypatch)
    return fake


@pytest.fixture(autouse=True)
def _logging_undone() -> Iterator[None]:
    """`main` configures logging on the stderr it is given: undone afterwards."""
    saved, handlers = structlog.get_config(), logging.getLogger().handlers[:]
    yield
    structlog.configure(**saved)
    logging.getLogger().handlers[:] = handlers


def _run(*argv: str) -> tuple[int, str, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["streams", "resize", *argv, *SERVERS])
    errors = [line for line in err.getvalue().splitlines() if ": error: " in line]
    return code, out.getvalue(), errors


def test_count_is_required_and_an_integer(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for argv in ([], ["--count", "twelve"]):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args(["streams", "resize", *argv, *SERVERS])
        assert exited.value.code == 2
    assert "--count" in capsys.readouterr().err
    args = parser.parse_args(["streams", "resize", "--count", "12", *SERVERS])
    assert (args.command, args.action, args.count, args.replication) == ("streams", "resize", 12, 1)
    assert args.run is streams_command.run_resize


def test_a_grow_starts_the_resize_and_prints_what_it_created_and_the_epoch(
    cluster: Cluster,
) -> None:
    code, out, errors = _run("--count", "12", "--replication", "3")
    assert code == 0 and not errors
    assert cluster.started == [("web", 12, 3)]
    assert json.loads(out) == {"app": "web", "streams": 12, "from": 8, "created": 4, "epoch": 1}


@pytest.mark.parametrize(
    ("count", "message"),
    [
        ("8", "app 'web' already has 8 streams: nothing to resize"),
        ("4", "app 'web' has 8 streams, --count 4 would shrink it: shrinking is not offered by "
              "the command: producers require Kafka to hold exactly `count` stream topics"),
        ("0", "--count and --replication must be >= 1"),
    ],
)  # fmt: skip
def test_a_shrink_the_same_count_or_no_count_is_one_line_and_starts_nothing(
    cluster: Cluster, count: str, message: str
) -> None:
    code, out, errors = _run("--count", count)
    assert code == 2 and out == "" and cluster.started == []
    assert len(errors) == 1 and message in errors[0], errors
    assert errors[0].startswith("sessionizer streams resize: error: ")


def test_an_app_without_streams_is_told_to_create_them(cluster: Cluster) -> None:
    cluster.count = None
    code, _out, errors = _run("--count", "12")
    assert code == 2 and cluster.started == []
    assert errors == [
        "sessionizer streams resize: error: app 'web' has no streams; "
        "run `sessionizer streams create --count N`"
    ]


def test_a_resize_not_settled_yet_refuses_the_next(cluster: Cluster) -> None:
    cluster.previous = {"epoch": 1, "from": 8, "to": 12, "sources": 8, "migrated": 8}
    cluster.previous.update(targets=4, settled=3)
    code, _out, errors = _run("--count", "16")
    assert code == 2 and cluster.started == [] and len(errors) == 1
    assert (
        "resize 8 -> 12 (epoch 1) is not settled yet (8/8 streams migrated, 3/4 settled)"
        in (errors[0])
    )
    cluster.previous["settled"] = 4  # settled: the next one starts
    cluster.count = 12
    code, out, errors = _run("--count", "16")
    assert code == 0 and json.loads(out)["epoch"] == 2 and cluster.started == [("web", 16, 1)]


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("cannot reach ZooKeeper at z:1 within 15s; is the cluster up"),
        ProvisioningError("cannot reach Kafka at b:1: timed out; is the cluster up?"),
    ],
    ids=["zookeeper", "kafka"],
)
def test_an_unreachable_cluster_is_one_line(
    cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
) -> None:
    if isinstance(error, ProvisioningError):  # ZooKeeper answers; Kafka, in start_resize, not

        def unreachable(connection: ConnectionConfig, count: int, replication: int) -> Epoch:
            raise error

        monkeypatch.setattr(streams_command, "start_resize", unreachable)
    else:
        cluster.unreachable = error
    code, out, errors = _run("--count", "12")
    assert code == 2 and out == ""
    assert len(errors) == 1 and "cannot reach" in errors[0], errors
