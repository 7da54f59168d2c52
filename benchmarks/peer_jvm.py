"""What the JVM peers' drivers (`peer_kstreams`, `peer_flink`) share: build, run, measure.

    .venv/bin/python -m benchmarks.peer_jvm [--force]

builds the JVM programs of benchmarks/jvm/ with Maven (`mvn -q -B clean
package`, versions pinned in benchmarks/jvm/pom.xml) unless their jars are
newer than every pom and source file there; `make bench` runs it, and each
driver calls `ensure_built()` on first use.  The jars and their runtime
classpaths (`target/lib/`) are git-ignored build output.

A driver runs its program as one child JVM (`run_jvm`) and reads its CPU time
from the kernel when it is reaped (`wait4`: user + system of every thread, the
whole process, start-up included).  The program writes a JSON file of its own
(`first_record_at`, `cpu_at_first_record_s`, `last_output_at`, ...), which
`jvm_figures` turns into the harness's result fields, so that CPU can also be
told without the JVM's start-up (what it had used when it consumed its first
record).  `DirWatch` sums the bytes of every file that ever appeared in a
directory (Flink's checkpoints: each checkpoint's files are deleted once a newer
one completes, so the final size is not what was written).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "JVM_DIR",
    "DirWatch",
    "JvmRun",
    "classpath",
    "ensure_built",
    "jvm_figures",
    "jvm_missing",
    "pom_version",
    "read_jvm_result",
    "run_jvm",
]

JVM_DIR = Path(__file__).resolve().parent / "jvm"
MODULES = ("kstreams", "flink")


def _jar(module: str) -> Path:
    return JVM_DIR / module / "target" / f"{module}-peer.jar"


def _sources() -> Iterable[Path]:
    yield JVM_DIR / "pom.xml"
    for module in ("common", *MODULES):
        yield JVM_DIR / module / "pom.xml"
        yield from (JVM_DIR / module / "src").rglob("*.java")


def jvm_missing() -> str | None:
    """Why the JVM peers cannot run here (no java or mvn on PATH), or None."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH: install Java 17+ and Maven"
    return None


def is_stale() -> bool:
    """Whether a jar is missing or older than a pom or a source file of benchmarks/jvm/."""
    built = [_jar(m).stat().st_mtime if _jar(m).exists() else None for m in MODULES]
    if None in built or not all((JVM_DIR / m / "target" / "lib").is_dir() for m in MODULES):
        return True
    newest = max(p.stat().st_mtime for p in _sources())
    return newest > min(t for t in built if t is not None)


def ensure_built(*, force: bool = False) -> None:
    """Build benchmarks/jvm/ with Maven if its jars are missing or stale."""
    if not force and not is_stale():
        return
    missing = jvm_missing()
    if missing:
        raise RuntimeError(missing)
    if shutil.which("javac") is None:  # a JRE runs the cluster, building needs a JDK
        raise RuntimeError("javac is not on PATH: install a JDK 17+ (openjdk-17-jdk-headless)")
    print(f"building the JVM peers in {JVM_DIR} (mvn -q -B clean package)...", flush=True)
    done = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(JVM_DIR / "pom.xml"), "clean", "package"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise RuntimeError("Maven failed to build benchmarks/jvm:\n" + "\n".join(tail))


def classpath(module: str) -> str:
    """The `java -cp` of one program: its jar and its runtime dependencies."""
    target = JVM_DIR / module / "target"
    return f"{_jar(module)}{os.pathsep}{target / 'lib' / '*'}"


def pom_version(prop: str) -> str | None:
    """A version property of benchmarks/jvm/pom.xml (`kafka.version`, `flink.version`)."""
    found = re.search(rf"<{re.escape(prop)}>([^<]+)<", (JVM_DIR / "pom.xml").read_text())
    return found.group(1) if found else None


@dataclass(frozen=True)
class JvmRun:
    """How the JVM ended and what it used: exit code, CPU s (user + system), peak RSS."""

    code: int
    cpu_s: float
    max_rss_kib: int


def run_jvm(command: list[str]) -> JvmRun:
    """Run one JVM to its end (its output is ours); killed if this process is interrupted."""
    process = subprocess.Popen(command)
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except BaseException:
        process.kill()
        process.wait()
        raise
    process.returncode = os.waitstatus_to_exitcode(status)
    return JvmRun(process.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


def jvm_figures(jvm: dict[str, Any], run: JvmRun) -> dict[str, Any]:
    """The harness's timing and CPU fields from the program's own result file and `run`."""
    first = jvm.get("first_record_at")
    at_first = jvm.get("cpu_at_first_record_s")
    return {
        "first_record_at": first,
        # The end: the last session handed to the sink (after it, only flushes and shutdown).
        "last_record_at": jvm.get("last_output_at") or jvm.get("finished_at"),
        "finished_at": jvm.get("finished_at"),
        "records_seen": jvm.get("records_seen"),
        "fragments_seen": jvm.get("fragments_seen"),
        "sessions_emitted": jvm.get("sessions_emitted"),
        "cpu_s": run.cpu_s,
        "cpu_at_first_record_s": at_first,
        "cpu_s_after_first_record": None if at_first is None else run.cpu_s - at_first,
        "setup_s": None if first is None else first - jvm["jvm_started_at"],
        "max_rss_mib": run.max_rss_kib / 1024,
    }


def read_jvm_result(path: Path) -> dict[str, Any]:
    """The JSON object the JVM program wrote."""
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


class DirWatch:
    """Sums the largest size seen of every file that ever appeared under a directory.

    Polled every `interval` seconds in a thread (a context manager); files written
    and deleted between two polls are missed, so the sum is a lower bound.
    """

    def __init__(self, root: Path, interval: float = 0.2) -> None:
        self.root = root
        self.interval = interval
        self.sizes: dict[str, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dir-watch", daemon=True)

    def __enter__(self) -> DirWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join(timeout=10)
        self.record(_snapshot(self.root))

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            self.record(_snapshot(self.root))

    def record(self, snapshot: dict[str, int]) -> None:
        """Take one listing {path: size} into account."""
        for path, size in snapshot.items():
            if size > self.sizes.get(path, -1):
                self.sizes[path] = size

    @property
    def bytes_written(self) -> int:
        """Bytes of every file seen, each at the largest size seen."""
        return sum(self.sizes.values())


def _snapshot(root: Path) -> dict[str, int]:
    sizes = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            try:
                sizes[path] = os.stat(path).st_size
            except OSError:  # deleted since the listing
                continue
    return sizes


def main(argv: list[str] | None = None) -> None:
    """Build the JVM peers if needed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    ensure_built(force=args.force)
    print(f"JVM peers built: {', '.join(str(_jar(m)) for m in MODULES)}")


if __name__ == "__main__":
    main()
