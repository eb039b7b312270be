"""``semvecctl stats``: a store's shape (owners, blob sizes, idle ages, TTL left, largest
sessions, longest event logs, events per day; per shard on a sharded SQL deployment) in
one streaming pass, as a table, JSON, or a report with the distributions drawn;
``--idle-for`` previews what ``sessions prune`` would reclaim; ``--watch`` refreshes a
sampled view. The work is in :mod:`backends.ops.stats`.
"""


from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection, require_seam
from semvecctl.options import (AssumeTtl, BatchSize, MatchSessions, Output, Overwrite, SessionOwner, SessionUnowned, store_command, Watch)
from semvecctl.output import Column, OutputFormat
from semvecctl.report import ReportFile

NAME = "stats"
HELP = help_of(NAME)


def _size(number: Any) -> str:
    if number is None:
        return "–"
    value = float(number)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(number)


def _age(seconds: Any) -> str:
    if seconds is None:
        return "–"
    seconds = int(seconds)
    for unit, width in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= width:
            return f"{seconds / width:.1f}{unit}"
    return f"{seconds}s"


def _spread(hist: dict[str, Any], fmt: Any) -> str:
    if not hist.get("count"):
        return "–"
    return (f"p50 {fmt(hist['p50'])}, p90 {fmt(hist['p90'])}, p99 {fmt(hist['p99'])}, "
            f"max {fmt(hist['max'])}")


def rows_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The table: one figure per row."""
    owners = data["owners"]
    events = data["events"]
    rows = [
        ("sessions", f"{data['sessions']:,}" + (" (sampled)" if data["sampled"] else "")),
        ("owners", "more than the counted" if owners["approximate"] else owners["distinct"]),
        ("top owners", ", ".join(f"{o['owner']} {o['sessions']:,}" for o in owners["top"][:5]) or "–"),
        ("blob bytes", f"total {_size(data['blob_bytes']['sum'])}; "
                       + _spread(data["blob_bytes"], _size)),
        ("idle age", _spread(data["idle_seconds"], _age) if data["idle_seconds"]["count"]
         else "unknown: this store keeps no write time (on Redis: --assume-ttl)"
         if data.get("idle_note") else "–"),
        ("TTL left", _spread(data["ttl_seconds"], _age)),
        ("without expiry", f"{data['no_expiry']:,}"),
        ("damaged", data["damaged"]),
        ("largest", ", ".join(f"{s['session_id']} {_size(s['bytes'])}" for s in data["largest"][:5]) or "–"),
        ("event logs", events.get("note") or f"{events['users']:,} user(s), {events['events']:,} event(s)"),
        ("longest logs", ", ".join(f"{u['user_id']} {u['events']:,}" for u in events["longest_logs"][:5]) or "–"),
    ]
    rows += _shard_rows(data.get("shards"))
    mirror = data.get("item_mirror")
    if mirror:
        rows.append(("item mirror", f"{mirror['items']:,} item(s), {mirror['evicted']:,} evicted"
                     + (f", {_size(mirror['bytes'])}" if mirror.get("bytes") is not None else "")))
    per_day = events.get("per_day") or {}
    if per_day:
        last = list(per_day.items())[-3:]
        rows.append(("events per day", ", ".join(f"{d} {n:,}" for d, n in last) + " (latest)"))
    preview = data.get("prune_preview")
    if preview:
        rows.append((f"prune --idle-for {_age(preview['idle_for_s'])}",
                     f"would delete {preview['sessions']:,} session(s), {_size(preview['bytes'])}"))
    return [{"field": k, "value": v} for k, v in rows]


def _shard_rows(shards: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """A sharded deployment's rows: the skew, then one per shard (with its database where
    the shard's name is not it); none elsewhere."""
    if not shards:
        return []
    spread = shards["skew"]
    rows: list[tuple[str, Any]] = [
        ("shards", f"{shards['count']}; skew (largest / mean) "
         + (f"{spread['sessions']:.2f} by sessions, {spread['blob_bytes']:.2f} by bytes"
            if spread["sessions"] is not None else "–"))]
    for shard in shards["per_shard"]:
        rows.append((shard["shard"], f"{shard['sessions']:,} session(s), "
                     f"{_size(shard['blob_bytes'])}"
                     + (f" ({shard['database']})" if shard["database"] != shard["shard"] else "")))
    return rows


@store_command()
def app(*,
    conn: Connection,
    owner: SessionOwner = None,
    unowned: SessionUnowned = False,
    match: MatchSessions = None,
    idle_for: Optional[str] = typer.Option(
        None, "--idle-for", metavar="DURATION", show_default=False,
        help="Also count what 'sessions prune --idle-for DURATION' would delete (sessions "
             "and bytes), by prune's own rule; nothing is deleted."),
    assume_ttl: AssumeTtl = None,
    top: int = typer.Option(10, "--top", min=1, max=1000, help="Largest sessions, owners and logs listed."),
    events: bool = typer.Option(True, "--events/--no-events",
                                help="Also read every user's event log shape (count, per day)."),
    batch_size: BatchSize = 500,
    watch: Watch = None,
    sample: int = typer.Option(1000, "--sample", min=1, max=1_000_000,
                               help="With --watch: sessions (and users) read per refresh."),
    report_file: ReportFile = None,
    overwrite: Overwrite = False,
    output: Output = OutputFormat.table,
) -> None:
    """Show a store's shape in one streaming pass; --idle-for previews a prune."""
    from backends.contract import Capability
    from backends.ops.stats import collect

    from semvecctl.durations import parse_duration
    from semvecctl.report import write_report

    out = current().output
    current().may_replace(report_file, overwrite=overwrite, option="--report")
    idle_td = parse_duration(idle_for) if idle_for is not None else None
    ttl = (int(parse_duration(assume_ttl, "--assume-ttl").total_seconds())
           if assume_ttl is not None else None)
    scope = conn.scope
    options = dict(owner_subject=scope, match=match, batch_size=batch_size, idle_for=idle_td,
                   assume_ttl=ttl, top=top, with_events=events)
    with conn.open() as adapter_obj:
        require_seam(adapter_obj, Capability.SESSIONS, "session listing")
        if watch is not None:
            _watch(adapter_obj, options, watch, sample)
            return
        stats = collect(adapter_obj, progress=lambda s: out.progress(s, label="reading sessions"),
                        **options)
    data = stats.to_dict()
    data["uri"] = conn.display_uri
    write_report(report_file, "stats", data)
    out.emit(data, output, columns=[Column("FIGURE", "field", style="bold"), Column("VALUE", "value")],
             rows=rows_of(data))


def _watch(adapter_obj: Any, options: dict[str, Any], every: float, sample: int) -> None:
    """The cheap view: each refresh reads at most ``sample`` sessions (and users)."""
    from backends.ops.stats import collect

    from semvecctl.watch import stamp, watch

    def take() -> dict[str, Any]:
        return collect(adapter_obj, sample=sample, **options).to_dict()

    def line(data: dict[str, Any]) -> str:
        blob = data["blob_bytes"]
        text = (f"{stamp()} sampled {data['sessions']} session(s): blob p50 {_size(blob['p50'])} "
                f"p99 {_size(blob['p99'])}; no expiry {data['no_expiry']}; "
                f"owners {len(data['owners']['top'])}+")
        if data.get("prune_preview"):
            text += f"; idle {data['prune_preview']['sessions']}"
        return text

    def render(data: dict[str, Any]) -> Any:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"{stamp()} · first {sample} session(s), refreshed every {every:g}s",
                      show_header=False)
        for row in rows_of(data):
            table.add_row(Text(str(row["field"])), Text(str(row["value"])))  # never markup
        return table

    watch(take, line, every=every, render=render)
