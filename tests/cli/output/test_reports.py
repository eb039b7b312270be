"""``--report FILE`` on ``retrieve diff``, ``conformance run`` and ``indexes validate``:
the files are parsed (html.parser for the page and its SVG, table rows for Markdown) and
checked for the figures the same run prints with ``-o json``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from html.parser import HTMLParser

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryItem
from semvecctl.app import app
from tests.support import retrieval_doubles as doubles

DIFF_ADAPTER = ["--adapter", "tests.support.retrieval_doubles:server_adapter"]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


class Page(HTMLParser):
    """Every element (tag, attributes, direct text), and tables as lists of rows."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict] = []
        self.tables: list[list[list[str]]] = []
        self.headings: list[str] = []
        self._open: list[dict] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elements.append(element)
        if tag not in ("meta", "br"):
            self._open.append(element)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        while self._open:
            element = self._open.pop()
            if element["tag"] == tag:
                break
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._open:
            self._open[-1]["text"] += data
            if self._open[-1]["tag"] == "title" and len(self._open) > 1:
                self._open[-2]["text"] += data  # an SVG <title> describes its parent
        if self._cell is not None:
            self._cell.append(data)

    def all(self, tag, cls=None):
        return [e for e in self.elements if e["tag"] == tag
                and (cls is None or cls in e["attrs"].get("class", "").split())]


def assert_self_contained(text: str) -> None:
    page = Page(text)
    assert not page.all("script") and "<script" not in text.lower()
    assert not page.all("link") and not page.all("img") and not page.all("iframe")
    for element in page.elements:  # nothing is fetched: no attribute names a resource
        for name, value in element["attrs"].items():
            assert name not in ("src", "href", "srcset", "action", "xlink:href", "data"), element
            assert not name.startswith("on"), element
            assert "//" not in (value or ""), element
    styles = "".join(e["text"] for e in page.all("style"))
    assert "url(" not in styles and "@import" not in styles


def md_tables(text: str) -> list[list[list[str]]]:
    """The Markdown pipe tables of a report, as rows of cells (the separator row dropped)."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if all(set(c) <= {"-"} and c for c in cells):
                continue
            if current is None:
                current = []
                tables.append(current)
            current.append(cells)
        else:
            current = None
    return tables


def f4(value: float) -> str:
    return f"{value:.4f}"


@pytest.fixture
def session():
    sid = f"s-{uuid.uuid4().hex}"
    doubles.SEEDED[sid] = (
        MemoryItem("a", "apples are red", (1.0, 0.0), owner_subject="t1"),
        MemoryItem("b", "bananas <b>are</b> yellow | ripe", (0.9, 0.3), owner_subject="t1"),
        MemoryItem("c-new", "cherries are dark", (0.88, 0.35), owner_subject="t1"),
        MemoryItem("d", "dates are sweet", (0.0, 1.0), owner_subject="t2"),
    )
    doubles.SERVER_EXTRA[sid] = (MemoryItem("stale", "mirror only", (1.0, 0.01)),)
    yield sid
    doubles.SEEDED.pop(sid, None)
    doubles.SERVER_EXTRA.pop(sid, None)


def _diff(session, *extra):
    return ["retrieve", "diff", *DIFF_ADAPTER, "-s", session, "--like", "a", "-k", "4", *extra]


def test_diff_html_holds_the_metrics_rows_and_a_rank_shift_chart(session, tmp_path):
    gate = ("--min-rbo", "0")  # a gate given: a verdict (without one there is none)
    data = json.loads(invoke(*_diff(session, *gate), "-o", "json").stdout)
    path = tmp_path / "diff.html"
    result = invoke(*_diff(session, *gate, "--report", path))
    assert result.exit_code == 0, result.output
    assert f"report written to {path}" in result.stderr
    text = path.read_text(encoding="utf-8")
    assert_self_contained(text)
    page = Page(text)

    assert page.all("span", "verdict")[0]["text"] == "PASS"
    query = data["queries"][0]
    metrics = query["metrics"]
    per_query = next(t for t in page.tables if t[0][:1] == ["query"])
    header, row = per_query[0], per_query[1]
    assert row[header.index("rbo")] == f4(metrics["rbo"])
    assert row[header.index("jaccard")] == f4(metrics["jaccard"])
    assert row[header.index("common")] == str(metrics["common"])
    assert row[-1] == "ok"
    aggregate = next(t for t in page.tables if t[0][:1] == ["metric"])
    assert ["rbo", f4(data["aggregate"]["mean_rbo"]), f4(data["aggregate"]["min_rbo"])] in aggregate
    assert ["jaccard", f4(data["aggregate"]["mean_jaccard"]),
            f4(data["aggregate"]["min_jaccard"])] in aggregate
    rankings = next(t for t in page.tables if t[0][:2] == ["rank", "in-process"])
    assert [r[1] for r in rankings[1:]] == [r["in_process_item"] for r in query["rows"]]
    assert [r[4] for r in rankings[1:]] == [r["server_item"] for r in query["rows"]]
    assert "bananas <b>are</b>" not in text  # stored text is never markup

    # the chart: one dot per ranked item on each side, one line per item on both
    svg = page.all("svg", "rank-shift")
    assert len(svg) == 1
    left = [r["in_process_item"] for r in query["rows"] if r["in_process_item"]]
    right = [r["server_item"] for r in query["rows"] if r["server_item"]]
    assert len(page.all("circle", "left")) == len(left)
    assert len(page.all("circle", "right")) == len(right)
    assert len(page.all("circle", "only")) == metrics["only_a"] + metrics["only_b"]
    lines = page.all("line", "shift")
    assert len(lines) == metrics["common"]
    y_of = {}
    for circle in page.all("circle"):
        side = "left" if "left" in circle["attrs"]["class"] else "right"
        y_of[(side, circle["text"].split(":")[0])] = circle["attrs"]["cy"]
    for line in lines:
        item = line["text"].split(":")[0]
        assert line["attrs"]["y1"] == y_of[("left", item)]
        assert line["attrs"]["y2"] == y_of[("right", item)]
        moved = right.index(item) - left.index(item)
        expected = "same" if moved == 0 else ("up" if moved < 0 else "down")
        assert expected in line["attrs"]["class"].split()


@pytest.mark.parametrize("suffix", [".html", ".md"])
def test_diff_report_without_a_gate_gives_no_verdict_and_shows_every_query(session, tmp_path,
                                                                          suffix):
    """Poor agreement and no --min-*: the report says "no gate", never PASS or FAIL, and
    names what each query asked beside its metrics."""
    queries = tmp_path / "q.jsonl"
    asked = ["apples", "dates are sweet", "zzz nothing like it"]
    queries.write_text("".join(json.dumps({"id": f"q{i}", "query": text, "vector": vector}) + "\n"
                               for i, (text, vector) in enumerate(zip(asked, [[1, 0], [0, 1],
                                                                              [0.5, 0.5]]))))
    queries.write_text(queries.read_text() + json.dumps({"id": "q-like", "like": "b"}) + "\n")
    args = ["retrieve", "diff", *DIFF_ADAPTER, "-s", session, "--queries", str(queries), "-k", "2"]
    data = json.loads(invoke(*args, "-o", "json").stdout)
    assert data["gate"]["thresholds"] == {} and data["aggregate"]["min_rbo"] < 1
    assert [q.get("text") for q in data["queries"]] == [*asked, None]
    path = tmp_path / f"diff{suffix}"
    result = invoke(*args, "--report", path)
    assert result.exit_code == 0, result.output
    text = path.read_text(encoding="utf-8")
    assert "PASS" not in text and "FAIL" not in text
    if suffix == ".html":
        page = Page(text)
        badge = page.all("span", "verdict")[0]
        assert badge["text"] == "NO GATE" and "neutral" in badge["attrs"]["class"].split()
        tables = page.tables
    else:
        assert text.splitlines()[0] == "## NO GATE: retrieve diff: in-process vs " + data["server"]
        assert "✅" not in text and "❌" not in text
        tables = md_tables(text)
    per_query = next(t for t in tables if t[0][:2] == ["query", "asked"])
    assert [row[:2] for row in per_query[1:]] == [["q0", "apples"], ["q1", "dates are sweet"],
                                                  ["q2", "zzz nothing like it"],
                                                  ["q-like", "like b"]]
    assert {row[-1] for row in per_query[1:]} == {"no gate"}
    rbo = per_query[0].index("rbo")
    assert [row[rbo] for row in per_query[1:]] == [f4(q["metrics"]["rbo"]) for q in data["queries"]]


def test_diff_markdown_leads_with_the_verdict_and_keeps_the_exit_code(session, tmp_path):
    plain = invoke(*_diff(session, "--min-rbo", "0.99"))
    path = tmp_path / "diff.md"
    result = invoke(*_diff(session, "--min-rbo", "0.99", "--report", path))
    assert plain.exit_code == result.exit_code == 1  # the gate decides, not the report
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first.startswith("## ") and "FAIL" in first
    assert "gate miss" in text.splitlines()[2]
    tables = md_tables(text)
    per_query = next(t for t in tables if t[0][:1] == ["query"])
    assert per_query[1][-1] == "missed rbo"
    data = json.loads(invoke(*_diff(session), "-o", "json").stdout)
    assert per_query[1][per_query[0].index("rbo")] == f4(data["queries"][0]["metrics"]["rbo"])
    rankings = next(t for t in tables if t[0][:2] == ["rank", "in-process"])
    assert len(rankings) - 1 == len(data["queries"][0]["rows"])


def test_diff_report_of_many_queries_has_a_row_and_a_chart_each(session, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in (
        {"id": "near-a", "vector": [1, 0]}, {"id": "near-d", "vector": [0, 1]},
        {"id": "like-b", "like": "b", "top_k": 2})) + "\n")
    args = ["retrieve", "diff", *DIFF_ADAPTER, "-s", session, "--queries", queries]
    data = json.loads(invoke(*args, "-o", "json").stdout)
    html, md = tmp_path / "many.html", tmp_path / "many.md"
    assert invoke(*args, "--report", html).exit_code == 0
    assert invoke(*args, "--report", md).exit_code == 0
    page = Page(html.read_text(encoding="utf-8"))
    per_query = next(t for t in page.tables if t[0][:1] == ["query"])
    by_id = {row[0]: row for row in per_query[1:]}
    assert set(by_id) == {"near-a", "near-d", "like-b"}
    for q in data["queries"]:
        assert by_id[q["query"]][per_query[0].index("rbo")] == f4(q["metrics"]["rbo"])
    assert len(page.all("svg", "rank-shift")) == 3
    md_rows = next(t for t in md_tables(md.read_text(encoding="utf-8")) if t[0][:1] == ["query"])
    assert md.read_text(encoding="utf-8").count("<details><summary>Rankings") == 3  # folded
    assert sorted(r[0].lstrip("✅❌ ") for r in md_rows[1:]) == sorted(by_id)


def test_new_per_query_figures_show_up_without_being_named(tmp_path):
    """A field the diff result gains later (say an exact-search recall) reaches the report."""
    from semvecctl.report import render_report

    data = {"server": "srv", "aggregate": {"queries": 1, "mean_rbo": 0.5, "min_rbo": 0.5,
                                           "mean_recall": 0.875, "min_recall": 0.75},
            "gate": {"passed": True, "missed": []},
            "queries": [{"query": "q1", "metrics": {"rbo": 0.5, "jaccard": 0.25},
                         "exact": {"recall": 0.75, "jaccard": 0.6}, "settings": {},
                         "rows": [], "moves": [], "notes": []}]}
    page = Page(render_report("diff", data, ".html"))
    per_query = next(t for t in page.tables if t[0][:1] == ["query"])
    assert per_query[1][per_query[0].index("exact.recall")] == "0.7500"
    aggregate = next(t for t in page.tables if t[0][:1] == ["metric"])
    assert ["recall", "0.8750", "0.7500"] in aggregate
    md = md_tables(render_report("diff", data, ".md"))
    assert "exact.recall" in next(t for t in md if t[0][:1] == ["query"])[0]


@pytest.mark.parametrize("name", ["report.txt", "report", "report.htm", "report.md.gz"])
def test_any_other_suffix_is_a_usage_error_before_any_work(session, tmp_path, name):
    path = tmp_path / name
    result = invoke(*_diff(session, "--report", path))
    assert result.exit_code == 2
    assert ".md" in result.stderr and ".html" in result.stderr
    assert not path.exists() and list(tmp_path.iterdir()) == []
    for args in (["conformance", "run", "--backend", "memory", "--report", path],
                 ["indexes", "validate", "--backend", "memory", "--report", path]):
        assert invoke(*args).exit_code == 2


def test_report_replaces_a_file_whole_and_leaves_no_temp_file(session, tmp_path):
    path = tmp_path / "diff.md"
    path.write_text("old content that must not survive\n" * 1000)
    assert invoke(*_diff(session, "--report", path)).exit_code == 2  # only with --overwrite
    assert path.read_text(encoding="utf-8").startswith("old content")
    assert invoke(*_diff(session, "--report", path, "--overwrite")).exit_code == 0
    text = path.read_text(encoding="utf-8")
    assert "old content" not in text and text.endswith("\n")
    assert [p.name for p in tmp_path.iterdir()] == ["diff.md"]


def test_missing_directories_are_made_like_for_junit(session, tmp_path):
    path = tmp_path / "out" / "reports" / "diff.html"
    assert invoke(*_diff(session, "--report", path)).exit_code == 0
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_an_unwritable_report_is_one_line_and_exit_3(session, tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    path = tmp_path / "a-file" / "diff.html"
    result = invoke(*_diff(session, "--report", path))
    assert result.exit_code == 3
    assert "cannot write the report" in result.stderr
    assert "Traceback" not in result.output


def test_credentials_are_scrubbed_from_the_report(tmp_path):
    from semvecctl.application import current
    from semvecctl.report import write_report

    uri = "redis://operator:s3cr3t-pass@cache.internal:6379/0"
    current().remember_secret(uri)
    path = tmp_path / "idx.html"
    write_report(path, "indexes", {"backend": "redis", "uri": uri, "ok": False, "strict": False,
                                   "indexes": [{"name": "ix", "target": "t", "kind": "btree",
                                                "state": "missing", "ok": False,
                                                "required": True, "detail": f"at {uri}",
                                                "differences": []}]})
    text = path.read_text(encoding="utf-8")
    assert "s3cr3t-pass" not in text and "cache.internal" in text


# -- conformance run -----------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".html", ".md"])
def test_conformance_report_lists_every_case_and_its_status(tmp_path, suffix):
    args = ["conformance", "run", "--backend", "memory", "--only", "contract,state"]
    data = json.loads(invoke(*args, "-o", "json").stdout)
    path = tmp_path / f"conf{suffix}"
    result = invoke(*args, "--report", path)
    assert result.exit_code == 0, result.output
    text = path.read_text(encoding="utf-8")
    if suffix == ".html":
        assert_self_contained(text)
        page = Page(text)
        assert page.all("span", "verdict")[0]["text"] == "PASS"
        tables = page.tables
        assert f"level {data['level']}" in page.all("p", "headline")[0]["text"]
    else:
        assert text.splitlines()[0].startswith("## ") and "PASS" in text.splitlines()[0]
        tables = [[[c.lstrip("✅❌ ") for c in row] for row in t] for t in md_tables(text)]
    cases = next(t for t in tables if t[0][:2] == ["case", "status"])
    expected = {f"{c['group']}.{c['case']}": c["status"]
                for g in data["groups"] for c in g["cases"]}
    assert {row[0]: row[1] for row in cases[1:]} == expected
    groups = next(t for t in tables if t[0][:2] == ["group", "status"])
    assert {row[0]: row[1] for row in groups[1:]} == {g["name"]: g["status"] for g in data["groups"]}


def test_conformance_report_of_a_failing_adapter_names_the_failure(tmp_path):
    path = tmp_path / "broken.html"
    args = ["conformance", "run", "--adapter", "tests.support.conformance_doubles:OverwritingInsertAdapter",
            "--only", "state"]
    plain = invoke(*args)
    result = invoke(*args, "--report", path)
    assert plain.exit_code == result.exit_code == 1
    page = Page(path.read_text(encoding="utf-8"))
    assert page.all("span", "verdict")[0]["text"] == "FAIL"
    failures = next(t for t in page.tables if t[0][:3] == ["case", "status", "expected"])
    assert "state.insert_never_overwrites" in [row[0] for row in failures[1:]]
    cases = next(t for t in page.tables if t[0][:2] == ["case", "status"])
    assert ["state.insert_never_overwrites", "failed"] in [row[:2] for row in cases[1:]]
    assert page.all("tr", "bad")


# -- indexes validate ----------------------------------------------------------------------


def test_indexes_report_for_a_backend_with_nothing_to_provision(tmp_path):
    path = tmp_path / "idx.md"
    result = invoke("indexes", "validate", "--backend", "memory", "--report", path)
    assert result.exit_code == 0, result.output
    text = path.read_text(encoding="utf-8")
    assert "PASS" in text.splitlines()[0] and "nothing to provision" in text


@pytest.mark.postgres
def test_indexes_report_shows_each_verdict_on_a_real_pgvector(pgvector_url, monkeypatch, tmp_path):
    import psycopg

    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", "16")
    base = ["indexes", "validate", "--backend", "pgvector", "--uri", pgvector_url]
    assert invoke("indexes", "ensure", "--backend", "pgvector", "--uri", pgvector_url,
                  "--apply", "--yes").exit_code == 0
    ok_path = tmp_path / "ok.html"
    assert invoke(*base, "--report", ok_path).exit_code == 0
    page = Page(ok_path.read_text(encoding="utf-8"))
    assert page.all("span", "verdict")[0]["text"] == "PASS"

    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("DROP INDEX semvec_items_session_recency")
    data = json.loads(invoke(*base, "-o", "json").stdout)
    html, md = tmp_path / "drift.html", tmp_path / "drift.md"
    assert invoke(*base, "--report", html).exit_code == 1
    assert invoke(*base, "--report", md).exit_code == 1
    text = html.read_text(encoding="utf-8")
    assert_self_contained(text)
    assert data["uri"] in text  # the URI as the command shows it (redacted)
    page = Page(text)
    assert page.all("span", "verdict")[0]["text"] == "FAIL"
    table = next(t for t in page.tables if t[0][:1] == ["index"])
    header = table[0]
    got = {row[0]: (row[header.index("state")], row[header.index("verdict")]) for row in table[1:]}
    want = {r["name"]: (r["state"], "match" if r["ok"] else "DRIFT") for r in data["indexes"]}
    assert got == want and got["semvec_items_session_recency"] == ("missing", "DRIFT")
    md_table = next(t for t in md_tables(md.read_text(encoding="utf-8")) if t[0][:1] == ["index"])
    assert {row[0].lstrip("✅❌ ") for row in md_table[1:]} == set(want)


# -- looking at it -----------------------------------------------------------------------


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="no headless chromium on this machine")
def test_the_diff_page_renders_in_a_headless_browser(session, tmp_path):
    path = tmp_path / "diff.html"
    assert invoke(*_diff(session, "--report", path)).exit_code == 0
    png = tmp_path / "diff.png"
    env = {**os.environ, "HOME": str(tmp_path)}
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    "--no-first-run", "--disable-dev-shm-usage", f"--screenshot={png}",
                    "--window-size=1100,1400", path.as_uri()],
                   check=True, capture_output=True, timeout=120, env=env)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1100, 1400)
    assert len(data) > 20_000  # a blank page compresses to a few kilobytes
    if os.environ.get("SEMVEC_KEEP_REPORT_PNG"):
        shutil.copy(png, os.environ["SEMVEC_KEEP_REPORT_PNG"])
