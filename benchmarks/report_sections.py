"""RESULTS.md sections of the scenario benchmarks: producer, nodes, failover, scaling, skew.

Each section takes its scenario's JSON payload and the machine's core count and
returns its markdown and its plots (saved by `benchmarks.report`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.common import Payload
from benchmarks.report_plots import Plot, bars, plt
from benchmarks.tables import markdown

__all__ = ["failover", "nodes", "producer", "scaling", "skew"]


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


def _producer(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
    rows = payload["results"]
    text = [
        markdown(
            rows,
            [
                "workload",
                "client",
                "producer",
                "fragments",
                "records",
                ("fragments_per_s", "fragments/s"),
                ("ratio_to_bare", "ratio to bare"),
                ("ratio_to_encoding", "ratio to bare + encoding"),
                ("cpu_us", "CPU µs/fragment"),
                ("cpu_ratio", "CPU ratio"),
                "watermarks",
                ("watermark_share", "watermark share"),
                "cores_busy",
                ("metadata_s", "metadata s"),
            ],
        )
    ]
    for row in rows:
        if row["producer"] == "StreamProducer":
            text.append(
                f"- {row['workload']}, {row['client']}: `StreamProducer` sends "
                f"{row['fragments_per_s']:,.0f} fragments/s, {row['ratio_to_bare']:.0%} of the "
                f"bare producer's rate and {row['ratio_to_encoding']:.0%} of bare + encoding's; "
                f"{row['watermarks']:,} watermark records ({row['watermark_share']:.2%} of "
                "records)."
            )
    figure, ax = plt().subplots(figsize=(8, 3.8))
    groups = list(dict.fromkeys((r["workload"], r["client"]) for r in rows))
    kinds: dict[str, Callable[[str], bool]] = {
        "bare": lambda p: p.startswith("bare ") and "encoding" not in p,
        "bare + encoding": lambda p: p == "bare + encoding",
        "StreamProducer": lambda p: p == "StreamProducer",
    }
    series = {
        kind: [
            next(
                (
                    r["fragments_per_s"]
                    for r in rows
                    if (r["workload"], r["client"]) == group and matches(r["producer"])
                ),
                None,
            )
            for group in groups
        ]
        for kind, matches in kinds.items()
    }
    bars(ax, [f"{w}\n{c}" for w, c in groups], series)
    ax.set_ylabel("fragments/s")
    ax.set_title("Producer: StreamProducer vs the bare producer of the same client")
    return "\n".join(text), [("producer", figure)]


def _runs_note(row: Payload) -> str:
    """The runs a row's medians come from, where it was repeated."""
    runs = row.get("runs")
    if not runs:
        return ""
    nodes = ", ".join(f"{rate:,.0f}" for rate in runs["node"])
    return f" (median of {len(runs['node'])} runs; the nodes' runs: {nodes} fragments/s)"


def _relay_note(row: Payload) -> str:
    """How much of the bare readers' rate a node could keep at most, by the relays."""
    if row.get("relay_ceiling") is None:
        return ""  # a run from before the relays
    return (
        f" (bare relays, reading and writing the same sessions with no engine, kept "
        f"{row['relay_ceiling']:.1%}: the nodes did {row['ratio_to_relay']:.1%} of that)"
    )


def _nodes(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
    rows = payload["results"]
    text = [
        markdown(
            rows,
            [
                "workload",
                "client",
                ("n", "N"),
                ("bare_fragments_per_s", "bare readers fragments/s"),
                ("relay_fragments_per_s", "bare relays fragments/s"),
                ("node_fragments_per_s", "nodes fragments/s"),
                ("ratio", "ratio nodes/bare"),
                ("relay_ceiling", "relay/bare"),
                ("ratio_to_relay", "nodes/relay"),
                ("node_per_core", "fragments per node CPU s"),
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
            f"- {row['workload']}, {row.get('client', 'kafka-python')}, N={row['n']}: "
            f"{row['node_fragments_per_s']:,.0f} fragments/s{_runs_note(row)} and "
            f"{row['node_sessions_per_s']:,.0f} sessions/s, {row['ratio']:.1%} of {row['n']} "
            f"bare reader(s) of the same client{_relay_note(row)}; every session "
            f"{'matches' if row['node_exact'] else 'does NOT match'} the batch definition."
        )
    text.append(_busy_note(rows, "node_cores_busy", cpus))
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    figure, axes = plt().subplots(1, len(workloads), figsize=(6 * len(workloads), 3.8))
    axes = axes if len(workloads) > 1 else [axes]
    for ax, workload in zip(axes, workloads, strict=True):
        mine = [r for r in rows if r["workload"] == workload]
        bars(
            ax,
            [f"{r.get('client', 'kafka-python')}\nN={r['n']}" for r in mine],
            {
                "bare readers": [r["bare_fragments_per_s"] for r in mine],
                **(
                    {"bare relays": [r["relay_fragments_per_s"] for r in mine]}
                    if all(r.get("relay_fragments_per_s") for r in mine)
                    else {}
                ),
                "sessionizer nodes": [r["node_fragments_per_s"] for r in mine],
            },
        )
        ax.set_yscale("log")
        ax.set_ylabel("fragments/s (log)")
        ax.set_title(f"{workload}: N nodes vs N bare readers")
    return "\n".join(t for t in text if t), [("nodes_vs_bare", figure)]


def _failover(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
    rows = payload["results"]
    params = payload["params"]
    text = [
        markdown(
            rows,
            [
                "mode",
                "handover",
                "runs",
                ("streams_moved", "streams moved"),
                ("handovers_used", "resumed from a handover"),
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
        f"`kill -9` from below), drain period {params['drain']} s.  Times from the signal "
        "(join: from the new node's `node_started`) to the moved streams' `stream_resumed` "
        "on their new owners, and to every stream committed at its end offset."
    )
    text += _handover_lines(rows)
    labels = [
        r["mode"].replace(" --", "\n--")
        + (f"\nhandover {r['handover']}" if r.get("handover", "-") != "-" else "")
        for r in rows
    ]
    figure, (left, right) = plt().subplots(1, 2, figsize=(14, 4.2))
    bars(
        left,
        labels,
        {
            "first stream resumed": [r["first_resumed_s"] for r in rows],
            "all streams resumed": [r["resumed_s"] for r in rows],
            "caught up": [r["caught_up_s"] for r in rows],
        },
    )
    left.set_ylabel("seconds after the signal / join")
    left.set_title("Moves of one of 3 nodes' streams mid-traffic")
    whole = [r["replayed"] for r in rows]
    bars(right, labels, {"records replayed": whole}, label=lambda v: f"{v:,.0f}")
    right.set_ylabel("records")
    right.set_title("Records the new owners re-read")
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=7)
    return "\n".join(text), [("failover", figure)]


def _handover_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per planned mode run both ways: what the handover saved."""
    lines = []
    for mode in dict.fromkeys(r["mode"] for r in rows):
        on = next((r for r in rows if r["mode"] == mode and r.get("handover") == "on"), None)
        off = next((r for r in rows if r["mode"] == mode and r.get("handover") == "off"), None)
        if on is None or off is None:
            continue
        lines.append(
            f"- {mode}: with handover {_n(on['replayed'])} records replayed "
            f"({_n(on['handovers_used'])} of {_n(on['streams_moved'])} moved streams resumed "
            f"from one), all resumed in {_s(on['resumed_s'])}, "
            f"{_n(on['duplicates'])} duplicates; without, {_n(off['replayed'])} replayed, "
            f"{_s(off['resumed_s'])}, {_n(off['duplicates'])} duplicates."
        )
    if lines:
        lines.insert(0, "")
    return lines


def _n(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _s(value: Any) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _skew(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
    rows = payload["results"]
    params = payload["params"]
    text = [
        markdown(
            rows,
            [
                "policy",
                "nodes",
                ("loads", "node loads, fragments/s"),
                ("imbalance", "busiest / mean"),
                ("moves", "streams moved"),
                ("load_moves", "of which load moves"),
                ("settle_s", "settled s"),
                "steady",
                "exact",
            ],
        ),
        "",
        f"{params['rate']:,.0f} fragments/s sent, {payload.get('hot_share', 0):.0%} of them on "
        f"4 of 16 streams; `--balance-interval {params['interval']}`, tolerance 0.2.  Loads "
        "averaged over the steady stretch (one interval).",
    ]
    nodes = sorted({r["nodes"] for r in rows})
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    figure, ax = plt().subplots(figsize=(7, 3.6))
    bars(
        ax,
        [f"{n} nodes" for n in nodes],
        {
            f"--balance {p}": [
                next((r["imbalance"] for r in rows if r["policy"] == p and r["nodes"] == n), None)
                for n in nodes
            ]
            for p in policies
        },
    )
    ax.axhline(1.2, color="grey", linestyle="--", linewidth=1)
    ax.set_ylabel("busiest node's load / mean")
    ax.set_title("Skewed traffic: per-node load imbalance (dashed: the tolerance)")
    return "\n".join(text), [("skew", figure)]


def _scaling(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
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
    pyplot = plt()
    figure, axes = pyplot.subplots(2, 2, figsize=(10, 7))
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
    return "\n".join(t for t in text if t), [("scaling", figure)]


producer, nodes, failover, scaling, skew = (
    _producer,
    _nodes,
    _failover,
    _scaling,
    _skew,
)
