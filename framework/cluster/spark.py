"""`SparkStandalone`: a Spark standalone master and N workers as JVMs, from PySpark's own jars.

No Spark distribution is downloaded: the master and the workers run from the
jars the installed `pyspark` package ships (`<pyspark>/jars`), like the
`pyspark` shell does.  Each daemon gets its own directory under the cluster
directory (`spark-master/`, `spark-worker1/`, ...) with its `server.log`, a
`spark-defaults.conf` it is started with, and for workers `work/` (each
executor's stdout and stderr, `work/<app id>/<executor id>/`) and `local/`
(executors' scratch space, where the jars the driver ships them land).
The master is ready when its JSON status (`<web UI>/json/`) lists N ALIVE
workers.  `cluster up --spark-workers N` records the daemons in `spark.json`
next to the servers' `cluster.json`, so `cluster down` finds and stops them.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

import structlog

from framework.cluster.process import (
    ServerProcess,
    check_started,
    free_ports,
    java,
    retry_taken_ports,
    running_state,
    stop_recorded,
    stop_together,
    wait_until,
    write_state,
)
from framework.kernel.errors import ClusterError
from framework.kernel.lifecycle import Lifecycle

__all__ = [
    "SPARK_STATE_FILE",
    "SparkStandalone",
    "fetch_json",
    "pyspark_home",
    "running_spark",
    "start_spark_dir",
    "stop_spark_dir",
]

SPARK_STATE_FILE = "spark.json"
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_SPARK_CORE_JAR = re.compile(r"spark-core_(?P<scala>[0-9.]+)-.+\.jar")
# Every daemon: no port hopping (a taken port fails, and the cluster starts again on new
# ports, instead of a daemon silently listening elsewhere), and no submission REST server
# on its fixed port 6066.
_DEFAULTS = {"spark.port.maxRetries": "0", "spark.master.rest.enabled": "false"}
_log = structlog.get_logger("sessionizer.cluster")


def pyspark_home() -> Path:
    """The installed `pyspark` package directory: it holds `jars/` and serves as SPARK_HOME."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterError("pyspark is not installed: pip install the project (it pins pyspark)")
    home = Path(spec.origin).parent
    if not (home / "jars").is_dir():
        raise ClusterError(f"pyspark at {home} has no jars/ directory: reinstall pyspark")
    return home


def _scala_version(home: Path) -> str:
    """The Scala version of the installed Spark, from its spark-core jar's name."""
    for jar in (home / "jars").glob("spark-core_*.jar"):
        if match := _SPARK_CORE_JAR.fullmatch(jar.name):
            return match["scala"]
    raise ClusterError(f"no spark-core jar in {home / 'jars'}: reinstall pyspark")


def fetch_json(url: str, timeout: float = 5.0) -> Any:
    """GET `url` and parse its JSON body; None when nothing (valid) answers."""
    try:
        with urlopen(url, timeout=timeout) as response:
            return json.load(response)
    except (URLError, OSError, ValueError):
        return None


class SparkStandalone(Lifecycle):
    """A Spark standalone master and `workers` workers on free loopback ports.

    Use as a context manager; every JVM it started is stopped on exit, also on
    error.  With `die_with_parent` (the default) the JVMs get SIGKILL when the
    process that started them dies, as the launcher's servers do; `cluster up`
    turns that off so the daemons outlive it.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        daemon_heap_mb: int = 256,
        ready_timeout: float = 180.0,
        die_with_parent: bool = True,
        host: str = "127.0.0.1",
    ) -> None:
        if workers < 1:
            raise ClusterError(f"a Spark standalone cluster needs >= 1 worker, got {workers}")
        self.directory = Path(directory).resolve()
        self.workers = workers
        self.host = host
        self._worker_cores = worker_cores
        self._worker_memory = worker_memory
        self._heap_mb = daemon_heap_mb
        self._ready_timeout = ready_timeout
        self._die_with_parent = die_with_parent
        self._ports: list[int] = []
        self._processes: dict[str, ServerProcess] = {}

    # -- addresses ------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        """The URL drivers connect to, `spark://HOST:PORT`."""
        return f"spark://{self.host}:{self._port(0)}"

    @property
    def webui_url(self) -> str:
        """The master's web UI."""
        return f"http://{self.host}:{self._port(1)}"

    @property
    def json_url(self) -> str:
        """The master's JSON status: workers, active and completed applications."""
        return f"{self.webui_url}/json/"

    def worker_webui_urls(self) -> list[str]:
        """Each worker's web UI (its JSON status is under `/json/`), worker 1 first."""
        return [f"http://{self.host}:{self._port(3 + 2 * i)}" for i in range(self.workers)]

    def _port(self, index: int) -> int:
        if not self._ports:
            raise ClusterError("the Spark standalone cluster was not started: call start()")
        return self._ports[index]

    # -- status -----------------------------------------------------------------------

    def master_status(self) -> dict[str, Any]:
        """The master's JSON status now (raises if it does not answer)."""
        status = fetch_json(self.json_url)
        if not isinstance(status, dict):
            raise ClusterError(f"the Spark master does not answer at {self.json_url}")
        return status

    def worker_statuses(self) -> list[dict[str, Any]]:
        """Each worker's JSON status now (its executors and finished executors)."""
        statuses = []
        for url in self.worker_webui_urls():
            status = fetch_json(f"{url}/json/")
            if not isinstance(status, dict):
                raise ClusterError(f"the Spark worker does not answer at {url}/json/")
            statuses.append(status)
        return statuses

    def worker_directories(self) -> list[Path]:
        """Each worker's work directory: `<app id>/<executor id>/stderr` are executor logs."""
        return [self.directory / f"spark-worker{i}" / "work" for i in range(1, self.workers + 1)]

    # -- start and stop ---------------------------------------------------------------

    def start(self) -> SparkStandalone:
        """Start the master, then the workers; return once all workers are ALIVE.

        A daemon that finds its port taken makes the whole cluster start again on
        new ports, up to PORT_ATTEMPTS times.
        """
        home, java_path = pyspark_home(), java()

        def attempt() -> None:
            self._ports = free_ports(2 + 2 * self.workers, self.host)
            self._start(home, java_path)

        retry_taken_ports(attempt, "spark_port_taken")
        self._write_state()
        _log.info("spark_up", master=self.master_url, workers=self.workers, ui=self.webui_url)
        return self

    def stop(self) -> None:
        """Stop the workers (and with them their executors), then the master."""
        workers = [p for name, p in self._processes.items() if name != "spark-master"]
        stop_together(workers)
        if "spark-master" in self._processes:
            self._processes["spark-master"].stop(timeout=20)
        (self.directory / SPARK_STATE_FILE).unlink(missing_ok=True)

    def _open(self) -> None:
        self.start()

    def _close(self) -> None:
        self.stop()

    # -- internals --------------------------------------------------------------------

    def _start(self, home: Path, java: str) -> None:
        """One attempt of `start` on the ports chosen for it."""
        self._processes = {}
        try:
            master = self._add(home, java, "spark-master", self._master_arguments())
            master.start()
            wait_until(self._answering(master), self._ready_timeout, "the Spark master", 0.25)
            workers = [
                self._add(home, java, f"spark-worker{i}", self._worker_arguments(i))
                for i in range(1, self.workers + 1)
            ]
            for worker in workers:
                worker.start()
            what = f"{self.workers} Spark worker(s) to register with the master"
            wait_until(self._workers_alive(workers), self._ready_timeout, what, 0.5)
        except BaseException:
            self.stop()
            raise

    def _master_arguments(self) -> list[str]:
        host, port, ui = self.host, str(self._port(0)), str(self._port(1))
        return [_MASTER_CLASS, "--host", host, "--port", port, "--webui-port", ui]

    def _worker_arguments(self, index: int) -> list[str]:
        port, ui = str(self._port(2 * index)), str(self._port(2 * index + 1))
        work = self.directory / f"spark-worker{index}" / "work"
        return [
            _WORKER_CLASS, self.master_url, "--host", self.host, "--port", port,
            "--webui-port", ui, "--cores", str(self._worker_cores),
            "--memory", self._worker_memory, "--work-dir", str(work),
        ]  # fmt: skip

    def _add(self, home: Path, java: str, name: str, arguments: list[str]) -> ServerProcess:
        """A daemon in a fresh `<dir>/<name>`, started through `env` (it execs java: same pid)."""
        directory = self.directory / name
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        defaults = directory / "spark-defaults.conf"
        defaults.write_text("".join(f"{key} {value}\n" for key, value in _DEFAULTS.items()))
        environment = [
            f"SPARK_HOME={home}",  # workers build their executors' classpath from <home>/jars
            f"SPARK_SCALA_VERSION={_scala_version(home)}",
            f"SPARK_LOCAL_IP={self.host}",  # web UIs bind there too, not on every interface
            f"SPARK_LOCAL_DIRS={directory / 'local'}",  # executors' scratch space and jars
        ]
        command = [
            "env", "-u", "SPARK_CONF_DIR", *environment,
            java, f"-Xmx{self._heap_mb}m", "-cp", str(home / "jars" / "*"),
            *arguments, "--properties-file", str(defaults),
        ]  # fmt: skip
        process = ServerProcess(
            name, command, directory / "server.log", die_with_parent=self._die_with_parent
        )
        self._processes[name] = process
        return process

    def _answering(self, master: ServerProcess) -> Callable[[], bool]:
        def answering() -> bool:
            check_started(master)
            status = fetch_json(self.json_url, timeout=2.0)
            return isinstance(status, dict) and status.get("status") == "ALIVE"

        return answering

    def _workers_alive(self, workers: list[ServerProcess]) -> Callable[[], bool]:
        def alive() -> bool:
            for worker in workers:
                check_started(worker)
            status = fetch_json(self.json_url, timeout=2.0)
            if not isinstance(status, dict):
                return False
            registered = [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]
            return len(registered) == self.workers

        return alive

    def _write_state(self) -> None:
        write_state(
            self.directory / SPARK_STATE_FILE,
            self._processes,
            master_url=self.master_url,
            webui_url=self.webui_url,
            workers=self.workers,
        )


def running_spark(directory: Path | str) -> dict[str, Any] | None:
    """`master_url`, `webui_url` and `workers` of the standalone cluster running in `directory`.

    None unless `cluster up --spark-workers` left one there and all of its JVMs run.
    """
    state = running_state(Path(directory) / SPARK_STATE_FILE)
    if state is None:
        return None
    return {k: state[k] for k in ("master_url", "webui_url", "workers")}


def stop_spark_dir(directory: Path | str) -> list[str]:
    """Stop the Spark daemons recorded in `directory` (workers first); return their names."""
    return stop_recorded(Path(directory) / SPARK_STATE_FILE)


def start_spark_dir(directory: Path | str, workers: int) -> tuple[str, bool]:
    """The master URL of the standalone cluster in `directory`, started if none runs there.

    Returns (master URL, whether it was started now).  Daemons left half-dead by
    an earlier run are stopped first; the new ones outlive this process.
    """
    existing = running_spark(directory)
    if existing is not None:
        return str(existing["master_url"]), False
    stop_spark_dir(directory)
    cluster = SparkStandalone(directory, workers=workers, die_with_parent=False)
    return cluster.start().master_url, True
