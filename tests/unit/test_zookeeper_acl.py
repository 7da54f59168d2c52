"""ZooKeeper auth without servers: the ACLs an app's znodes get, and the one-line NoAuth error."""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import (
    ACL,
    ANYONE_ID_UNSAFE,
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    Id,
    Permissions,
    make_digest_acl,
)

from balancer import Balancer, BalancerConfig, NoopListener
from balancer.status import auth_line, format_table
from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.kernel.paths import AppPaths
from framework.kernel.zookeeper import (
    OPEN,
    ZooKeeperAccessError,
    access_checked,
    acl_kind,
    app_acl,
    ensure_app,
    namespace_acl,
    new_client,
    refused,
)
from framework.testing.member import parse_args
from state.zookeeper_store import ZooKeeperRecords

AUTH = "digest:acl-user:s3cret-pw"
ROOT = "/sessionizer/shop"


def test_without_auth_znodes_stay_open() -> None:
    assert app_acl(None) is None
    assert namespace_acl(None) is None
    client = new_client("127.0.0.1:2181")
    assert client.auth_data == set() and client.default_acl is None


def test_digest_auth_gives_that_identity_everything_and_nobody_else_anything() -> None:
    acl = app_acl(AUTH)
    assert acl == [make_digest_acl("acl-user", "s3cret-pw", all=True)]
    [entry] = acl
    assert entry.perms == Permissions.ALL
    assert entry.id.scheme == "digest" and entry.id.id.startswith("acl-user:")
    assert "s3cret-pw" not in entry.id.id  # ZooKeeper stores a hash, never the password
    assert acl_kind(acl) == "digest"


def test_other_schemes_use_the_authenticated_identity() -> None:
    assert app_acl("sasl:kafka") == list(CREATOR_ALL_ACL)


def test_a_client_with_auth_authenticates_and_creates_with_the_apps_acl() -> None:
    client = new_client("127.0.0.1:2181", auth=AUTH, session_timeout=4.0)
    assert client.auth_data == {("digest", "acl-user:s3cret-pw")}
    assert client.default_acl == app_acl(AUTH)


def test_connection_auth_data_matches_the_client_builder() -> None:
    connection = ConnectionConfig("h:1", "k:2", "shop", zk_auth=AUTH)
    assert set(connection.zk_auth_data) == new_client("h:1", auth=AUTH).auth_data
    assert "s3cret-pw" not in repr(connection)


def test_the_namespace_lets_other_apps_in_but_only_the_identity_change_it() -> None:
    acl = namespace_acl(app_acl(AUTH))
    assert acl is not None
    assert acl[0] == make_digest_acl("acl-user", "s3cret-pw", all=True)
    assert acl[1] == ACL(Permissions.READ | Permissions.CREATE, ANYONE_ID_UNSAFE)
    assert acl_kind(acl) == OPEN  # anyone has some right there: not an app's own ACL


@pytest.mark.parametrize(
    ("acls", "kind"),
    [
        (OPEN_ACL_UNSAFE, "open"),
        ([make_digest_acl("a", "b", all=True), make_digest_acl("c", "d", read=True)], "digest"),
        ([ACL(Permissions.ALL, Id("x509", "CN=node")), make_digest_acl("a", "b", all=True)],
         "digest+x509"),
    ],
)  # fmt: skip
def test_acl_kind_names_open_acls_and_the_schemes_of_closed_ones(
    acls: list[ACL], kind: str
) -> None:
    assert acl_kind(acls) == kind


def test_the_noauth_error_is_one_line_naming_app_address_and_what_to_do() -> None:
    error = ZooKeeperAccessError(ROOT, "127.0.0.1:2181", authenticated=False)
    assert isinstance(error, ConfigError)
    text = str(error)
    assert "\n" not in text
    assert text.startswith("app shop: ZooKeeper at 127.0.0.1:2181 refused access to ")
    assert f"{ROOT} (NoAuth)" in text
    assert "--zk-auth" in text and "SESSIONIZER_ZK_AUTH" in text
    other = str(ZooKeeperAccessError(f"{ROOT}/stream_state/s", "h:1", authenticated=True))
    assert other.startswith("app shop:") and "not the identity that created the app" in other


def test_refused_reads_the_address_and_whether_credentials_were_given_from_the_client() -> None:
    with_auth = refused(new_client("h1:2181,h2:2182/chroot", auth=AUTH), ROOT)
    assert with_auth.hosts == "h1:2181,h2:2182/chroot" and with_auth.path == ROOT
    assert "not the identity" in str(with_auth) and "s3cret-pw" not in str(with_auth)
    assert "was created with --zk-auth" in str(refused(new_client("h:1"), ROOT))


def test_access_checked_maps_noauth_only() -> None:
    client = new_client("h:1")
    with pytest.raises(ZooKeeperAccessError) as caught, access_checked(client, ROOT):
        raise NoAuthError()
    assert isinstance(caught.value.__cause__, NoAuthError)
    with pytest.raises(KeyError), access_checked(client, ROOT):
        raise KeyError("other errors pass through")


class RefusingClient:
    """Just enough of a KazooClient: ZooKeeper answers NoAuth to every request."""

    hosts = [("zk1", 2181)]
    chroot = ""
    auth_data: set[tuple[str, str]] = set()
    default_acl = None

    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def add_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: Any) -> None:
        self.listeners.remove(listener)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise NoAuthError()

    exists = ensure_path = get = get_children = set = create = _refuse


def test_ensure_app_on_a_protected_app_raises_the_clear_error() -> None:
    with pytest.raises(ZooKeeperAccessError, match="app shop: ZooKeeper at zk1:2181"):
        ensure_app(RefusingClient(), AppPaths("shop"))  # type: ignore[arg-type]


def test_a_balancer_refused_at_start_fails_at_once_with_the_clear_error() -> None:
    client = RefusingClient()
    balancer = Balancer(
        BalancerConfig("zk1:2181", "shop", "n1"),
        NoopListener(),
        client=client,  # type: ignore[arg-type]
    )
    with pytest.raises(ZooKeeperAccessError, match=r"/sessionizer/shop \(NoAuth\)"):
        balancer.start()
    assert client.listeners == []  # nothing left behind
    assert str(balancer.state) == "stopped"


def test_a_balancer_builds_its_client_with_the_configured_auth() -> None:
    config = BalancerConfig("zk1:2181", "shop", "n1", zk_auth=AUTH)
    assert "s3cret-pw" not in repr(config)
    balancer = Balancer(config, NoopListener())
    assert balancer.client.auth_data == {("digest", "acl-user:s3cret-pw")}
    assert balancer.client.default_acl == app_acl(AUTH)
    with pytest.raises(ConfigError, match="SCHEME:CREDENTIALS"):
        BalancerConfig("zk1:2181", "shop", "n1", zk_auth="digest")


def test_the_state_store_maps_noauth_on_read_and_write() -> None:
    records = ZooKeeperRecords(RefusingClient(), f"{ROOT}/stream_state")  # type: ignore[arg-type]
    with pytest.raises(ZooKeeperAccessError, match="stream_state/s0 \\(NoAuth\\)"):
        records.read("s0")
    with pytest.raises(ZooKeeperAccessError, match="app shop:"):
        records.write("s0", b"{}", 3)


def test_the_member_takes_zk_auth_from_its_option_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SESSIONIZER_ZK_AUTH", raising=False)
    assert parse_args(["--id", "a"]).zk_auth is None
    assert parse_args(["--id", "a", "--zk-auth", AUTH]).zk_auth == AUTH
    monkeypatch.setenv("SESSIONIZER_ZK_AUTH", AUTH)
    assert parse_args(["--id", "a"]).zk_auth == AUTH


def test_status_table_says_whether_the_znodes_are_protected() -> None:
    status = {"app": "shop", "consumers": [], "streams": [], "auth": "open"}
    lines = format_table(status).splitlines()
    assert lines[1] == "app shop: znodes open to anyone (created without --zk-auth)"
    assert "znodes protected (digest)" in auth_line("shop", "digest")
    del status["auth"]
    assert not any("znodes" in line for line in format_table(status).splitlines())
