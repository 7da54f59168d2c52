"""The live-resize tests' cases (docs/resize.md): a recording processor, runs of a
`framework.testkit.resize.ResizeWorld` from a `Plan` and a seed, and the checks (the
batch definition as if the app always had the new count, the ids of first streams,
nothing lost or counted twice)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from framework.kernel.fragment import Fragment
from framework.testkit.inputs import APP
from framework.testkit.resize import ResizeWorld, SimProducer
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import stream_name
from sessionizer.processor import StreamProcessor
from sessionizer.records import session_id
from sessionizer.reference import batch_sessions

__all__ = [
    "GRACE_MS",
    "LEAD_MS",
    "TIMEOUT_MS",
    "LeadingMembers",
    "Members",
    "Plan",
    "check",
    "check_once",
    "expected",
    "expected_ids",
    "found",
    "fragment",
    "run",
]

TIMEOUT_MS = 10_000
GRACE_MS = 8_000
LEAD_MS = 20_000


class Members(StreamProcessor[dict[str, Any]]):
    """Records its fragments' input positions (field "i") in fold order; field "end" ends."""

    timeout = TIMEOUT_MS / 1000
    grace = GRACE_MS / 1000
    max_session_duration = None
    max_lead: float | None = None
    max_producer_skew = 0

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        """Field "end"."""
        return bool(fragment.get("end"))

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        """No members yet."""
        return {"members": []}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        """Add the fragment's position."""
        session["members"].append(fragment["i"])

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        """The positions, in fold order."""
        return {"members": list(session["members"])}


class LeadingMembers(Members):
    """`Members` that parks a fragment dated more than `LEAD_MS` ahead (docs/sessions.md)."""

    max_lead = LEAD_MS / 1000


def fragment(i: int, key: str, at: int, *, end: bool = False) -> ParsedFragment:
    """Input position `i`: a fragment of `key` at `at` ms."""
    fields: dict[str, Any] = {"i": i}
    if end:
        fields["end"] = True
    return ParsedFragment(key, at, fields)


def expected(fragments: Sequence[ParsedFragment]) -> list[tuple[str, tuple[int, ...]]]:
    """The batch definition as (key, members in event-time order), sorted."""
    engine_fragments = [Fragment(f.fields["i"], f.key, f.timestamp_ms, f.fields) for f in fragments]
    sessions = batch_sessions(engine_fragments, TIMEOUT_MS, lambda v: bool(v.get("end")))
    return sorted((s.key, s.offsets) for s in sessions)


def found(world: ResizeWorld) -> list[tuple[str, tuple[int, ...]]]:
    """The sessions written, one per id; the copies of an id must be identical."""
    by_id: dict[str, Any] = {}
    for session in world.sessions:
        seen = by_id.setdefault(session.session_id, session)
        assert seen == session, f"two contents for {session.session_id}: {seen} / {session}"
    return sorted((s.key, tuple(s.result["members"])) for s in by_id.values())


def expected_ids(world: ResizeWorld) -> dict[tuple[int, ...], str]:
    """Each batch session's id: the stream its earliest-written members went to (the old one,
    if any went there), and the smallest offset there."""
    where = {f.fields["i"]: (stream, offset) for f, stream, offset in world.sent}
    old = world.epoch.old if world.epoch is not None else world.count
    ids = {}
    for key, members in expected([f for f, _, _ in world.sent]):
        places = [where[i] for i in members]
        home = stream_name(APP, stream_for_key(key, old))
        first_stream = home if any(s == home for s, _ in places) else places[0][0]
        first = min(offset for stream, offset in places if stream == first_stream)
        ids[members] = session_id(first_stream, first, key)
    return ids


def check(world: ResizeWorld) -> None:
    """Nothing lost, nothing split, no dead letter, every id the one its first stream gives,
    and every stream settled (its safe offset free to pass the epoch's start)."""
    assert not world.unsettled(), world.unsettled()
    assert not world.letters, world.letters[:3]
    fragments = [f for f, _, _ in world.sent]
    assert found(world) == expected(fragments)
    ids = expected_ids(world)
    for session in world.sessions:
        members = tuple(sorted(session.result["members"], key=_order(fragments)))
        assert session.session_id == ids[members], (session, ids[members])


def _order(fragments: Sequence[ParsedFragment]) -> Any:
    times = {f.fields["i"]: f.timestamp_ms for f in fragments}
    return lambda i: (times[i], i)


@dataclass(frozen=True)
class Plan:
    """One resize run: counts, producers, input size, when it resizes, how often things fail."""

    old: int
    new: int
    producers: int = 2
    keys: int = 12
    fragments: int = 160
    resize_at: int = 70
    switch_window: int = 5
    """Producers switch within this many input positions (1 s of event time each) of it."""
    anonymous: bool = False
    """Add a producer without id that never sees the resize (its moved keys are forwarded)."""
    lagging: bool = False
    """The first producer never sees the resize: the barriers wait for its end of input."""
    step: float = 0.5
    commit: float = 0.2
    record: float = 0.2
    crash: float = 0.0
    handover: float = 0.0
    ends: float = 0.1
    """Share of fragments that are END fragments."""
    future: float = 0.0
    """Share of fragments dated 25 or 60 s ahead (then the processor parks those more than
    `LEAD_MS` ahead of stream time until the next record's verdict)."""


def run(plan: Plan, seed: int) -> ResizeWorld:
    """Send the input, resize at `plan.resize_at`, interleave owners' steps, commits, crashes
    and handovers at random (seeded), then let every owner finish."""
    rng = random.Random(seed)
    world = ResizeWorld(LeadingMembers if plan.future else Members, plan.old, plan.producers)
    if plan.anonymous:
        world.producers.append(SimProducer(None, plan.old, sees_resize=False))
    if plan.lagging:
        world.producers[0].sees_resize = False
    keys = [f"user-{i}" for i in range(plan.keys)]
    switch_at = [plan.resize_at + rng.randint(0, plan.switch_window) for _ in world.producers]
    for i in range(plan.fragments):
        if i == plan.resize_at:
            world.resize(plan.new)
        for producer, at in zip(world.producers, switch_at, strict=True):
            if i == at and producer.sees_resize:
                world.switch(producer)
        producer = world.producers[rng.randrange(len(world.producers))]
        at = 1_000 * i + rng.randint(0, 900)
        if plan.future and rng.random() < plan.future:
            at += rng.choice([25_000, 60_000])
        world.send(producer, fragment(i, rng.choice(keys), at, end=rng.random() < plan.ends))
        _act(world, plan, rng)
    for producer in world.producers:
        world.end(producer)
    world.settle(lambda lo, hi: rng.randint(lo, hi))
    return world


def _act(world: ResizeWorld, plan: Plan, rng: random.Random) -> None:
    for stream in sorted(world.logs):
        if rng.random() < plan.step:
            for _ in range(rng.randint(1, 3)):
                world.step(stream)
        if rng.random() < plan.record:
            world.record_start(stream)
        if rng.random() < plan.commit:
            world.commit(stream)
        if rng.random() < plan.crash:
            world.crash(stream, flushed=rng.random() < 0.5)
        if rng.random() < plan.handover:
            world.hand_over(stream)


def check_once(world: ResizeWorld) -> None:
    """Every fragment sent is in exactly one session, or is exactly one late (or, dated too
    far ahead, future) dead letter."""
    seen: dict[int, int] = {}
    by_id = {session.session_id: session for session in world.sessions}
    for session in by_id.values():
        for i in session.result["members"]:
            seen[i] = seen.get(i, 0) + 1
    letters = {(letter.stream, letter.offset): letter for letter in world.letters}
    for letter in letters.values():
        assert letter.reason in ("late", "future") and letter.value is not None, letter
        i = msgpack.unpackb(letter.value)["i"]
        seen[i] = seen.get(i, 0) + 1
    sent = sorted(f.fields["i"] for f, _, _ in world.sent)
    assert sorted(seen) == sent, "lost: " + str(sorted(set(sent) - set(seen)))
    assert all(count == 1 for count in seen.values()), {i: c for i, c in seen.items() if c > 1}
