"""Deterministic synthetic web traffic, in the same fragment shape as the apache format.

The model, chosen so that sessions are unambiguous under a 30-minute timeout:

- new visitors arrive as a Poisson process (mean gap `MEAN_ARRIVAL_GAP_MS`); each has a
  unique client IP and a user agent, so its key ``"<ip>|<agent>"`` is its own;
- a session lands on one of a few sites, from a search engine, a link or directly, and
  views 1 page (a bounce, `BOUNCE_RATE`) or 2-8 pages, at most `MAX_PAGE_GAP_MS` apart;
- with probability `RETURN_RATE` the visitor comes back for another session
  `MIN_RETURN_GAP_MS`..`MAX_RETURN_GAP_MS` after its last page, with the same key.

So the batch definition with a 30-minute gap finds exactly `sessions` sessions.
Timestamps are whole seconds after `start_ms`, as in an Apache log; the output is
sorted by event time (ties in generation order), as a log is.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from framework.kernel.errors import InvalidArgument
from router.formats_apache import referrer_site
from router.fragment import ParsedFragment

__all__ = [
    "BOUNCE_RATE",
    "DEFAULT_START_MS",
    "MAX_PAGES",
    "MAX_PAGE_GAP_MS",
    "MAX_RETURN_GAP_MS",
    "MEAN_ARRIVAL_GAP_MS",
    "MIN_PAGE_GAP_MS",
    "MIN_RETURN_GAP_MS",
    "RETURN_RATE",
    "generate_fragments",
]

DEFAULT_START_MS = 1_704_067_200_000
"""2024-01-01T00:00:00Z: a fixed start, so that a seed always gives the same fragments."""

_SECOND = 1_000
_MINUTE = 60 * _SECOND
MEAN_ARRIVAL_GAP_MS = 6 * _SECOND
BOUNCE_RATE = 0.35
MAX_PAGES = 8
MIN_PAGE_GAP_MS = 3 * _SECOND
MAX_PAGE_GAP_MS = 12 * _MINUTE  # well under a 30-minute timeout
RETURN_RATE = 0.25
MIN_RETURN_GAP_MS = 45 * _MINUTE  # well over a 30-minute timeout
MAX_RETURN_GAP_MS = 8 * 60 * _MINUTE


@dataclass(frozen=True, slots=True)
class _Site:
    host: str
    landing: tuple[str, ...]
    pages: tuple[str, ...]


# Reserved example domains (RFC 2606), so generated data never names a real site.
_SITES = (
    _Site(
        "shop.example.com",
        landing=("/", "/sale", "/products/desk-lamp", "/products/office-chair"),
        pages=(
            "/products/standing-desk",
            "/products/monitor-arm",
            "/cart",
            "/cart/add",
            "/checkout",
            "/account/login",
            "/search?q=lamp",
        ),
    ),
    _Site(
        "blog.example.org",
        landing=("/", "/2023/12/kafka-in-practice", "/2024/01/zookeeper-recipes"),
        pages=("/about", "/tags/streaming", "/2023/11/jump-hash", "/feed.xml", "/comments"),
    ),
    _Site(
        "docs.example.net",
        landing=("/", "/getting-started", "/reference/api"),
        pages=("/install", "/configuration", "/reference/cli", "/faq", "/changelog"),
    ),
    _Site(
        "news.example.com",
        landing=("/", "/world", "/tech/2024/01/01/new-year"),
        pages=("/sports", "/business", "/tech", "/weather", "/account/login"),
    ),
)
_POST_PATHS = frozenset({"/cart/add", "/checkout", "/account/login", "/comments"})
_EXTERNAL_REFERRERS = (
    "-",
    "-",
    "https://www.google.com/",
    "https://www.google.com/",
    "https://duckduckgo.com/",
    "https://www.bing.com/",
    "https://news.ycombinator.com/",
    "https://t.co/",
)
_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.2 Safari/605.1.15",
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "curl/8.5.0",
)
_PROTOCOLS = ("HTTP/1.1", "HTTP/1.1", "HTTP/2.0")
# Visitor n gets IP 1.0.0.0 + (n * stride + offset) mod 222 * 2**24, i.e. within
# 1.0.0.0-222.255.255.255.  The stride is a prime not dividing 222 * 2**24, so the map
# is a bijection and no two visitors share an IP (nor, therefore, a key).
_IP_BASE = 1 << 24
_IP_SPACE = 222 << 24
_IP_STRIDE = 2_654_435_761


@dataclass(frozen=True, slots=True)
class _Visitor:
    ip: str
    agent: str
    protocol: str


@dataclass(frozen=True, slots=True)
class _Visit:
    visitor: _Visitor
    first: bool  # a new visitor, whose arrival schedules the next new visitor


def generate_fragments(
    sessions: int, seed: int, start_ms: int = DEFAULT_START_MS
) -> Iterator[ParsedFragment]:
    """Yield the fragments of `sessions` synthetic web sessions, sorted by event time."""
    if sessions < 0:
        raise InvalidArgument(f"sessions must be >= 0, got {sessions}")
    if start_ms < 0:
        raise InvalidArgument(f"start_ms must be >= 0 (epoch ms), got {start_ms}")
    # Validate now, not on the first next(): the body below is a generator.
    return _generate(sessions, random.Random(seed), start_ms)


def _generate(sessions: int, rng: random.Random, start_ms: int) -> Iterator[ParsedFragment]:
    ip_offset = rng.randrange(_IP_SPACE)
    visitor_numbers = itertools.count()
    order = itertools.count()  # tie-breaker: equal times come out in generation order
    heap: list[tuple[int, int, _Visit | ParsedFragment]] = []

    def new_visitor() -> _Visitor:
        number = (next(visitor_numbers) * _IP_STRIDE + ip_offset) % _IP_SPACE + _IP_BASE
        ip = ".".join(str(number >> shift & 0xFF) for shift in (24, 16, 8, 0))
        return _Visitor(ip, rng.choice(_AGENTS), rng.choice(_PROTOCOLS))

    def push(at_ms: int, item: _Visit | ParsedFragment) -> None:
        heapq.heappush(heap, (at_ms, next(order), item))

    # Invariant: while fewer than `sessions` visits are scheduled, exactly one future
    # new visitor is in the heap, so nothing later than it can be yielded before it.
    scheduled = 0
    if sessions:
        push(start_ms, _Visit(new_visitor(), first=True))
        scheduled = 1
    while heap:
        at_ms, _, item = heapq.heappop(heap)
        if isinstance(item, ParsedFragment):
            yield item
            continue
        pages = _session(rng, item.visitor, at_ms)
        for page in pages:
            push(page.timestamp_ms, page)
        if scheduled < sessions and rng.random() < RETURN_RATE:
            gap = _seconds(rng, MIN_RETURN_GAP_MS, MAX_RETURN_GAP_MS)
            push(pages[-1].timestamp_ms + gap, _Visit(item.visitor, first=False))
            scheduled += 1
        if item.first and scheduled < sessions:
            seconds = max(1, round(rng.expovariate(_SECOND / MEAN_ARRIVAL_GAP_MS)))
            push(at_ms + seconds * _SECOND, _Visit(new_visitor(), first=True))
            scheduled += 1


def _seconds(rng: random.Random, low_ms: int, high_ms: int) -> int:
    return rng.randint(low_ms // _SECOND, high_ms // _SECOND) * _SECOND


def _session(rng: random.Random, visitor: _Visitor, start_ms: int) -> list[ParsedFragment]:
    site = rng.choice(_SITES)
    count = 1 if rng.random() < BOUNCE_RATE else rng.randint(2, MAX_PAGES)
    path = rng.choice(site.landing)
    referrer = rng.choice(_EXTERNAL_REFERRERS)
    at_ms = start_ms
    pages = [_page(rng, visitor, at_ms, path, referrer)]
    for _ in range(count - 1):
        at_ms += _seconds(rng, MIN_PAGE_GAP_MS, MAX_PAGE_GAP_MS)
        referrer = f"https://{site.host}{path}"
        path = rng.choice(site.pages)
        pages.append(_page(rng, visitor, at_ms, path, referrer))
    return pages


def _page(
    rng: random.Random, visitor: _Visitor, at_ms: int, path: str, referrer: str
) -> ParsedFragment:
    roll = rng.random()
    status = 200 if roll < 0.9 else 304 if roll < 0.96 else 404
    # Same fields, types and derivations as formats_apache produces (304: no body, "-").
    fields = {
        "ip": visitor.ip,
        "method": "POST" if path in _POST_PATHS else "GET",
        "path": path,
        "protocol": visitor.protocol,
        "status": status,
        "bytes": 0 if status == 304 else rng.randint(300, 120_000),
        "referrer": referrer,
        "agent": visitor.agent,
        "site": referrer_site(referrer),
    }
    return ParsedFragment(f"{visitor.ip}|{visitor.agent}", at_ms, fields)
