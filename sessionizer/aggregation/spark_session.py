"""Start (and fully stop) the SparkSession the aggregation runs in, with Spark's Kafka source.

The `spark-sql-kafka-0-10_2.13` jars come in `SparkSettings.jars` (the CLI takes
them from the `spark` profile of `deploy/local/pom.xml`, resolved by Maven into
the project's artifact cache like the Kafka and ZooKeeper servers) and are passed
with `spark.jars`, so Spark never runs Ivy at start-up.  Spark's own logging is
turned down to warnings.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark
from pyspark import SparkContext
from pyspark.sql import SparkSession

from sessionizer.aggregation.config import SparkSettings
from sessionizer.aggregation.errors import SparkSetupError

__all__ = ["kafka_source_jars", "spark_session", "stderr_line"]

_KAFKA_SOURCE_JAR = re.compile(r"spark-sql-kafka-0-10_2\.13-(?P<version>.+)\.jar")
# Spark's log4j2 configuration: warnings and errors only, on stderr; the noisiest
# start-up warnings (loopback hostname, no native Hadoop, state store "normal for the
# first batch" notes, "failed to cancel job group" on stop) and Kafka clients at ERROR.
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = spark %p %c{1}: %m%n%ex
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.state.name = org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider
logger.state.level = error
logger.dag.name = org.apache.spark.scheduler.DAGScheduler
logger.dag.level = error
logger.kafka.name = org.apache.kafka
logger.kafka.level = error
"""


def stderr_line(message: str) -> None:
    """Print one progress line of the aggregation on stderr."""
    print(f"aggregate: {message}", file=sys.stderr, flush=True)


def kafka_source_jars(directory: Path) -> tuple[Path, ...]:
    """The jars in `directory`, checked to hold Spark's Kafka source for the installed pyspark."""
    jars = tuple(sorted(directory.glob("*.jar")))
    versions = {m["version"] for j in jars if (m := _KAFKA_SOURCE_JAR.fullmatch(j.name))}
    if versions != {pyspark.__version__}:
        found = ", ".join(sorted(versions)) or "none"
        raise SparkSetupError(
            f"Spark's Kafka source in {directory} is version {found}, but pyspark is "
            f"{pyspark.__version__}: make spark.version in deploy/local/pom.xml and the pyspark "
            "pin in pyproject.toml equal (spark-sql-kafka must exist on Maven Central)"
        )
    return jars


@contextmanager
def spark_session(settings: SparkSettings) -> Iterator[SparkSession]:
    """Yield a SparkSession; the active one if there is one, else a new one stopped at exit.

    Reusing lets tests and notebooks share one session (`settings` then do not
    apply); a session started here is stopped with its JVM when the block ends.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        if "spark-sql-kafka" not in (active.conf.get("spark.jars", "") or ""):
            raise SparkSetupError(
                "the active SparkSession has no Kafka source in spark.jars: stop it, or create it "
                "with sessionizer.aggregation.spark_session()"
            )
        stderr_line(f"using the active SparkSession (master {active.sparkContext.master})")
        yield active
        return
    if not any(_KAFKA_SOURCE_JAR.fullmatch(jar.name) for jar in settings.jars):
        raise SparkSetupError(
            "SparkSettings.jars lacks spark-sql-kafka-0-10_2.13: pass "
            "kafka_source_jars(framework.cluster.resolve_artifacts().spark)"
        )
    with tempfile.TemporaryDirectory(prefix="sessionizer-spark-") as scratch:
        log_config = Path(scratch) / "log4j2.properties"
        log_config.write_text(_LOG4J2)
        stderr_line(f"starting Spark {pyspark.__version__} on {settings.master}")
        started = time.monotonic()
        spark: SparkSession | None = None
        try:
            spark = (
                SparkSession.builder.master(settings.master)
                .appName(settings.app_name)
                .config("spark.jars", ",".join(str(jar) for jar in settings.jars))
                .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
                .config("spark.driver.memory", settings.driver_memory)
                .config("spark.ui.enabled", str(settings.ui).lower())
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.session.timeZone", "UTC")
                .config(
                    "spark.driver.extraJavaOptions",
                    f"-Dlog4j2.configurationFile=file:{log_config}",
                )
                .getOrCreate()
            )
            context = spark.sparkContext
            stderr_line(
                f"Spark started in {time.monotonic() - started:.1f}s "
                f"(application {context.applicationId} on {context.master})"
            )
            yield spark
        finally:
            _stop(spark)


def _stop(spark: SparkSession | None) -> None:
    """Stop the session, then the gateway JVM pyspark launched for it (it exits on stdin EOF)."""
    if spark is not None:
        spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    process: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if process is None:
        return
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
