"""Resolve the server jars (Kafka, ZooKeeper, Spark's Kafka source) with Maven into a cache."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from framework.kernel.errors import ClusterError

__all__ = [
    "Artifacts",
    "artifacts_cached",
    "default_cache_dir",
    "find_pom",
    "resolve_artifacts",
]

_PROFILES = ("kafka", "zookeeper", "spark")


@dataclass(frozen=True)
class Artifacts:
    """Directories holding each server's classpath jars (`spark`: jars for `spark.jars`)."""

    kafka: Path
    zookeeper: Path
    spark: Path

    def classpath(self, profile: str) -> str:
        """A `java -cp` wildcard classpath for one server kind."""
        return str(getattr(self, profile) / "*")


def default_cache_dir() -> Path:
    """`$SESSIONIZER_CACHE`, else `$XDG_CACHE_HOME/sessionizer`, else `~/.cache/sessionizer`."""
    explicit = os.environ.get("SESSIONIZER_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sessionizer"


def find_pom() -> Path:
    """The project's `deploy/local/pom.xml` (or `$SESSIONIZER_POM`)."""
    explicit = os.environ.get("SESSIONIZER_POM")
    candidates = [Path(explicit)] if explicit else []
    candidates.append(Path(__file__).resolve().parents[2] / "deploy" / "local" / "pom.xml")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ClusterError(
        "cannot find deploy/local/pom.xml: run from a clone of the project "
        "(pip install -e .) or set SESSIONIZER_POM to its path"
    )


def _cache_root(cache_dir: Path | None, pom: Path) -> Path:
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return (cache_dir or default_cache_dir()) / f"artifacts-{digest}"


def artifacts_cached(cache_dir: Path | None = None) -> bool:
    """Whether the jars of the current pom are already in the cache (no download needed)."""
    root = _cache_root(cache_dir, find_pom())
    return all((root / profile / ".complete").exists() for profile in _PROFILES)


def resolve_artifacts(cache_dir: Path | None = None, *, quiet: bool = False) -> Artifacts:
    """Return the server jars, running Maven once per pom version to fetch them.

    The cache is keyed by the pom's content, so editing a version in the pom
    resolves the new jars instead of silently reusing the old ones.
    """
    pom = find_pom()
    root = _cache_root(cache_dir, pom)
    artifacts = Artifacts(kafka=root / "kafka", zookeeper=root / "zookeeper", spark=root / "spark")
    for profile in _PROFILES:
        target: Path = getattr(artifacts, profile)
        if (target / ".complete").exists():
            continue
        _run_maven(pom, profile, target, quiet=quiet)
    return artifacts


def _run_maven(pom: Path, profile: str, target: Path, *, quiet: bool) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ClusterError("Maven (mvn) is not on PATH: install Maven and Java 17+ first")
    if not quiet:
        print(
            f"resolving {profile} jars from Maven Central into {target} (first run only)...",
            file=sys.stderr,
            flush=True,
        )
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        mvn, "-q", "-B", "-f", str(pom), "-P", profile,
        "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-15:]
        raise ClusterError(
            f"Maven could not resolve the {profile} artifacts (exit {result.returncode}); "
            "check network access to Maven Central:\n" + "\n".join(tail)
        )
    if not staging.is_dir() or not any(staging.glob("*.jar")):
        raise ClusterError(
            f"Maven resolved no jars for profile {profile!r} of {pom}; "
            "does the pom define that profile?"
        )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    (target / ".complete").write_text(pom.read_text())


if __name__ == "__main__":
    # `python -m framework.cluster.artifacts`: fetch the jars ahead of the first cluster start.
    resolved = resolve_artifacts()
    print(
        f"kafka jars: {resolved.kafka}\nzookeeper jars: {resolved.zookeeper}\n"
        f"spark jars: {resolved.spark}",
        file=sys.stderr,
    )
