"""``--report FILE``: a file people can look at, beside the command's usual output.

``.md`` is for CI job summaries and pull-request comments (headline verdict first, then
tables); ``.html`` is one self-contained page (inline CSS and SVG, no script, nothing
fetched). Any other suffix is a usage error, caught when the option is parsed so no work
is done first. The report is written whatever the command's verdict, atomically (a temp
file beside it, then a rename), and with every remembered secret scrubbed; writing it
never changes the exit status of a command that ran, only a file that cannot be written
does (exit 3).

The commands hand over the same dictionary ``-o json`` prints, so a field added to a
result shows up here without this package knowing it by name.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

__all__ = ["REPORT_SUFFIXES", "ReportFile", "write_report"]

REPORT_SUFFIXES = (".md", ".html")


def _check_suffix(value: Optional[Path]) -> Optional[Path]:
    if value is not None and value.suffix.lower() not in REPORT_SUFFIXES:
        raise typer.BadParameter(
            f"{str(value)!r}: a report is .md (Markdown) or .html (a self-contained page)")
    return value


ReportFile = Annotated[Optional[Path], typer.Option(
    "--report", help="Also write a report here: FILE.md (CI summaries, PR comments) or "
    "FILE.html (one self-contained page). Written whatever the verdict.",
    show_default=False, dir_okay=False, callback=_check_suffix)]


def render_report(kind: str, data: dict[str, Any], suffix: str) -> str:
    """The report text for ``kind`` (``diff``, ``conformance``, ``indexes``)."""
    from semvecctl.report.document import build

    document = build(kind, data)
    if suffix.lower() == ".html":
        from semvecctl.report.html import render_html

        return render_html(document)
    from semvecctl.report.markdown import render_markdown

    return render_markdown(document)


def write_report(path: Optional[Path], kind: str, data: dict[str, Any]) -> None:
    """Render and write the report if one was asked for; say where on stderr."""
    if path is None:
        return
    from semvecctl.application import current
    from semvecctl.exit_codes import ExitCode

    app = current()
    text = app.scrub(render_report(kind, data, path.suffix))
    try:
        _write_atomically(path, text)
    except OSError as exc:
        current().abort(f"cannot write the report {str(path)!r}: "
                        f"{exc.strerror or exc}", ExitCode.ENVIRONMENT, cause=None)
    app.output.info(f"report written to {path}")


def _write_atomically(path: Path, text: str) -> None:
    """A temp file in the target's directory, renamed over it: never half-written."""
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)  # like --junit: CI asks for out/report.md
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_name, 0o666 & ~umask)  # a report is shared, unlike an archive
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise
