"""Signed receipts: ``--sign-with KEY`` on ``erase --apply --receipt`` writes RECEIPT.sig;
``receipts verify FILE --key PUB`` says valid (0), invalid (1) or unsigned (1). On the
suite's real Redis with the erase seed (tests/support/maintenance.py). A bad key is refused
(exit 2) before the store is opened: nothing is erased."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.maintenance import make_target, seed

pytestmark = pytest.mark.redis


def run(*args: str, env=None):
    return CliRunner().invoke(app, list(args), env=env)


@pytest.fixture
def target(request):
    return make_target(request, "redis")


def _keypair(directory, name="key", fmt=serialization.PrivateFormat.OpenSSH, mode=0o600,
             encryption=None):
    private = Ed25519PrivateKey.generate()
    key = directory / name
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, fmt,
                                          encryption or serialization.NoEncryption()))
    os.chmod(key, mode)
    pub = directory / f"{name}.pub"
    pub.write_bytes(private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                      serialization.PublicFormat.OpenSSH) + b" test\n")
    return key, pub


def _erase(target, s, receipt, *extra):
    return run("erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
               "--receipt", str(receipt), *extra, *target.args)


def _events_left(target, s):
    return len(target.adapter.event_store().list_events(s.alice, owner_subject="acme"))


@pytest.fixture
def signed(target, tmp_path):
    s = seed(target.adapter)
    key, pub = _keypair(tmp_path)
    receipt = tmp_path / "receipt.json"
    result = _erase(target, s, receipt, "--sign-with", str(key))
    assert result.exit_code == 0, result.output
    assert "signed the receipt with SHA256:" in result.stderr
    return receipt, pub


def test_a_signed_erase_receipt_verifies(signed):
    receipt, pub = signed
    record = json.loads((receipt.parent / "receipt.json.sig").read_text())
    assert record["algorithm"] == "ed25519" and record["key_id"].startswith("SHA256:")
    assert "=" not in record["key_id"]
    result = run("receipts", "verify", str(receipt), "--key", str(pub))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"valid: signed by {record['key_id']}"
    assert "digest recomputed: matches" in result.stderr
    as_json = json.loads(run("receipts", "verify", str(receipt), "--key", str(pub), "-o", "json").stdout)
    assert as_json["status"] == "valid" and as_json["key_id"] == record["key_id"]


@pytest.mark.parametrize("where", [0, 1, 57, -2, -1])
def test_one_changed_byte_anywhere_makes_the_receipt_invalid(signed, where):
    receipt, pub = signed
    data = bytearray(receipt.read_bytes())
    data[where] ^= 0x01
    receipt.write_bytes(bytes(data))
    result = run("receipts", "verify", str(receipt), "--key", str(pub))
    assert result.exit_code == 1
    assert result.stdout.startswith("invalid: ")


def test_a_resigned_edit_of_the_ids_fails_the_digest(signed, tmp_path):
    """Re-signing an edited receipt makes its signature match, but not its digest."""
    from backends.ops.signing import load_signing_key, sign_receipt

    receipt, _ = signed
    body = json.loads(receipt.read_text())
    body["event_ids"][0] = "forged"
    receipt.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    key, pub = _keypair(tmp_path, "other")
    sign_receipt(str(receipt), load_signing_key(str(key)))
    result = run("receipts", "verify", str(receipt), "--key", str(pub))
    assert result.exit_code == 1
    assert result.stdout.startswith("invalid: the digest over the removed ids")


def test_another_key_is_invalid(signed, tmp_path):
    receipt, _ = signed
    _, other = _keypair(tmp_path, "other")
    result = run("receipts", "verify", str(receipt), "--key", str(other))
    assert result.exit_code == 1
    assert result.stdout.startswith("invalid: signed by SHA256:")


def test_an_unsigned_receipt_is_reported_unsigned(target, tmp_path):
    s = seed(target.adapter)
    _, pub = _keypair(tmp_path)
    receipt = tmp_path / "receipt.json"
    assert _erase(target, s, receipt).exit_code == 0
    result = run("receipts", "verify", str(receipt), "--key", str(pub))
    assert result.exit_code == 1
    assert result.stdout.strip() == f"unsigned: no {receipt}.sig"
    no_key = run("receipts", "verify", str(receipt), "--key", str(tmp_path / "absent.pub"))
    assert no_key.exit_code == 1 and no_key.stdout.startswith("unsigned: ")  # the key is not read


@pytest.mark.parametrize("problem", ["mode-0644", "missing", "encrypted-pkcs8", "not-a-key"])
def test_a_bad_key_is_refused_before_anything_is_erased(target, tmp_path, problem):
    s = seed(target.adapter)
    before = target.dump()
    if problem == "mode-0644":
        key, _ = _keypair(tmp_path, mode=0o644)
        expected = f"permissions 0644 for {key} are too open"
    elif problem == "missing":
        key, expected = tmp_path / "nope", "no such key file"
    elif problem == "encrypted-pkcs8":
        key, _ = _keypair(tmp_path, fmt=serialization.PrivateFormat.PKCS8,
                          encryption=serialization.BestAvailableEncryption(b"pass"))
        expected = "is an encrypted private key"
    else:
        key = tmp_path / "junk"
        key.write_text("not a key\n")
        os.chmod(key, 0o600)
        expected = "is not an OpenSSH or PKCS8 PEM private key"
    receipt = tmp_path / "receipt.json"
    result = _erase(target, s, receipt, "--sign-with", str(key))
    assert result.exit_code == 2, result.output
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert target.dump() == before and _events_left(target, s) == 3
    assert not receipt.exists() and not (tmp_path / "receipt.json.journal").exists()


def test_sign_with_without_receipt_is_a_usage_error(target, tmp_path):
    s = seed(target.adapter)
    key, _ = _keypair(tmp_path)
    result = run("erase", "--user", s.alice, "--owner", "acme", "--sign-with", str(key),
                 *target.args)
    assert result.exit_code == 2
    assert "--sign-with needs --receipt FILE" in result.stderr


def test_a_pkcs8_pem_key_signs_and_a_pem_public_key_verifies(target, tmp_path):
    s = seed(target.adapter)
    key, _ = _keypair(tmp_path, fmt=serialization.PrivateFormat.PKCS8)
    private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    pem = tmp_path / "pub.pem"
    pem.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
    receipt = tmp_path / "receipt.json"
    assert _erase(target, s, receipt, "--sign-with", str(key)).exit_code == 0
    result = run("receipts", "verify", str(receipt), "--key", str(pem))
    assert result.exit_code == 0, result.output


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not on PATH")
def test_an_ssh_keygen_key_signs_and_its_fingerprint_is_the_key_id(target, tmp_path):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    fingerprint = subprocess.run(["ssh-keygen", "-l", "-f", f"{key}.pub"], check=True,
                                 capture_output=True, text=True).stdout.split()[1]
    s = seed(target.adapter)
    receipt = tmp_path / "receipt.json"
    assert _erase(target, s, receipt, "--sign-with", str(key)).exit_code == 0
    assert json.loads((tmp_path / "receipt.json.sig").read_text())["key_id"] == fingerprint
    result = run("receipts", "verify", str(receipt), "--key", f"{key}.pub")
    assert result.exit_code == 0 and result.stdout.strip() == f"valid: signed by {fingerprint}"


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not on PATH")
def test_an_encrypted_openssh_key_is_refused(target, tmp_path):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret-pass", "-f", str(key)],
                   check=True)
    s = seed(target.adapter)
    result = _erase(target, s, tmp_path / "receipt.json", "--sign-with", str(key))
    assert result.exit_code == 2 and "is an encrypted private key" in result.stderr
    assert "secret-pass" not in result.output and _events_left(target, s) == 3


def test_without_cryptography_signing_asks_for_the_extra(monkeypatch, tmp_path):
    import backends.ops.signing as signing

    monkeypatch.setattr(signing, "available", lambda: False)
    receipt = tmp_path / "r.json"
    receipt.write_text("{}\n")
    result = run("receipts", "verify", str(receipt), "--key", str(tmp_path / "k.pub"))
    assert result.exit_code == 3
    assert "pip install 'semvecctl[signing]'" in result.stderr


def test_without_cryptography_sign_with_stops_before_erasing(target, monkeypatch, tmp_path):
    import backends.ops.signing as signing

    s = seed(target.adapter)
    key, _ = _keypair(tmp_path)
    monkeypatch.setattr(signing, "available", lambda: False)
    result = _erase(target, s, tmp_path / "receipt.json", "--sign-with", str(key))
    assert result.exit_code == 3 and "pip install 'semvecctl[signing]'" in result.stderr
    assert _events_left(target, s) == 3 and not (tmp_path / "receipt.json").exists()


def test_an_rsa_key_is_refused(target, tmp_path):
    from cryptography.hazmat.primitives.asymmetric import rsa

    s = seed(target.adapter)
    key = tmp_path / "rsa"
    key.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    os.chmod(key, 0o600)
    result = _erase(target, s, tmp_path / "receipt.json", "--sign-with", str(key))
    assert result.exit_code == 2 and "is not an Ed25519 key" in result.stderr
    assert _events_left(target, s) == 3


def test_a_damaged_signature_file_is_invalid(signed):
    receipt, pub = signed
    sig = receipt.parent / "receipt.json.sig"
    sig.write_text("{not json")
    result = run("receipts", "verify", str(receipt), "--key", str(pub))
    assert result.exit_code == 1 and result.stdout.startswith("invalid: ")
    record = {"algorithm": "ed25519", "key_id": "x", "sha256": "y", "signature": "z"}
    sig.write_text(json.dumps(record))
    assert run("receipts", "verify", str(receipt), "--key", str(pub)).exit_code == 1


def test_a_missing_receipt_or_public_key_is_a_usage_error(signed, tmp_path):
    receipt, pub = signed
    missing = run("receipts", "verify", str(tmp_path / "nope.json"), "--key", str(pub))
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    no_key = run("receipts", "verify", str(receipt), "--key", str(tmp_path / "nope.pub"))
    assert no_key.exit_code == 2 and "no such key file" in no_key.stderr


def test_a_run_stopped_before_its_signature_is_signed_by_the_rerun(target, monkeypatch, tmp_path):
    """The signature is written before the journal goes: a run stopped between the receipt
    and its .sig leaves the journal, and the same command again finds the erasure finished
    and signs its receipt (which is not rewritten)."""
    import backends.ops.signing as signing

    s = seed(target.adapter)
    key, pub = _keypair(tmp_path)
    receipt = tmp_path / "receipt.json"

    def stopped(path, key):
        raise OSError("disk gone")

    real = signing.sign_receipt
    monkeypatch.setattr(signing, "sign_receipt", stopped)
    first = _erase(target, s, receipt, "--sign-with", str(key))
    assert first.exit_code != 0 and receipt.exists()
    assert (tmp_path / "receipt.json.journal").exists() and not (tmp_path / "receipt.json.sig").exists()
    written = receipt.read_bytes()
    monkeypatch.setattr(signing, "sign_receipt", real)
    second = _erase(target, s, receipt, "--sign-with", str(key))
    assert second.exit_code == 0, second.output
    assert "had finished" in second.stderr and receipt.read_bytes() == written
    assert run("receipts", "verify", str(receipt), "--key", str(pub)).exit_code == 0
