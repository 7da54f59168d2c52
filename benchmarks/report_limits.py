"""RESULTS.md sections of the limits: broker ceiling, memory per session, CPU profile, ZooKeeper.

Same shape as `benchmarks.report_sections`: each takes its scenario's payload
and the core count and returns markdown and plots.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import Payload
from benchmarks.report_plots import Plot, bars, plt
from benchmarks.tables import markdown

__all__ = ["broker_ceiling", "engine_memory", "profile_node", "zookeeper_commits"]


def broker_ceiling(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
    """The perf-test tools' rows: the physical limit of this broker on this machine."""
    rows = payload["results"]
    text = [
        markdown(
            rows,
            [
                "tool",
                "records",
                ("records_per_s", "records/s"),
                ("mb_per_s", "MB/s"),
                ("record_size", "record bytes"),
                ("seconds", "seconds"),
                ("latency_avg_ms", "avg latency ms"),
            ],
        ),
        "",
        f"- Consumer: the {payload.get('stream_records', 0):,} records of the app's "
        f"{payload['params']['streams']} stream topics (fragments and watermarks), as the nodes "
        "and bare readers read them.  Producer: records of the workload's mean value size "
        f"({payload.get('record_size')} B) to one topic with as many partitions, with "
        "`StreamProducer`'s settings.",
    ]
    return "\n".join(text), []


def engine_memory(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
    """Bytes per open session, and what holds them."""
    rows = payload["results"]
    text = [
        markdown(
            rows,
            [
                "engine",
                ("open_sessions", "open sessions"),
                ("fragments_per_session", "fragments per session"),
                ("raw_per_session", "held raw per session"),
                ("bytes_per_session", "bytes per open session"),
            ],
        ),
        "",
    ]
    summary = payload.get("summary_bytes", {})
    text += [f"- {name.strip()}: {value:,.0f} B" for name, value in summary.items()]
    bare = summary.get("per open session, without raw fragments")
    if bare is not None:
        verdict = "meets" if bare <= 600 else "misses"
        text.append(
            f"- Target (issue 16): at most 600 B per open session plus the fragments within "
            f"grace; without its raw fragments a session costs {bare:,.0f} B: it {verdict} it."
        )
    return "\n".join(text), []


def profile_node(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
    """The py-spy breakdown, one column pair per client."""
    rows = payload["results"]
    clients = list(dict.fromkeys(r["client"] for r in rows))
    categories = list(dict.fromkeys(r["category"] for r in rows))
    table: list[dict[str, Any]] = []
    for category in categories:
        line: dict[str, Any] = {"category": category}
        for client in clients:
            row = next(r for r in rows if r["client"] == client and r["category"] == category)
            line[f"{client} loop"] = _percent(row["loop_share"])
            line[f"{client} busy"] = _percent(row["loop_busy_share"])
            line[f"{client} other"] = _percent(row["other_threads_cores"])
        table.append(line)
    columns: list[str | tuple[str, str]] = ["category"]
    for client in clients:
        columns += [
            (f"{client} loop", f"{client}: loop thread, % of wall"),
            (f"{client} busy", f"{client}: % of loop's CPU"),
            (f"{client} other", f"{client}: other threads, % of a core"),
        ]
    text = [markdown(table, columns), ""]
    for client in clients:
        first = next(r for r in rows if r["client"] == client)
        text.append(
            f"- {client}: recorded {first['recorded_s']:.1f} s; the node used "
            f"{first['node_cpu_s']:.1f} CPU s (from /proc, native threads included) and "
            f"sessionized {first['fragments_per_s']:,.0f} fragments/s with the profiler attached."
        )
    figure, ax = plt().subplots(figsize=(9, 3.8))
    busy = [c for c in categories if all(r["loop_busy_share"] is not None for r in rows
                                        if r["category"] == c)]  # fmt: skip
    series: dict[str, list[float | None]] = {
        str(client): [
            100
            * float(
                next(
                    r["loop_busy_share"]
                    for r in rows
                    if r["client"] == client and r["category"] == c
                )
            )
            for c in busy
        ]
        for client in clients
    }
    bars(ax, [c.split(" (")[0].replace(" + ", "\n+ ") for c in busy], series, _pct_label)
    ax.set_ylabel("% of the loop thread's CPU")
    ax.set_title("Where a node's loop thread spends its CPU (py-spy)")
    ax.tick_params(axis="x", labelsize=7)
    return "\n".join(text), [("profile_node", figure)]


def _percent(value: float | None) -> str | None:
    return None if value is None else f"{value:.1%}"


def _pct_label(value: float) -> str:
    return f"{value:.0f}%"


def zookeeper_commits(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
    """Capacity, commit rounds at 16-1,024 streams, and the labelled simulation."""
    capacity = payload["capacity"]
    text = [
        "Measured write capacity of this ZooKeeper (one server, this machine): "
        f"{capacity['sets_per_s']:,.0f} version-checked sets/s pipelined, "
        f"{capacity['sets_in_multis_per_s']:,.0f}/s grouped in multi-operations "
        f"({capacity['record_bytes']:,} B records); small znodes "
        f"({capacity.get('small_bytes', '?')} B): {capacity.get('small_sets_per_s', 0):,.0f} "
        "sets/s from concurrent clients.",
        "",
        markdown(
            payload["rounds"],
            [
                "streams",
                "mode",
                ("round_ms_median", "commit round ms (median)"),
                ("zk_writes_per_round", "ZooKeeper writes per round (= writes/s at 1 s)"),
                ("zk_requests_per_round", "requests per round"),
            ],
        ),
        "",
        "**Simulation, not a measurement** (`benchmarks/zookeeper_simulation.py`): from the "
        "measured capacity, one FIFO server (every write goes through the leader) and nodes "
        "committing every 1 s at random phases, in multi-operations of at most 256 writes; "
        "the limit is 70% utilisation or a 99th-percentile commit round over half the "
        "interval.  It leaves out reads, watches, session pings, snapshots and client CPU.",
        "",
        markdown(
            payload["simulation"],
            [
                ("busy_share", "share of streams moving"),
                "nodes",
                ("streams_until_zk_is_the_limit", "streams until ZooKeeper is the limit"),
                ("streams_per_node", "streams per node"),
                ("zk_writes_per_s", "ZooKeeper writes/s"),
                "utilisation",
                ("commit_round_p99_ms", "commit round p99 ms"),
            ],
        ),
    ]
    return "\n".join(text), []
