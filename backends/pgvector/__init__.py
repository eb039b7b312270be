"""The ``pgvector`` backend: PostgreSQL + pgvector, advertised as a plugin.

``backends.pgvector:PgVectorAdapter`` is this distribution's ``semvec.backends`` entry
point. Importing the package is cheap (no psycopg, no numpy): the driver loads when an
adapter is constructed.
"""

from backends.pgvector.adapter import PgVectorAdapter

__all__ = ["PgVectorAdapter"]
