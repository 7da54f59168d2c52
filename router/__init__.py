"""Routing: the key -> stream hash, stream naming, input formats and synthetic traffic.

The hash and naming rules are a cross-language contract, documented in docs/routing.md.
"""

from framework.kernel.compiled import package_path

# SESSIONIZER_HOT_PATH=compiled: the mypyc build's modules of this package (the producer's
# per-fragment path) are found first (framework.kernel.compiled); before anything else.
__path__ = package_path(__name__, __path__)

from router.errors import (
    MalformedLine,
    MalformedReason,
    RouterError,
    StreamCountMismatch,
    UndecodableRecord,
)
from router.format_registry import FORMATS, Format, load_format
from router.formats import parse_line
from router.formats_sshd import DEFAULT_SYSLOG_YEAR
from router.fragment import ParsedFragment
from router.generator import generate_fragments
from router.hashing import hash64, jump_consistent_hash, stream_for_key
from router.naming import (
    deadletter_topic,
    sessions_topic,
    stream_index,
    stream_name,
)

# One name per line, sorted (ruff RUF022), so adding the producer's names is a local edit.
__all__ = [
    "DEFAULT_SYSLOG_YEAR",
    "FORMATS",
    "Format",
    "MalformedLine",
    "MalformedReason",
    "ParsedFragment",
    "RouterError",
    "StreamCountMismatch",
    "UndecodableRecord",
    "deadletter_topic",
    "generate_fragments",
    "hash64",
    "jump_consistent_hash",
    "load_format",
    "parse_line",
    "sessions_topic",
    "stream_for_key",
    "stream_index",
    "stream_name",
]
