"""A prune's receipt: ``sessions prune --apply --receipt FILE [--sign-with KEY]`` lists the
sessions it deleted under the digest ``receipts verify`` recomputes, and those it kept.
On the suite's real PostgreSQL (the prune tests' sessions and ageing)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.cli.prune.test_prune import age, run
from tests.cli.receipts.test_receipts import _keypair
from tests.cli.receipts.test_receipts import run as plain_run
from tests.support.maintenance import make_target

pytestmark = pytest.mark.postgres


@pytest.fixture
def target(request):
    return make_target(request, "postgres")


@pytest.fixture
def idle(target):
    tag = uuid.uuid4().hex[:8]
    store = target.adapter.state_store()
    names = [f"{tag}-old-{i}" for i in range(3)] + [f"{tag}-fresh"]
    for sid in names:
        store.save(sid, b"blob", expected_version=None)
    for sid in names[:3]:
        age(target, sid, 2 * 86400)
    return names


def test_a_signed_prune_receipt_names_what_it_deleted_and_verifies(target, idle, tmp_path):
    key, pub = _keypair(tmp_path)
    receipt = tmp_path / "prune.json"
    result = run(target, "sessions", "prune", "--idle-for", "1d", "--apply", "--yes",
                 "--receipt", str(receipt), "--sign-with", str(key))
    assert result.exit_code == 0, result.output
    body = json.loads(receipt.read_text())
    assert body["format"] == "semvec-prune-receipt/1" and body["idle_for_s"] == 86400
    assert body["sessions"] == sorted(idle[:3]) and body["states_deleted"] == 3
    assert idle[3] not in json.dumps(body)
    verified = plain_run("receipts", "verify", str(receipt), "--key", str(pub))
    assert verified.exit_code == 0, verified.output
    assert "digest recomputed: matches" in verified.stderr
    body["sessions"][0] = idle[3]  # a receipt claiming another session
    receipt.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    assert plain_run("receipts", "verify", str(receipt), "--key", str(pub)).exit_code == 1


def test_a_preview_writes_no_receipt_and_none_is_replaced_unasked(target, idle, tmp_path):
    receipt = tmp_path / "prune.json"
    preview = run(target, "sessions", "prune", "--idle-for", "1d", "--receipt", str(receipt))
    assert preview.exit_code == 0 and not receipt.exists(), preview.output
    receipt.write_text("kept")
    again = run(target, "sessions", "prune", "--idle-for", "1d", "--apply", "--yes",
                "--receipt", str(receipt))
    assert again.exit_code == 2 and "already exists" in again.stderr
    assert receipt.read_text() == "kept"
    assert target.adapter.state_store().load(idle[0]) is not None  # nothing was deleted
