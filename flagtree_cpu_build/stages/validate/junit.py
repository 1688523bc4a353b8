"""JUnit XML, as Jenkins, GitLab and GitHub test reporters read it: the validation's checks, one
testcase each, or — when they did not run — one case that says why (skipped) or what stopped the run
(error), so a CI step that uploads the file always finds one."""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ...atomic import write_atomic

if TYPE_CHECKING:
    from .validate import ValidationReport


def write_junit(report: ValidationReport, path: Path) -> None:
    """JUnit XML as Jenkins, GitLab and GitHub test reporters read it: one testcase per check."""
    counts = report.counts()
    suite_attrs = {"name": f"flagtree-cpu validate ({report.recipe})", "tests": str(len(report.results)),
                   "failures": str(counts["fail"]), "errors": "0", "skipped": str(counts["skip"]),
                   "time": f"{report.seconds:.3f}", "timestamp": report.started, "hostname": socket.gethostname()}
    suites = ET.Element("testsuites", {k: suite_attrs[k] for k in ("name", "tests", "failures", "errors", "time")})
    suite = ET.SubElement(suites, "testsuite", suite_attrs)
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", {"name": "python", "value": str(report.python)})
    ET.SubElement(properties, "property", {"name": "recipe", "value": report.recipe})
    if report.variant:
        ET.SubElement(properties, "property", {"name": "variant", "value": report.variant})
    for result in report.results:
        case = ET.SubElement(suite, "testcase", {"classname": f"flagtree-cpu.validate.{report.recipe}",
                                                  "name": result.kernel, "time": f"{result.seconds:.3f}"})
        if result.status == "fail":
            failure = ET.SubElement(case, "failure", {"message": _xml_text(result.message or result.figure),
                                                      "type": "required" if result.required else "optional"})
            failure.text = _xml_text("\n".join(x for x in (result.message, f"fix: {result.fix}" if result.fix else "",
                                                 f"log: {result.log}" if result.log else "") if x))
        elif result.status == "skip":
            ET.SubElement(case, "skipped", {"message": _xml_text(result.message)})
        if result.output:
            ET.SubElement(case, "system-out").text = _xml_text(result.output)
    _write_xml(suites, path)


def write_junit_verdict(path: Path, recipe: str, kind: str, message: str, text: str = "") -> None:
    """A JUnit report for a run whose checks did not run: one testcase that is ``skipped`` (with the
    reason) or an ``error`` (what stopped the run and its fix), so a CI step that uploads the file
    always finds one that says what happened."""
    errors = "1" if kind == "error" else "0"
    attrs = {"name": f"flagtree-cpu validate ({recipe})", "tests": "1", "failures": "0", "errors": errors,
             "skipped": "1" if kind == "skipped" else "0", "time": "0",
             "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"), "hostname": socket.gethostname()}
    suites = ET.Element("testsuites", {k: attrs[k] for k in ("name", "tests", "failures", "errors", "time")})
    suite = ET.SubElement(suites, "testsuite", attrs)
    case = ET.SubElement(suite, "testcase", {"classname": f"flagtree-cpu.validate.{recipe}", "name": "validation",
                                              "time": "0"})
    verdict = ET.SubElement(case, kind, {"message": _xml_text(message)})
    if text:
        verdict.text = _xml_text(text)
    _write_xml(suites, path)


def _write_xml(suites: ET.Element, path: Path) -> None:
    ET.indent(suites)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, ET.tostring(suites, encoding="utf-8", xml_declaration=True))


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    """Kernel output may hold terminal escapes or NULs, which XML 1.0 cannot carry."""
    return _NOT_XML.sub("\ufffd", text)
