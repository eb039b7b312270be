"""JUnit XML for CI: one ``testsuite`` per group, one ``testcase`` per case.

Failures carry the expected-vs-actual message; not-applicable and skipped cases are
``skipped`` with their reason, so a CI dashboard never shows them as passes. Advisory
findings (beyond the published contract) pass, with the finding in ``system-out``. A known
divergence (an expected failure) is ``skipped`` of type ``expected-failure`` with its
reason, and each testsuite's properties carry both ``level`` and ``strict_level`` (the
root ``testsuites`` element holds no properties in the JUnit schema).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from backends.conformance.model import ConformanceReport, Status


def _text(result) -> str:
    lines = [result.message]
    if result.expected is not None:
        lines += [f"expected: {result.expected}", f"actual:   {result.actual}"]
    if result.doc:
        lines.append(f"case: {result.doc}")
    return "\n".join(line for line in lines if line)


def _levels(report: ConformanceReport) -> list[tuple[str, str]]:
    """Both levels (the same without a known-failures list) and where the list came from."""
    levels = [("level", report.level), ("strict_level", report.strict_level)]
    if report.known_failures is not None:
        levels.append(("known_failures", str(report.known_failures.get("origin") or "")))
    return levels


def to_junit_xml(report: ConformanceReport) -> ET.ElementTree:
    root = ET.Element("testsuites", {
        "name": f"semvec conformance: {report.backend}",
        "tests": str(len(report.cases)),
        "failures": str(report.counts()[Status.FAILED]),
        "errors": str(report.counts()[Status.ERROR]),
        "skipped": str(report.counts()[Status.NOT_APPLICABLE] + report.counts()[Status.SKIPPED]
                       + report.counts()[Status.EXPECTED_FAILURE]),
        "time": f"{report.duration:.3f}",
    })
    for group in report.groups:
        counts = group.counts()
        suite = ET.SubElement(root, "testsuite", {
            "name": f"conformance.{group.name}",
            "tests": str(len(group.cases)),
            "failures": str(counts[Status.FAILED]),
            "errors": str(counts[Status.ERROR]),
            "skipped": str(counts[Status.NOT_APPLICABLE] + counts[Status.SKIPPED]
                           + counts[Status.EXPECTED_FAILURE]),
            "time": f"{group.duration:.3f}",
            "timestamp": report.started_at.replace(microsecond=0).isoformat(),
        })
        props = ET.SubElement(suite, "properties")
        for name, value in (("backend", report.backend), *_levels(report),
                            ("group_status", group.status),
                            ("group_strict_status", group.strict_status),
                            ("prefix", report.prefix), ("target", report.target)):
            if value:
                ET.SubElement(props, "property", {"name": name, "value": str(value)})
        for result in group.cases:
            case = ET.SubElement(suite, "testcase", {
                "classname": f"semvec.conformance.{group.name}",
                "name": result.case,
                "time": f"{result.duration:.3f}",
            })
            if result.status == Status.FAILED:
                node = ET.SubElement(case, "failure", {"message": result.message,
                                                       "type": "ConformanceFailure"})
                node.text = _text(result)
            elif result.status == Status.ERROR:
                node = ET.SubElement(case, "error", {"message": result.message,
                                                     "type": "ConformanceError"})
                node.text = _text(result)
            elif result.status == Status.EXPECTED_FAILURE:
                # a known divergence: not a pass, not a new failure (pytest's xfail)
                ET.SubElement(case, "skipped", {"type": "expected-failure",
                                                "message": result.message})
                ET.SubElement(case, "system-out").text = _text(result)
            elif result.status in (Status.NOT_APPLICABLE, Status.SKIPPED):
                ET.SubElement(case, "skipped", {"message": f"{result.status}: {result.message}"})
            elif result.status == Status.ADVISORY or result.message:
                # an advisory finding, or steps skipped as not applicable: shown, not failed
                ET.SubElement(case, "system-out").text = _text(result)
    tree = ET.ElementTree(root)
    ET.indent(tree)
    return tree


def write_junit_xml(report: ConformanceReport, path: str | Path) -> Path:
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    to_junit_xml(report).write(path, encoding="utf-8", xml_declaration=True)
    return path
