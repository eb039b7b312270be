"""Opt-in (marker `engine`): a deletion certificate made by the deployed engine's own
erasure (semvec 0.8.9's compliance ``forget_user``, signed with an Ed25519 compliance key)
is recorded with ``erasures record --certificate``, checked with the engine's public key,
and a later import of a backup taken before the erasure withholds the subject's events
while the other subject's flow. Skipped unless the proprietary engine is importable (never
a dependency; a scratch environment only). Real redis-server from the suite, written by
the engine's own Redis adapter."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from semvecctl.app import app

pytestmark = pytest.mark.engine

pytest.importorskip("semvec", reason="the semvec engine is not installed")

from tests.backends.redis.test_engine_interop_redis import engine  # noqa: E402,F401


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _compliance_key(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = tmp_path / "compliance.pub"
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


@pytest.mark.redis
def test_the_engines_certificate_is_recorded_and_withholds_the_subject(engine, redis_url,
                                                                        tmp_path):
    from semvec.api.owner_scope import OwnerScope
    from semvec.compliance.audit import InMemoryAuditLog
    from semvec.compliance.certificates import verify_certificate
    from semvec.compliance.event_store import MemoryEvent as EngineEvent
    from semvec.compliance.retention import forget_user

    tag = uuid.uuid4().hex[:8]
    alice, bob, session = f"{tag}-alice", f"{tag}-bob", f"{tag}-shared"
    acme = OwnerScope("acme")
    earlier = datetime.now(timezone.utc) - timedelta(minutes=5)

    def event(user: str, content: str, n: int) -> EngineEvent:
        return EngineEvent(event_id=uuid.uuid4(), user_id=user, content=content,
                           created_at=earlier + timedelta(seconds=n), embedding=[0.5, -0.25],
                           owner_subject="acme", session_id=session)

    engine.commit_turn(session, b"blended", expected_version=None, scope=acme,
                       events=[event(alice, "alice secret", 0), event(bob, "bob says hi", 1),
                               event(alice, "alice again", 2)])
    backup = tmp_path / "before.jsonl"
    exported = invoke("sessions", "export", "--uri", redis_url, "--with-events", "--match",
                      f"{tag}-*", "--out", str(backup))
    assert exported.exit_code == 0, exported.output
    alice_ids = sorted(str(e.event_id) for e in engine.event_store().list_by_user(alice))
    assert len(alice_ids) == 2

    private, public = _compliance_key(tmp_path)
    cert = forget_user(user_id=alice, store=engine.event_store(), audit_log=InMemoryAuditLog(),
                       priv_pem=private, issuer="acme", scope=acme)
    assert cert.event_count == 2 and verify_certificate(cert, pub_pem=public.read_bytes())
    assert engine.event_store().list_by_user(alice) == []
    (tmp_path / "forget.json").write_text(json.dumps(cert.to_dict()))

    recorded = invoke("erasures", "record", "--certificate", str(tmp_path / "forget.json"),
                      "--owner", "acme", "--verify-with", str(public), "--uri", redis_url,
                      "-o", "json")
    assert recorded.exit_code == 0, recorded.output
    assert json.loads(recorded.stdout)["event_count"] == 2
    check = invoke("erasures", "check", "--user", alice, "--owner", "acme", "--uri", redis_url)
    assert check.exit_code == 0, check.output

    again = invoke("sessions", "import", str(backup), "--uri", redis_url, "--on-conflict",
                   "skip", "--apply", "--yes", "-o", "json")
    assert again.exit_code == 0, again.output
    assert sorted(json.loads(again.stdout)["withheld"]["event_ids"]) == alice_ids
    assert engine.event_store().list_by_user(alice) == []
    assert [e.content for e in engine.event_store().list_by_user(bob)] == ["bob says hi"]
