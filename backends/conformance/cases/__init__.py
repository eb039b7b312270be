"""Conformance cases, one module per group (imported on demand by the catalogue)."""
