"""pytest11 plugin: exposes the conformance suite to backend authors' own test suites."""
