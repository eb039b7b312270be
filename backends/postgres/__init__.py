"""The ``postgres`` backend: the deployed engine's own SQL layout (state and events), and
the base other SQL backends build on (config, pool, errors, database, schema, state,
events, indexes, placement over shards, relocation, audit).

A backend built on it imports from here and nothing here imports from one, in the manner
of SQLAlchemy's dialects. ``backends.postgres:PostgresAdapter`` is this distribution's
``semvec.backends`` entry point; in the engine's own process the engine's shipped
``postgres`` wins and this one is never reached. Importing the package is cheap (no
psycopg).
"""

from backends.postgres.adapter import PostgresAdapter

__all__ = ["PostgresAdapter"]
