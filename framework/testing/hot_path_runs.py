"""The same inputs on each hot path, one worker process per path (`framework.kernel.compiled`).

A process runs one implementation of the node's per-record modules, chosen when it
starts (`SESSIONIZER_HOT_PATH`), so the equivalence tests (tests/unit/test_hot_path_equivalence.py)
start a `Worker` per path: `python -m framework.testing.hot_path_runs` with the variable set,
which answers pickled requests (a function of `_CALLS` and its arguments) on its
stdin with pickled answers on its stdout.  `run` is a `StreamTask` over Kafka records,
crashed (rewound to its last commit) and handed over (`export_engine` /
`restore_engine`) before given indexes, yielding the bytes a node writes: sessions
(`encode_session`), dead letters (key, value, headers) and committed states
(`StreamState.encode`); `produce` is a `StreamProducer` over an in-memory transport,
returning what it sends.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib import import_module
from pathlib import Path
from typing import IO, Any

import pytest

from framework.kernel import compiled

ROOT = Path(__file__).resolve().parents[2]
STREAM = "app.stream.0007"


def _encoded(output: Any) -> bytes:
    """The bytes a sink writes for one output (a session's JSON, a dead letter's record)."""
    from sessionizer.records import FinishedSession
    from sessionizer.sinks import UnsendableSession, encode_session

    if isinstance(output, FinishedSession):
        try:
            return encode_session(output)
        except UnsendableSession as exc:
            return f"unsendable {exc.reason}: {exc.error}".encode()
    return repr((output.key, output.value, output.headers())).encode()


def _outputs(scenario: Any, records: list[Any], events: dict[int, str]) -> Iterator[bytes]:
    from framework.node.task import StreamTask
    from sessionizer.handover import HandoverUnavailable, export_engine, restore_engine
    from state.record import StreamState

    task = StreamTask.resume(scenario.processor(), StreamState.initial(STREAM))
    pending, index = dict(events), 0
    while index < len(records):
        event = pending.pop(index, None)
        if event is not None:
            state = task.snapshot()
            yield state.encode()
            task.committed_as(state)
            try:
                if event != "handover":
                    raise HandoverUnavailable(STREAM, "a crash")
                engine = restore_engine(scenario.processor(), state, export_engine(task.engine))
                task = StreamTask(STREAM, engine, position=task.position, committed=state)
            except HandoverUnavailable:  # a crash, or a session the processor cannot dump
                task = task.rewound()
                index = next(i for i, r in enumerate(records) if r.offset >= task.position)
                continue
        yield from (_encoded(output) for output in task.handle(records[index]))
        index += 1
    yield task.snapshot().encode()


def run(scenario: Any, records: list[Any], events: dict[int, str]) -> list[bytes]:
    """What a node writes for `records` with crashes and handovers at `events`' indexes."""
    return list(_outputs(scenario, records, events))


def produce(
    fragments: list[Any], num_streams: int, interval_ms: int, refuse: set[int]
) -> list[Any]:
    """What `StreamProducer` sends for `fragments` (`send`, or `encode` + `send_encoded` for
    every other one): its records in order, and each fragment it refused with the error."""
    from framework.testing.producer import RecordingTransport
    from router.errors import MalformedLine, ProduceFailed
    from router.producer import ProducerConfig, StreamProducer

    transport = RecordingTransport(refuse_streams=refuse)
    config = ProducerConfig("memory:1", "app", num_streams, watermark_interval_ms=interval_ms)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("router.producer.open_transport", lambda config, topics: transport)
        producer = StreamProducer(config)
    sent: list[Any] = []
    for index, fragment in enumerate(fragments):
        try:
            if index % 2:
                producer.send_encoded(producer.encode(fragment))
            else:
                producer.send(fragment)
        except (MalformedLine, ProduceFailed) as exc:
            sent.append((index, type(exc).__name__, str(exc)))
    producer.end_of_input()
    sent += [*transport.records, producer.stats.as_dict(), producer.stats.watermarks]
    return sent


def hello() -> tuple[str, str, dict[str, str]]:
    """(the path this process runs, why, where each compiled module was loaded from)."""
    chosen = compiled.choice()
    files = {name: str(import_module(name).__file__) for name in compiled.MODULES}
    return chosen.path, chosen.reason, files


def require_compiled(reason: str) -> None:
    """Skip only where no build can be made; fail on CI and where one could be."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the compiled hot path, but it runs Python: {reason}")
    missing = compiled.missing_tools()
    if missing is not None:
        pytest.skip(f"no compiled hot path on this machine: {missing}")
    pytest.fail(
        f"the compiled hot path should run, but Python runs here ({reason}); build it: "
        "make install (or .venv/bin/python deploy/build_compiled.py)"
    )


def require_native(reason: str) -> None:
    """`require_compiled` for the native modules: skip only where cargo is missing."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must build the native modules, but they are missing: {reason}")
    if shutil.which("cargo") is None:
        pytest.skip(f"no native modules on this machine: no cargo on PATH ({reason})")
    pytest.fail(
        f"the native modules should be built, but they are missing ({reason}); build them: "
        "make install (or .venv/bin/python deploy/build_compiled.py)"
    )


def printed_on(path: str, script: str) -> str:
    """What `python -c script` prints in a fresh process on hot path `path`."""
    base = {name: value for name, value in os.environ.items() if name != compiled.ENV}
    child = subprocess.run(
        [sys.executable, "-c", script],
        env={**base, compiled.ENV: path},
        capture_output=True,
        text=True,
        check=True,
    )
    return child.stdout.strip()


def load_native(name: str) -> Any:
    """The build's native module `name`, whatever hot path this process runs (a test
    compares it with the Python reference in one process); `require_native` if absent."""
    build = compiled.default_build_dir().resolve()
    problem = compiled.build_problem(build)
    if problem is None:
        manifest = json.loads((build / compiled.MANIFEST).read_text(encoding="utf-8"))
        if name in manifest.get("native", ()):
            if str(build) not in sys.path:
                sys.path.append(str(build))
            return import_module(name)
        problem = manifest.get("native_problem") or "the build has no native modules"
    require_native(problem)


_CALLS: dict[str, Callable[..., Any]] = {"run": run, "produce": produce, "hello": hello}


class Worker:
    """A process on one hot path, answering `call`s (`close` it, or use it as a context)."""

    def __init__(self, path: str) -> None:
        self.path = path
        env = {**os.environ, compiled.ENV: path}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "framework.testing.hot_path_runs"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def call(self, name: str, *args: Any) -> Any:
        """`name(*args)` in the worker; an exception there fails here with its traceback."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        pickle.dump((name, args), stdin)
        stdin.flush()
        ok, answer = pickle.load(stdout)
        if not ok:
            raise AssertionError(f"the {self.path} worker failed:\n{answer}")
        return answer

    def close(self) -> None:
        """End the worker."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=30)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    import traceback

    while True:
        try:
            name, args = pickle.load(requests)
        except EOFError:
            return
        try:
            answer: tuple[bool, Any] = (True, _CALLS[name](*args))
        except Exception:  # the test shows it
            answer = (False, traceback.format_exc())
        pickle.dump(answer, answers)
        answers.flush()


if __name__ == "__main__":
    # The answers go to the original stdout; anything printed goes to stderr.
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr
    _serve(sys.stdin.buffer, channel)
