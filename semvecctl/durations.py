"""Durations on the command line (``30d``, ``12h``, ``90m``, ``45s``, or combined,
``1d12h``), one grammar for every flag that takes one (``sessions prune --idle-for``,
``sessions export --since``)."""

import re
from datetime import timedelta

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: the accepted range, in seconds
MIN_SECONDS, MAX_SECONDS = 1, 3650 * 86400
_DURATION = re.compile(r"(?:(\d{1,9})([smhd]))+")


def duration_seconds(text: str) -> tuple[int | None, str]:
    """(seconds, "") for a duration within 1s..3650d; (None, why not) otherwise."""
    value = (text or "").strip().lower()
    if not _DURATION.fullmatch(value):
        return None, "is not a duration like 30d, 12h, 90m or 45s"
    seconds = sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)([smhd])", value))
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        return None, "is outside the range 1s..3650d"
    return seconds, ""


def parse_duration(text: str, flag: str = "--idle-for") -> timedelta:
    """The duration ``flag`` was given, or a usage error (exit 2) naming the flag."""
    from semvecctl.application import current
    from semvecctl.exit_codes import ExitCode

    seconds, why = duration_seconds(text)
    if seconds is None:
        current().abort(f"{flag} {text!r} {why}", ExitCode.USAGE)
    return timedelta(seconds=seconds)
