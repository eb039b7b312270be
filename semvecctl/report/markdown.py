"""A report as GitHub-flavoured Markdown: the verdict on the first line (what a CI job
summary or a PR comment shows first), then one table per block."""

from __future__ import annotations

from semvecctl.report.document import BarChart, Document, Facts, Notes, RankChart, Table, cell

_MARKS = {"good": "✅ ", "bad": "❌ ", "": ""}


def _md(value: object) -> str:
    """One table cell: pipes escaped, line breaks kept as <br>."""
    text = cell(value).replace("\\", "\\\\").replace("|", "\\|")
    return "<br>".join(text.splitlines()) if "\n" in text else text


def _table(columns: list[str], rows: list[list[object]], marks: list[str] | None = None) -> list[str]:
    lines = ["| " + " | ".join(_md(c) for c in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    for i, row in enumerate(rows):
        mark = _MARKS.get((marks or [])[i] if marks and i < len(marks) else "", "")
        cells = [_md(v) for v in row]
        if cells:
            cells[0] = mark + cells[0]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_markdown(doc: Document) -> str:
    mark = {"pass": _MARKS["good"], "fail": _MARKS["bad"], "neutral": ""}[doc.tone]
    lines = [f"## {mark}{doc.verdict}: {_md(doc.title)}", "", f"**{doc.verdict}** — {doc.headline}",
             ""]
    for block in doc.blocks:
        if isinstance(block, Facts):
            lines += [f"### {block.title}", ""]
            lines += _table(["field", "value"], [[k, v] for k, v in block.pairs])
        elif isinstance(block, Table):
            table = _table(block.columns, block.rows, block.marks) if block.rows else ["(none)"]
            if block.folded:
                lines += [f"<details><summary>{_md(block.title)}</summary>", "", *table, "",
                          "</details>"]
            else:
                lines += [f"### {block.title}", "", *table]
        elif isinstance(block, BarChart):
            tallest = max((n for _, n in block.bars), default=0) or 1
            lines += [f"### {block.title}", ""]
            lines += _table(["bin", block.counts, ""],
                            [[label, n, "█" * max(round(30 * n / tallest), 1 if n else 0)]
                             for label, n in block.bars])
        elif isinstance(block, RankChart):
            continue  # the Markdown shows the rankings table that follows each chart
        elif isinstance(block, Notes):
            lines += [f"### {block.title}", ""] + [f"- {_md(line)}" for line in block.lines]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
