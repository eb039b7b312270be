"""Suite-wide fixtures. Real servers are started by the fixture modules below."""

pytest_plugins = [
    "tests.support.fixtures.redis_server",
    "tests.support.fixtures.postgres_server",
]
