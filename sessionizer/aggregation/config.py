"""Settings of an aggregation run: what to read, where results go, how Spark starts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from framework.kernel.errors import ConfigError
from sessionizer.aggregation.figures import TOP_LANDING_PAGES

__all__ = ["DEFAULT_MASTER", "DEFAULT_WATERMARK", "AggregateJob", "SparkSettings"]

DEFAULT_MASTER = "local[*]"
"""The Spark master used unless `--master` names another."""
DEFAULT_WATERMARK = "24 hours"
"""How far behind the largest `first_ts` seen a session may arrive and still be counted."""
_INTERVAL = re.compile(r"[1-9][0-9]* (second|minute|hour|day|week)s?")
_MEMORY = re.compile(r"[1-9][0-9]*[kmgt]?", re.IGNORECASE)
# The masters Spark 4 accepts: local[N|*][,F], local-cluster[..], a standalone master (or
# several, for ZooKeeper-based recovery), YARN (from HADOOP_CONF_DIR), Kubernetes.
_MASTER = re.compile(
    r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?|local-cluster\[[^\]]+\]"
    r"|spark://[^\s/]+(:[0-9]+)?(,[^\s/]+(:[0-9]+)?)*|yarn|k8s://\S+"
)


@dataclass(frozen=True)
class AggregateJob:
    """What to aggregate (`topic`: the app's `<app>.sessions`) and where the results go."""

    bootstrap: str
    topic: str
    out: Path
    watermark: str = DEFAULT_WATERMARK
    top: int = TOP_LANDING_PAGES
    kafka_config: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Kafka client properties by their standard names (`--kafka-config`), e.g. security."""

    def __post_init__(self) -> None:
        if not self.bootstrap:
            raise ConfigError("no Kafka bootstrap servers: bootstrap is empty")
        if not self.topic:
            raise ConfigError(
                "no topic to aggregate: give the app's sessions topic (<app>.sessions)"
            )
        if not _INTERVAL.fullmatch(self.watermark):
            raise ConfigError(
                f"watermark {self.watermark!r} is not a delay like '24 hours' or '90 minutes'"
            )
        if self.top < 1:
            raise ConfigError(f"the number of top landing pages must be >= 1, got {self.top}")

    @property
    def chart_path(self) -> Path:
        """Where the PNG chart goes."""
        return self.out / "sessions_per_hour.png"

    @property
    def session_table(self) -> Path:
        """The streaming query's de-duplicated sessions (Parquet, exactly-once file sink)."""
        return self.out / "stream" / "sessions"

    @property
    def checkpoint(self) -> Path:
        """The streaming query's checkpoint directory."""
        return self.out / "stream" / "checkpoint"


@dataclass(frozen=True)
class SparkSettings:
    """How to start Spark: master URL, the Kafka source jars, shuffle partitions, memory, UI."""

    master: str = DEFAULT_MASTER
    jars: tuple[Path, ...] = ()
    app_name: str = "sessionizer-aggregate"
    shuffle_partitions: int = 4
    driver_memory: str = "1g"
    ui: bool = True

    def __post_init__(self) -> None:
        if not self.master.strip():
            raise ConfigError("the Spark master URL is empty: pass --master, e.g. local[2]")
        if not _MASTER.fullmatch(self.master):
            raise ConfigError(
                f"{self.master!r} is not a Spark master URL: use local[*], local[N], "
                "spark://HOST:PORT, yarn or k8s://https://HOST:PORT"
            )
        if self.shuffle_partitions < 1:
            raise ConfigError(f"shuffle_partitions must be >= 1, got {self.shuffle_partitions}")
        if not _MEMORY.fullmatch(self.driver_memory):
            raise ConfigError(f"driver_memory must look like 512m or 2g: {self.driver_memory!r}")
