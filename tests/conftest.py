"""Suite-wide fixtures. Real servers are started by the fixture modules below."""

pytest_plugins = [
    "tests.fixtures.redis_server",
    "tests.fixtures.postgres_server",
]
