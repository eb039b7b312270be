"""Where the ``pgvector`` backend looks for its settings: its own location variable before
the engine's ``DATABASE_URL`` (both declared in :mod:`backends.info`), the SQL backends'
schema variable and its embedding-width variable. The base resolves them
(:class:`backends.postgres.config.SqlConfig`); this module says which they are, and
:data:`SETTINGS` is the table ``semvecctl config settings pgvector`` renders.
"""

from __future__ import annotations

from backends.info import declared
from backends.postgres.config import SqlVariables
from backends.settings import Setting

_INFO = declared("pgvector")
#: the embedding column's width (default: the deployed item table's, else 384)
ENV_DIMENSIONS = "SEMVEC_PGVECTOR_DIMENSIONS"

PGVECTOR_VARIABLES = SqlVariables("pgvector", _INFO.uri_env, schema_env=_INFO.schema_env,
                                  dimensions_env=ENV_DIMENSIONS)


def _settings() -> tuple[Setting, ...]:
    from backends.pgvector.retrieval import DEFAULT_EXACT_SEARCH_LIMIT, SEARCH_MODES

    return PGVECTOR_VARIABLES.settings() + (
        Setting("search_mode", None, "/".join(SEARCH_MODES), "auto",
                "the semantic signal's plan: exact, HNSW, or by session size"),
        Setting("exact_search_limit", None, "int >= 0", DEFAULT_EXACT_SEARCH_LIMIT,
                "sessions with at most this many live items are searched exactly"),
    )


#: every setting of the pgvector backend
SETTINGS: tuple[Setting, ...] = _settings()
