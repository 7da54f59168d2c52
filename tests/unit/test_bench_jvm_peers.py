"""The JVM peers' Python side: build staleness, CPU/timing fields, checkpoint bytes, sentinel.

No JVM runs here: the programs in benchmarks/jvm/ run only in `benchmarks.peers`.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from benchmarks import peer_jvm, peers
from benchmarks.peer_common import GAP_MS, GRACE_MS
from benchmarks.peer_jvm import DirWatch, JvmRun, jvm_figures, pom_version, run_jvm
from benchmarks.peer_kstreams import sentinel_time

ROOT = Path(__file__).resolve().parents[2]

JVM_RESULT = {
    "jvm_started_at": 100.0,
    "first_record_at": 104.5,
    "last_output_at": 110.0,
    "finished_at": 112.0,
    "cpu_at_first_record_s": 3.0,
    "records_seen": 1_200,
    "fragments_seen": 1_000,
    "sessions_emitted": 300,
}


def test_jvm_figures_split_cpu_at_the_first_record() -> None:
    figures = jvm_figures(JVM_RESULT, JvmRun(code=0, cpu_s=10.5, max_rss_kib=2048))
    assert figures["cpu_s"] == 10.5  # the whole process, start-up included
    assert figures["cpu_s_after_first_record"] == pytest.approx(7.5)
    assert figures["setup_s"] == pytest.approx(4.5)
    assert figures["first_record_at"] == 104.5
    assert figures["last_record_at"] == 110.0  # the last session handed to the sink
    assert figures["max_rss_mib"] == 2.0


def test_jvm_figures_without_marks() -> None:
    bare = {"jvm_started_at": 100.0, "finished_at": 112.0}
    figures = jvm_figures(bare, JvmRun(code=0, cpu_s=1.0, max_rss_kib=0))
    assert figures["last_record_at"] == 112.0  # no session emitted: the end of the program
    assert figures["cpu_s_after_first_record"] is None
    assert figures["setup_s"] is None


def test_dir_watch_counts_every_file_once_at_its_largest() -> None:
    watch = DirWatch(Path("/nonexistent"))
    watch.record({"chk-1/_metadata": 10, "chk-1/state": 100})
    watch.record({"chk-1/state": 400, "chk-2/_metadata": 12})  # grew; chk-1/_metadata deleted
    watch.record({"chk-2/_metadata": 12, "chk-2/state": 50})
    assert watch.bytes_written == 10 + 400 + 12 + 50
    assert len(watch.sizes) == 4


def test_dir_watch_reads_a_directory(tmp_path: Path) -> None:
    (tmp_path / "chk-1").mkdir()
    (tmp_path / "chk-1" / "_metadata").write_bytes(b"x" * 7)
    with DirWatch(tmp_path, interval=0.01) as watch:
        pass
    assert watch.bytes_written == 7  # the last listing is taken on exit


def test_sentinel_is_past_the_close_of_the_latest_session() -> None:
    last = 1_432_055_173_000
    at = sentinel_time(last)
    # Kafka Streams emits a session once stream time passes its end + gap + grace.
    assert at > last + GAP_MS + GRACE_MS
    assert at - last < GAP_MS + GRACE_MS + 60_000


def test_kafka_streams_runs_the_projects_kafka_version() -> None:
    project = re.search(r"<kafka\.version>([^<]+)<", (ROOT / "deploy/local/pom.xml").read_text())
    assert project is not None
    assert pom_version("kafka.version") == project.group(1)
    assert (pom_version("flink.version") or "").startswith("2.")


def _tree(root: Path) -> None:
    (root / "pom.xml").write_text("<project/>")
    for module in ("common", "kstreams", "flink"):
        source = root / module / "src" / "Main.java"
        source.parent.mkdir(parents=True)
        source.write_text("class Main {}")
        (root / module / "pom.xml").write_text("<project/>")


def _build(root: Path, at: float) -> None:
    for module in peer_jvm.MODULES:
        jar = root / module / "target" / f"{module}-peer.jar"
        (jar.parent / "lib").mkdir(parents=True, exist_ok=True)
        jar.write_bytes(b"jar")
        os.utime(jar, (at, at))


def test_a_missing_or_older_jar_is_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer_jvm, "JVM_DIR", tmp_path)
    _tree(tmp_path)
    assert peer_jvm.is_stale()  # never built
    _build(tmp_path, at=Path(tmp_path / "pom.xml").stat().st_mtime + 10)
    assert not peer_jvm.is_stale()
    edited = tmp_path / "flink" / "src" / "Main.java"
    later = edited.stat().st_mtime + 20
    os.utime(edited, (later, later))
    assert peer_jvm.is_stale()


def test_run_jvm_reports_the_childs_exit_code_and_cpu() -> None:
    burn = (
        "import sys, time\n"
        "end = time.process_time() + 0.2\n"
        "while time.process_time() < end: pass\n"
        "sys.exit(3)"
    )
    run = run_jvm([sys.executable, "-c", burn])
    assert run.code == 3
    assert run.cpu_s >= 0.15  # the child's own CPU, read when it was reaped
    assert run.max_rss_kib > 0


def test_jvm_peers_are_registered_with_their_driver_and_flags() -> None:
    assert {"kstreams", "kstreams-eos", "flink"} <= set(peers.PEERS)
    assert peers.JVM_PEERS["kstreams-eos"][:2] == ("kstreams", ["--eos"])
    assert peers.JVM_PEERS["flink"][:2] == ("flink", [])


def test_fragments_per_cpu_second_with_and_without_start_up() -> None:
    row: dict[str, object] = {"cpu_s": 20.0, "cpu_s_after_first_record": 16.0}
    peers._per_cpu(row, 40_000)
    assert row["fragments_per_cpu_s"] == 2_000
    assert row["fragments_per_cpu_s_after_start"] == 2_500
    ours: dict[str, object] = {"cpu_s": 10.0}
    peers._per_cpu(ours, 40_000)
    assert ours == {"cpu_s": 10.0, "fragments_per_cpu_s": 4_000}
