"""`run_until_signalled`: run a `Node` the way `sessionizer node` does, signals included.

- The first SIGTERM or SIGINT asks the node to stop: it commits what it can
  commit with certainty, releases (or drains) and returns; exit code 0.
- If that takes longer than the drain plus `NodeConfig.shutdown_deadline`
  (session timeout + 4 s), whatever ZooKeeper and Kafka are doing, the process
  ends there with `EXIT_FORCED`: its streams' last commits stand, and their
  next owners replay from them.  It logs every thread's stack first
  (`thread_stacks`), to say where the stop hung.
- A second signal ends the process at once (`EXIT_SECOND_SIGNAL`), committing
  nothing more.
- An unexpected exception in the loop: nothing is committed after it, the
  streams are released, and the exit code is `EXIT_CRASHED`.
- SIGUSR1 logs every thread's stack (`thread_stacks`), and the node runs on
  (`framework.kernel.stacks`; left alone if the process already handles it).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from types import FrameType
from typing import Final

import structlog

from framework.kernel import compiled
from framework.kernel.stacks import Stacks, stacks_on_signal, thread_stacks
from framework.node.collector import tune_collector
from framework.node.errors import NodeCrashed
from framework.node.node import Node

__all__ = ["EXIT_CRASHED", "EXIT_FORCED", "EXIT_SECOND_SIGNAL", "run_until_signalled"]

EXIT_CRASHED: Final = 1
EXIT_FORCED: Final = 3
EXIT_SECOND_SIGNAL: Final = 130

log = structlog.get_logger("sessionizer.node")


def run_until_signalled(node: Node) -> int:
    """Run `node` in this (main) thread until SIGTERM/SIGINT; return the exit code."""
    requests = 0
    config = node.config
    # Which implementation of the engine's modules runs (framework.kernel.compiled): a
    # SESSIONIZER_HOT_PATH that cannot run (unknown, no build, a stale one) runs Python.
    chosen = compiled.choice()
    (log.info if chosen.as_asked else log.warning)(
        "hot_path",
        node=config.node_id,
        path=chosen.path,
        requested=chosen.requested,
        native=list(chosen.native),
        reason=chosen.reason,
    )
    tune_collector(config.gc_threshold)
    log.info(
        "gc", node=config.node_id, threshold=gc.get_threshold()[0], frozen=gc.get_freeze_count()
    )

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal requests
        requests += 1
        if requests > 1:
            _exit_now(config.node_id, EXIT_SECOND_SIGNAL, "second_signal", signal=signum)
        node.stop()
        deadline = (config.drain_seconds or 0.0) + config.shutdown_deadline
        watchdog = threading.Timer(
            deadline,
            _exit_now,
            args=(config.node_id, EXIT_FORCED, "shutdown_deadline_exceeded"),
            kwargs={"seconds": deadline},
        )
        watchdog.daemon = True
        watchdog.start()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with stacks_on_signal(lambda stacks: _log_stacks(config.node_id, stacks)):
            node.run()
    except NodeCrashed as exc:
        print(f"sessionizer node: error: {exc}", file=sys.stderr)
        return EXIT_CRASHED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _exit_now(node: str, code: int, event: str, **fields: object) -> None:
    """End the process without running cleanup that could block on an unreachable server."""
    if code == EXIT_FORCED:
        _log_stacks(node, thread_stacks())  # what the stop was still waiting for
    log.warning(event, node=node, exit_code=code, note="nothing more is committed", **fields)
    sys.stderr.flush()
    os._exit(code)


def _log_stacks(node: str, stacks: Stacks) -> None:
    log.warning("thread_stacks", node=node, threads=stacks)
