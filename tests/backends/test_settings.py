"""Each backend declares its settings once (backends.settings): the table agrees with the
facts backends.info holds (URI and secret variables), the resolvers take their variable
names and option lists from it, and the Markdown the docs show is rendered from it."""

from __future__ import annotations

import pytest

from backends.info import KNOWN_INFO
from backends.settings import (Setting, declared_settings, markdown, option_names,
                               secret_variables, setting, settings_of, variables)

TABLES = declared_settings()


def test_every_persistent_backend_declares_a_table():
    assert {"redis", "mongo", "postgres", "pgvector"} <= set(TABLES)
    assert settings_of("memory") == ()


@pytest.mark.parametrize("info", [i for i in KNOWN_INFO if i.settings], ids=lambda i: i.name)
def test_the_table_agrees_with_backend_info(info):
    table = TABLES[info.name]
    assert setting(table, "uri").variables == info.uri_env  # first hit wins, in order
    assert set(info.secret_variables) <= set(secret_variables(table))
    assert set(secret_variables(table)) <= set(info.secret_variables)
    if info.ttl_env and info.name in ("redis", "mongo"):
        assert info.ttl_env in variables(table)
    names = [row.name for row in table]
    assert len(names) == len(set(names)), "a setting is declared twice"


def test_the_resolvers_name_the_options_their_tables_declare():
    from backends.errors import BackendConfigError
    from backends.postgres.config import SqlConfig
    from backends.redis.config import RedisSettings

    with pytest.raises(BackendConfigError) as sql:
        SqlConfig.resolve("postgresql://h/db", {"colour": 1})
    assert ", ".join(option_names(TABLES["postgres"])) in str(sql.value)
    with pytest.raises(BackendConfigError) as redis:
        RedisSettings.resolve("redis://h/0", {"colour": 1})
    assert ", ".join(sorted(option_names(TABLES["redis"]))) in str(redis.value)


def test_mongo_reads_its_database_variable_from_the_table(monkeypatch):
    from backends.mongo.config import resolve_settings

    variable = setting(TABLES["mongo"], "database").env
    resolved = resolve_settings("mongodb://h/", database=None, session_ttl_s=None,
                                item_sync=None, dimensions=None,
                                server_selection_timeout_ms=None, connect_timeout_ms=None,
                                have_client=False, environ={variable: "other"})
    assert resolved.database == "other"


def test_markdown_has_a_row_per_setting_and_escapes_pipes():
    table = (Setting("a", "SEMVEC_A", "int", 1, "one | two"), Setting("b", None, "bool", None, "x"))
    lines = markdown(table).splitlines()
    assert lines[0] == "| name | variable | type | default | meaning |"
    assert len(lines) == 4 and "one \\| two" in lines[2] and "`SEMVEC_A`" in lines[2]
