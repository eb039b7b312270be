"""``semvecctl retrieve run|diff``: rank a session's memory in-process or server-side,
and show how and how much the two disagree before server-side retrieval is switched on.

Exit codes: 0 ok; 1 a ``--min-rbo`` / ``--min-jaccard`` / ``--min-recall`` gate was
missed; 2 bad input (query, vector, files); 3 the backend cannot do what was asked (no
server-side retrieval, no live-item enumeration, no exact search for ``--exact``); 4
unreachable.
"""


import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer

from semvecctl.application import current
from semvecctl.completers import complete_session_id, typed_session_id
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.options import (ItemOwner, ItemUnowned, Output, Overwrite, store_command)
from semvecctl.output import Column, OutputFormat
from semvecctl.report import ReportFile

NAME = "retrieve"
HELP = help_of(NAME)
app = typer.Typer(no_args_is_help=True, help=HELP)


class Side(str, Enum):
    in_process = "in-process"
    server = "server"


# -- shared options ----------------------------------------------------------------------

Session = Annotated[str, typer.Option("--session", "-s", help="Session id whose memory to rank "
                                      "(as sessions list shows it).",
                                      autocompletion=complete_session_id,
                                      callback=typed_session_id)]
Query = Annotated[Optional[str], typer.Option(
    "--query", "-q", help="Query text (used by BM25 / lexical search).", show_default=False)]
QueryVector = Annotated[Optional[str], typer.Option(
    "--query-vector", help="Query embedding: a JSON array, or a file holding one.",
    show_default=False)]
Like = Annotated[Optional[str], typer.Option(
    "--like", help="Query with a stored item's embedding and text (no embedding model needed).",
    show_default=False)]
TopK = Annotated[int, typer.Option("--top-k", "-k", min=1, max=10_000, help="Results to return.")]
Bm25 = Annotated[bool, typer.Option("--bm25/--no-bm25", help="Use the lexical signal (BM25 / $search).")]
Bm25FetchK = Annotated[int, typer.Option("--bm25-fetch-k", min=0, max=100_000, help="BM25 hits fused with the cosine candidates when BM25 is on (the engine's default, 50).")]
MmrFetchK = Annotated[int, typer.Option(
    "--mmr-fetch-k", min=0, max=100_000, help="MMR diversity over this many candidates (when above --top-k).")]
MmrLambda = Annotated[float, typer.Option("--mmr-lambda", min=0.0, max=1.0, help="MMR relevance weight.")]
RrfK = Annotated[Optional[int], typer.Option(
    "--rrf-k", min=0, max=100_000, show_default=False,
    help="Reciprocal-rank fusion constant k. Default: SEMVEC_RRF_K, else 60 (as the engine).")]
RrfWeights = Annotated[Optional[str], typer.Option(
    "--rrf-weights", show_default=False,
    help="Fusion weights dense,bm25. Default: SEMVEC_RRF_WEIGHTS, else 1,1 (as the engine).")]
Items = Annotated[Optional[Path], typer.Option(
    "--items", help="Read the in-process side's items from this JSONL file instead of the store.",
    show_default=False, dir_okay=False)]


def _parse_vector(value: str) -> tuple[float, ...]:
    from backends.retrieval.items import parse_vector

    text = value.strip()
    if not text.startswith("["):
        path = Path(value)
        if not path.is_file():
            current().abort(f"--query-vector is neither a JSON array nor a readable file: {value!r}", ExitCode.USAGE)
        text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            data = data.get("embedding", data.get("vector"))
        return parse_vector(data, "--query-vector")
    except (ValueError, TypeError) as exc:
        current().abort(f"--query-vector: {exc}", ExitCode.USAGE, cause=None)


def _rrf_weights(value: str | None) -> tuple[float, float] | None:
    if value is None:
        return None
    try:
        parts = tuple(float(x) for x in value.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 2 or any(p < 0 for p in parts):
        current().abort(f"--rrf-weights expects two non-negative numbers 'dense,bm25', got {value!r}", ExitCode.USAGE)
    return parts  # type: ignore[return-value]


def _load_items(adapter: Any, session: str, owner: Any, items_file: Path | None,
                needed: bool) -> tuple[tuple, str]:
    """The in-process side's items and where they came from (``adapter`` None: no store,
    the file alone)."""
    from backends.contract import Capability, offers
    from backends.retrieval.items import load_items_jsonl

    if items_file is not None:
        try:
            return load_items_jsonl(items_file), str(items_file)
        except ValueError as exc:
            current().abort(f"--items: {exc}", ExitCode.USAGE, cause=None)
    if offers(adapter, Capability.LIVE_ITEMS):
        return tuple(adapter.iter_live_items(session, owner_subject=owner)), "live"
    if needed:
        current().abort(
            f"enumerating live memory items is not supported by backend "
            f"{getattr(adapter, 'name', '?')!r}; pass --items FILE.jsonl for the in-process side", ExitCode.ENVIRONMENT)
    return (), "none"


def _context(session, owner, top_k, bm25, bm25_fetch_k, mmr_fetch_k, mmr_lambda, rrf_k,
             rrf_weights):
    from backends.contract import RetrievalContext

    return RetrievalContext(
        session_id=session, top_k=top_k, owner_subject=owner, use_bm25=bm25,
        bm25_fetch_k=bm25_fetch_k, mmr_fetch_k=mmr_fetch_k, mmr_lambda=mmr_lambda,
        rrf_k=rrf_k, rrf_weights=_rrf_weights(rrf_weights))


def _single_spec(query: str | None, query_vector: str | None, like: str | None):
    from backends.retrieval.diff import QuerySpec

    if query_vector is not None and like is not None:
        current().abort("give --query-vector or --like, not both", ExitCode.USAGE)
    if query is None and query_vector is None and like is None:
        current().abort("nothing to search for: give --query, --query-vector or --like", ExitCode.USAGE)
    vector = _parse_vector(query_vector) if query_vector is not None else None
    return QuerySpec("query", text=query, vector=vector, like=like)


def _no_server(adapter: Any) -> NoReturn:
    current().abort(
        f"backend {getattr(adapter, 'name', '?')!r} has no server-side retrieval "
        "(no server_retriever()): it always retrieves in-process, so there is "
        "nothing to diff against", ExitCode.ENVIRONMENT)


def _no_store_named(conn: Connection) -> bool:
    """No ``--backend``, ``--uri`` or ``--adapter`` on the command line."""
    return conn.backend is None and conn.uri is None and conn.adapter is None


def _unit_row(rank: int, unit: Any) -> dict[str, Any]:
    from backends.retrieval.diff import excerpt, score_kind

    return {"rank": rank, "item_id": unit.item_id, "score": float(unit.score),
            "score_kind": score_kind(unit), "tier": unit.tier, "text": excerpt(unit.text)}


# -- run -------------------------------------------------------------------------------


@app.command("run")
@store_command()
def run(*,
    session: Session,
    conn: Connection,
    query: Query = None,
    query_vector: QueryVector = None,
    like: Like = None,
    top_k: TopK = 5,
    bm25: Bm25 = False,
    bm25_fetch_k: Bm25FetchK = 50,
    mmr_fetch_k: MmrFetchK = 0,
    mmr_lambda: MmrLambda = 0.5,
    rrf_k: RrfK = None,
    rrf_weights: RrfWeights = None,
    side: Side = typer.Option(Side.in_process, "--side", help="Which retriever ranks.",
                              case_sensitive=False),
    items: Items = None,
    owner: ItemOwner = None,
    unowned: ItemUnowned = False,
    output: Output = OutputFormat.table,
) -> None:
    """Rank a session's memory with one retriever and print the top-k."""
    from dataclasses import replace

    from backends.retrieval.diff import ordering_notes, resolve_query, run_side

    import contextlib

    scope = conn.scope
    spec = _single_spec(query, query_vector, like)
    ctx = _context(session, scope, top_k, bm25, bm25_fetch_k, mmr_fetch_k, mmr_lambda,
                   rrf_k, rrf_weights)
    # ranking the items of a file in-process touches no store: with no store flag given,
    # none is resolved (nor refused as unnamed), and the report names no backend
    storeless = items is not None and side is Side.in_process and _no_store_named(conn)
    with (contextlib.nullcontext(None) if storeless else conn.open()) as adapter_obj:
        server = _server_side(adapter_obj) if side is Side.server else None
        need_items = side is Side.in_process or like is not None
        live, origin = _load_items(adapter_obj, session, scope, items, need_items)
        try:
            vector, text = resolve_query(spec, live)
            ctx = replace(ctx, query_embedding=vector, query_text=text)
            units = run_side(side.value, ctx, items=live, server=server)
            notes = ordering_notes(ctx, live) if server is None else []
        except (ValueError, LookupError) as exc:
            current().abort(str(exc).strip("'\""), ExitCode.USAGE, cause=None)
        retriever = "in-process" if server is None else getattr(server, "name", "server")
        report = {
            "backend": None if adapter_obj is None else adapter_obj.name,
            "side": side.value,
            "retriever": retriever,
            "session": session,
            "items": origin,
            "results": [_unit_row(r, u) for r, u in enumerate(units, 1)],
            "notes": [{"code": n.code, "message": n.message} for n in notes],
        }
    _render_run(report, notes, output)


def _server_side(adapter_obj: Any) -> Any:
    """The store's server-side retriever for ``--side server``; exit 3 when it has none,
    since there is nothing else to rank with on that side."""
    from backends.contract import server_retriever_of

    server = server_retriever_of(adapter_obj)
    if server is None:
        current().abort(
            f"backend {adapter_obj.name!r} has no server-side retrieval "
            "(no server_retriever()); use --side in-process", ExitCode.ENVIRONMENT)
    return server


def _render_run(report: dict[str, Any], notes: list[Any], output: OutputFormat) -> None:
    """The ranking on stdout; in a table, the ordering notes and the count beside it on
    stderr, so stdout keeps only its rows."""
    out = current().output
    rows = report["results"]
    out.emit(report, output, rows=rows, columns=[
        Column("#", "rank", justify="right"), Column("ITEM", "item_id", style="bold"),
        Column("SCORE", "score", justify="right"), Column("SCORE IS", "score_kind"),
        Column("TIER", "tier"), Column("TEXT", "text", max_width=60)])
    if output is OutputFormat.table:
        for note in notes:
            out.info(f"note [{note.code}]: {note.message}")
        out.info(f"{len(rows)} result(s) from the {report['retriever']} retriever for session "
                 f"{report['session']}")


# -- diff ------------------------------------------------------------------------------


def _fusion_paths(server: Any) -> dict[str, Any] | None:
    """Which fusion path the server offers and which the engine would take with these
    credentials, when the retriever can tell (MongoDB); None otherwise."""
    paths = getattr(server, "fusion_paths", None)
    if not callable(paths):
        return None
    try:
        return dict(paths())
    except Exception as exc:  # noqa: BLE001 - a report line, not the diff's verdict
        return {"error": type(exc).__name__}


def _diff_table(report: Any, single: bool, fusion: dict[str, Any] | None = None) -> None:
    """The table form of ``diff``: one query side by side, or many as one row each; then
    the fusion path and the reasons the two sides can differ."""
    out = current().output
    notes = _single_query_tables(out, report) if single else _per_query_tables(out, report)
    if fusion and "engine_path" in fusion:
        out.write("")
        out.write(f"Fusion: the server {'has' if fusion['server_has_rank_fusion'] else 'has no'} "
                  f"$rankFusion; the engine would fuse {fusion['engine_path']}-side with these "
                  f"credentials ({fusion['reason']})")
    if notes:
        out.write("")
        out.write("Why they can differ:")
        for note in notes:
            out.write(f"  - [{note.code}] {note.message}")


def _single_query_tables(out: Any, report: Any) -> list[Any]:
    """Both rankings of the one query side by side, the score kinds and the metrics;
    returns the query's notes."""
    query = report.queries[0]
    out.table([
        Column("#", "rank", justify="right"),
        Column("IN-PROCESS", "in_process_item", style="bold"),
        Column("SCORE", "in_process_score", justify="right"),
        Column("WHERE", "in_process_presence"),
        Column("TEXT", "in_process_text"),
        Column("SERVER", "server_item", style="bold"),
        Column("SCORE", "server_score", justify="right"),
        Column("WHERE", "server_presence"),
        Column("TEXT", "server_text"),
    ], query.rows, title=f"in-process vs {report.server}")
    kinds = {side: sorted({k for r in query.rows if (k := getattr(r, f"{side}_score_kind"))})
             for side in ("in_process", "server")}
    out.write("Scores: in-process = " + (", ".join(kinds["in_process"]) or "-")
              + "; server = " + (", ".join(kinds["server"]) or "-"))
    m = query.metrics
    out.write("")
    out.table([Column("METRIC", "metric"), Column("VALUE", "value", justify="right")], [
        {"metric": f"overlap@{m.k}", "value": m.overlap},
        {"metric": f"jaccard@{m.k}", "value": m.jaccard},
        {"metric": f"rbo (p={m.p:g})", "value": m.rbo},
        {"metric": "kendall tau-b (common items)", "value": m.kendall_tau_b},
        {"metric": "common / in-process only / server only",
         "value": f"{m.common} / {m.only_a} / {m.only_b}"},
        *_exact_rows(query),
    ])
    return query.notes


def _per_query_tables(out: Any, report: Any) -> list[Any]:
    """A row per query of a --queries file, then the aggregate; returns every distinct
    note once (the same reason recurs across queries)."""
    out.table([
        Column("QUERY", "query", style="bold"),
        Column("RBO", "rbo", justify="right"),
        Column("JACCARD", "jaccard", justify="right"),
        Column("OVERLAP", "overlap", justify="right"),
        Column("TAU-B", "tau", justify="right"),
        Column("COMMON", "common", justify="right"),
        *([Column("RECALL", "recall", justify="right"),
           Column("EXACT-J", "exact_jaccard", justify="right")]
          if "mean_exact_recall" in report.aggregate else []),
        Column("GATE", "gate"),
    ], _query_rows(report), title=f"in-process vs {report.server}, per query")
    agg = report.aggregate
    out.write("")
    out.table([Column("AGGREGATE", "name"), Column("MEAN", "mean", justify="right"),
               Column("MIN", "min", justify="right")], [
        {"name": name, "mean": agg[f"mean_{key}"], "min": agg[f"min_{key}"]}
        for name, key in (("rbo", "rbo"), ("jaccard", "jaccard"), ("overlap", "overlap"),
                          ("kendall tau-b", "kendall_tau_b"),
                          ("server recall vs exact", "exact_recall"),
                          ("server jaccard vs exact", "exact_jaccard"))
        if f"mean_{key}" in agg
    ])
    seen: dict[str, Any] = {}
    for q in report.queries:
        for note in q.notes:
            seen.setdefault(note.message, note)
    return list(seen.values())


def _exact_rows(query: Any) -> list[dict[str, Any]]:
    """The single-query metric rows for --exact (none without it)."""
    e = query.exact
    if e is None:
        return []
    missed = ", ".join(map(str, e.missed[:5])) + (" …" if len(e.missed) > 5 else "")
    return [{"metric": f"server recall@{e.k} vs exact", "value": e.recall},
            {"metric": f"server jaccard@{e.k} vs exact", "value": e.jaccard},
            {"metric": "exact results the server missed", "value": missed or "none"}]


def _query_rows(report: Any) -> list[dict[str, Any]]:
    missed: dict[str, list[str]] = {}
    for miss in report.misses:
        missed.setdefault(miss.query_id, []).append(miss.metric)
    return [{
        "query": q.query_id, "rbo": q.metrics.rbo, "jaccard": q.metrics.jaccard,
        "overlap": q.metrics.overlap, "tau": q.metrics.kendall_tau_b, "common": q.metrics.common,
        "gate": ("missed " + ", ".join(missed[q.query_id])) if q.query_id in missed
        else ("ok" if report.thresholds else "no gate"),
        **({"recall": q.exact.recall, "exact_jaccard": q.exact.jaccard} if q.exact else {}),
    } for q in report.queries]


@app.command("diff")
@store_command()
def diff(*,
    session: Session,
    conn: Connection,
    query: Query = None,
    query_vector: QueryVector = None,
    like: Like = None,
    queries: Optional[Path] = typer.Option(
        None, "--queries", help="Run every query of this JSONL file (id, query, vector | like, "
        "top_k, use_bm25, bm25_fetch_k, mmr_fetch_k, mmr_lambda).", show_default=False,
        dir_okay=False),
    top_k: TopK = 5,
    bm25: Bm25 = False,
    bm25_fetch_k: Bm25FetchK = 50,
    mmr_fetch_k: MmrFetchK = 0,
    mmr_lambda: MmrLambda = 0.5,
    rrf_k: RrfK = None,
    rrf_weights: RrfWeights = None,
    items: Items = None,
    owner: ItemOwner = None,
    unowned: ItemUnowned = False,
    min_rbo: Optional[float] = typer.Option(
        None, "--min-rbo", min=0.0, max=1.0, help="Exit 1 if any query's RBO is below this.",
        show_default=False),
    min_jaccard: Optional[float] = typer.Option(
        None, "--min-jaccard", min=0.0, max=1.0,
        help="Exit 1 if any query's Jaccard@k is below this.", show_default=False),
    rbo_p: float = typer.Option(0.9, "--rbo-p", min=0.01, max=0.99,
                                help="RBO persistence p (weight on the top ranks)."),
    exact: bool = typer.Option(
        False, "--exact", help="Also run the server side's search with its approximate "
        "signal made exact (same store and filter) and report the server side's recall@k "
        "and Jaccard@k against it, per query and aggregated."),
    min_recall: Optional[float] = typer.Option(
        None, "--min-recall", min=0.0, max=1.0,
        help="Exit 1 if any query's recall@k against exact search is below this "
        "(implies --exact).", show_default=False),
    report_file: ReportFile = None,
    overwrite: Overwrite = False,
    output: Output = OutputFormat.table,
) -> None:
    """Run the same query in-process and server-side; show both rankings side by side,
    the agreement metrics and the reasons they can differ. --exact adds recall against
    exact search. With --min-rbo/--min-jaccard/--min-recall it is a CI gate (exit 1
    when a query misses)."""
    from backends.contract import server_retriever_of
    from backends.retrieval.diff import diff_queries, has_exact_search

    from semvecctl.report import write_report

    out = current().output
    current().may_replace(report_file, overwrite=overwrite, option="--report")
    # diff needs a store whatever --items says: its server side is the store's retriever
    # (with none named it is refused like any command that works on a store)
    scope = conn.scope
    specs = _diff_specs(queries, query, query_vector, like)
    ctx = _context(session, scope, top_k, bm25, bm25_fetch_k, mmr_fetch_k, mmr_lambda,
                   rrf_k, rrf_weights)
    with conn.open() as adapter_obj:
        server = server_retriever_of(adapter_obj)
        if server is None:
            _no_server(adapter_obj)
        exact = exact or min_recall is not None
        if exact and not has_exact_search(server):
            current().abort(
                f"--exact: the server-side retriever of backend {adapter_obj.name!r} has no "
                "exact search (exact_search) to measure recall against", ExitCode.ENVIRONMENT)
        live, origin = _load_items(adapter_obj, session, scope, items, True)
        try:
            report = diff_queries(ctx, specs, items=live, server=server, p=rbo_p,
                                  items_origin=origin, min_rbo=min_rbo, min_jaccard=min_jaccard,
                                  exact=exact, min_recall=min_recall)
        except (ValueError, LookupError) as exc:
            current().abort(str(exc).strip("'\""), ExitCode.USAGE, cause=None)
        data = {"backend": adapter_obj.name, "session": session, "items": origin,
                **report.to_dict()}
        fusion = _fusion_paths(server)
        if fusion is not None:
            data["fusion"] = fusion
    out.emit(data, output, table=lambda: _diff_table(report, queries is None, data.get("fusion")))
    write_report(report_file, "diff", data)
    _refuse_missed(report)


def _diff_specs(queries: Path | None, query: str | None, query_vector: str | None,
                like: str | None) -> list[Any]:
    """The queries to diff: every one of a --queries file, or the one the query flags
    give (not both: which would be compared would be a guess)."""
    from backends.retrieval.diff import load_queries_jsonl

    if queries is None:
        return [_single_spec(query, query_vector, like)]
    if query is not None or query_vector is not None or like is not None:
        current().abort("--queries replaces --query/--query-vector/--like; give one or the other", ExitCode.USAGE)
    try:
        return load_queries_jsonl(queries)
    except ValueError as exc:
        current().abort(f"--queries: {exc}", ExitCode.USAGE, cause=None)


def _refuse_missed(report: Any) -> None:
    """The CI gate: each query under a --min-* threshold on stderr, then exit 1."""
    if report.misses:
        out = current().output
        for miss in report.misses:
            out.error(f"gate missed: query {miss.query_id!r} {miss.metric} "
                      f"{miss.value:.4f} < {miss.threshold:g}")
        current().abort(code=ExitCode.CHECK_FAILED)
