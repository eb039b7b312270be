"""Property-based: URI parsing and redaction, and backend-name folding, on hostile input.

``backend_for_uri`` answers a backend or raises InvalidURI (never anything else);
``redact_uri`` never raises and never shows a password, whatever characters the password
holds (even unencoded ``/``, ``?``, ``#`` or ``@``); ``scrub`` removes it from any text;
``fold_name`` never raises and ignores case and separators.
"""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.registry import fold_name
from backends.redaction import redact_uri, scrub
from backends.selection import InvalidURI, SCHEME_BACKENDS, backend_for_uri

FAST = settings(max_examples=int(__import__("os").environ.get("SEMVEC_HYPOTHESIS_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

schemes = st.sampled_from(sorted(SCHEME_BACKENDS) + ["http", "redis+cluster", "", "REDIS"])
hosts = st.sampled_from(["localhost", "127.0.0.1", "db.example.net", "[::1]", "", "h_1",
                         "host,other:27017"])
ports = st.one_of(st.just(""), st.integers(min_value=-5, max_value=70000).map(lambda p: f":{p}"),
                  st.just(":abc"))
users = st.text(alphabet=string.ascii_letters + string.digits + "._-%", max_size=8)
#: passwords with every kind of character, but a marker so they cannot occur by chance
passwords = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=16).map(
    lambda body: f"Zq7{body}X9k")
tails = st.sampled_from(["", "/0", "/semvec", "/db?authSource=admin", "?ssl=true",
                         "/0?password=leak", "#frag", "/x?a=1&b=2"])


@st.composite
def credential_uris(draw):
    scheme = draw(schemes)
    user = draw(users)
    password = draw(passwords)
    userinfo = f"{user}:{password}" if draw(st.booleans()) or scheme not in ("redis", "rediss") \
        else password
    uri = f"{scheme}://{userinfo}@{draw(hosts)}{draw(ports)}{draw(tails)}"
    return uri, password


def printable(password: str) -> str:
    """What of a password survives URL parsing (tabs and newlines are dropped by it)."""
    return password.replace("\t", "").replace("\n", "").replace("\r", "")


@FAST
@given(st.text(max_size=80))
def test_backend_for_uri_answers_or_refuses_clearly(text):
    try:
        backend = backend_for_uri(text)
    except InvalidURI as exc:
        assert str(exc) and "\n" not in str(exc)  # one line, the URI shown by repr
        return
    assert backend in set(SCHEME_BACKENDS.values())


@FAST
@given(credential_uris())
def test_backend_for_uri_never_echoes_a_password(case):
    uri, password = case
    try:
        backend_for_uri(uri)
    except InvalidURI as exc:
        assert password not in str(exc) and printable(password) not in str(exc)


@FAST
@given(st.text(max_size=120))
def test_redact_uri_never_raises(text):
    assert isinstance(redact_uri(text), str)


@FAST
@given(credential_uris())
def test_redact_uri_never_shows_the_password(case):
    uri, password = case
    shown = redact_uri(uri)
    assert password not in shown and printable(password) not in shown, shown


@FAST
@given(credential_uris(), st.text(max_size=30))
def test_scrub_removes_the_password_from_any_text(case, noise):
    uri, password = case
    text = f"{noise} connecting to {uri} failed; password={password} {noise}"
    cleaned = scrub(text, uri)
    assert password not in cleaned and printable(password) not in cleaned, cleaned


@FAST
@given(st.text(max_size=40))
def test_fold_name_never_raises_and_is_idempotent(name):
    folded = fold_name(name)
    assert fold_name(folded) == folded
    assert not any(ch in folded for ch in "-_.")


ascii_names = st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=12)


@FAST
@given(ascii_names, st.lists(st.sampled_from("-_."), max_size=4), st.data())
def test_fold_name_ignores_case_separators_and_surrounding_space(name, seps, data):
    decorated = name
    for sep in seps:
        at = data.draw(st.integers(min_value=0, max_value=len(decorated)))
        decorated = decorated[:at] + sep + decorated[at:]
    decorated = data.draw(st.sampled_from(["", " ", "\t"])) + decorated.swapcase() + " "
    assert fold_name(decorated) == fold_name(name) == name.lower()


@FAST
@given(st.text(max_size=30))
def test_registry_resolution_of_any_name_answers_or_refuses(name):
    from backends.errors import BackendError
    from backends.registry import Registry

    try:
        resolution = Registry().resolve(name)
    except (BackendError, RuntimeError, ValueError, TypeError) as exc:
        assert str(exc)
        return
    assert resolution is not None


def test_a_seed_list_or_a_sentinel_list_names_several_hosts_and_each_port_is_checked():
    """A replica set's seed list and a Sentinel's sentinels are one URI with several hosts;
    a URI of any other scheme names one host, and a bad port anywhere in a list refuses."""
    import pytest

    from backends.redis.config import parse_sentinel_url

    assert backend_for_uri("mongodb://a:27017,b:27018/db?replicaSet=rs0") == "mongo"
    assert backend_for_uri("redis+sentinel://s1:26379,s2/mymaster/2") == "redis"
    target = parse_sentinel_url("rediss+sentinel://u:p%40ss@s1:26379,s2/mymaster/2")
    assert target.sentinels == (("s1", 26379), ("s2", 26379))
    assert (target.service, target.db, target.username, target.password, target.tls) == (
        "mymaster", 2, "u", "p@ss", True)
    for bad in ("mongodb://a:1,b:x/db", "redis://a:1,b:2/0", "redis+sentinel://a:1,b:99999/m"):
        with pytest.raises(InvalidURI, match="the port is not a number"):
            backend_for_uri(bad)
