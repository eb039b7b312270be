"""The ``postgres`` backend: the deployed engine's own SQL layout (state and events).

``backends.postgres:PostgresAdapter`` is this distribution's ``semvec.backends`` entry
point, kept as the public import path; the adapter lives in :mod:`backends.sql` (the
shared SQL layer). In the engine's own process the engine's shipped ``postgres`` wins and
this one is never reached; in semvecctl it is how an operator works on an engine SQL
deployment. Importing the package is cheap (no psycopg).
"""

from backends.sql.adapter import PostgresAdapter

__all__ = ["PostgresAdapter"]
