"""`sessionizer deadletters [show N | replay]`: list, show and replay the dead letters.

`deadletters` lists `<app>.deadletter` up to its current end (reason, stream,
offsets, key, exception; `--reason`, `--stream` filter, `--json` one object per
line). `deadletters show N` prints the dead letter at topic offset N with its
traceback. `deadletters replay --processor MODULE:CLASS` rebuilds the sessions the
replayable dead letters stand for (`framework.dead_letters.REPLAYABLE`) with the
fixed processor and sends those whose `session_id` is not in `<app>.sessions`
yet (read with `isolation.level=read_committed`), progress on stderr, a JSON
summary with `--json`. See docs/deadletters.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any

from framework.commands.options import Command, connection_from_args
from framework.dead_letters import (
    DeadLetterError,
    Lost,
    StoredLetter,
    TopicReader,
    lost_sessions,
    read_fragments,
    read_letters,
    replay,
)
from framework.kernel.config import ConnectionConfig
from framework.node.loader import load_processor
from router.naming import deadletter_topic, sessions_topic
from sessionizer.kafka_sink import open_kafka_sink
from sessionizer.records import FinishedSession
from sessionizer.sinks import PAYLOAD_REFERENCE, UnsendableSession, encode_session

__all__ = ["add_parser"]


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=("list", "show", "replay"),
        default="list",
        help="list (the default), show POSITION, or replay --processor MODULE:CLASS",
    )
    parser.add_argument(
        "position", nargs="?", type=int, help="show: the dead letter's offset (from the list)"
    )
    parser.add_argument("--json", action="store_true", help="JSON: one per line, or a summary")
    parser.add_argument("--reason", help="only this reason (`late`, `hook:update`, `hook:*`...)")
    parser.add_argument("--stream", help="only this stream")
    parser.add_argument("--processor", help="replay: the fixed processor, MODULE:CLASS")


def run(args: argparse.Namespace) -> int:
    """List, show or replay."""
    misuse = _misuse(args)
    if misuse is not None:  # before any server is asked: a usage error is not worth a timeout
        raise DeadLetterError(misuse)
    if args.action == "replay":
        load_processor(args.processor)  # fail early, naming the class, before any reading
    connection = connection_from_args(args)
    reader = TopicReader(connection.bootstrap, connection.kafka_config)
    try:
        letters = read_letters(reader, deadletter_topic(connection.app))
        if args.action == "show":
            return _show(letters, args.position, as_json=args.json)
        if args.action == "replay":
            return _replay(args, connection, reader, letters)
        for stored in _filtered(letters, args.reason, args.stream):
            print(json.dumps(_fields(stored)) if args.json else _line(stored))
        return 0
    finally:
        reader.close()


def _misuse(args: argparse.Namespace) -> str | None:
    """What is wrong with the action's arguments, if anything."""
    if args.action == "show" and args.position is None:
        return "deadletters show needs the dead letter's offset (see the list)"
    if args.action != "show" and args.position is not None:
        return f"deadletters {args.action} takes no position (did you mean `show {args.position}`?)"
    if args.action == "replay" and not args.processor:
        return "deadletters replay needs --processor MODULE:CLASS (the fixed one)"
    if args.action != "replay" and args.processor:
        return f"--processor is for `deadletters replay`, not `{args.action}`"
    return None


def _filtered(
    letters: Iterable[StoredLetter], reason: str | None, stream: str | None
) -> list[StoredLetter]:
    def wanted(letter_reason: str) -> bool:
        if reason is None:
            return True
        if reason.endswith("*"):
            return letter_reason.startswith(reason[:-1])
        return letter_reason == reason or letter_reason.split(":", 1)[0] == reason

    return [
        s
        for s in letters
        if wanted(s.letter.reason) and (stream is None or s.letter.stream == stream)
    ]


def _fields(stored: StoredLetter, *, traceback: bool = False) -> dict[str, Any]:
    letter = stored.letter
    fields: dict[str, Any] = {
        "position": stored.position,
        "reason": letter.reason,
        "stream": letter.stream,
        "offset": letter.offset,
        "last_offset": letter.last_offset,
        "key": letter.session_key
        if letter.session_key is not None
        else (letter.key or b"").decode("utf-8", "replace"),
        "session_id": letter.session_id,
        "exception": letter.exception or None,
        "error": letter.error,
        "payload": letter.payload,
        "timestamp_ms": letter.timestamp_ms,
    }
    if traceback:
        fields["traceback"] = letter.traceback or None
    return fields


def _line(stored: StoredLetter) -> str:
    letter, fields = stored.letter, _fields(stored)
    offsets = str(letter.offset)
    if letter.last_offset is not None:
        offsets += f"..{letter.last_offset}"
    error = letter.error if len(letter.error) <= 80 else letter.error[:77] + "..."
    return (
        f"{stored.position:>7} {letter.reason:<20} {letter.stream:<24} {offsets:<14} "
        f"{fields['key'][:32]:<32} {error}"
    )


def _show(letters: list[StoredLetter], position: int, *, as_json: bool) -> int:
    for stored in letters:
        if stored.position == position:
            fields = _fields(stored, traceback=True)
            if as_json:
                print(json.dumps(fields))
            else:
                for name, value in fields.items():
                    if name != "traceback":
                        print(f"{name:<13} {value}")
                print("traceback:\n" + (stored.letter.traceback or "(none)"))
            return 0
    raise DeadLetterError(f"no dead letter at offset {position} of the dead-letter topic")


def _replay(
    args: argparse.Namespace,
    connection: ConnectionConfig,
    reader: TopicReader,
    letters: list[StoredLetter],
) -> int:
    processor_path: str = args.processor
    chosen = _filtered(letters, args.reason, args.stream)
    lost = lost_sessions(chosen)
    emitted = _emitted_ids(connection)
    todo = [entry for entry in lost.values() if entry.session_id not in emitted]
    _progress(f"{len(lost)} lost sessions, {len(lost) - len(todo)} already in the sessions topic")
    excluded: dict[str, set[int]] = {}
    for stored in letters:  # fragments that are dead letters are no part of a referenced session
        if stored.letter.payload != PAYLOAD_REFERENCE:
            excluded.setdefault(stored.letter.stream, set()).add(stored.letter.offset)
    fragments = read_fragments(reader, todo, excluded, _progress)
    sessions, failures = _rebuild(processor_path, todo, fragments)
    _send(connection, sessions)
    summary = {
        "dead_letters": len(chosen),
        "lost_sessions": len(lost),
        "already_emitted": len(lost) - len(todo),
        "replayed": len(sessions),
        "failed": failures,
    }
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print(
            f"replayed {len(sessions)} of {len(lost)} lost sessions "
            f"({summary['already_emitted']} were already emitted, {len(failures)} failed)"
        )
        for ident, why in failures.items():
            print(f"  {ident}: {why}")
    return 0 if not failures else 1


def _rebuild(
    processor_path: str, todo: list[Lost], fragments: dict[str, dict[int, Any]]
) -> tuple[list[FinishedSession], dict[str, str]]:
    sessions: list[FinishedSession] = []
    failures: dict[str, str] = {}
    for number, entry in enumerate(sorted(todo, key=lambda e: (e.stream, e.session_id)), 1):
        outcome = replay(
            lambda: load_processor(processor_path), entry, fragments.get(entry.stream, {})
        )
        if isinstance(outcome, str):
            failures[entry.session_id] = outcome
            continue
        try:
            encode_session(outcome)  # not sent at all rather than dead-lettered once more
        except UnsendableSession as exc:
            failures[entry.session_id] = f"still {exc.reason}: {exc.error}"
            continue
        sessions.append(outcome)
        if number % 100 == 0:
            _progress(f"rebuilt {number} of {len(todo)} sessions")
    return sessions, failures


def _emitted_ids(connection: ConnectionConfig) -> set[str]:
    """The session ids already in the sessions topic (committed records only)."""
    reader = TopicReader(
        connection.bootstrap, connection.kafka_config, isolation_level="read_committed"
    )
    try:
        topic = sessions_topic(connection.app)
        ids = set()
        for record in reader.read(topic, 0, reader.end(topic)):
            ids.add(json.loads(record.value)["session_id"])
        return ids
    finally:
        reader.close()


def _send(connection: ConnectionConfig, sessions: list[FinishedSession]) -> None:
    """Send the rebuilt sessions as a node does (acks=all, idempotent), then wait for them."""
    if not sessions:
        return
    sink = open_kafka_sink(
        "kafka-python",
        connection.bootstrap,
        sessions_topic(connection.app),
        deadletter_topic(connection.app),
        client_id="sessionizer-deadletters",
        properties=connection.kafka_config,
    )
    try:
        for session in sessions:
            sink.emit(session)
        sink.flush()
    finally:
        sink.close()
    _progress(f"sent {len(sessions)} sessions to {sessions_topic(connection.app)}")


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


DEADLETTERS = Command(
    "deadletters",
    run,
    help="list, show and replay the dead letters",
    description="Reads <app>.deadletter up to its current end (docs/deadletters.md).",
    options=_options,
    quiet_clients=True,
)
add_parser = DEADLETTERS.register
