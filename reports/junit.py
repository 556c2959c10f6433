"""JUnit XML for `actaudit check` (read by GitLab, Jenkins and GitHub test reporters)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from audit.io import write_text


def render(changes, suite: str = "actaudit") -> str:
    fails = sum(c.status == "fail" for c in changes)
    ts = ET.Element("testsuite", name=suite, tests=str(len(changes)), failures=str(fails),
                    errors="0", skipped="0")
    for c in changes:
        tc = ET.SubElement(ts, "testcase", classname=f"actaudit.{c.candidate}", name=c.key)
        if c.status == "fail":
            f = ET.SubElement(tc, "failure", message=c.messages[0], type="AccuracyRegression")
            f.text = "\n".join(c.messages)
        elif c.messages:
            ET.SubElement(tc, "system-out").text = "\n".join(c.messages)
    root = ET.Element("testsuites", name=suite, tests=str(len(changes)), failures=str(fails))
    root.append(ts)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(path, changes) -> None:
    write_text(Path(path), render(changes))
