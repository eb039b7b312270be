"""The rate a summary line appends (issue 42: ``doctor`` on PostgreSQL printed "(0/s)"): the
count over the time, from an injected clock, or nothing when there is no rate to tell."""

from __future__ import annotations

import pytest

from semvecctl.output import ProgressTask


def task_at(seconds: list[float], count: int | None = None) -> ProgressTask:
    ticks = iter(seconds)
    task = ProgressTask()
    task._clock = lambda: next(ticks)
    task.started = task._clock()
    if count is not None:
        task.set(count)
    task.finish()
    return task


@pytest.mark.parametrize("seconds, count, summary", [
    ([0.0, 2.0, 2.0], 770, "in 2.0s (385/s)"),
    ([0.0, 4.0, 4.0], 3, "in 4.0s (0.75/s)"),        # slow, but not "0/s"
    ([0.0, 0.3], None, "in 0.3s"),                  # nothing counted: no rate, not "0/s"
    ([0.0, 0.0, 0.0], 5, "in 0.0s"),                # too fast for the clock to measure
    ([0.0, 1.5, 1.5], 0, "in 1.5s"),
])
def test_the_summary_rate_is_true_or_absent(seconds, count, summary):
    task = task_at(seconds, count)
    assert task.summary() == summary
    assert (task.measured_rate is None) == ("/s" not in summary)


def test_the_generic_audit_reports_its_whole_count():
    """An audit of fewer rows than a batch used to report none (progress only at each full
    batch); it reports its final count, so the rate is of what it read."""
    from backends.memory import MemoryBackendAdapter
    from backends.ops.doctor import audit

    adapter = MemoryBackendAdapter()
    for n in range(7):
        adapter.state_store().save(f"s{n}", b"x", expected_version=None)
    seen: list[int] = []
    assert list(audit(adapter, batch=500, progress=seen.append)) == []
    assert seen == [7]
