"""ZooKeeper auth and ACLs on real servers (issue 15): an app made with --zk-auth is its own.

An app provisioned with `--zk-auth digest:USER:PASSWORD` has every znode, its
ephemeral claims and memberships included, readable and writable by that
identity only: a node with it sessionizes as usual, anyone else gets NoAuth,
and a node or command without it (or with another password) fails at start
with one line. `status` says which apps are protected.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

from framework.kernel.config import ConnectionConfig
from framework.kernel.paths import AppPaths
from framework.kernel.zookeeper import app_acl, app_client, namespace_acl, zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import cli, cli_json
from framework.testing.members import (
    ClaimObserver,
    MemberGroup,
    MemberProcess,
    balanced,
    stream_names,
    wait_for,
)
from framework.testing.members import provision_streams as register_streams
from framework.testing.nodes import NodeGroup, settled, streams_of
from framework.verify import expected_sessions, verify_sessions
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
STREAMS = 4
VISITS = 80
SEED = 15
WEBLOG = "sessionizer.examples.weblog:WebSessions"
PASSWORD, WRONG_PASSWORD = "s3cret-pw", "not-the-pw"
AUTH = f"digest:acl-user:{PASSWORD}"
WRONG = f"digest:acl-user:{WRONG_PASSWORD}"
OTHER = "digest:someone-else:pw"


def test_a_node_with_the_apps_credentials_works_and_everyone_else_is_refused(
    zk_hosts: str,
    kafka_bootstrap: str,
    app: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app, zk_auth=AUTH)
    provision_streams(connection, STREAMS)
    streams = streams_of(app, STREAMS)
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    with NodeGroup(connection, tmp_path, WEBLOG) as group, app_client(connection) as zk:
        monkeypatch.setenv("SESSIONIZER_ZK_AUTH", AUTH)  # the node reads it; not on its argv
        group.start("n1")
        monkeypatch.delenv("SESSIONIZER_ZK_AUTH")
        sent = cli_json(
            "generate", "--sessions", str(VISITS), "--seed", str(SEED), "--end-of-input",
            "--json", "--zk-auth", AUTH, **conn,
        )  # fmt: skip
        wait_for(lambda: settled(zk, connection, ["n1"], streams), 120, "n1 to catch up")

        _assert_every_znode_is_the_identitys_alone(zk, connection.paths)
        _assert_refused(zk_hosts, connection.paths, streams[0])
        _assert_node_refused(group.start("n2"), app, zk_hosts, authenticated=False)
        wrong = group.start("n3", "--zk-auth", WRONG)
        _assert_node_refused(wrong, app, zk_hosts, authenticated=True)
        assert settled(zk, connection, ["n1"], streams)  # n1 never noticed
        assert group.nodes["n1"].process.poll() is None
    written = read_sessions(kafka_bootstrap, app, deduplicate=False)
    fragments = list(generate_fragments(VISITS, seed=SEED))
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))
    print(f"\nzk-auth node: {result.line()}")
    assert sent["sent"] == len(fragments)
    assert result.exact, result


def _walk(zk: KazooClient, path: str) -> Iterator[str]:
    yield path
    for child in zk.get_children(path):
        yield from _walk(zk, f"{path}/{child}")


def _assert_every_znode_is_the_identitys_alone(zk: KazooClient, paths: AppPaths) -> None:
    znodes = list(_walk(zk, paths.root))
    kinds = {p.removeprefix(paths.root).split("/")[1] for p in znodes if p != paths.root}
    assert {"active_streams", "active_consumers", "claimed_streams", "stream_state"} <= kinds
    assert any(zk.exists(p).ephemeralOwner for p in znodes)  # claims and membership too
    for path in znodes:
        assert zk.get_acls(path)[0] == app_acl(AUTH), path
    namespace = zk.get_acls(paths.root.rsplit("/", 1)[0])[0]
    # Created open by an earlier app, or by one with --zk-auth (then others may still add apps).
    assert namespace in (OPEN_ACL_UNSAFE, namespace_acl(app_acl(AUTH)))


def _assert_refused(zk_hosts: str, paths: AppPaths, stream: str) -> None:
    """A kazoo client without the app's identity can neither read nor write anything of it."""
    for auth in ([], [tuple(WRONG.split(":", 1))], [tuple(OTHER.split(":", 1))]):
        client = KazooClient(hosts=zk_hosts, auth_data=auth)
        client.start(timeout=30)
        try:
            attempts = {
                "read stream_state": lambda c=client: c.get(paths.stream_state(stream)),
                "write stream_state": lambda c=client: c.set(paths.stream_state(stream), b"{}"),
                "claim": lambda c=client: c.create(paths.claim(stream), ephemeral=True),
                "delete a claim": lambda c=client: c.delete(paths.claim(stream)),
                "join": lambda c=client: c.create(paths.consumer("intruder"), ephemeral=True),
                "list members": lambda c=client: c.get_children(paths.active_consumers),
                "open the ACL": lambda c=client: c.set_acls(paths.root, OPEN_ACL_UNSAFE),
            }
            for what, attempt in attempts.items():
                with pytest.raises(NoAuthError):
                    attempt()
                    pytest.fail(f"{what} was allowed with auth {auth}")
        finally:
            client.stop()
            client.close()


def _assert_node_refused(
    node: MemberProcess, app: str, zk_hosts: str, *, authenticated: bool
) -> None:
    assert node.wait(timeout=90) == 2
    log = node.log_path.read_text()
    errors = [line for line in log.splitlines() if line.startswith("sessionizer node: error:")]
    assert len(errors) == 1, log[-3000:]
    [line] = errors
    assert f"app {app}: ZooKeeper at {zk_hosts} refused access to /sessionizer/{app}" in line
    assert "(NoAuth)" in line and "--zk-auth" in line and "SESSIONIZER_ZK_AUTH" in line
    assert ("not the identity" in line) == authenticated
    assert "Traceback" not in log
    assert PASSWORD not in log and WRONG_PASSWORD not in log


def test_status_says_whether_an_apps_znodes_are_protected(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    opened = f"{app}o"
    provision_streams(ConnectionConfig(zk_hosts, kafka_bootstrap, app, zk_auth=AUTH), 2)
    provision_streams(ConnectionConfig(zk_hosts, kafka_bootstrap, opened), 2)
    closed_conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    open_conn = {**closed_conn, "app": opened}

    status = cli_json("status", "--json", "--zk-auth", AUTH, **closed_conn)
    assert status["auth"] == "digest"
    assert {"app", "consumers", "streams"} <= set(status) and len(status["streams"]) == 2
    assert cli_json("status", "--json", **open_conn)["auth"] == "open"
    # An app created open may be used with --zk-auth: open ACLs let anyone in.
    assert cli_json("status", "--json", "--zk-auth", AUTH, **open_conn)["auth"] == "open"

    code, out, _ = cli("status", "--zk-auth", AUTH, **closed_conn)
    assert code == 0 and f"app {app}: znodes protected (digest)" in out
    code, out, _ = cli("status", **open_conn)
    assert code == 0
    assert f"app {opened}: znodes open to anyone (created without --zk-auth)" in out

    for argv in (
        ("status", "--json"),
        ("status", "--json", "--zk-auth", WRONG),
        ("streams", "create", "--count", "2"),
        ("streams", "reset", f"{app}.stream.0000", "--from-offset", "0"),
        ("generate", "--sessions", "1"),
    ):
        code, out, err = cli(*argv, **closed_conn)
        assert code == 2, (argv, err)
        lines = [line for line in err.splitlines() if "error:" in line]
        assert len(lines) == 1 and "refused access" in lines[0] and "(NoAuth)" in lines[0], err
        assert "{" not in out and PASSWORD not in err + out and WRONG_PASSWORD not in err + out


def test_members_with_the_credentials_balance_and_one_without_them_is_refused(
    zk_hosts: str, app: str, tmp_path: Path
) -> None:
    paths, names = AppPaths(app), stream_names(app, STREAMS)
    with zookeeper_client(zk_hosts, auth=AUTH) as zk:
        register_streams(zk, paths, names)
        assert zk.get_acls(paths.stream(names[0]))[0] == app_acl(AUTH)
        with (
            MemberGroup(zk_hosts, app, tmp_path, zk_auth=AUTH) as group,
            ClaimObserver(zk_hosts, paths, names, auth=AUTH) as observer,
        ):
            group.start("a")
            group.start("b")
            wait_for(lambda: balanced(zk, paths, ["a", "b"], STREAMS), 60, "a and b to balance")
            wait_for(lambda: _committed(zk, paths, names), 30, "commits by the members")
            for name, auth in (("c", None), ("d", WRONG)):
                other = MemberGroup(zk_hosts, app, tmp_path, zk_auth=auth).start(name)
                assert other.wait(timeout=60) == 2
                err = (tmp_path / f"{name}.err").read_text()
                assert err.startswith("framework.member: error: app ") and "(NoAuth)" in err
                assert err.count("\n") == 1 and "Traceback" not in err
            assert balanced(zk, paths, ["a", "b"], STREAMS)
        assert observer.violations == [] and observer.snapshots > 0


def _committed(zk: KazooClient, paths: AppPaths, names: list[str]) -> bool:
    counters = [json.loads(zk.get(paths.stream_state(n))[0] or b"{}") for n in names]
    return all(c.get("counter", 0) > 0 for c in counters)
