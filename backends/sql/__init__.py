"""The engine's SQL layout, the base of both SQL backends: config, pool, driver,
database, schema (the state and events DDL), state, events, indexes, detection, the
``postgres`` adapter and its audit.

``backends.pgvector`` is a flavour of this layer (it imports from here; nothing here
imports from it), in the manner of SQLAlchemy's dialects. Importing the package is
cheap (no psycopg).
"""

from backends.sql.adapter import PostgresAdapter

__all__ = ["PostgresAdapter"]
