"""JUnit XML for `actaudit check` (read by GitLab, Jenkins and GitHub test reporters)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from audit.io import write_text

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _x(s: str) -> str:
    """Text XML 1.0 can hold: characters it forbids (control characters, lone
    surrogates) written as \\xNN escapes."""
    return _XML_BAD.sub(lambda m: f"\\x{ord(m.group()):02x}", str(s))


def render(changes, suite: str = "actaudit") -> str:
    fails = sum(c.status == "fail" for c in changes)
    n = sum(c.status != "warning" for c in changes)
    ts = ET.Element("testsuite", name=suite, tests=str(n), failures=str(fails), errors="0", skipped="0")
    for c in changes:
        if c.status == "warning":  # not a result: said in the suite's output
            ET.SubElement(ts, "system-out").text = _x("\n".join(c.messages))
            continue
        tc = ET.SubElement(ts, "testcase", classname=_x(f"actaudit.{c.candidate}"), name=_x(c.key))
        if c.status == "fail":
            f = ET.SubElement(tc, "failure", message=_x(c.messages[0]), type="AccuracyRegression")
            f.text = _x("\n".join(c.messages))
        elif c.messages:
            ET.SubElement(tc, "system-out").text = _x("\n".join(c.messages))
    root = ET.Element("testsuites", name=suite, tests=str(n), failures=str(fails))
    root.append(ts)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(path, changes) -> None:
    write_text(Path(path), render(changes))
