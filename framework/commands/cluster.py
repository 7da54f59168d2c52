"""`sessionizer cluster up|down`: a real local ZooKeeper + Kafka for development."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from framework.cluster.launcher import STATE_FILE, LocalCluster, running_cluster, stop_cluster_dir
from framework.cluster.security import ClusterSecurity
from framework.cluster.spark import (
    SPARK_STATE_FILE,
    running_spark,
    start_spark_dir,
    stop_spark_dir,
)
from framework.commands.options import Command, EnvDefault, Group

__all__ = ["add_parser"]


def _up_options(up: argparse.ArgumentParser) -> None:
    _dir_option(up)
    up.add_argument("--zookeepers", type=int, choices=[1, 3], default=1)
    up.add_argument("--brokers", type=int, choices=[1, 3], default=1)
    up.add_argument(
        "--secure",
        action="store_true",
        help="Kafka listens with SASL_SSL (SCRAM-SHA-512, certificates made by keytool under "
        "DIR/security) and ZooKeeper gets a digest identity for the app's ACLs; also prints "
        "export SESSIONIZER_KAFKA_CONFIG=... and SESSIONIZER_ZK_AUTH=...",
    )
    up.add_argument(
        "--spark-workers",
        type=_worker_count,
        default=0,
        metavar="N",
        help="also start a Spark standalone master and N workers (JVMs from pyspark's own jars) "
        "and print export SESSIONIZER_SPARK_MASTER=spark://..., which `aggregate` then uses",
    )


def _dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=EnvDefault("SESSIONIZER_CLUSTER_DIR", Path(".local-cluster")),
        help="where servers keep data and logs [env: SESSIONIZER_CLUSTER_DIR] "
        "(default: .local-cluster)",
    )


def _print_exports(
    directory: Path, zk_connect: str, bootstrap: str, security: ClusterSecurity | None = None
) -> None:
    # The directory too, so that a later `cluster down` (no --dir) stops this cluster.
    print(f"export SESSIONIZER_CLUSTER_DIR={shlex.quote(str(directory.resolve()))}")
    print(f"export SESSIONIZER_ZK={shlex.quote(zk_connect)}")
    print(f"export SESSIONIZER_BOOTSTRAP={shlex.quote(bootstrap)}")
    # The only place the ZooKeeper secret is shown: stdout, for `eval`.
    for line in security.exports() if security is not None else []:
        print(line)


def _running_security(directory: Path) -> ClusterSecurity | None:
    """The security material of the cluster running in `directory`, if it was started secure."""
    try:
        secure = json.loads((directory / STATE_FILE).read_text()).get("secure", False)
    except (OSError, ValueError):
        return None
    return ClusterSecurity.load(directory) if secure else None


def run_up(args: argparse.Namespace) -> int:
    """Start the cluster (or report the one already running in --dir)."""
    existing = running_cluster(args.dir)
    if existing is not None:
        security = _running_security(args.dir)
        kind = "secured" if security is not None else "open"
        print(f"{kind} cluster already running in {args.dir}", file=sys.stderr)
        if args.secure and security is None:
            print(
                "it was not started with --secure: `sessionizer cluster down` first",
                file=sys.stderr,
            )
            return 1
        _print_exports(args.dir, existing["zk_connect"], existing["bootstrap"], security)
        _spark_up(args)
        return 0
    stop_cluster_dir(args.dir)  # a half-dead earlier cluster: stop what is left of it
    secured = " secured (SASL_SSL, SCRAM-SHA-512; ZooKeeper digest auth)" if args.secure else ""
    print(
        f"starting {args.zookeepers} ZooKeeper and {args.brokers}{secured} Kafka server(s) "
        f"in {args.dir}...",
        file=sys.stderr,
        flush=True,
    )
    cluster = LocalCluster(
        args.dir,
        zookeepers=args.zookeepers,
        brokers=args.brokers,
        die_with_parent=False,
        secure=args.secure,
    )
    cluster.up()
    print(f"cluster up; logs under {cluster.directory}/*/server.log", file=sys.stderr)
    if cluster.security is not None:
        print(
            f"certificates, client properties and passwords (mode 0600) under "
            f"{cluster.security.directory}",
            file=sys.stderr,
        )
    _print_exports(args.dir, cluster.zk_connect, cluster.bootstrap, cluster.security)
    _spark_up(args)
    return 0


def _worker_count(text: str) -> int:
    count = int(text)
    if count < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {count}")
    return count


def _spark_up(args: argparse.Namespace) -> None:
    """With --spark-workers, start the standalone Spark cluster; print its export if it runs."""
    running = running_spark(args.dir)
    if running is not None:
        master = str(running["master_url"])
        print(f"Spark already running at {master}", file=sys.stderr)
    elif args.spark_workers:
        print(
            f"starting a Spark standalone master and {args.spark_workers} worker(s)...",
            file=sys.stderr,
            flush=True,
        )
        master, _ = start_spark_dir(args.dir, args.spark_workers)
        print(f"Spark up at {master}; logs under {args.dir}/spark-*/server.log", file=sys.stderr)
    else:
        return
    print(f"export SESSIONIZER_SPARK_MASTER={shlex.quote(master)}")


def run_down(args: argparse.Namespace) -> int:
    """Stop the servers `cluster up` started in --dir; exit 1 if no cluster was ever there.

    A directory with a state file whose servers have all exited is not an error (the
    state file is removed); a directory without one is: the servers the user means
    are elsewhere, most likely in the --dir they gave `cluster up`.
    """
    if not any((args.dir / name).exists() for name in (STATE_FILE, SPARK_STATE_FILE)):
        print(
            f"sessionizer cluster down: error: no cluster was started in {args.dir.resolve()}; "
            "pass the --dir given to `cluster up` (its output exports SESSIONIZER_CLUSTER_DIR)",
            file=sys.stderr,
        )
        return 1
    stopped = stop_spark_dir(args.dir) + stop_cluster_dir(args.dir)
    print(
        f"stopped: {', '.join(stopped) if stopped else 'nothing was still running'} "
        f"(in {args.dir})",
        file=sys.stderr,
    )
    return 0


CLUSTER = Group(
    "cluster",
    help="start or stop a local ZooKeeper + Kafka",
    actions=(
        Command(
            "up",
            run_up,
            help="start real ZooKeeper and Kafka JVMs; prints export lines for eval",
            description='Starts the servers and returns when they serve. Use as: eval "$('
            'sessionizer cluster up)". Progress goes to stderr, the export lines to stdout (the '
            "addresses, and SESSIONIZER_CLUSTER_DIR for `cluster down`).",
            options=_up_options,
        ),
        Command(
            "down",
            run_down,
            help="stop the local cluster",
            description='Stops the servers `cluster up` started in --dir (`eval "$(sessionizer '
            'cluster up)"` exports SESSIONIZER_CLUSTER_DIR for it); exits 1 if no cluster was '
            "ever started there.",
            options=_dir_option,
        ),
    ),
)
add_parser = CLUSTER.register
