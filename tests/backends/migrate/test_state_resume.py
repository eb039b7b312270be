"""``MigrationState.check_resume``: the preflight a ``run`` makes on an existing state file
before either store is touched (refuse another pair, other filters, a file another process
runs), leaving nothing open or held."""

from __future__ import annotations

import pytest

from backends.migrate import MigrationState, StateBusy, StateMismatch, fingerprint

SOURCE, TARGET = fingerprint("redis", "src"), fingerprint("redis", "dst")


@pytest.fixture
def path(tmp_path):
    state_file = str(tmp_path / "m.state")
    MigrationState.open(state_file, source=SOURCE, target=TARGET, settings={}).close()
    return state_file


def test_a_resumable_file_passes_and_its_claim_is_released(path):
    MigrationState.check_resume(path, source=SOURCE, target=TARGET, settings={}, claim=True)
    holder = MigrationState.open(path, source=SOURCE, target=TARGET)
    try:
        holder.claim()  # would raise StateBusy had the preflight kept its claim
    finally:
        holder.close()


def test_a_file_another_process_runs_is_refused_only_when_claiming(path):
    holder = MigrationState.open(path, source=SOURCE, target=TARGET)
    holder.claim()
    try:
        with pytest.raises(StateBusy, match="in use by"):
            MigrationState.check_resume(path, source=SOURCE, target=TARGET, settings={}, claim=True)
        MigrationState.check_resume(path, source=SOURCE, target=TARGET, settings={}, claim=False)
    finally:
        holder.close()


def test_another_pair_or_other_filters_are_refused(path):
    with pytest.raises(StateMismatch, match="another pair"):
        MigrationState.check_resume(path, source=fingerprint("redis", "elsewhere"), target=TARGET,
                                    settings={}, claim=False)
    with pytest.raises(StateMismatch, match="other filters"):
        MigrationState.check_resume(path, source=SOURCE, target=TARGET, settings={"match": "a*"},
                                    claim=False)
