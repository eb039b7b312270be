"""A report as one self-contained HTML page: inline CSS, inline SVG charts, no script and
nothing fetched, so it reads the same as a CI artifact opened offline. Every value is
escaped; colours are set as SVG attributes too, so the chart survives a stripped style."""

from __future__ import annotations

from html import escape

from semvecctl.report.document import BarChart, Document, Facts, Notes, RankChart, Table, cell

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#1f2328;background:#fff}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.6em 0 .5em}
.verdict{display:inline-block;padding:.15em .6em;border-radius:4px;font-weight:700;color:#fff}
.verdict.pass{background:#1a7f37}.verdict.fail{background:#cf222e}
.verdict.neutral{background:#57606a}
.headline{font-size:1.05em;margin:.6em 0 1.2em}
table{border-collapse:collapse;margin:.4em 0 1em;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa}tr.good td:first-child{border-left:4px solid #1a7f37}
tr.bad td{background:#ffebe9}tr.bad td:first-child{border-left:4px solid #cf222e}
td.num{text-align:right}svg{display:block;margin:.4em 0 1em;max-width:100%;height:auto}
ul.notes li{margin:.2em 0}.legend{color:#57606a;font-size:.9em;margin-top:-.6em}
"""

_COLOURS = {"up": "#1a7f37", "down": "#cf222e", "same": "#57606a", "only": "#9a6700"}
_LABEL_CHARS = 30


def _numeric(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _table(columns: list[str], rows: list[list[object]], marks: list[str] | None = None) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = []
    for i, row in enumerate(rows):
        mark = (marks or [])[i] if marks and i < len(marks) else ""
        cls = f' class="{mark}"' if mark else ""
        cells = "".join(
            f'<td class="num">{escape(cell(v))}</td>' if _numeric(v) else f"<td>{escape(cell(v))}</td>"
            for v in row)
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _label(text: str) -> str:
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"


def rank_chart_svg(chart: RankChart) -> str:
    """Both rankings as two columns of dots; a line joins an item's rank on the left to
    its rank on the right (green: the server ranks it higher, red: lower, grey: same).
    An item ranked on one side only gets a hollow amber dot and no line."""
    row_h, top, left_x, right_x, width = 24, 48, 300, 560, 860
    depth = max(len(chart.left), len(chart.right), 1)
    height = top + depth * row_h + 12
    right_rank = {item: r for r, item in enumerate(chart.right, 1)}
    left_rank = {item: r for r, item in enumerate(chart.left, 1)}

    def y(rank: int) -> int:
        return top + (rank - 1) * row_h

    parts = [
        f'<svg class="rank-shift" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="system-ui,sans-serif" font-size="13">',
        f"<title>{escape(chart.title)}</title>",
        f'<text x="{left_x}" y="22" text-anchor="end" font-weight="700">'
        f"{escape(chart.left_label)}</text>",
        f'<text x="{right_x}" y="22" font-weight="700">{escape(chart.right_label)}</text>',
    ]
    for rank, item in enumerate(chart.left, 1):
        other = right_rank.get(item)
        if other is None:
            continue
        kind = "same" if other == rank else ("up" if other < rank else "down")
        parts.append(
            f'<line class="shift {kind}" x1="{left_x + 8}" y1="{y(rank)}" x2="{right_x - 8}" '
            f'y2="{y(other)}" stroke="{_COLOURS[kind]}" stroke-width="2">'
            f"<title>{escape(item)}: rank {rank} in-process, {other} server-side</title></line>")
    for side, items, ranks, x in (("left", chart.left, right_rank, left_x + 8),
                                  ("right", chart.right, left_rank, right_x - 8)):
        for rank, item in enumerate(items, 1):
            only = item not in ranks
            fill, stroke = ("#fff", _COLOURS["only"]) if only else (_COLOURS["same"], _COLOURS["same"])
            where = " (this side only)" if only else ""
            parts.append(
                f'<circle class="rank {side}{" only" if only else ""}" cx="{x}" cy="{y(rank)}" '
                f'r="5" fill="{fill}" stroke="{stroke}" stroke-width="2">'
                f"<title>{escape(item)}: rank {rank}{where}</title></circle>")
            text = escape(f"{rank}. {_label(item)}")
            if side == "left":
                parts.append(f'<text x="{left_x - 4}" y="{y(rank) + 4}" text-anchor="end">{text}</text>')
            else:
                parts.append(f'<text x="{right_x + 4}" y="{y(rank) + 4}">{text}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart_svg(chart: BarChart) -> str:
    """One bar per bin, its height the bin's share of the tallest; the count above each
    bar, the bin's label below (rotated when there are many)."""
    bars = chart.bars or [("(none)", 0)]
    width, height, top, bottom, left = 860, 300, 28, 90, 48
    plot_h = height - top - bottom
    slot = (width - left - 12) / len(bars)
    tallest = max(n for _, n in bars) or 1
    parts = [f'<svg class="histogram" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="system-ui,sans-serif" font-size="11">',
             f"<title>{escape(chart.title)}</title>",
             f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 8}" y2="{top + plot_h}" '
             'stroke="#57606a" stroke-width="1"/>',
             f'<text x="8" y="{top - 10}" fill="#57606a">{escape(chart.counts)}</text>']
    rotate = len(bars) > 12
    for i, (label, count) in enumerate(bars):
        h = round(plot_h * count / tallest, 1)
        x = round(left + i * slot + slot * 0.1, 1)
        w = round(max(slot * 0.8, 1), 1)
        y = round(top + plot_h - h, 1)
        parts.append(f'<rect class="bar" x="{x}" y="{y}" width="{w}" height="{h}" fill="#0969da">'
                     f"<title>{escape(label)}: {count:,} {escape(chart.counts)}</title></rect>")
        cx = round(x + w / 2, 1)
        parts.append(f'<text x="{cx}" y="{round(y - 3, 1)}" text-anchor="middle">{count:,}</text>')
        ly = top + plot_h + 14
        if rotate:
            parts.append(f'<text x="{cx}" y="{ly}" text-anchor="end" '
                         f'transform="rotate(-45 {cx} {ly})">{escape(_label(label))}</text>')
        else:
            parts.append(f'<text x="{cx}" y="{ly}" text-anchor="middle">{escape(_label(label))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(doc: Document) -> str:
    cls = doc.tone
    body = [f'<h1><span class="verdict {cls}">{doc.verdict}</span> {escape(doc.title)}</h1>',
            f'<p class="headline">{escape(doc.headline)}</p>']
    for block in doc.blocks:
        if isinstance(block, Facts):
            body.append(f"<h2>{escape(block.title)}</h2>")
            body.append(_table(["field", "value"], [[k, v] for k, v in block.pairs]))
        elif isinstance(block, Table):
            body.append(f"<h2>{escape(block.title)}</h2>")
            body.append(_table(block.columns, block.rows, block.marks) if block.rows
                        else "<p>(none)</p>")
        elif isinstance(block, RankChart):
            body.append(f"<h2>{escape(block.title)}</h2>")
            body.append(rank_chart_svg(block))
            body.append('<p class="legend">A line joins an item\'s two ranks: '
                        '<b style="color:#1a7f37">green</b> the right side ranks it higher, '
                        '<b style="color:#cf222e">red</b> lower, grey the same; a hollow dot '
                        'is an item ranked on one side only.</p>')
        elif isinstance(block, BarChart):
            body.append(f"<h2>{escape(block.title)}</h2>")
            body.append(bar_chart_svg(block))
        elif isinstance(block, Notes):
            body.append(f"<h2>{escape(block.title)}</h2>")
            body.append('<ul class="notes">' + "".join(f"<li>{escape(line)}</li>"
                                                       for line in block.lines) + "</ul>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(doc.verdict)}: {escape(doc.title)}</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
