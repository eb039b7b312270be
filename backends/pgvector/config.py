"""Where the ``pgvector`` backend looks for its settings: its own location variable before
the engine's ``DATABASE_URL`` (both declared in :mod:`backends.info`), the SQL backends'
schema variable and its embedding-width variable. The base resolves them
(:class:`backends.postgres.config.SqlConfig`); this module only says which they are.
"""

from __future__ import annotations

from backends.info import declared
from backends.postgres.config import SqlVariables

_INFO = declared("pgvector")
#: the embedding column's width (default: the deployed item table's, else 384)
ENV_DIMENSIONS = "SEMVEC_PGVECTOR_DIMENSIONS"

PGVECTOR_VARIABLES = SqlVariables("pgvector", _INFO.uri_env, schema_env=_INFO.schema_env,
                                  dimensions_env=ENV_DIMENSIONS)
