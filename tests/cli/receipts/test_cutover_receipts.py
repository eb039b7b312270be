"""``--sign-with`` on ``migrate cutover`` (real Redis -> real PostgreSQL): the receipt is
signed and verifies; a bad key is refused (exit 2) before the stores are opened, so no
final pass runs and no receipt is written."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from backends.contract import MemoryEvent
from semvecctl.app import app

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


def cli(*args):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def migrated(redis_url, pgvector_url, tmp_path):
    from backends.redis import RedisBackendAdapter

    source = RedisBackendAdapter(redis_url)
    try:
        for i in range(3):
            event = MemoryEvent(event_id=str(uuid.uuid4()), user_id="u", content=f"turn {i}",
                                session_id=f"chat-{i}", owner_subject="acme", meta={})
            source.commit_turn(f"chat-{i}", b"x%d" % i, expected_version=None,
                               owner_subject="acme", events=[event])
    finally:
        source.close()
    state = str(tmp_path / "m.state")
    pair = ["--from", redis_url, "--to", pgvector_url]
    ran = cli("migrate", "run", *pair, "--state", state, "--allow-loss", "--apply", "--yes")
    assert ran.exit_code == 0, ran.output
    return pair, state


def _key(directory, mode=0o600):
    private = Ed25519PrivateKey.generate()
    key, pub = directory / "key", directory / "key.pub"
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                          serialization.NoEncryption()))
    os.chmod(key, mode)
    pub.write_bytes(private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                      serialization.PublicFormat.OpenSSH))
    return key, pub


def test_a_signed_migration_receipt_verifies(migrated, tmp_path):
    pair, state = migrated
    key, pub = _key(tmp_path)
    receipt = tmp_path / "r.json"
    cut = cli("migrate", "cutover", *pair, "--state", state, "--quiet-window", "0.1",
              "--receipt", str(receipt), "--sign-with", str(key), "--apply", "--yes")
    assert cut.exit_code == 0, cut.output
    assert (tmp_path / "r.json.sig").exists()
    verified = cli("receipts", "verify", str(receipt), "--key", str(pub))
    assert verified.exit_code == 0 and verified.stdout.startswith("valid: signed by SHA256:")
    receipt.write_bytes(receipt.read_bytes().replace(b"true", b"fals", 1))
    assert cli("receipts", "verify", str(receipt), "--key", str(pub)).exit_code == 1


def test_a_too_open_key_stops_the_cutover_before_it_starts(migrated, tmp_path):
    pair, state = migrated
    key, _ = _key(tmp_path, mode=0o640)
    receipt = tmp_path / "r.json"
    before = open(state, "rb").read()
    cut = cli("migrate", "cutover", *pair, "--state", state, "--quiet-window", "0.1",
              "--receipt", str(receipt), "--sign-with", str(key), "--apply", "--yes")
    assert cut.exit_code == 2 and "permissions 0640" in cut.stderr and "chmod 600" in cut.stderr
    assert not receipt.exists() and open(state, "rb").read() == before


def test_sign_with_needs_an_explicit_receipt(migrated, tmp_path):
    pair, state = migrated
    key, _ = _key(tmp_path)
    cut = cli("migrate", "cutover", *pair, "--state", state, "--sign-with", str(key), "--apply", "--yes")
    assert cut.exit_code == 2 and "--sign-with needs --receipt FILE" in cut.stderr
    shards = cli("shards", "cutover", "--to-shards", "postgresql://x/a", "--state", state,
                 "--backend", "postgres", "--uri", "postgresql://x/b", "--sign-with", str(key))
    assert shards.exit_code == 2 and "--sign-with needs --receipt FILE" in shards.stderr


def test_a_signed_reshard_receipt_verifies(sharded_sql, tmp_path):
    from tests.backends.postgres.test_reshard import deployment
    from tests.backends.postgres.test_reshard import seed as seed_shards

    three = sharded_sql.make(3)
    old, new = three.shards[:2], three.shards
    writer = deployment("postgres", three.primary, old)
    try:
        seed_shards(writer, 20)
    finally:
        writer.close()

    def shards(*args):
        return cli("--shards", ",".join(old), "shards", *args, "--to-shards", ",".join(new),
                   "--state", str(tmp_path / "g.state"), "--uri", three.primary)

    assert shards("run", "--apply", "--yes").exit_code == 0
    key, pub = _key(tmp_path)
    receipt = tmp_path / "r.json"
    cut = shards("cutover", "--quiet-window", "0", "--receipt", str(receipt), "--sign-with",
                 str(key), "--apply", "--yes")
    assert cut.exit_code == 0, cut.output
    verified = cli("receipts", "verify", str(receipt), "--key", str(pub))
    assert verified.exit_code == 0, verified.output
