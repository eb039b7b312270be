"""What a report says, apart from how it is drawn: a verdict, then blocks (facts, tables,
rank charts, notes) built from the dictionary a command prints with ``-o json``.

Builders read fields generically where they can (every scalar metric of a query, every
``mean_``/``min_`` aggregate), so a field a result gains later shows up without a change
here; only the headline names the fields it leads with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Document", "Facts", "Table", "RankChart", "BarChart", "Notes", "build", "cell"]


@dataclass
class Facts:
    title: str
    pairs: list[tuple[str, Any]]


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]
    #: per row: "good", "bad" or "" (drawn as a colour in HTML, a mark in Markdown)
    marks: list[str] = field(default_factory=list)
    #: fold it away where the format can (a long run's per-query detail in a PR comment)
    folded: bool = False


@dataclass
class RankChart:
    """Two rankings of one query; an item ranked on both sides is joined by a line."""

    title: str
    left_label: str
    right_label: str
    left: list[str]
    right: list[str]


@dataclass
class BarChart:
    """A distribution: one bar per bin (its label and count), left to right."""

    title: str
    bars: list[tuple[str, int]]
    #: what a bar counts, shown on the axis ("sessions", "users")
    counts: str = "sessions"


@dataclass
class Notes:
    title: str
    lines: list[str]


@dataclass
class Document:
    title: str
    passed: bool
    headline: str
    blocks: list[Any] = field(default_factory=list)
    #: the badge's word when not a pass/fail verdict (a stats report says what it shows)
    label: str | None = None
    #: no verdict to give (a run without a gate): the badge is neither green nor red
    neutral: bool = False

    @property
    def tone(self) -> str:
        """``pass``, ``fail`` or ``neutral``: the badge's colour."""
        return "neutral" if self.neutral else ("pass" if self.passed else "fail")

    @property
    def verdict(self) -> str:
        if self.label:
            return self.label
        return "PASS" if self.passed else "FAIL"


def cell(value: Any) -> str:
    """One value as report text: floats to 4 places, None as a dash."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value) or "–"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={cell(v)}" for k, v in value.items()) or "–"
    return str(value)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


# -- retrieve diff -----------------------------------------------------------------------

#: keys of a query's dict that are not per-query figures
_QUERY_STRUCTURE = {"query", "settings", "rows", "moves", "notes", "metrics", "text", "like"}


def _asked(query: Mapping[str, Any]) -> str:
    """What a query asked, as a report shows it: its text, or the item it is like."""
    if query.get("text") is not None:
        return str(query["text"])
    if query.get("like") is not None:
        return f"like {query['like']}"
    return "–"


def _query_figures(query: Mapping[str, Any]) -> dict[str, Any]:
    """Every scalar figure of one query: its metrics, then any other figures it carries
    (a nested dict of scalars is prefixed with its key, e.g. ``exact.recall``)."""
    figures: dict[str, Any] = {}
    for key, value in (query.get("metrics") or {}).items():
        if _scalar(value):
            figures[key] = value
    for key, value in query.items():
        if key in _QUERY_STRUCTURE:
            continue
        if _scalar(value):
            figures[key] = value
        elif isinstance(value, Mapping):
            for sub, inner in value.items():
                if _scalar(inner):
                    figures[f"{key}.{sub}"] = inner
    return figures


def _aggregate_table(aggregate: Mapping[str, Any]) -> tuple[Table | None, list[tuple[str, Any]]]:
    """``mean_x``/``min_x``/``max_x`` keys as one row per metric; the rest as facts."""
    stats: dict[str, dict[str, Any]] = {}
    prefixes: list[str] = []
    rest: list[tuple[str, Any]] = []
    for key, value in aggregate.items():
        prefix, _, metric = key.partition("_")
        if metric and prefix in ("mean", "min", "max", "median", "p50", "p95") and _scalar(value):
            stats.setdefault(metric, {})[prefix] = value
            if prefix not in prefixes:
                prefixes.append(prefix)
        else:
            rest.append((key, value))
    if not stats:
        return None, rest
    rows = [[metric, *[values.get(p) for p in prefixes]] for metric, values in stats.items()]
    return Table("Aggregate over the queries", ["metric", *prefixes], rows), rest


def _ranked(rows: Sequence[Mapping[str, Any]], side: str) -> list[str]:
    return [str(r[f"{side}_item"]) for r in rows if r.get(f"{side}_item") is not None]


def build_diff(data: Mapping[str, Any]) -> Document:
    server = data.get("server") or "server"
    queries = list(data.get("queries") or [])
    gate = data.get("gate") or {}
    missed = list(gate.get("missed") or [])
    passed = bool(gate.get("passed", not missed))
    # a run given no threshold has no verdict: "no gate", never a green PASS
    gated = bool(missed or gate.get("thresholds"))
    aggregate = data.get("aggregate") or {}
    lead = [f"{name} {cell(aggregate.get(key))}" for name, key in
            (("mean RBO", "mean_rbo"), ("mean Jaccard", "mean_jaccard")) if key in aggregate]
    if missed:
        headline = (f"{len(missed)} gate miss(es) over {len(queries)} query(ies): "
                    + "; ".join(f"{m.get('query_id')} {m.get('metric')} {cell(m.get('value'))}"
                                f" < {cell(m.get('threshold'))}" for m in missed))
    elif gated:
        headline = (f"no gate missed over {len(queries)} query(ies) ("
                    + ", ".join(f"{k.replace('_', ' ')} {cell(v)}"
                                for k, v in gate["thresholds"].items()) + ")")
    else:
        headline = (f"no gate given (--min-rbo, --min-jaccard, --min-recall): no verdict over "
                    f"{len(queries)} query(ies); read the agreement below")
    if lead:
        headline += " · " + ", ".join(lead)
    doc = Document(f"retrieve diff: in-process vs {server}", passed, headline,
                   label=None if gated else "NO GATE", neutral=not gated)
    doc.blocks.append(Facts("Run", [(k, data[k]) for k in ("backend", "session", "items", "server")
                                    if k in data]))
    table, rest = _aggregate_table(aggregate)
    if table is not None:
        doc.blocks.append(table)
    if rest:
        doc.blocks.append(Facts("Aggregate facts", rest))

    missed_by_query: dict[str, list[str]] = {}
    for miss in missed:
        missed_by_query.setdefault(str(miss.get("query_id")), []).append(str(miss.get("metric")))
    figures = [_query_figures(q) for q in queries]
    columns: list[str] = []
    for fig in figures:
        columns += [c for c in fig if c not in columns]
    rows, marks = [], []
    for query, fig in zip(queries, figures):
        misses = missed_by_query.get(str(query.get("query")))
        verdict = ("missed " + ", ".join(misses)) if misses else ("ok" if gated else "no gate")
        rows.append([query.get("query"), _asked(query), *[fig.get(c) for c in columns], verdict])
        marks.append("bad" if misses else ("good" if gated else ""))
    doc.blocks.append(Table("Per query", ["query", "asked", *columns, "gate"], rows, marks))

    for query in queries:
        qid = f"{query.get('query')} ({_asked(query)})"
        qrows = list(query.get("rows") or [])
        doc.blocks.append(RankChart(f"Rank shift, query {qid}", "in-process", str(server),
                                    _ranked(qrows, "in_process"), _ranked(qrows, "server")))
        doc.blocks.append(Table(f"Rankings, query {qid}",
                                ["rank", "in-process", "score", "where", "server", "score",
                                 "where"],
                                [[r.get("rank"), r.get("in_process_item"),
                                  r.get("in_process_score"), r.get("in_process_presence"),
                                  r.get("server_item"), r.get("server_score"),
                                  r.get("server_presence")] for r in qrows],
                                folded=len(queries) > 1))
    seen: dict[str, str] = {}
    for query in queries:
        for note in query.get("notes") or []:
            seen.setdefault(str(note.get("message")), str(note.get("code")))
    if seen:
        doc.blocks.append(Notes("Why the two sides can differ",
                                [f"[{code}] {message}" for message, code in seen.items()]))
    return doc


# -- conformance run ---------------------------------------------------------------------


def build_conformance(data: Mapping[str, Any]) -> Document:
    backend = data.get("backend")
    counts = {k: v for k, v in (data.get("counts") or {}).items() if v}
    passed = bool(data.get("ok"))
    known = data.get("known_failures")
    headline = (f"conformance level {data.get('level')} for backend {backend!r}: "
                + (", ".join(f"{v} {k}" for k, v in counts.items()) or "nothing ran")
                + f" in {cell(float(data.get('duration') or 0.0))}s")
    if known is not None:
        headline += (f" · strict level {data.get('strict_level')} (known divergences from "
                     f"{known.get('origin')} accepted)")
    title = f"conformance of backend {backend!r}"
    if data.get("target"):
        title += f" at {data['target']}"
    doc = Document(title, passed, headline)
    groups = list(data.get("groups") or [])
    cases = [c for g in groups for c in (g.get("cases") or [])]
    failures = [c for c in cases if c.get("status") in ("failed", "error")]
    if failures:
        doc.blocks.append(Table(
            "Failures", ["case", "status", "expected", "actual", "detail"],
            [[f"{c.get('group')}.{c.get('case')}", c.get("status"), c.get("expected"),
              c.get("actual"), c.get("message")] for c in failures],
            ["bad"] * len(failures)))
    if known is not None:
        divergent = [c for c in cases if c.get("known_reason")]
        doc.blocks.append(Table(
            "Known divergences", ["case", "status", "strict status", "reason", "link"],
            [[f"{c.get('group')}.{c.get('case')}", c.get("status"),
              c.get("strict_status") or c.get("status"), c.get("known_reason"),
              c.get("known_link") or "–"] for c in divergent],
            [{"expected-failure": "", "failed": "bad"}.get(str(c.get("status")), "")
             for c in divergent]))
    caps = data.get("capabilities") or {}
    doc.blocks.append(Facts("Run", [("backend", backend), ("target", data.get("target") or "–"),
                                    ("level", data.get("level")),
                                    ("strict level", data.get("strict_level")),
                                    ("known failures", (known or {}).get("origin") or "–"),
                                    ("selection", data.get("selection")),
                                    ("started", data.get("started_at")),
                                    *[(f"capability {k}", v) for k, v in caps.items()]]))
    doc.blocks.append(Table(
        "Groups", ["group", "status", "strict", "cases", "time (s)", "note"],
        [[g.get("name"), g.get("status"), g.get("strict_status") or g.get("status"),
          len(g.get("cases") or []), g.get("duration"), g.get("reason")] for g in groups],
        [_status_mark(g.get("status")) for g in groups]))
    doc.blocks.append(Table(
        "Cases", ["case", "status", "time (s)", "detail"],
        [[f"{c.get('group')}.{c.get('case')}", c.get("status"), c.get("duration"),
          c.get("message")] for c in cases],
        [_status_mark(c.get("status")) for c in cases], folded=True))
    return doc


def _status_mark(status: Any) -> str:
    return {"passed": "good", "failed": "bad", "error": "bad"}.get(str(status), "")


# -- indexes validate --------------------------------------------------------------------


def build_indexes(data: Mapping[str, Any]) -> Document:
    backend = data.get("backend")
    rows = list(data.get("indexes") or [])
    strict = bool(data.get("strict"))
    passed = bool(data.get("ok", True))

    def verdict(row: Mapping[str, Any]) -> str:
        if row.get("ok"):
            return "match"
        return "DRIFT" if (row.get("required", True) or strict) else "advisory"

    verdicts = [verdict(r) for r in rows]
    drift = verdicts.count("DRIFT")
    advisory = verdicts.count("advisory")
    if data.get("note"):
        headline = str(data["note"])
    elif drift:
        headline = f"{drift} of {len(rows)} index(es) do not match"
    else:
        headline = f"every required index matches ({len(rows)} checked"
        headline += f", {advisory} recommended one(s) missing or different)" if advisory else ")"
    doc = Document(f"indexes validate: backend {backend!r}", passed, headline)
    doc.blocks.append(Facts("Run", [("backend", backend), ("uri", data.get("uri")),
                                    ("strict", strict)]))
    doc.blocks.append(Table(
        "Indexes", ["index", "target", "kind", "need", "state", "verdict", "differences"],
        [[r.get("name"), r.get("target"), r.get("kind"),
          "required" if r.get("required", True) else "recommended", r.get("state"), v,
          _differences(r)] for r, v in zip(rows, verdicts)],
        [{"match": "good", "DRIFT": "bad"}.get(v, "") for v in verdicts]))
    return doc


def _differences(row: Mapping[str, Any]) -> str:
    parts = [f"{d.get('field')}: want {d.get('expected')!r}, have {d.get('actual')!r}"
             for d in row.get("differences") or []]
    if not parts and row.get("detail"):
        parts.append(str(row["detail"]))
    return "; ".join(parts) or "–"


# -- stats -------------------------------------------------------------------------------


def _bytes(number: Any) -> str:
    value = float(number or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _seconds(number: Any) -> str:
    value = int(number or 0)
    for unit, width in (("d", 86400), ("h", 3600), ("m", 60)):
        if value >= width:
            return f"{value / width:.1f}{unit}"
    return f"{value}s"


def _bins(hist: Mapping[str, Any], fmt: Callable[[Any], str]) -> list[tuple[str, int]]:
    return [(f"{fmt(b['low'])}–{fmt(b['high'])}" if b["high"] - b["low"] > 1 else fmt(b["low"]),
             int(b["count"])) for b in hist.get("histogram") or []]


def _quantiles(name: str, hist: Mapping[str, Any], fmt: Callable[[Any], str]) -> list[Any]:
    return [name, hist.get("count"), *(fmt(hist[k]) if hist.get(k) is not None else None
                                       for k in ("min", "p50", "p90", "p99", "max"))]


def build_stats(data: Mapping[str, Any]) -> Document:
    sessions = int(data.get("sessions") or 0)
    blob = data.get("blob_bytes") or {}
    damaged = int(data.get("damaged") or 0)
    headline = (f"{sessions:,} session(s){' (sampled)' if data.get('sampled') else ''}, "
                f"{_bytes(blob.get('sum'))} of blobs, {int(data.get('no_expiry') or 0):,} "
                "without expiry" + (f", {damaged:,} damaged" if damaged else ""))
    preview = data.get("prune_preview")
    if preview:
        headline += (f" · prune --idle-for {_seconds(preview['idle_for_s'])} would delete "
                     f"{preview['sessions']:,} session(s), {_bytes(preview['bytes'])}")
    doc = Document(f"shape of backend {data.get('backend')!r}"
                   + (f" at {data['uri']}" if data.get("uri") else ""),
                   passed=not damaged, headline=headline, label="DAMAGED" if damaged else "STATS")
    owners = data.get("owners") or {}
    doc.blocks.append(Facts("Store", [
        ("sessions", sessions), ("owners", owners.get("distinct") if not owners.get("approximate")
                                 else "more than counted (approximate)"),
        ("blob bytes", _bytes(blob.get("sum"))), ("without expiry", data.get("no_expiry")),
        ("idle age unknown", data.get("idle_unknown")), ("damaged", damaged)]
        + ([("item mirror rows", (data.get("item_mirror") or {}).get("items")),
            ("item mirror evicted", (data.get("item_mirror") or {}).get("evicted")),
            ("item mirror bytes", _bytes((data.get("item_mirror") or {}).get("bytes"))
             if (data.get("item_mirror") or {}).get("bytes") is not None else None)]
           if data.get("item_mirror") else [])))
    shards = data.get("shards")
    if shards:
        skew = shards.get("skew") or {}
        doc.blocks.append(Table(
            f"Shards (skew, largest / mean: {skew.get('sessions')} by sessions, "
            f"{skew.get('blob_bytes')} by bytes)", ["shard", "database", "sessions", "blob bytes"],
            [[s["shard"], s["database"], s["sessions"], _bytes(s["blob_bytes"])]
             for s in shards.get("per_shard") or []]))
    idle = data.get("idle_seconds") or {}
    ttl = data.get("ttl_seconds") or {}
    doc.blocks.append(Table("Distributions", ["figure", "count", "min", "p50", "p90", "p99", "max"], [
        _quantiles("blob size", blob, _bytes), _quantiles("idle age", idle, _seconds),
        _quantiles("TTL left", ttl, _seconds)]))
    doc.blocks.append(BarChart("Blob sizes", _bins(blob, _bytes)))
    if idle.get("count"):
        doc.blocks.append(BarChart("Idle ages (since the last write)", _bins(idle, _seconds)))
    if ttl.get("count"):
        doc.blocks.append(BarChart("TTL left", _bins(ttl, _seconds)))
    doc.blocks.append(Table("Sessions per owner (top)", ["owner", "sessions"],
                            [[o["owner"], o["sessions"]] for o in owners.get("top") or []]))
    doc.blocks.append(Table("Largest sessions", ["session", "owner", "bytes"],
                            [[s["session_id"], s["owner_subject"], s["bytes"]]
                             for s in data.get("largest") or []]))
    events = data.get("events") or {}
    if events.get("users"):
        doc.blocks.append(Table("Longest event logs", ["user", "events"],
                                [[u["user_id"], u["events"]] for u in events.get("longest_logs") or []]))
        per_day = events.get("per_day") or {}
        doc.blocks.append(BarChart("Events created per day (UTC)",
                                   [(day, int(n)) for day, n in per_day.items()], counts="events"))
    notes = [line for line in (data.get("idle_note"), events.get("note")) if line]
    if notes:
        doc.blocks.append(Notes("Not shown", notes))
    return doc


BUILDERS: dict[str, Callable[[Mapping[str, Any]], Document]] = {
    "diff": build_diff, "conformance": build_conformance, "indexes": build_indexes,
    "stats": build_stats}


def build(kind: str, data: Mapping[str, Any]) -> Document:
    return BUILDERS[kind](data)
