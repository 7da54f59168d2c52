"""Pytest fixtures with real ZooKeeper and Kafka, for this project's tests and users' own.

Enable in a `conftest.py` with `pytest_plugins = ["framework.testing"]`.
Servers are chosen in this order:

1. `SESSIONIZER_ZK` and `SESSIONIZER_BOOTSTRAP` from the environment;
2. containers through testcontainers, when a Docker engine answers;
3. otherwise the project's own launcher (`framework.cluster.LocalCluster`).

Every test gets its own app name (`app` fixture), so topics and znodes of one
test are never seen by another.

Test support lives in two packages. This one is the repository's own, for
pytest: the fixtures (`fixtures`, registered by this package), `nodes` (node
processes and the conditions tests wait for), `member` (a runnable balancer
member, `python -m framework.testing.member`) and `members` (its processes),
`processors` (the faulty processors node processes load by name), `cli` (the
CLI in-process), `traffic`, `aggregate`, `engine_cases`, `producer`,
`confluent` (a librdkafka consumer in memory), `exactly_once` (a transactional
Kafka in memory), `handover_runs`, `engine_checks`, `offset_streams`,
`settling`, `metrics`, `deploy` and `docs` (the helpers several test modules
share; no test module imports another). `framework.testkit` is for users and
imports no pytest: a processor in-process, and a real `Node` over in-memory
parts (`framework.testkit.memory`). Both are leaves: nothing in the product
imports them (a plain install has no pytest); what the demo shares with the
tests lives in the product (`framework.processes`, `framework.local_nodes`).

This module imports nothing itself, so that the processes started from this
package (`python -m framework.testing.member`, nodes loading `processors`) do
not pay for pytest and the cluster launcher at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from framework.testing.fixtures import Servers, provide_servers

__all__ = ["Servers", "provide_servers"]

# Registered with this package by pytest (`pytest_plugins = ["framework.testing"]`).
pytest_plugins = ["framework.testing.fixtures"]


def __getattr__(name: str) -> Any:
    """`Servers` and `provide_servers`, imported on first use (they need pytest's plugin)."""
    if name in __all__:
        from framework.testing import fixtures

        return getattr(fixtures, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
