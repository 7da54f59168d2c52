"""A node or command on confluent-kafka never loads kafka-python (0.2 CPU s of every start)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import sys
import framework.cli
framework.cli.build_parser()  # imports every command's module, as each invocation does
import framework.node.runner, framework.node.confluent_source, framework.node.node
from router.producer import ProducerConfig
ProducerConfig("127.0.0.1:9", "app", 4).confluent_settings()
loaded = sorted(name for name in sys.modules if name == "kafka" or name.startswith("kafka."))
print(loaded[:5])
"""


def test_the_cli_and_a_confluent_node_import_no_kafka_python() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout
