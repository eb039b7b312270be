"""Suite-wide fixtures. Real servers are started by the fixture modules below; the engine
plugin turns skipped engine tests into failures where CI requires the engine."""

pytest_plugins = [
    "tests.support.fixtures.redis_server",
    "tests.support.fixtures.postgres_server",
    "tests.support.fixtures.engine",
]
