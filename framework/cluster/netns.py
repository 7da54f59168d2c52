"""`NetworkLab`: a private network of Linux network namespaces, for partition tests.

One *server* namespace holds a bridge with two addresses, one for ZooKeeper and
one for Kafka, so a node can be cut from one server and not the other.  Each
*node* namespace is joined to the bridge by a veth pair and has one address::

    sz-<run>-srv   br0  10.213.0.1 (ZooKeeper)  10.213.0.2 (Kafka)
                    |-- v-n1 <veth> eth0  sz-<run>-n1  10.213.0.11
                    |-- v-n2 <veth> eth0  sz-<run>-n2  10.213.0.12
                    ...

Every address lives inside a namespace the lab created; nothing is added to
the namespace the test runs in.  A cut is a pair of policy-routing rules in
the server namespace (`ip rule ... blackhole`, ahead of the `local` table), so
packets vanish silently in both directions, as in a real partition: the node's
sockets time out rather than being refused, and the server stops hearing from
the node (a ZooKeeper session expires).  `heal` deletes the rules.

The lab always cleans up: on exit, also after a failure half-way through
building it, it kills whatever still runs inside its namespaces and deletes
them (which deletes their veth ends too).  Needs root (CAP_NET_ADMIN and
CAP_SYS_ADMIN) and iproute2; `unavailable()` says why not, for a test skip.

Commands are built by pure functions of `LabPlan`, unit-tested without root.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import structlog

from framework.cluster.process import is_zombie
from framework.kernel.errors import ClusterError, InvalidArgument, InvalidSetting
from framework.kernel.lifecycle import Lifecycle

__all__ = [
    "CutTarget",
    "LabPlan",
    "NetworkLab",
    "exec_prefix",
    "inside",
    "namespace_exists",
    "unavailable",
]

CutTarget = Literal["zk", "kafka", "both"]

NETNS_DIR = Path("/run/netns")
_CLONE_NEWNET = 0x40000000
_PREFIX = "sz"
# The `local` table moves behind the cut rules, so a cut drops packets addressed to
# the servers too (with `local` first they would still be delivered).
_LOCAL_PREF = 100
_CUT_PREF = 10
_NODE_NAME = re.compile(r"^[a-z][a-z0-9]{0,9}$")
_log = structlog.get_logger("sessionizer.netns")


def exec_prefix(namespace: str | None) -> list[str]:
    """The argv prefix that runs a command inside `namespace` ([] for the current one)."""
    return ["ip", "netns", "exec", namespace] if namespace else []


def namespace_exists(namespace: str) -> bool:
    """Whether a named network namespace (as `ip netns add` makes them) exists."""
    return (NETNS_DIR / namespace).exists()


@dataclass(frozen=True)
class LabPlan:
    """Names, addresses and the `ip` commands of one lab; pure, no side effects."""

    run_id: str
    nodes: tuple[str, ...]
    subnet: str = "10.213.0"  # a /24 used only inside the lab's own namespaces

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9]{1,12}", self.run_id):
            raise InvalidSetting(
                f"run id must be 1-12 lowercase letters or digits: {self.run_id!r}"
            )
        for node in self.nodes:
            # The server-side veth is `v-<node>`, and interface names have 15 bytes at most.
            if not _NODE_NAME.fullmatch(node):
                raise InvalidSetting(f"node name must match {_NODE_NAME.pattern}: {node!r}")
        if len(set(self.nodes)) != len(self.nodes) or len(self.nodes) > 200:
            raise InvalidSetting(f"node names must be distinct (at most 200): {self.nodes}")

    # -- names and addresses ---------------------------------------------------------

    @property
    def server(self) -> str:
        """The server namespace (ZooKeeper and Kafka run here)."""
        return f"{_PREFIX}-{self.run_id}-srv"

    def namespace(self, node: str) -> str:
        """The namespace of one node."""
        self._check_node(node)
        return f"{_PREFIX}-{self.run_id}-{node}"

    @property
    def namespaces(self) -> list[str]:
        """Every namespace of the lab, server first."""
        return [self.server, *(self.namespace(n) for n in self.nodes)]

    @property
    def zk_address(self) -> str:
        """ZooKeeper's address on the bridge."""
        return f"{self.subnet}.1"

    @property
    def kafka_address(self) -> str:
        """Kafka's address on the bridge."""
        return f"{self.subnet}.2"

    def address(self, node: str) -> str:
        """A node's address."""
        self._check_node(node)
        return f"{self.subnet}.{11 + self.nodes.index(node)}"

    def targets(self, target: CutTarget) -> list[str]:
        """The server addresses a cut of kind `target` separates a node from."""
        return {
            "zk": [self.zk_address],
            "kafka": [self.kafka_address],
            "both": [self.zk_address, self.kafka_address],
        }[target]

    # -- commands --------------------------------------------------------------------

    def setup_commands(self) -> list[list[str]]:
        """Create the namespaces, the bridge, the veth pairs and the addresses, in order."""
        srv = self.server
        commands = [
            ["ip", "netns", "add", srv],
            ["ip", "-n", srv, "link", "set", "lo", "up"],
            ["ip", "-n", srv, "link", "add", "br0", "type", "bridge"],
            ["ip", "-n", srv, "addr", "add", f"{self.zk_address}/24", "dev", "br0"],
            ["ip", "-n", srv, "addr", "add", f"{self.kafka_address}/24", "dev", "br0"],
            ["ip", "-n", srv, "link", "set", "br0", "up"],
            ["ip", "-n", srv, "rule", "add", "pref", str(_LOCAL_PREF), "lookup", "local"],
            ["ip", "-n", srv, "rule", "del", "pref", "0", "lookup", "local"],
        ]
        for node in self.nodes:
            ns, veth = self.namespace(node), f"v-{node}"
            commands += [
                ["ip", "netns", "add", ns],
                ["ip", "-n", ns, "link", "set", "lo", "up"],
                # Both ends are created inside their namespaces, never in the caller's.
                ["ip", "-n", srv, "link", "add", veth, "type", "veth",
                 "peer", "name", "eth0", "netns", ns],
                ["ip", "-n", srv, "link", "set", veth, "master", "br0"],
                ["ip", "-n", srv, "link", "set", veth, "up"],
                ["ip", "-n", ns, "addr", "add", f"{self.address(node)}/24", "dev", "eth0"],
                ["ip", "-n", ns, "link", "set", "eth0", "up"],
            ]  # fmt: skip
        return commands

    def rule_commands(
        self, node: str, server_address: str, action: Literal["add", "del"]
    ) -> list[list[str]]:
        """The two rules (node to server, server to node) that cut one node from one address."""
        ours = self.address(node)
        return [
            ["ip", "-n", self.server, "rule", action, "pref", str(_CUT_PREF),
             "from", source, "to", destination, "blackhole"]
            for source, destination in ((ours, server_address), (server_address, ours))
        ]  # fmt: skip

    def teardown_commands(self) -> list[list[str]]:
        """Delete every namespace (nodes first); their veth ends and the bridge go with them."""
        return [["ip", "netns", "del", ns] for ns in reversed(self.namespaces)]

    def _check_node(self, node: str) -> None:
        if node not in self.nodes:
            raise InvalidArgument(f"no node {node!r} in this lab; nodes are {list(self.nodes)}")


# -- switching the calling thread ------------------------------------------------------


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise ClusterError(f"setns into a network namespace failed: {os.strerror(errno)}")


@contextlib.contextmanager
def inside(namespace: str | None) -> Iterator[None]:
    """Run the calling thread in `namespace` for the block (no-op for None).

    A network namespace belongs to a thread: sockets this thread opens inside
    the block, and threads and processes it starts there (a KafkaProducer's
    sender, a KazooClient's connection thread, a subprocess), live in the
    namespace, also after the block.  Other threads are not affected.
    """
    if namespace is None:
        yield
        return
    original = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(NETNS_DIR / namespace, os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(original)
    finally:
        os.close(original)


# -- availability ------------------------------------------------------------------------


def unavailable() -> str | None:
    """Why a lab cannot be built here (None when it can): probes `ip netns add` for real."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not on PATH"
    probe = f"{_PREFIX}-probe-{secrets.token_hex(3)}"
    added = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if added.returncode != 0:
        reason = added.stderr.strip() or f"exit {added.returncode}"
        return f"`ip netns add` is not permitted here (needs root/CAP_NET_ADMIN): {reason}"
    try:
        entered = subprocess.run(
            [*exec_prefix(probe), "true"], capture_output=True, text=True, timeout=30
        )
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    if entered.returncode != 0:
        reason = entered.stderr.strip() or f"exit {entered.returncode}"
        return f"`ip netns exec` is not permitted here (needs CAP_SYS_ADMIN): {reason}"
    return None


# -- the lab -----------------------------------------------------------------------------


@dataclass
class NetworkLab(Lifecycle):
    """A server namespace and one namespace per node, joined by a bridge; a context manager.

    `cut(node, from_=...)` separates a node from ZooKeeper, Kafka or both;
    `heal(node)` undoes every cut of that node.  `prefix(ns)` / `run_in(ns, argv)`
    run commands inside a namespace; `inside(ns)` moves the calling thread.
    """

    nodes: Sequence[str] = ("n1", "n2", "n3")
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    plan: LabPlan = field(init=False)
    _cuts: dict[str, set[str]] = field(init=False, default_factory=dict)
    _built: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.plan = LabPlan(self.run_id, tuple(self.nodes))

    # -- names -------------------------------------------------------------------------

    @property
    def server(self) -> str:
        """The server namespace."""
        return self.plan.server

    def namespace(self, node: str) -> str:
        """A node's namespace."""
        return self.plan.namespace(node)

    @property
    def zk_address(self) -> str:
        """ZooKeeper's address (reachable from every namespace of the lab)."""
        return self.plan.zk_address

    @property
    def kafka_address(self) -> str:
        """Kafka's address (reachable from every namespace of the lab)."""
        return self.plan.kafka_address

    def prefix(self, namespace: str) -> list[str]:
        """argv prefix running a command in `namespace`."""
        return exec_prefix(namespace)

    def run_in(
        self, namespace: str, argv: Sequence[str], *, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` inside `namespace` to completion; output captured, not checked."""
        return subprocess.run(
            [*exec_prefix(namespace), *argv], capture_output=True, text=True, timeout=timeout
        )

    def inside(self, namespace: str) -> contextlib.AbstractContextManager[None]:
        """Move the calling thread into `namespace` for a block (see module `inside`)."""
        return inside(namespace)

    # -- lifecycle ---------------------------------------------------------------------

    def _open(self) -> None:
        self.build()

    def _close(self) -> None:
        self.close()

    def build(self) -> None:
        """Create everything; on any failure, remove what was made and raise."""
        self._built = True  # from here on, close() has something to look at
        try:
            for command in self.plan.setup_commands():
                _ip(command)
        except BaseException:
            self.close()
            raise
        _log.info(
            "network_lab_up",
            server=self.server,
            zk=self.zk_address,
            kafka=self.kafka_address,
            nodes={n: self.plan.address(n) for n in self.plan.nodes},
        )

    def close(self) -> None:
        """Kill what still runs in the lab's namespaces and delete them; robust to half-built.

        Raises `ClusterError` if a namespace could not be removed.
        """
        if not self._built:
            return
        for namespace in self.plan.namespaces:
            if namespace_exists(namespace):
                _kill_inside(namespace)
        for command in self.plan.teardown_commands():
            if namespace_exists(command[-1]):
                subprocess.run(command, capture_output=True, check=False)
        self._cuts.clear()
        left = [ns for ns in self.plan.namespaces if namespace_exists(ns)]
        if left:
            raise ClusterError(
                f"network namespaces left behind (remove with `ip netns del`): {left}"
            )
        self._built = False
        _log.info("network_lab_down", server=self.server)

    # -- faults ------------------------------------------------------------------------

    def cut(self, node: str, from_: CutTarget = "both") -> None:
        """Drop every packet between `node` and the given server(s), both ways."""
        cut = self._cuts.setdefault(node, set())
        for address in self.plan.targets(from_):
            if address not in cut:
                for command in self.plan.rule_commands(node, address, "add"):
                    _ip(command)
                cut.add(address)
        _log.info("network_cut", node=node, from_=from_)

    def heal(self, node: str) -> None:
        """Undo every cut of `node`."""
        for address in sorted(self._cuts.pop(node, set())):
            for command in self.plan.rule_commands(node, address, "del"):
                _ip(command)
        _log.info("network_healed", node=node)

    def cut_from(self, node: str) -> list[str]:
        """The server addresses `node` is cut from right now."""
        return sorted(self._cuts.get(node, ()))


def _ip(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise ClusterError(f"`{' '.join(command)}` failed: {result.stderr.strip()}")


def _kill_inside(namespace: str, timeout: float = 10.0) -> None:
    """SIGKILL every process still inside one of the lab's own namespaces (never ourselves).

    Only processes the lab's user started can be in a namespace it created.
    """
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True)
    pids = [int(p) for p in listed.stdout.split() if p.isdigit() and int(p) != os.getpid()]
    for pid in pids:
        _log.warning("network_lab_killing_leftover", namespace=namespace, pid=pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            # A killed child of ours stays a zombie until reaped; that holds no namespace.
            if is_zombie(pid):
                break
            time.sleep(0.05)
