"""Kept importable for code written against it: redaction is :mod:`backends.redaction`
(a leaf), choosing a backend from a URI is :mod:`backends.selection`. Nothing inside the
package imports this module."""

from backends.redaction import (  # noqa: F401 - re-exported
    REDACTED,
    is_secret_name,
    redact_settings,
    redact_uri,
    scrub,
    uri_secrets,
)
from backends.selection import (  # noqa: F401 - re-exported
    SCHEME_BACKENDS,
    SHARED_SCHEME_BACKENDS,
    InvalidURI,
    backend_for_uri,
    choose_backend_for_uri,
    fitting_backends,
)
