"""Every kazoo client of the project, and the ACLs of an app's znodes.

`new_client(hosts, auth=...)` is the one place a `KazooClient` is built: with
`--zk-auth SCHEME:CREDENTIALS` it authenticates as that identity and creates
every znode with `app_acl(auth)` (its `default_acl`), which gives that identity
all rights and nobody else any; without it, znodes are open, as before.  The
namespace parents (`/<namespace>`), shared by every app, are created by
`ensure_app` with `namespace_acl`: the identity may do everything, anyone else
may only list them and create their own app beside ours.

A client without the app's identity gets `NoAuthError` from ZooKeeper;
`refused` turns that into one clear `ZooKeeperAccessError` (a `ConfigError`:
the CLI prints it and exits 2), and `access_checked` / `app_client` do so for
a block of requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, ANYONE_ID_UNSAFE, CREATOR_ALL_ACL, Permissions, make_digest_acl

from framework.kernel.client_settings import parse_zk_auth
from framework.kernel.errors import ConfigError

if TYPE_CHECKING:
    from framework.kernel.config import ConnectionConfig
    from framework.kernel.paths import AppPaths

__all__ = [
    "OPEN",
    "ZooKeeperAccessError",
    "access_checked",
    "acl_kind",
    "app_acl",
    "app_client",
    "auth_data",
    "check_access",
    "ensure_app",
    "namespace_acl",
    "new_client",
    "refused",
    "root_acl_kind",
    "zookeeper_client",
]

OPEN = "open"
"""`acl_kind` of znodes anyone may read and write (an app created without --zk-auth)."""

_AUTH_HINT = "--zk-auth SCHEME:CREDENTIALS / SESSIONIZER_ZK_AUTH"


class ZooKeeperAccessError(ConfigError):
    """ZooKeeper refused a request on an app's znodes (NoAuth): wrong or missing --zk-auth."""

    def __init__(self, path: str, hosts: str, *, authenticated: bool) -> None:
        self.path = path
        self.hosts = hosts
        app = path.strip("/").split("/")[1] if path.count("/") >= 2 else path
        if authenticated:
            hint = (
                "the --zk-auth given is not the identity that created the app: pass the "
                f"app's own {_AUTH_HINT}"
            )
        else:
            hint = f"the app was created with --zk-auth: pass the same {_AUTH_HINT}"
        super().__init__(
            f"app {app}: ZooKeeper at {hosts} refused access to {path} (NoAuth); {hint}"
        )


def auth_data(auth: str | None) -> list[tuple[str, str]]:
    """kazoo's `auth_data` for `SCHEME:CREDENTIALS` (empty without auth)."""
    return [] if auth is None else [parse_zk_auth(auth)]


def app_acl(auth: str | None) -> list[ACL] | None:
    """The ACL of every znode of an app: `auth`'s identity may do all, nobody else anything.

    `digest:user:password` gives kazoo's `make_digest_acl(user, password, all=True)`;
    any other scheme the `auth` scheme's ACL (whatever identity the session
    authenticated as).  None without auth: kazoo's open ACL, as before.
    """
    if auth is None:
        return None
    scheme, credentials = parse_zk_auth(auth)
    if scheme == "digest":
        user, _, password = credentials.partition(":")
        return [make_digest_acl(user, password, all=True)]
    return list(CREATOR_ALL_ACL)


def namespace_acl(acl: Sequence[ACL] | None) -> list[ACL] | None:
    """The ACL of a namespace parent created with app ACL `acl`: also list and create for anyone.

    The namespace is shared: locking it to one identity would keep every other
    app (open, or with other credentials) out of it.
    """
    if not acl:
        return None
    return [*acl, ACL(Permissions.READ | Permissions.CREATE, ANYONE_ID_UNSAFE)]


def new_client(
    hosts: str, *, auth: str | None = None, session_timeout: float = 10.0, **options: Any
) -> KazooClient:
    """An unstarted client that authenticates with `auth` and creates znodes with its ACL."""
    return KazooClient(
        hosts=hosts,
        timeout=session_timeout,
        auth_data=auth_data(auth),
        default_acl=app_acl(auth),
        **options,
    )


@contextmanager
def zookeeper_client(
    hosts: str,
    *,
    auth: str | None = None,
    timeout: float = 15.0,
    session_timeout: float = 10.0,
) -> Iterator[KazooClient]:
    """Yield a started client; always stopped and closed on exit."""
    client = new_client(hosts, auth=auth, session_timeout=session_timeout)
    try:
        client.start(timeout=timeout)
    except KazooTimeoutError as exc:
        client.close()
        raise ConfigError(
            f"cannot reach ZooKeeper at {hosts} within {timeout:.0f}s; "
            "is the cluster up (`sessionizer cluster up`) and --zk right?"
        ) from exc
    try:
        yield client
    finally:
        client.stop()
        client.close()


@contextmanager
def app_client(
    connection: ConnectionConfig, *, timeout: float = 15.0, session_timeout: float = 10.0
) -> Iterator[KazooClient]:
    """A started client with the connection's --zk-auth; NoAuth in the block is one clear error."""
    with (
        zookeeper_client(
            connection.zk,
            auth=connection.zk_auth,
            timeout=timeout,
            session_timeout=session_timeout,
        ) as client,
        access_checked(client, connection.paths.root),
    ):
        yield client


def _hosts(client: KazooClient) -> str:
    listed = ",".join(f"{host}:{port}" for host, port in client.hosts or ())
    return listed + (client.chroot or "")


def refused(client: KazooClient, path: str) -> ZooKeeperAccessError:
    """The error for a NoAuth on `path` (the app's root, usually) through `client`."""
    return ZooKeeperAccessError(path, _hosts(client), authenticated=bool(client.auth_data))


@contextmanager
def access_checked(client: KazooClient, path: str) -> Iterator[None]:
    """Turn a `NoAuthError` raised inside the block into `refused(client, path)`."""
    try:
        yield
    except NoAuthError as exc:
        raise refused(client, path) from exc


def ensure_app(client: KazooClient, paths: AppPaths, children: Iterable[str] = ()) -> None:
    """Create the app's root (and `children`) with the client's ACL, the namespace with its own.

    Raises `ZooKeeperAccessError` if the client may not use an existing app.
    """
    with access_checked(client, paths.root):
        namespace = paths.root.rsplit("/", 1)[0]
        if client.default_acl and client.exists(namespace) is None:
            client.ensure_path(namespace, acl=namespace_acl(client.default_acl))
        client.ensure_path(paths.root)
        for path in children:
            client.ensure_path(path)


def check_access(client: KazooClient, paths: AppPaths) -> None:
    """Read the app's root (which needs its identity); raise `ZooKeeperAccessError` if refused."""
    with access_checked(client, paths.root):
        client.get_children(paths.root)


def acl_kind(acls: Iterable[ACL]) -> str:
    """`"open"` if anyone has a right, else the schemes of the identities (e.g. `"digest"`)."""
    schemes = set()
    for acl in acls:
        if acl.id == ANYONE_ID_UNSAFE:
            return OPEN
        schemes.add(acl.id.scheme)
    return "+".join(sorted(schemes)) or "none"


def root_acl_kind(client: KazooClient, paths: AppPaths) -> str:
    """`acl_kind` of the app root's ACL; `ZooKeeperAccessError` if ZooKeeper refuses to say."""
    with access_checked(client, paths.root):
        acls, _stat = client.get_acls(paths.root)
    return acl_kind(acls)
