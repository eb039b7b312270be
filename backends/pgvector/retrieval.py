"""Server-side retrieval on PostgreSQL: one SQL statement ranks, filters and fuses.

Three signals over one session's live items, each a CTE that applies the session,
owner (three-state) and not-evicted filters BEFORE its own LIMIT, so a selective filter
never shrinks the result:

- semantic: cosine distance ``embedding <=> query``;
- lexical (only with ``use_bm25`` and query text): ``ts_rank_cd`` over the generated
  ``text_tsv`` column, any query term matching (OR, like BM25), 'simple' configuration;
- recency: ``updated_at`` newest first (the session/evicted/updated_at b-tree).

Each signal ranks a candidate pool of :func:`candidate_pool` items, ``max(width, 100)``,
except the semantic signal on the HNSW plan, ``max(width, 64)`` with ``ef_search`` the
same: the candidates the graph search visits anyway (a deeper pool means a deeper graph
search, the one cost here that grows with the store).
Pools do not depend on k below their floor, so the fused order does not either and the
top-k is a prefix of the top-(k+1) (a pool cut at ``width`` gave, at k=1, a recency rank
to the newest item only); a session of up to 100 items is ranked whole by every signal.

They are fused by weighted reciprocal rank ``sum w / (rrf_k + rank)`` in the same
statement: the signals are FULL JOINed on the item id (a hash join each, no regrouping
of a union) and their terms added in signal order, as
:func:`backends.retrieval.rrf_fuse` adds them (ties by item id, as it breaks them); the
result is cut to the fetch width, and only then joined back for the rows' columns; the
shared narrowing stage (:func:`backends.retrieval.apply_narrowing`) runs on the result.

Exact vs approximate: for a session with at most ``exact_search_limit`` live items the
semantic CTE orders by an expression the HNSW index cannot serve, so the planner scans
the session's rows through the b-tree and sorts them: exact. Larger sessions use HNSW with
``hnsw.iterative_scan = relaxed_order`` (pgvector >= 0.8), which keeps scanning the graph
until the filtered LIMIT is met, and re-sort the candidates by true distance. Without
iterative scans (pgvector < 0.8) a filtered HNSW scan can come back short, so every
search takes the exact plan there. The size is counted inside the statement (both
branches gated by one-time filters; only one runs) and remembered per session for
``PLAN_CACHE_SECONDS``, because counting a big session costs more than its HNSW query.

A search is one round trip: no transaction, results in binary; the HNSW settings are
set on the pooled connection once. The pool depths and the cut are literals in the SQL
text, not parameters: knowing its LIMITs, PostgreSQL's generic plan for the prepared
statement (psycopg prepares a statement run five times) costs what a custom one does, so
it is kept and the statement is not planned again on every search (planning was about a
fifth of a 10k-item search). :meth:`PgVectorRetrievalBackend.exact_search` is the
same search on the exact plan (what ``retrieve diff --exact`` compares against).
bench/bench_pgvector.py and bench/bench_pgvector_scale.py measure the plans.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from backends.contract import UNSCOPED, MemoryUnit, RetrievalContext
from backends.postgres.database import Database
from backends.postgres.placement import Placement
from backends.pgvector.items import as_vector, vector_tuple
from backends.pgvector.schema import ITEMS_TABLE
from backends.postgres.state import owner_clause
from backends.retrieval.fusion import SERVER_SIGNAL_WEIGHTS, effective_rrf_k

#: The shared server-side split (``backends.retrieval.fusion``).
DEFAULT_WEIGHTS: dict[str, float] = SERVER_SIGNAL_WEIGHTS

#: Sessions up to this many live items are searched exactly (see module docstring).
DEFAULT_EXACT_SEARCH_LIMIT = 5000
_MAX_SCAN_TUPLES = 100_000

SEARCH_MODES = ("auto", "exact", "hnsw")

#: Each signal ranks at least this many candidates (a session up to this size is
#: ranked whole by every signal).
CANDIDATE_POOL = 100
#: ... except the semantic signal on the HNSW plan, whose pool is also its
#: ``hnsw.ef_search``: the graph search that finds the top 10 visits that many candidates
#: anyway, so returning them all costs rows, not search, while a deeper pool means a
#: deeper search. 64, not pgvector's default 40: on the graph the manifest plans
#: (ef_construction 128) semantic recall@10 against exact search at 100k items is 0.96-0.99
#: at 64 (it varies with the build) and about 0.01-0.02 lower at 40, for a fused search
#: 10-25% slower than at 40 (bench/bench_pgvector_scale.py --alt-pool 40).
HNSW_CANDIDATE_POOL = 64


def candidate_pool(width: int, floor: int = CANDIDATE_POOL) -> int:
    """How many candidates a signal ranks before fusion: ``max(width, floor)``. The
    pool is the same for every width up to ``floor``, so the fused order (and the top-k,
    a prefix of it) does not depend on k there, whatever the session's size."""
    return max(int(width), int(floor))


def _embedding(value: Any) -> tuple[float, ...] | None:
    # a binary-loaded Vector's to_list() already holds Python floats: no per-float work
    return tuple(value.to_list()) if hasattr(value, "to_list") else vector_tuple(value)


def _as_vector(value: Any) -> Any:
    return value if hasattr(value, "to_binary") else as_vector(value)


def ef_search(pool: int) -> int:
    """``hnsw.ef_search`` for a semantic pool: the pool itself, within pgvector's range."""
    return min(1000, max(1, int(pool)))


def _order(plan: str) -> str:
    # "+ 0" hides the operator from the HNSW index: the planner must sort exactly
    return "(embedding <=> %s) + 0" if plan == "exact" else "embedding <=> %s"


#: connection -> the HNSW settings it holds; only our pool's connections get here
_CONNECTION_SETTINGS: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()


def _hnsw_settings(conn: Any, ef: int) -> None:
    """Session-level HNSW settings, sent only when this connection lacks them. A SET
    LOCAL per search needs a transaction: BEGIN, SET, query, COMMIT are four round
    trips, which cost more than the HNSW query itself. The pool's connections run only
    our statements, and only vector searches read these settings."""
    if _CONNECTION_SETTINGS.get(conn) == ef:
        return
    conn.execute(f"SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = {int(ef)};"
                 f" SET hnsw.max_scan_tuples = {_MAX_SCAN_TUPLES}")
    _CONNECTION_SETTINGS[conn] = ef


#: How long a session's plan (exact / HNSW, from its live-item count) is remembered.
PLAN_CACHE_SECONDS = 30.0
_PLAN_CACHE_SIZE = 4096


class _PlanCache:
    """(session, owner) -> plan for a short while: counting a big session's live items
    costs more than its HNSW query, so the count runs once per session and window, not
    per search. A stale entry only picks the slower of two correct plans."""

    def __init__(self, seconds: float) -> None:
        self._seconds = float(seconds)
        self._entries: dict[tuple, tuple[str, float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(session_id: str, owner: Any) -> tuple:
        return (session_id, "\x00unscoped" if owner is UNSCOPED else owner)

    def get(self, session_id: str, owner: Any) -> str | None:
        entry = self._entries.get(self._key(session_id, owner))
        if entry is None or entry[1] < time.monotonic():
            return None
        return entry[0]

    def put(self, session_id: str, owner: Any, plan: str) -> None:
        if self._seconds <= 0:
            return
        with self._lock:
            if len(self._entries) >= _PLAN_CACHE_SIZE:
                self._entries.pop(next(iter(self._entries)))
            self._entries[self._key(session_id, owner)] = (plan, time.monotonic() + self._seconds)


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

    def __init__(self, db: Placement | Database, *, search_mode: str = "auto",
                 exact_search_limit: int = DEFAULT_EXACT_SEARCH_LIMIT,
                 weights: dict[str, float] | None = None,
                 plan_cache_seconds: float = PLAN_CACHE_SECONDS,
                 pool: int = CANDIDATE_POOL, hnsw_pool: int = HNSW_CANDIDATE_POOL) -> None:
        if search_mode not in SEARCH_MODES:
            raise ValueError(f"search_mode must be one of {SEARCH_MODES}, got {search_mode!r}")
        if not isinstance(db, Placement):
            db = Placement(db, ())
        #: the deployment; each search reads its session's shard (same schema everywhere)
        self._placement = db
        self._db = db.primary
        self.search_mode = search_mode
        self.exact_search_limit = int(exact_search_limit)
        self.weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
        #: which plan the last search used ("exact" / "hnsw"; None without a query
        #: vector), for tests and benchmarks
        self.last_plan: str | None = None
        self._iterative_scan: bool | None = None  # pgvector >= 0.8, probed once
        self._plans = _PlanCache(plan_cache_seconds)
        self.pool, self.hnsw_pool = int(pool), int(hnsw_pool)

    def _at(self, ctx: RetrievalContext) -> Database:
        """The database holding the context's session (its items live on its shard)."""
        return self._placement.for_session(ctx.session_id)

    def search(self, ctx: RetrievalContext) -> list[MemoryUnit]:
        return self._search(ctx, None)

    def exact_search(self, ctx: RetrievalContext) -> list[MemoryUnit]:
        """The same search with the semantic signal computed exactly (every live item of
        the session compared): what ``retrieve diff --exact`` measures recall against."""
        return self._search(ctx, "exact")

    def semantic_ranking(self, ctx: RetrievalContext, limit: int, *,
                         exact: bool = False) -> list[str]:
        """Item ids of the semantic signal alone, best first, as :meth:`search` ranks
        them (same plan, settings and filters); ``exact`` forces the exact plan."""
        query_vec = self._query_vector(ctx)
        if query_vec is None:
            return []
        owner_sql, owner_params = owner_clause(ctx.owner_subject)
        scope, scope_params = self._scope(ctx, owner_sql, owner_params)

        def work(conn: Any) -> list[str]:
            plan = self._plan_for(conn, ctx, "exact" if exact else None)
            if plan is None:  # unknown size: decide now (one extra statement)
                plan = self._probe_plan(conn, scope, scope_params)
            sql = (f"SELECT item_id FROM {self._db.tables.of(ITEMS_TABLE)} WHERE {scope}"
                   f" AND embedding IS NOT NULL ORDER BY {_order(plan)} LIMIT %s")
            params = [*scope_params, _as_vector(query_vec), int(limit)]
            rows = self._run(conn, plan, candidate_pool(int(limit), self.hnsw_pool), sql, params)
            return [r[0] for r in rows]

        return self._at(ctx).read(work, list, typed=True)

    # -- the search -----------------------------------------------------------------

    def _query_vector(self, ctx: RetrievalContext) -> Any:
        """The query as a pgvector ``Vector`` (one numpy conversion, no per-float work)."""
        if ctx.query_embedding is None:
            return None
        import numpy as np
        from pgvector import Vector

        dims = self._at(ctx).dimensions
        query_vec = np.asarray(ctx.query_embedding, dtype=np.float32).reshape(-1)
        if len(query_vec) != dims:
            raise ValueError(
                f"query embedding has {len(query_vec)} dimensions; items are vector({dims})"
            )
        return Vector(query_vec)

    def _search(self, ctx: RetrievalContext, force: str | None) -> list[MemoryUnit]:
        from backends.retrieval import apply_narrowing, fetch_width, wants_lexical

        width = fetch_width(ctx)
        pool = candidate_pool(width, self.pool)
        query_vec = self._query_vector(ctx)
        text = (ctx.query_text or "").strip()
        active = [s for s, on in (("semantic", query_vec is not None),
                                  ("lexical", wants_lexical(ctx)), ("recency", True)) if on]
        owner_sql, owner_params = owner_clause(ctx.owner_subject)

        def work(conn: Any) -> tuple[list[Any], str | None]:
            plan = self._plan_for(conn, ctx, force) if query_vec is not None else "none"
            sql, params = self._statement(active, plan, width, pool, ctx, owner_sql,
                                          owner_params, query_vec, text)
            rows = self._run(conn, plan, candidate_pool(width, self.hnsw_pool), sql, params)
            if plan is None:  # decided inside the statement (see _statement)
                small = rows[0][11] if rows else True  # no live rows: a small session
                plan = "exact" if small else "hnsw"
                self._plans.put(ctx.session_id, ctx.owner_subject, plan)
            return rows, (None if plan == "none" else plan)

        rows, self.last_plan = self._at(ctx).read(work, lambda: ([], None), typed=True)
        candidates = [self._unit(row) for row in rows]
        emit = ctx.stage
        if emit is not None:
            emit("retrieve", {"backend": self.name, "signals": active, "plan": self.last_plan,
                              "width": width, "pool": pool,
                              "hnsw_pool": candidate_pool(width, self.hnsw_pool)})
            emit("fuse", {"weights": {s: self.weights[s] for s in active},
                          "k": effective_rrf_k(ctx.rrf_k),
                          "items": [u.item_id for u in candidates]})
        return apply_narrowing(ctx, candidates, emit=emit)

    def _run(self, conn: Any, plan: str | None, hnsw_pool: int, sql: str, params: list) -> list:
        """One round trip: the statement alone, results in binary (no text parsing of
        vectors). The HNSW settings live on the pooled connection (see _hnsw_settings)."""
        if plan not in ("exact", "none"):
            _hnsw_settings(conn, ef_search(hnsw_pool))
        return conn.execute(sql, params, binary=True).fetchall()

    # -- which plan -----------------------------------------------------------------

    def _plan_for(self, conn: Any, ctx: RetrievalContext, force: str | None) -> str | None:
        """"exact", "hnsw", or None: decide in the statement from the session's size."""
        if self._iterative_scan is None:
            from backends.postgres.schema import extension_version

            self._iterative_scan = supports_iterative_scan(extension_version(conn))
        if not self._iterative_scan:
            # without iterative scans a filtered HNSW scan can silently return fewer
            # than k rows, so older pgvector always gets the exact plan
            return "exact"
        if force is not None:
            return force
        if self.search_mode != "auto":
            return self.search_mode
        return self._plans.get(ctx.session_id, ctx.owner_subject)

    def _probe_plan(self, conn: Any, scope: str, scope_params: tuple) -> str:
        (live,) = conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {self._db.tables.of(ITEMS_TABLE)} WHERE {scope}"
            " LIMIT %s) AS s", (*scope_params, self.exact_search_limit + 1)).fetchone()
        return "exact" if int(live) <= self.exact_search_limit else "hnsw"

    # -- SQL --------------------------------------------------------------------------

    def _scope(self, ctx: RetrievalContext, owner_sql: str, owner_params: tuple):
        return (f"session_id = %s AND NOT evicted AND {owner_sql}",
                (ctx.session_id, *owner_params))

    def _statement(self, active: list[str], plan: str | None, width: int, pool: int,
                   ctx: RetrievalContext, owner_sql: str, owner_params: tuple, query_vec,
                   text: str):
        table = self._db.tables.of(ITEMS_TABLE)
        scope, scope_params = self._scope(ctx, owner_sql, owner_params)
        ctes: list[str] = []
        params: list[Any] = []
        if "semantic" in active:
            vec = _as_vector(query_vec)

            def ranked(branch: str, gate: str) -> str:
                order = _order(branch)
                depth = pool if branch == "exact" else candidate_pool(width, self.hnsw_pool)
                params.extend([vec, *scope_params, vec])
                return (f"(SELECT item_id, embedding <=> %s AS dist FROM {table} WHERE {scope}"
                        f" AND embedding IS NOT NULL{gate} ORDER BY {order} LIMIT {int(depth)})")

            if plan is None:
                # size unknown: count the session's live rows (up to the limit) once, as
                # an InitPlan; each branch is gated by a one-time filter, so only the
                # chosen one runs
                limit = int(self.exact_search_limit)
                ctes.append(f"size AS MATERIALIZED (SELECT count(*) <= {limit} AS small FROM"
                            f" (SELECT 1 FROM {table} WHERE {scope} LIMIT {limit + 1}) AS c)")
                params.extend(scope_params)
                branches = (ranked("exact", " AND (SELECT small FROM size)")
                            + " UNION ALL "
                            + ranked("hnsw", " AND NOT (SELECT small FROM size)"))
            else:
                branches = ranked(plan, "")
            ctes.append(
                "sem AS (SELECT item_id, row_number() OVER"
                f" (ORDER BY dist, item_id COLLATE \"C\") AS rnk FROM ({branches}) AS s)")
        if "lexical" in active:
            ctes.append(
                "lex AS (SELECT item_id, row_number() OVER"
                " (ORDER BY score DESC, item_id COLLATE \"C\") AS rnk FROM (SELECT item_id,"
                " ts_rank_cd(text_tsv, q.query) AS score"
                f" FROM {table}, (SELECT to_tsquery('simple', replace("
                " plainto_tsquery('simple', %s)::text, ' & ', ' | ')) AS query) AS q"
                f" WHERE {scope} AND text_tsv @@ q.query"
                f" ORDER BY score DESC, item_id COLLATE \"C\" LIMIT {int(pool)}) AS l)"
            )
            params += [text, *scope_params]
        ctes.append(
            "rec AS (SELECT item_id, row_number() OVER"
            " (ORDER BY updated_at DESC, item_id COLLATE \"C\") AS rnk FROM (SELECT item_id,"
            f" updated_at FROM {table} WHERE {scope}"
            f" ORDER BY updated_at DESC, item_id COLLATE \"C\" LIMIT {int(pool)}) AS r)"
        )
        params.extend(scope_params)
        # fuse with FULL JOINs on the item id (one hash join per signal, no regrouping),
        # adding the weighted reciprocal ranks in signal order as rrf_fuse does; order and
        # cut to the width BEFORE fetching the rows' columns
        cte_of = {"semantic": "sem", "lexical": "lex", "recency": "rec"}
        joined = cte_of[active[0]] + "".join(
            f" FULL JOIN {cte_of[sig]} USING (item_id)" for sig in active[1:])
        score = " + ".join(
            f"coalesce({float(self.weights[sig])!r}::float8 / (%s + {cte_of[sig]}.rnk), 0)"
            for sig in active)
        params += [float(effective_rrf_k(ctx.rrf_k))] * len(active)
        ranks = ", ".join(
            f"{cte_of[sig]}.rnk AS {cte_of[sig]}_rank" if sig in active
            else f"NULL::bigint AS {cte_of[sig]}_rank" for sig in cte_of)
        ctes.append(
            f"fused AS MATERIALIZED (SELECT item_id, {score} AS score, {ranks} FROM {joined}"
            f" ORDER BY score DESC, item_id COLLATE \"C\" LIMIT {int(width)})"
        )
        plan_column = "(SELECT small FROM size)" if plan is None and "semantic" in active else "NULL::boolean"
        # a slice never looks at the vectors (MMR and a reranker may): then none is sent
        from backends.retrieval import narrowing_stage

        vectors = "NULL::vector" if narrowing_stage(ctx) == "slice" else "i.embedding"
        sql = (
            "WITH " + ", ".join(ctes) +
            f" SELECT f.item_id, i.text, i.tier, {vectors}, i.updated_at, i.owner_subject,"
            f" i.session_id, f.score, f.sem_rank, f.lex_rank, f.rec_rank, {plan_column}"
            f" FROM fused AS f JOIN {table} AS i ON i.session_id = %s AND i.item_id = f.item_id"
            " ORDER BY f.score DESC, f.item_id COLLATE \"C\""
        )
        params.append(ctx.session_id)
        return sql, params

    @staticmethod
    def _unit(row: Any) -> MemoryUnit:
        ranks = {name: rank for name, rank in
                 (("semantic", row[8]), ("lexical", row[9]), ("recency", row[10]))
                 if rank is not None}
        return MemoryUnit(
            item_id=row[0], text=row[1], score=float(row[7]), tier=row[2],
            embedding=_embedding(row[3]), updated_at=row[4], owner_subject=row[5],
            session_id=row[6], meta={"ranks": ranks, "score_kind": "fused"},
        )
