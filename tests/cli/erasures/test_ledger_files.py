"""The ledger beyond one store, on the suite's real Redis and PostgreSQL (one database, and
a primary with 3 shards: one deployment) and on MongoDB through mongomock (the suite's
double: no real MongoDB runs here; it evaluates no ``$$NOW``, so there the process clock
answers).

- every store has one identity, made once and kept with its ledger (on the primary of a
  sharded deployment); its ledger state is held by the store that showed it and by no
  other (``holds_ledger``), and a later erasure keeps it held;
- ``erase`` records the keyed hashes of the subject's sessions, at the store's clock, and
  its receipt says how far the erasing machine's clock was from the store's;
- ``erasures export`` / ``import`` move a ledger (signed with ``--sign-with``, verified
  with ``--verify-with``; the file atomic and 0600, replaced only with ``--overwrite``),
  the import a union (twice adds nothing), a damaged or wrongly signed file records
  nothing; the fresh store then withholds the subject;
- ``erasures record --certificate`` records an erasure the engine made (a certificate
  signed as the engine signs them: Ed25519 over its canonical JSON), and a later import
  withholds the subject's older events.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import datetime, timedelta, timezone

import pytest

from backends.contract.ledger import LedgerState, holds_ledger, ledger_state, session_digest, store_identity
from tests.cli.sessions.test_erasure_ledger import _fresh, _main, _withheld, invoke
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import BACKENDS, seed

BACKENDS_HERE = [p for p in BACKENDS if getattr(p, "values", (p,))[0] != "pgvector"]  # pgvector: postgres' ledger


@pytest.fixture(params=BACKENDS_HERE)
def kind(request):
    return request.param


def _erase(main, s, tmp_path, name="r.json"):
    result = invoke("erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                    "--receipt", str(tmp_path / name), *main.target_args())
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / name).read_text())


def _keypair(tmp_path):
    """An Ed25519 key as ssh-keygen writes it (private 0600, public one line), and PEMs."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private, public = tmp_path / "ledger_key", tmp_path / "ledger_key.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.OpenSSH,
                                          serialization.NoEncryption()))
    private.chmod(0o600)
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                     serialization.PublicFormat.OpenSSH))
    return key, private, public


def test_identity_is_made_once_kept_with_the_ledger_and_names_the_state(kind, request, tmp_path):
    target, main = _main(request, kind)
    s = seed(main.adapter)
    shown = invoke("erasures", "identity", *main.target_args(), "-o", "json")
    assert shown.exit_code == 0, shown.output
    first = json.loads(shown.stdout)
    assert first["identity"].startswith("semvec-store-") and first["ledger"]["entries"] == 0
    again = json.loads(invoke("erasures", "identity", *main.target_args(), "-o", "json").stdout)
    assert again["identity"] == first["identity"] and again["created_at"] == first["created_at"]
    assert store_identity(main.adapter).identity == first["identity"]
    if main.shards:  # one identity for the deployment, on the primary only
        kept = {k for k in main.dump() if k.startswith("semvecctl_erasure_store:")}
        assert len(kept) == 1 and all(k.endswith(" @db0") for k in kept)

    before = ledger_state(main.adapter)
    _erase(main, s, tmp_path)
    state = ledger_state(main.adapter)
    assert (state.entries, state.seq) == (1, before.seq + 1)
    shown = json.loads(invoke("erasures", "identity", *main.target_args(), "-o", "json").stdout)
    assert shown["ledger"] == state.as_dict() and shown["identity"] == first["identity"]
    identity = first["identity"]
    assert holds_ledger(main.adapter, identity, state)
    assert holds_ledger(main.adapter, identity, before)  # an older state is held too
    fresh = _fresh(request, kind, 1)
    assert not holds_ledger(fresh.adapter, identity, state)  # an empty store
    assert store_identity(fresh.adapter, create=False) is None  # the question made none
    moved = tmp_path / "ledger.json"
    assert invoke("erasures", "export", str(moved), *main.target_args()).exit_code == 0
    assert invoke("erasures", "import", str(moved), *fresh.target_args()).exit_code == 0
    assert not holds_ledger(fresh.adapter, identity, state)  # the entries, not the store
    # a state the store never showed (a store rolled back would show fewer entries)
    assert not holds_ledger(main.adapter, identity, LedgerState(state.entries + 1, state.seq + 1,
                                                                "0" * 64))
    assert not holds_ledger(main.adapter, identity, state._replace(digest="f" * 64))


def test_erase_records_its_sessions_at_the_store_clock(kind, request, tmp_path):
    target, main = _main(request, kind)
    s = seed(main.adapter)
    receipt = _erase(main, s, tmp_path)
    clock = receipt["clock"]
    assert clock["source"] == "store" and clock["margin_seconds"] == 5.0
    assert abs(clock["skew_seconds"]) < 5 and clock["round_trip_seconds"] >= 0
    ledger = main.adapter.erasure_ledger()
    [entry] = ledger.entries()
    [own] = [k for k in ledger.keys() if k.own]
    assert entry.sessions == (session_digest(own.secret, s.s1),)  # keyed, never the id
    assert entry.seq >= 1
    [row] = json.loads(invoke("erasures", "list", *main.target_args(), "-o", "json").stdout)
    assert (row["sessions"], row["position"]) == (1, entry.seq)
    store_time = datetime.fromisoformat(clock["store_time"])
    assert entry.erased_at == store_time
    assert receipt["erased_at"] == store_time.isoformat(timespec="seconds").replace("+00:00", "Z")
    assert abs(entry.erased_at - datetime.now(timezone.utc)) < timedelta(seconds=30)
    raw = json.dumps({k: repr(v) for k, v in main.dump().items() if "erasure" in k or "ledger" in k})
    assert s.s1 not in raw and s.alice not in raw


def test_export_and_import_move_the_ledger_signed_and_verified(kind, request, tmp_path):
    target, main = _main(request, kind)
    s = seed(main.adapter)
    backup = tmp_path / "before.jsonl"
    assert invoke("sessions", "export", *main.target_args(), "--with-events",
                  "--out", str(backup)).exit_code == 0
    # an archive without events: tied to no subject, but to the erased session's id
    _erase(main, s, tmp_path)
    _key, private, public = _keypair(tmp_path)
    moved = tmp_path / "ledger.json"
    exported = invoke("erasures", "export", str(moved), *main.target_args(), "--sign-with",
                      str(private), "-o", "json")
    assert exported.exit_code == 0, exported.output
    assert json.loads(exported.stdout)["entries"] == 1
    assert os.stat(moved).st_mode & 0o777 == 0o600 and (tmp_path / "ledger.json.sig").exists()
    document = json.loads(moved.read_text())
    assert s.alice not in moved.read_text() and s.s1 not in moved.read_text()
    assert document["store"]["identity"] == store_identity(main.adapter).identity
    assert document["state"] == ledger_state(main.adapter).as_dict()
    again = invoke("erasures", "export", str(moved), *main.target_args())
    assert again.exit_code == 2 and "--overwrite" in again.stderr and "Traceback" not in again.output

    fresh = _fresh(request, kind, 1)
    tampered = tmp_path / "tampered.json"
    tampered.write_text(moved.read_text().replace(document["entries"][0]["digest"], "0" * 64))
    (tmp_path / "tampered.json.sig").write_bytes((tmp_path / "ledger.json.sig").read_bytes())
    refused = invoke("erasures", "import", str(tampered), *fresh.target_args(), "--verify-with",
                     str(public))
    assert refused.exit_code == 1 and "nothing was recorded" in refused.stderr
    damaged = invoke("erasures", "import", str(tampered), *fresh.target_args())
    assert damaged.exit_code == 1 and "ledger state" in damaged.stderr  # unsigned path checks too
    assert fresh.adapter.erasure_ledger().entries() == []

    imported = invoke("erasures", "import", str(moved), *fresh.target_args(), "--verify-with",
                      str(public), "-o", "json")
    assert imported.exit_code == 0, imported.output
    summary = json.loads(imported.stdout)
    assert (summary["added"], summary["already_held"]) == (1, 0)
    twice = json.loads(invoke("erasures", "import", str(moved), *fresh.target_args(),
                              "-o", "json").stdout)
    assert (twice["added"], twice["updated"], twice["already_held"]) == (0, 0, 1)
    assert twice["state"] == summary["state"]
    check = invoke("erasures", "check", "--user", s.alice, "--owner", "acme", *fresh.target_args())
    assert check.exit_code == 0, check.output
    [entry] = fresh.adapter.erasure_ledger().entries()
    assert entry.sessions == tuple(document["entries"][0]["sessions"])
    # the fresh store now withholds the subject from the pre-erasure backup
    restored = invoke("sessions", "import", str(backup), *fresh.target_args(), "--apply", "--yes",
                      "-o", "json")
    assert restored.exit_code == 0, restored.output
    assert _withheld(json.loads(restored.stdout)) == ([s.s1], sorted(s.alice_ids[:3]))
    assert len(fresh.adapter.event_store().list_events(s.bob)) == 2


def test_a_ledger_file_that_is_not_one_records_nothing(tmp_path):
    for name, text in (("a.json", "not json"), ("b.json", json.dumps({"kind": "other"})),
                       ("c.json", json.dumps({"kind": "semvecctl-erasure-ledger", "version": 9}))):
        (tmp_path / name).write_text(text)
        result = invoke("erasures", "import", str(tmp_path / name), "--uri", "memory://")
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    missing = invoke("erasures", "import", str(tmp_path / "none.json"), "--uri", "memory://")
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    (tmp_path / "d.json.gz").write_bytes(b"\x1f\x8bnot gzip")
    broken = invoke("erasures", "import", str(tmp_path / "d.json.gz"), "--uri", "memory://")
    assert broken.exit_code == 1 and "Traceback" not in broken.output, broken.output


def test_a_ledger_exported_to_a_gz_name_reads_back(tmp_path):
    from backends.memory import MemoryBackendAdapter
    from backends.ops.ledger import export_ledger, read_ledger_file, record_subject

    adapter = MemoryBackendAdapter()
    record_subject(adapter, "u1", "acme", sessions=["s1"], receipt=None)
    export_ledger(adapter, str(tmp_path / "ledger.json.gz"))
    assert (tmp_path / "ledger.json.gz").read_bytes()[:2] == b"\x1f\x8b"
    found = read_ledger_file(str(tmp_path / "ledger.json.gz"))
    assert found.state == ledger_state(adapter) and len(found.entries) == 1


# -- the engine's erasures ------------------------------------------------------------------


def engine_certificate(key, user_id: str, deleted_at: datetime, count: int) -> dict:
    """A deletion certificate as the engine signs one (ENGINE-WIRE §9): Ed25519 over the
    canonical JSON of its five fields (sorted keys, no spaces, not ASCII-escaped)."""
    body = {"user_id": user_id, "event_count": count, "deleted_at": deleted_at.isoformat(),
            "reason": "user_request", "issuer": "acme"}
    payload = json.dumps(body, sort_keys=True, separators=(",", ":"),
                         ensure_ascii=False).encode("utf-8")
    return {**body, "signature_b64": base64.b64encode(key.sign(payload)).decode("ascii")}


def _pem(key, path):
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo))
    return path


def test_record_adds_the_engines_erasure_and_an_import_withholds_it(kind, request, tmp_path):
    target, main = _main(request, kind)
    s = seed(main.adapter)
    backup = tmp_path / "before.jsonl"
    assert invoke("sessions", "export", *main.target_args(), "--with-events",
                  "--out", str(backup)).exit_code == 0
    key, _private, _public = _keypair(tmp_path)
    pem = _pem(key, tmp_path / "compliance.pub")
    # the engine erased alice-of-acme's events (by id: as its forget does)
    for event_id in s.alice_ids[:3]:
        main.adapter.event_store().delete_event(event_id)
    cert = engine_certificate(key, s.alice, datetime.now(timezone.utc), 3)
    (tmp_path / "cert.json").write_text(json.dumps(cert))
    no_owner = invoke("erasures", "record", "--certificate", str(tmp_path / "cert.json"),
                      *main.target_args())
    assert no_owner.exit_code == 2 and "--owner" in no_owner.stderr
    forged = dict(cert, event_count=4)
    (tmp_path / "forged.json").write_text(json.dumps({"certificate": forged}))
    refused = invoke("erasures", "record", "--certificate", str(tmp_path / "forged.json"),
                     "--owner", "acme", "--verify-with", str(pem), *main.target_args())
    assert refused.exit_code == 1 and "signature does not match" in refused.stderr
    assert main.adapter.erasure_ledger().entries() == []
    recorded = invoke("erasures", "record", "--certificate", str(tmp_path / "cert.json"),
                      "--owner", "acme", "--verify-with", str(pem), *main.target_args(),
                      "-o", "json")
    assert recorded.exit_code == 0, recorded.output
    summary = json.loads(recorded.stdout)
    signature = base64.b64decode(cert["signature_b64"])
    import hashlib

    assert summary["receipt"] == f"certificate:sha256:{hashlib.sha256(signature).hexdigest()}"
    assert summary["recorded"] is True and summary["event_count"] == 3
    check = invoke("erasures", "check", "--user", s.alice, "--owner", "acme",
                   *main.target_args(), "-o", "json")
    assert check.exit_code == 0 and json.loads(check.stdout)["receipt"] == summary["receipt"]
    twice = invoke("erasures", "record", "--certificate", str(tmp_path / "cert.json"),
                   "--owner", "acme", *main.target_args(), "-o", "json")
    assert twice.exit_code == 0 and json.loads(twice.stdout)["recorded"] is False
    assert len(main.adapter.erasure_ledger().entries()) == 1
    # the older backup imported again: her events are withheld, bob's and s2's flow
    again = invoke("sessions", "import", str(backup), *main.target_args(), "--on-conflict",
                   "skip", "--apply", "--yes", "-o", "json")
    assert again.exit_code == 0, again.output
    assert _withheld(json.loads(again.stdout))[1] == sorted(s.alice_ids[:3])
    assert {e.event_id for e in main.adapter.event_store().list_events(
        s.alice, owner_subject="acme")} == set()
