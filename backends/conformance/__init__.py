"""Behavioural conformance suite for session backends (see issue: conformance)."""
