"""RESULTS.md's peers section (`benchmarks.peers`): every system side by side, with the runs
of a repeated row below the table."""

from __future__ import annotations

from benchmarks.common import Payload
from benchmarks.report_plots import Plot, bars, plt, size
from benchmarks.tables import markdown

__all__ = ["section"]


def section(payload: Payload, cpus: int) -> tuple[str, list[Plot]]:
    """The peers table, what each stored, mismatches and failures, and two bar charts."""
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
                ("cpu_s_after_first_record", "CPU s from first record"),
                ("fragments_per_cpu_s", "fragments per CPU s"),
                ("fragments_per_cpu_s_after_start", "per CPU s from first record"),
                "cores_busy",
            ],
        )
    ]
    text.append("")
    repeated = [row for row in rows if row.get("runs")]
    if repeated:
        text.append(
            "Each row gives the medians of its system's runs (every system once a turn, in "
            "turn; the other columns from its run of median fragments per CPU s):"
        )
        text += [f"- {r['workload']}, {r['system']}: {_peer_runs(r['runs'])}" for r in repeated]
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
    pyplot = plt()
    good = [r for r in rows if not r.get("error")]
    workloads = sorted({r["workload"] for r in good}, key=[r["workload"] for r in good].index)
    systems = sorted({r["system"] for r in good}, key=[r["system"] for r in good].index)
    figure, (left, right) = pyplot.subplots(1, 2, figsize=(11, 3.8))

    def value(workload: str, system: str, key: str) -> float | None:
        return next(
            (r.get(key) for r in good if r["workload"] == workload and r["system"] == system), None
        )

    bars(left, workloads, {s: [value(w, s, "fragments_per_s") for w in workloads] for s in systems})
    left.set_ylabel("fragments/s")
    left.set_title("Same sessionization, same topics")
    sizes = {s: [value(w, s, "state_bytes") for w in workloads] for s in systems}
    bars(right, workloads, sizes, label=size)
    right.set_yscale("log")
    right.set_ylabel("bytes (log)")
    right.set_title("Bytes stored for state/recovery")
    return "\n".join(text), [("peers", figure)]


def _peer_runs(runs: Payload) -> str:
    """The runs a repeated peers row gives the medians of."""
    per_cpu = ", ".join(f"{rate:,.0f}" for rate in runs["fragments_per_cpu_s"])
    rates = ", ".join(f"{rate:,.0f}" for rate in runs["fragments_per_s"])
    warm = [rate for rate in runs.get("fragments_per_cpu_s_after_start") or [] if rate]
    shown = f"; from the first record {', '.join(f'{r:,.0f}' for r in warm)}" if warm else ""
    count = len(runs["fragments_per_s"])
    return f"{count} runs: fragments per CPU s {per_cpu}{shown}; fragments/s {rates}"
