"""Server-side retrieval on PostgreSQL: one SQL statement ranks, filters and fuses.

Three signals over one session's live items, each a CTE that applies the session,
owner (three-state) and not-evicted filters BEFORE its own LIMIT, so a selective filter
never shrinks the result:

- semantic: cosine distance ``embedding <=> query``;
- lexical (only with ``use_bm25`` and query text): ``ts_rank_cd`` over the generated
  ``text_tsv`` column, any query term matching (OR, like BM25), 'simple' configuration;
- recency: ``updated_at`` newest first.

Each signal ranks a candidate pool of :func:`candidate_pool` items (``max(10 * width,
100)``, the rule MongoDB's ``numCandidates`` follows, capped at 1000 unless the width is
larger), not just ``width``: with pools cut at ``width`` an item's fused score depended
on k (at k=1 only the single newest item had a recency rank), so the top-k was not a
prefix of the top-(k+1) even on a 10-item session. With pools that cover the session,
the fused order no longer depends on k and the final ``LIMIT width`` is a prefix.

They are fused by weighted reciprocal rank ``sum w / (rrf_k + rank)`` in the same
statement (ties by item id, as :func:`backends.retrieval.rrf_fuse` breaks them), and the
shared narrowing stage (:func:`backends.retrieval.apply_narrowing`) runs on the result.

Exact vs approximate: for a session with at most ``exact_search_limit`` live items the
semantic CTE orders by an expression the HNSW index cannot serve, so the planner scans
the session's rows through the b-tree and sorts them: exact. Larger sessions use HNSW with
``hnsw.iterative_scan = relaxed_order`` (pgvector >= 0.8), which keeps scanning the graph
until the filtered LIMIT is met, and re-sort the candidates by true distance. Without
iterative scans (pgvector < 0.8) a filtered HNSW scan can come back short, so every
search takes the exact plan there. bench/bench_pgvector.py measures both plans.
"""

from __future__ import annotations

from typing import Any

from backends.contract import MemoryUnit, RetrievalContext
from backends.pgvector.database import Database
from backends.pgvector.items import as_vector, vector_tuple
from backends.pgvector.state import owner_clause
from backends.retrieval.fusion import SERVER_SIGNAL_WEIGHTS

#: The shared server-side split (``backends.retrieval.fusion``).
DEFAULT_WEIGHTS: dict[str, float] = SERVER_SIGNAL_WEIGHTS

#: Sessions up to this many live items are searched exactly (see module docstring).
DEFAULT_EXACT_SEARCH_LIMIT = 5000
_MAX_SCAN_TUPLES = 100_000

SEARCH_MODES = ("auto", "exact", "hnsw")

#: candidate pools stop growing here (unless the fetch width itself is larger)
MAX_CANDIDATE_POOL = 1000


def candidate_pool(width: int) -> int:
    """How many candidates each signal ranks before fusion: ``max(10 * width, 100)``
    (MongoDB's numCandidates rule), at most :data:`MAX_CANDIDATE_POOL`, never below
    ``width``. Independent of k for every session up to 100 live items."""
    return max(width, min(max(10 * width, 100), MAX_CANDIDATE_POOL))


def supports_iterative_scan(version: str | None) -> bool:
    """``hnsw.iterative_scan`` arrived in pgvector 0.8.0."""
    try:
        major, minor = (int(part) for part in (version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (0, 8)


class PgVectorRetrievalBackend:
    """RetrievalBackend ranking in PostgreSQL. See the module docstring for the SQL."""

    name = "pgvector-server"
    signals = ("semantic", "lexical", "recency")
    #: RetrievalContext fields this retriever ignores: the caller's two-signal weights
    #: have no meaning-preserving map onto three signals (DEFAULT_WEIGHTS is used), the
    #: fusion always runs, and items come from the table, not from ``ctx.memory``.
    #: ``rrf_k`` is honoured; ``stage`` receives retrieve/fuse/narrowing events.
    inert_fields = frozenset({"rrf_weights", "fuse_with_bm25", "memory"})

    def __init__(self, db: Database, *, search_mode: str = "auto",
                 exact_search_limit: int = DEFAULT_EXACT_SEARCH_LIMIT,
                 weights: dict[str, float] | None = None) -> None:
        if search_mode not in SEARCH_MODES:
            raise ValueError(f"search_mode must be one of {SEARCH_MODES}, got {search_mode!r}")
        self._db = db
        self.search_mode = search_mode
        self.exact_search_limit = int(exact_search_limit)
        self.weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
        #: which plan the last search used ("exact" / "hnsw"), for tests and benchmarks
        self.last_plan: str | None = None
        self._iterative_scan: bool | None = None  # pgvector >= 0.8, probed once

    def search(self, ctx: RetrievalContext) -> list[MemoryUnit]:
        from backends.retrieval import apply_narrowing, fetch_width, wants_lexical

        width = fetch_width(ctx)
        dims = self._db.dimensions
        query_vec = None
        if ctx.query_embedding is not None:
            query_vec = [float(x) for x in ctx.query_embedding]
            if len(query_vec) != dims:
                raise ValueError(
                    f"query embedding has {len(query_vec)} dimensions; items are vector({dims})"
                )
        text = (ctx.query_text or "").strip()
        use_lexical = wants_lexical(ctx)
        active = [s for s, on in (("semantic", query_vec is not None), ("lexical", use_lexical),
                                  ("recency", True)) if on]
        owner_sql, owner_params = owner_clause(ctx.owner_subject)

        def work(conn: Any) -> list[MemoryUnit]:
            with conn.transaction():
                exact = self._plan_exact(conn, ctx.session_id, owner_sql, owner_params)
                if query_vec is not None and not exact:
                    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    pool = candidate_pool(width)
                    conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(40, pool))}")
                    conn.execute(f"SET LOCAL hnsw.max_scan_tuples = {_MAX_SCAN_TUPLES}")
                self.last_plan = "exact" if exact else "hnsw"
                sql, params = self._statement(active, exact, width, ctx, owner_sql,
                                              owner_params, query_vec, text)
                return conn.execute(sql, params).fetchall()

        rows = self._db.read(work, list, vector=True)
        candidates = [self._unit(row) for row in rows]
        emit = ctx.stage
        if emit is not None:
            emit("retrieve", {"backend": self.name, "signals": active, "plan": self.last_plan,
                              "width": width, "pool": candidate_pool(width)})
            emit("fuse", {"weights": {s: self.weights[s] for s in active}, "k": ctx.rrf_k,
                          "items": [u.item_id for u in candidates]})
        return apply_narrowing(ctx, candidates, emit=emit)

    # -- SQL --------------------------------------------------------------------------

    def _plan_exact(self, conn: Any, session_id: str, owner_sql: str, owner_params: tuple) -> bool:
        if self._iterative_scan is None:
            from backends.pgvector.schema import extension_version

            self._iterative_scan = supports_iterative_scan(extension_version(conn))
        if not self._iterative_scan:
            # without iterative scans a filtered HNSW scan can silently return fewer
            # than k rows, so older pgvector always gets the exact plan
            return True
        if self.search_mode != "auto":
            return self.search_mode == "exact"
        (live,) = conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {self._db.tables.items} WHERE session_id = %s"
            f" AND NOT evicted AND {owner_sql} LIMIT %s) AS s",
            (session_id, *owner_params, self.exact_search_limit + 1),
        ).fetchone()
        return int(live) <= self.exact_search_limit

    def _statement(self, active: list[str], exact: bool, width: int, ctx: RetrievalContext,
                   owner_sql: str, owner_params: tuple, query_vec, text: str):
        table = self._db.tables.items
        pool = candidate_pool(width)
        scope = f"session_id = %s AND NOT evicted AND {owner_sql}"
        scope_params = (ctx.session_id, *owner_params)
        ctes: list[str] = []
        params: list[Any] = []
        arms: list[str] = []
        if "semantic" in active:
            # "+ 0" hides the operator from the HNSW index: the planner must sort exactly
            order = "(embedding <=> %s) + 0" if exact else "embedding <=> %s"
            ctes.append(
                "sem AS MATERIALIZED (SELECT item_id, row_number() OVER"
                " (ORDER BY dist, item_id COLLATE \"C\") AS rnk FROM (SELECT item_id,"
                f" embedding <=> %s AS dist FROM {table} WHERE {scope} AND embedding IS NOT NULL"
                f" ORDER BY {order} LIMIT %s) AS s)"
            )
            vec = as_vector(query_vec)
            params += [vec, *scope_params, vec, pool]
            arms.append("SELECT item_id, rnk, 'semantic' AS sig FROM sem")
        if "lexical" in active:
            ctes.append(
                "lex AS MATERIALIZED (SELECT item_id, row_number() OVER"
                " (ORDER BY score DESC, item_id COLLATE \"C\") AS rnk FROM (SELECT item_id,"
                " ts_rank_cd(text_tsv, q.query) AS score"
                f" FROM {table}, (SELECT to_tsquery('simple', replace("
                " plainto_tsquery('simple', %s)::text, ' & ', ' | ')) AS query) AS q"
                f" WHERE {scope} AND text_tsv @@ q.query"
                " ORDER BY score DESC, item_id COLLATE \"C\" LIMIT %s) AS l)"
            )
            params += [text, *scope_params, pool]
            arms.append("SELECT item_id, rnk, 'lexical' AS sig FROM lex")
        ctes.append(
            "rec AS MATERIALIZED (SELECT item_id, row_number() OVER"
            " (ORDER BY updated_at DESC, item_id COLLATE \"C\") AS rnk FROM (SELECT item_id,"
            f" updated_at FROM {table} WHERE {scope}"
            " ORDER BY updated_at DESC, item_id COLLATE \"C\" LIMIT %s) AS r)"
        )
        params += [*scope_params, pool]
        arms.append("SELECT item_id, rnk, 'recency' AS sig FROM rec")
        weight_case = " ".join(
            f"WHEN '{sig}' THEN {float(self.weights[sig])!r}::float8" for sig in active
        )
        ctes.append(
            "fused AS (SELECT item_id,"
            f" sum((CASE sig {weight_case} END) / (%s + rnk)) AS score,"
            " min(rnk) FILTER (WHERE sig = 'semantic') AS sem_rank,"
            " min(rnk) FILTER (WHERE sig = 'lexical') AS lex_rank,"
            " min(rnk) FILTER (WHERE sig = 'recency') AS rec_rank"
            f" FROM ({' UNION ALL '.join(arms)}) AS u GROUP BY item_id)"
        )
        params.append(float(ctx.rrf_k))
        sql = (
            "WITH " + ", ".join(ctes) +
            " SELECT f.item_id, i.text, i.tier, i.embedding, i.updated_at, i.owner_subject,"
            " i.session_id, f.score, f.sem_rank, f.lex_rank, f.rec_rank"
            f" FROM fused AS f JOIN {table} AS i ON i.session_id = %s AND i.item_id = f.item_id"
            " ORDER BY f.score DESC, f.item_id COLLATE \"C\" LIMIT %s"
        )
        params += [ctx.session_id, width]
        return sql, params

    @staticmethod
    def _unit(row: Any) -> MemoryUnit:
        ranks = {name: rank for name, rank in
                 (("semantic", row[8]), ("lexical", row[9]), ("recency", row[10]))
                 if rank is not None}
        return MemoryUnit(
            item_id=row[0], text=row[1], score=float(row[7]), tier=row[2],
            embedding=vector_tuple(row[3]), updated_at=row[4], owner_subject=row[5],
            session_id=row[6], meta={"ranks": ranks},
        )
