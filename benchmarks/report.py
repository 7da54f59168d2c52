"""Write benchmarks/RESULTS.md and the PNG plots from the scenarios' JSON results.

    .venv/bin/python -m benchmarks.report

Reads benchmarks/out/{run_all,producer_workloads,nodes_vs_bare,peers,
failover_modes,scaling}.json (what the scenario commands wrote), writes the
plots to benchmarks/plots/ and the tables, plots and findings to
benchmarks/RESULTS.md.  `run_all` calls it at the end; run it alone to
re-render after running one scenario by hand.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import OUT, progress
from benchmarks.tables import cell, markdown

__all__ = ["PLOTS", "RESULTS", "SCENARIOS", "main", "render"]

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
PLOTS = HERE / "plots"
SCENARIOS = ("producer_workloads", "nodes_vs_bare", "peers", "failover_modes", "scaling")
Payload = dict[str, Any]


def _load(name: str) -> Payload | None:
    path = OUT / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def _save(figure: Any, name: str) -> str:
    PLOTS.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(PLOTS / f"{name}.png", dpi=110)
    _plt().close(figure)
    return f"plots/{name}.png"


def _size(value: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    return ""


def _bars(
    ax: Any,
    groups: Sequence[str],
    series: dict[str, Sequence[float | None]],
    label: Callable[[float], str] = cell,
) -> None:
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [v or 0 for v in values]
        bars = ax.bar(xs, heights, width, label=name)
        for bar, value in zip(bars, values, strict=True):
            if value:
                ax.annotate(
                    label(float(value)),
                    (bar.get_x() + bar.get_width() / 2, value),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
    ax.set_xticks(range(len(groups)), groups)
    ax.legend(fontsize=8)


def _command(payload: Payload, module: str) -> str:
    params = payload.get("params", {})
    parts = [f".venv/bin/python -m benchmarks.{module}"]
    for key, value in params.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, list):
            parts.append(f"{flag} {' '.join(str(v) for v in value)}")
        elif isinstance(value, bool):
            parts.append(flag if value else "")
        else:
            parts.append(f"{flag} {value}")
    return " ".join(p for p in parts if p)


def _busy_note(rows: Sequence[dict[str, Any]], key: str, cpus: int) -> str:
    busy = [r[key] for r in rows if r.get(key) is not None]
    if not busy:
        return ""
    top = max(busy)
    verdict = (
        "the machine's cores, not the design, were the limit in the busiest runs"
        if top >= 0.85 * cpus
        else "the machine still had idle CPU in every run"
    )
    return f"Busiest run: {top:.2f} of {cpus} cores busy on average (all processes): {verdict}."


# -- scenario sections -------------------------------------------------------------------


def _producer(payload: Payload) -> tuple[str, list[str]]:
    rows = payload["results"]
    text = [
        markdown(
            rows,
            [
                "workload",
                "producer",
                "fragments",
                "records",
                "seconds",
                ("fragments_per_s", "fragments/s"),
                ("ratio_to_bare", "ratio"),
                "cores_busy",
                ("metadata_warmup_s", "metadata warm-up s"),
            ],
        )
    ]
    for row in rows:
        if row["producer"] == "StreamProducer":
            text.append(
                f"- {row['workload']}: `StreamProducer` sends {row['fragments_per_s']:,.0f} "
                f"fragments/s, {row['ratio_to_bare']:.0%} of the bare producer's rate "
                "(routing, msgpack encoding, watermarks and counting cost the rest)"
                + (
                    f"; it also wrote {row['records'] - row['fragments']:,} watermark records."
                    if row.get("records")
                    else "."
                )
            )
    warmup = rows[0].get("metadata_warmup_s")
    if warmup:
        streams = payload["params"]["streams"]
        text.append(
            f"- Both times include kafka-python's blocking metadata fetch on the first send to "
            f"each of the {streams} stream topics: {warmup:.1f} s on its own."
        )
    plt = _plt()
    figure, ax = plt.subplots(figsize=(6.5, 3.6))
    workloads = sorted({r["workload"] for r in rows}, key=[r["workload"] for r in rows].index)
    series = {
        label: [
            next(
                (
                    r["fragments_per_s"]
                    for r in rows
                    if r["workload"] == w and r["producer"] == label
                ),
                None,
            )
            for w in workloads
        ]
        for label in ("bare KafkaProducer", "StreamProducer")
    }
    _bars(ax, workloads, series)
    ax.set_ylabel("fragments/s")
    ax.set_title("Producer: StreamProducer vs bare KafkaProducer")
    return "\n".join(text), [_save(figure, "producer")]


def _nodes(payload: Payload, cpus: int) -> tuple[str, list[str]]:
    rows = payload["results"]
    text = [
        markdown(
            rows,
            [
                "workload",
                ("n", "N"),
                ("bare_fragments_per_s", "bare readers fragments/s"),
                ("node_fragments_per_s", "nodes fragments/s"),
                ("ratio", "ratio nodes/bare"),
                ("node_sessions_per_s", "sessions/s"),
                ("node_seconds", "seconds"),
                ("node_cpu_s", "node CPU s"),
                ("node_cores_busy", "cores busy"),
                ("node_exact", "exact"),
            ],
        )
    ]
    for row in rows:
        text.append(
            f"- {row['workload']}, N={row['n']}: {row['node_fragments_per_s']:,.0f} fragments/s "
            f"and {row['node_sessions_per_s']:,.0f} sessions/s, {row['ratio']:.1%} of "
            f"{row['n']} bare reader(s); every session "
            f"{'matches' if row['node_exact'] else 'does NOT match'} the batch definition."
        )
    text.append(_busy_note(rows, "node_cores_busy", cpus))
    plt = _plt()
    workloads = sorted({r["workload"] for r in rows}, key=[r["workload"] for r in rows].index)
    figure, axes = plt.subplots(1, len(workloads), figsize=(5.2 * len(workloads), 3.6))
    axes = axes if len(workloads) > 1 else [axes]
    for ax, workload in zip(axes, workloads, strict=True):
        mine = [r for r in rows if r["workload"] == workload]
        _bars(
            ax,
            [f"N={r['n']}" for r in mine],
            {
                "bare readers": [r["bare_fragments_per_s"] for r in mine],
                "sessionizer nodes": [r["node_fragments_per_s"] for r in mine],
            },
        )
        ax.set_yscale("log")
        ax.set_ylabel("fragments/s (log)")
        ax.set_title(f"{workload}: N nodes vs N bare readers")
    return "\n".join(t for t in text if t), [_save(figure, "nodes_vs_bare")]


def _peers(payload: Payload) -> tuple[str, list[str]]:
    rows = payload["results"]
    text = [
        markdown(
            rows,
            [
                "workload",
                "system",
                "version",
                ("fragments_per_s", "fragments/s"),
                ("ratio_to_ours", "vs 1 node"),
                "seconds",
                ("wall_s", "wall s"),
                ("sessions", "sessions written"),
                ("open_at_end", "open at end"),
                ("matches", "matches batch definition"),
                ("state_bytes", "state bytes"),
                ("disk_written", "local disk written"),
                ("cpu_s", "CPU s"),
                "cores_busy",
            ],
        )
    ]
    text.append("")
    text.append("What each one stored for recovery (`state bytes`):")
    seen: set[str] = set()
    for row in rows:
        if row.get("state_what") and row["system"] not in seen:
            seen.add(row["system"])
            text.append(f"- {row['system']}: {row['state_what']}")
    for row in rows:
        if row.get("matches") is False:
            late = (row.get("detail") or {}).get("late_records")
            text.append(
                f"- **{row['workload']} {row['system']} does not match**: "
                f"{row['lost']:,} sessions of the batch definition are not among those it "
                f"wrote, and {row['extra']:,} it wrote are not in it"
                + (f"; it set {late:,} input records aside as late" if late is not None else "")
            )
    errors = [r for r in rows if r.get("error")]
    for row in errors:
        text.append(f"- **{row['workload']} {row['system']} failed**: {row['error']}")
    plt = _plt()
    good = [r for r in rows if not r.get("error")]
    workloads = sorted({r["workload"] for r in good}, key=[r["workload"] for r in good].index)
    systems = sorted({r["system"] for r in good}, key=[r["system"] for r in good].index)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))

    def value(workload: str, system: str, key: str) -> float | None:
        return next(
            (r.get(key) for r in good if r["workload"] == workload and r["system"] == system), None
        )

    _bars(
        left, workloads, {s: [value(w, s, "fragments_per_s") for w in workloads] for s in systems}
    )
    left.set_ylabel("fragments/s")
    left.set_title("Same sessionization, same topics")
    sizes = {s: [value(w, s, "state_bytes") for w in workloads] for s in systems}
    _bars(right, workloads, sizes, label=_size)
    right.set_yscale("log")
    right.set_ylabel("bytes (log)")
    right.set_title("Bytes stored for state/recovery")
    return "\n".join(text), [_save(figure, "peers")]


def _failover(payload: Payload) -> tuple[str, list[str]]:
    rows = payload["results"]
    params = payload["params"]
    text = [
        markdown(
            rows,
            [
                "mode",
                "runs",
                ("streams_moved", "streams moved"),
                ("first_resumed_s", "first resumed s"),
                ("resumed_s", "all resumed s"),
                ("caught_up_s", "caught up s"),
                ("replayed", "records replayed"),
                ("duplicates", "duplicate sessions"),
                ("exact", "exact"),
            ],
        )
    ]
    text.append(
        f"\nMedians; ZooKeeper session timeout {params['session_timeout']} s (it bounds "
        f"`kill -9` from below), drain period {params['drain']} s."
    )
    plt = _plt()
    figure, ax = plt.subplots(figsize=(7, 3.6))
    _bars(
        ax,
        [r["mode"] for r in rows],
        {
            "first stream resumed": [r["first_resumed_s"] for r in rows],
            "all streams resumed": [r["resumed_s"] for r in rows],
            "caught up": [r["caught_up_s"] for r in rows],
        },
    )
    ax.set_ylabel("seconds after the signal")
    ax.set_title("Failover of one of 3 nodes mid-traffic")
    return "\n".join(text), [_save(figure, "failover")]


def _scaling(payload: Payload, cpus: int) -> tuple[str, list[str]]:
    rows = payload["results"]
    text = [
        markdown(
            rows,
            [
                "streams",
                "nodes",
                ("fragments_per_s", "fragments/s"),
                "speedup",
                ("cpu_s_per_M", "node CPU s per 1M"),
                "cores_busy",
                ("state_writes", "state writes"),
                ("state_kb_per_s", "state KiB/s"),
                ("state_bytes_peak", "peak state bytes"),
                ("converge_s", "converge s"),
                ("after_join_s", "after join s"),
                "exact",
            ],
        )
    ]
    counts = sorted({r["streams"] for r in rows})
    text.append("")
    for streams in counts:
        mine = [r for r in rows if r["streams"] == streams]
        best = max(mine, key=lambda r: r["fragments_per_s"])
        text.append(
            f"- {streams} streams: 1 node {mine[0]['fragments_per_s']:,.0f} fragments/s, best "
            f"{best['fragments_per_s']:,.0f} with {best['nodes']} nodes "
            f"(x{best['speedup']:.2f}); producer {mine[0]['producer_fragments_per_s']:,.0f} "
            f"fragments/s, one bare reader {mine[0]['bare_fragments_per_s']:,.0f}."
        )
    text.append(_busy_note(rows, "cores_busy", cpus))
    plt = _plt()
    figure, axes = plt.subplots(2, 2, figsize=(10, 7))
    for streams in counts:
        mine = [r for r in rows if r["streams"] == streams]
        nodes = [r["nodes"] for r in mine]
        axes[0][0].plot(nodes, [r["fragments_per_s"] for r in mine], "o-", label=f"{streams}")
        axes[0][1].plot(nodes, [r["cores_busy"] or 0 for r in mine], "o-", label=f"{streams}")
        axes[1][0].plot(nodes, [r["state_kb_per_s"] for r in mine], "o-", label=f"{streams}")
        axes[1][1].plot(nodes, [r["converge_s"] or 0 for r in mine], "o-", label=f"{streams}")
    axes[0][1].axhline(cpus, color="grey", linestyle="--", linewidth=1)
    titles = (
        ("fragments/s", "throughput"),
        ("cores busy (machine)", "CPU use, all processes"),
        ("KiB/s to ZooKeeper", "state written"),
        ("seconds", "spawn to balanced"),
    )
    for ax, (label, title) in zip([a for row in axes for a in row], titles, strict=True):
        ax.set_xlabel("nodes")
        ax.set_ylabel(label)
        ax.set_title(title)
        ax.legend(title="streams", fontsize=8)
        ax.set_xticks(sorted({r["nodes"] for r in rows}))
    return "\n".join(t for t in text if t), [_save(figure, "scaling")]


SECTIONS: dict[str, tuple[str, str, Callable[..., tuple[str, list[str]]]]] = {
    "producer_workloads": ("1. Producer", "producer_workloads", _producer),
    "nodes_vs_bare": ("2. Node throughput against bare readers", "nodes_vs_bare", _nodes),
    "peers": ("3. Peers: Bytewax, Quix Streams, Spark Structured Streaming", "peers", _peers),
    "failover_modes": (
        "4. Failover: kill -9, SIGTERM, SIGTERM --drain",
        "failover_modes",
        _failover,
    ),
    "scaling": ("5. Scaling of cost with streams and nodes", "scaling", _scaling),
}


def _header(meta: Payload | None, payloads: dict[str, Payload | None]) -> list[str]:
    lines = ["# Benchmark results", ""]
    if meta:
        lines += [
            f"Generated by `{meta['command']}` on {meta['date']} in "
            f"{meta['seconds'] / 60:.1f} minutes"
            + (" (**reduced sizes: --quick**)" if meta.get("quick") else "")
            + ".",
            "",
            "Every comparison below was made in that one run, on the same data, on "
            f"the same cluster ({meta['cluster']}).  Raw numbers: `benchmarks/out/*.json`.",
            "",
            "## Machine",
            "",
        ]
        machine = meta["machine"]
        lines += [f"- {k}: {v}" for k, v in machine.items()]
        lines += [
            "- load average (1 min) before/after each scenario: "
            + ", ".join(
                f"{name} {before:.2f}/{after:.2f}"
                for name, (before, after) in meta.get("load", {}).items()
            ),
            "",
            "## Versions",
            "",
            *[f"- {k}: {v}" for k, v in meta["versions"].items()],
            "",
        ]
        if meta.get("errors"):
            lines += ["## Scenarios that failed", ""]
            lines += [f"- {name}: {error}" for name, error in meta["errors"].items()]
            lines.append("")
    workloads = next((p["workloads"] for p in payloads.values() if p and p.get("workloads")), None)
    summaries: dict[tuple[str, int], dict[str, Any]] = {}
    for payload in payloads.values():
        for summary in (payload or {}).get("workloads", []):
            summaries[(summary["workload"], summary["fragments"])] = summary
    if workloads is not None:
        lines += [
            "## Workloads",
            "",
            "Built by `benchmarks/workload.py` (deterministic; the digest covers every key and "
            "event time).  `sessions`: the batch definition on the same fragments (WebSessions: "
            "key `ip|agent`, split at gaps over 30 minutes).",
            "",
            markdown(
                list(summaries.values()),
                ["workload", "fragments", "keys", "sessions", "event_hours", "digest", "source"],
            ),
            "",
        ]
    return lines


NOTES = {
    "producer_workloads": (
        "Both producers send the same fragments, built before timing, with the same settings "
        "(acks=all, idempotence, lz4, linger 20 ms, 256 KiB batches) to a fresh app's stream "
        "topics; the bare `KafkaProducer` gets the stream and the encoded key and value "
        "precomputed.  Timed from the first send to the last acknowledgement of the final flush."
    ),
    "nodes_vs_bare": (
        "Each workload is produced once.  On the same topics, for each N: N bare kafka-python "
        "readers (one process each, every N-th stream, fetch and record decoding only: the "
        "ceiling for this client), then N `sessionizer node` processes (WebSessions, default "
        "flags: commit every 1 s, at-least-once) from a fresh state.  Node time runs from the "
        "first stream resumed to ZooKeeper showing every stream's committed position at its "
        "end offset (so it includes up to one commit interval).  Every session written is "
        "checked against the batch definition (`exact`)."
    ),
    "peers": (
        "Every system reads the same stream topics from offset 0, one after the other, each "
        "in its own process: same key (`ip|agent`, the record key), same 30-minute gap, 2 "
        "minutes allowed for late records, watermark records skipped, each session written "
        "as one JSON record to a Kafka topic, state snapshot/commit interval 1 s (our nodes "
        "commit every 1 s).  Bytewax: one worker, `KafkaSource(tail=False)` -> `fold_window` "
        "with `EventClock` and `SessionWindower` -> `KafkaSink`, recovery on (SQLite).  Quix "
        "Streams 3.28 has a native `session_window` (the hand-written `State` function is no "
        "longer needed): one `StreamingDataFrame` per topic, `Count`/`Sum` aggregations, "
        '`final(closing_strategy="partition")`, changelog topics on.  Spark: the Kafka '
        "source, a Python UDF decoding the msgpack value, `withWatermark` 2 minutes, "
        "`session_window` 30 minutes, append mode to Kafka, `availableNow` trigger, "
        "`local[*]` (both cores), 4 shuffle partitions.  Time: ours, first stream resumed to "
        "the end committed; Bytewax, first record to the end of the run; Quix, first to last "
        "message processed; Spark, the sum of its micro-batches.  `wall s` adds start-up "
        "(JVM, topic creation, group join).  `open at end`: sessions a system without an "
        "end-of-input signal cannot close; `matches` checks everything else it wrote."
    ),
    "failover_modes": (
        "Three nodes sessionize the first half of the workload; the second half is produced "
        "while they consume and, a quarter of the way in, node n2 is stopped while busy.  "
        "Times run from the signal.  `records replayed`: what the survivors re-read from the "
        "safe offsets (open sessions are rebuilt from the log, never shipped)."
    ),
    "scaling": (
        "Per stream count the workload is produced once, then sessionized by 1..4 nodes in "
        "turn from a fresh state.  `node CPU s per 1M`: the nodes' own CPU time per million "
        "fragments; `cores busy`: the whole machine (Kafka, ZooKeeper and the benchmark "
        "included); `state writes`/`state KiB/s`: ZooKeeper `stream_state` writes; `converge "
        "s`: from spawning the nodes to every stream claimed with a spread <= 1."
    ),
}

READING = """## Reading these numbers

- Two cores run everything: Kafka, ZooKeeper, the benchmark process, and the system under
  test.  A node, a bare reader, Bytewax (one worker) and Quix are single Python processes,
  so each can use at most one core; Spark's `local[*]` uses both.  Where `cores busy` is
  close to 2, adding nodes cannot add throughput on this machine: that is the machine's
  limit, not the design's.  The node's CPU seconds per million fragments are the portable
  figure.
- Our state is the thesis's: per stream a safe offset and an ignore list, a record of about
  100 bytes, written every commit interval whether or not the stream moved, so its rate
  grows with the number of streams and not with traffic.  ZooKeeper fsyncs every write: the
  `local disk written` of our rows is the ZooKeeper server's own disk writes (4 KiB pages),
  when the run started the servers itself.
- Peers keep the open sessions themselves in their state and persist them: Bytewax
  snapshots, at every epoch, the window state of every key that changed into SQLite, Quix
  writes every window update to a changelog topic and to RocksDB, Spark writes state-store
  deltas per micro-batch.
- Bytewax's `EventClock` keeps one watermark per key, moved by that key's own records and
  by wall-clock time.  On replayed history a session closes early only if its key sends a
  record more than 32 minutes (event time) later; every other session stays open until the
  end of input, so Bytewax's live state, and the close at the end, grow with the input,
  and its fragments/s fall as the input grows (`python -m benchmarks.peers --peers bytewax
  --fragments N` at two sizes shows it).  Because wall time moves that watermark too, a
  record read long (in wall time) after its key's latest one can fall behind it: Bytewax
  sets it aside as late (`late_records` in `benchmarks/out/peers.json`) and writes the
  session without it.  How many depends on the run's timing, not on the input, so a slow
  run can differ from the batch definition where a fast one matches.
- A number is only printed if it was measured in this run; a peer that failed shows its
  error instead.
"""


def render(meta: Payload | None = None) -> Path:
    """Write RESULTS.md (and the plots) from the JSON results present; return its path."""
    payloads = {name: _load(name) for name in SCENARIOS}
    cpus = os.cpu_count() or 1
    lines = _header(meta, payloads)
    for name, (title, module, section) in SECTIONS.items():
        lines += [f"## {title}", ""]
        payload = payloads[name]
        error = (meta or {}).get("errors", {}).get(name)
        if payload is None or (meta and name not in meta.get("ran", [])):
            lines += [f"Not run in this run{': ' + error if error else ''}.", ""]
            continue
        lines += [f"`{_command(payload, module)}`", "", NOTES[name], ""]
        args = (payload, cpus) if section in (_nodes, _scaling) else (payload,)
        text, plots = section(*args)
        lines += [text.replace("|\n- ", "|\n\n- ", 1), ""]
        lines += [f"![{title}]({plot})" for plot in plots]
        lines.append("")
    lines.append(READING)
    RESULTS.write_text("\n".join(lines).rstrip() + "\n")
    return RESULTS


def main() -> None:
    """Re-render from benchmarks/out/*.json."""
    meta = _load("run_all")
    progress(f"wrote {render(meta)}")


if __name__ == "__main__":
    main()
