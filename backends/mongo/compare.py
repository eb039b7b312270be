"""Option-level comparison of an index we want with the index the server reports.

Pure functions over plain documents (``listIndexes`` / ``$listSearchIndexes`` output),
so every drift case is testable without a server. Drift is judged on options, not only
on keys: a unique index that lost ``unique`` is not "ok" because its keys match.
"""

from __future__ import annotations

from typing import Any, Mapping

from backends.contract import FieldDiff
from backends.mongo.manifest import RegularIndex, SearchIndex

#: Options listIndexes reports that carry no meaning for us.
_IGNORED_OPTIONS = frozenset({"v", "key", "name", "ns", "background"})
_COMPARED_OPTIONS = frozenset({"unique", "partialFilterExpression", "collation", "expireAfterSeconds"})
#: Defaults a server may spell out in a search index definition.
_SEARCH_DEFAULTS: Mapping[str, Any] = {
    "analyzer": "lucene.standard",
    "searchAnalyzer": "lucene.standard",
    "storedSource": False,
}
_VECTOR_FIELD_DEFAULTS: Mapping[str, Any] = {"quantization": "none"}


def _direction(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
        return int(value)
    return value


def _keys(value: Any) -> list[list[Any]]:
    items = value.items() if isinstance(value, Mapping) else value or []
    return [[str(k), _direction(d)] for k, d in items]


def _collation(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Simple collation and no collation are the same thing (servers omit simple)."""
    if not value or value.get("locale") == "simple":
        return None
    return dict(value)


def _plain(value: Any) -> Any:
    """SON / nested mappings → dicts, numbers normalised, for equality."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return _direction(value)


def same_key_pattern(actual: Mapping[str, Any], keys: list[list[Any]]) -> bool:
    return _keys(actual.get("key")) == keys


def compare_regular(expected: RegularIndex, actual: Mapping[str, Any]) -> list[FieldDiff]:
    diffs: list[FieldDiff] = []
    want_keys = [[k, d] for k, d in expected.keys]
    got_keys = _keys(actual.get("key"))
    if got_keys != want_keys:
        diffs.append(FieldDiff("keys", want_keys, got_keys))
    if bool(actual.get("unique", False)) != expected.unique:
        diffs.append(FieldDiff("unique", expected.unique, bool(actual.get("unique", False))))
    want_pf = _plain(expected.partial_filter) if expected.partial_filter is not None else None
    got_pf = _plain(actual.get("partialFilterExpression"))
    if got_pf != want_pf:
        diffs.append(FieldDiff("partialFilterExpression", want_pf, got_pf))
    want_coll = _collation(expected.collation)
    got_coll = _collation(actual.get("collation"))
    if want_coll is None and got_coll is not None:
        diffs.append(FieldDiff("collation", {"locale": "simple"}, _plain(got_coll)))
    elif want_coll is not None and (
        got_coll is None or any(_plain(got_coll.get(k)) != _plain(v) for k, v in want_coll.items())
    ):
        diffs.append(FieldDiff("collation", _plain(want_coll), _plain(got_coll)))
    got_ttl = actual.get("expireAfterSeconds")
    got_ttl = _direction(got_ttl) if got_ttl is not None else None
    if got_ttl != expected.expire_after_seconds:
        diffs.append(FieldDiff("expireAfterSeconds", expected.expire_after_seconds, got_ttl))
    for option in sorted(set(actual) - _IGNORED_OPTIONS - _COMPARED_OPTIONS):
        diffs.append(FieldDiff(option, None, _plain(actual[option])))
    return diffs


def only_ttl_differs(diffs: list[FieldDiff]) -> bool:
    """collMod can change expireAfterSeconds in place, but cannot add or drop TTL."""
    return bool(diffs) and all(
        d.field == "expireAfterSeconds" and d.expected is not None and d.actual is not None
        for d in diffs
    )


def _vector_fields(definition: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(f.get("path")): f for f in definition.get("fields") or [] if isinstance(f, Mapping)}


def compare_search_definition(expected: SearchIndex, actual_type: str | None,
                              actual_definition: Mapping[str, Any] | None) -> list[FieldDiff]:
    """Compare a search index definition field by field (dimensions, similarity, filter
    fields, mappings), reporting what differs and what is extra."""
    diffs: list[FieldDiff] = []
    if actual_type is not None and actual_type != expected.type:
        diffs.append(FieldDiff("type", expected.type, actual_type))
        return diffs
    actual_definition = actual_definition or {}
    if expected.type == "vectorSearch":
        want = _vector_fields(expected.definition or {"fields": []}) if expected.definition else {}
        got = _vector_fields(actual_definition)
        vector = got.get("embedding")
        if vector is None or vector.get("type") != "vector":
            diffs.append(FieldDiff("fields.embedding.type", "vector",
                                   vector.get("type") if vector else None))
        else:
            want_vec = want.get("embedding", {})
            for option in ("numDimensions", "similarity"):
                if option == "numDimensions" and expected.definition is None:
                    continue  # dimensions unknown: nothing to hold the index to
                wanted = want_vec.get(option, "cosine" if option == "similarity" else None)
                if _plain(vector.get(option)) != _plain(wanted):
                    diffs.append(FieldDiff(f"fields.embedding.{option}", wanted,
                                           _plain(vector.get(option))))
            for option in sorted(set(vector) - {"type", "path", "numDimensions", "similarity"}):
                if _VECTOR_FIELD_DEFAULTS.get(option, object()) != vector[option]:
                    diffs.append(FieldDiff(f"fields.embedding.{option}", None, _plain(vector[option])))
        from backends.mongo.manifest import SEARCH_FILTER_FIELDS

        for path in SEARCH_FILTER_FIELDS:
            field = got.get(path)
            if field is None or field.get("type") != "filter":
                diffs.append(FieldDiff(f"filter.{path}", "filter",
                                       field.get("type") if field else None))
        for path in sorted(set(got) - {"embedding", *SEARCH_FILTER_FIELDS}):
            diffs.append(FieldDiff(f"fields.{path}", None, _plain(got[path])))
        for option in sorted(set(actual_definition) - {"fields"}):
            diffs.append(FieldDiff(option, None, _plain(actual_definition[option])))
        return diffs
    want_map = (expected.definition or {}).get("mappings", {})
    got_map = actual_definition.get("mappings") or {}
    if bool(got_map.get("dynamic", False)) != bool(want_map.get("dynamic", False)):
        diffs.append(FieldDiff("mappings.dynamic", want_map.get("dynamic", False),
                               got_map.get("dynamic", False)))
    want_fields = want_map.get("fields") or {}
    got_fields = got_map.get("fields") or {}
    for path, spec in want_fields.items():
        got_field = got_fields.get(path)
        got_types = _types(got_field)
        if spec["type"] not in got_types:
            diffs.append(FieldDiff(f"mappings.fields.{path}.type", spec["type"],
                                   (got_types[0] if len(got_types) == 1 else got_types) or None))
    for path in sorted(set(got_fields) - set(want_fields)):
        diffs.append(FieldDiff(f"mappings.fields.{path}", None, _plain(got_fields[path])))
    for option in sorted(set(actual_definition) - {"mappings"}):
        if _SEARCH_DEFAULTS.get(option, object()) != actual_definition[option]:
            diffs.append(FieldDiff(option, None, _plain(actual_definition[option])))
    for option in sorted(set(got_map) - {"dynamic", "fields"}):
        diffs.append(FieldDiff(f"mappings.{option}", None, _plain(got_map[option])))
    return diffs


def _types(field: Any) -> list[str]:
    if field is None:
        return []
    if isinstance(field, Mapping):
        return [str(field.get("type"))]
    if isinstance(field, (list, tuple)):
        return [str(f.get("type")) for f in field if isinstance(f, Mapping)]
    return []


def search_readiness(actual: Mapping[str, Any]) -> tuple[str, str]:
    """(status, detail) for a listed search index: ready means status READY AND queryable."""
    status = str(actual.get("status") or "UNKNOWN")
    queryable = bool(actual.get("queryable", False))
    if status == "READY" and queryable:
        return "ok", ""
    if status in ("FAILED", "DOES_NOT_EXIST", "DELETING"):
        return "drift", f"status {status}"
    return "pending", f"status {status}, queryable {str(queryable).lower()}"
