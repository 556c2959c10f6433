"""The HTML report in a real headless browser (Chromium from the system packages; skipped
where it is absent, except in CI, CI=true, where .ci/run installs it and its absence fails):
no script errors, every image loads, no blocks overlap, the explorer draws, and the summary
comes first."""

import os
import re
import shutil
import subprocess

import pytest

import audit
from reports import html as html_report

CHROMIUM = next(
    (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
)


def require_chromium() -> str:
    """The browser's path; where there is none, a skip, or in CI (CI=true) a failure."""
    if CHROMIUM is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("no Chromium on this CI machine (.ci/run installs the Debian package 'chromium')")
        pytest.skip("no Chromium on this machine")
    return CHROMIUM


@pytest.fixture(scope="module", autouse=True)
def _chromium():  # (module scope: before the module's page is built)
    require_chromium()


ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--window-size=1400,1000",
    "--virtual-time-budget=10000",
]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser")
    res = audit.sweep(
        ["gelu.tanh", "gelu.erfc", "gelu.safe_clip", "swiglu.silu_mul"],
        dtype="fp8_e4m3,bf16",
        keep_points=True,
        grid=24,
    )
    return html_report.build(res, out, "actaudit report browser test"), res


def _dom(path, anchor=""):
    p = subprocess.run(
        [CHROMIUM, *ARGS, "--dump-dom", path.as_uri() + anchor], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def _body(dom):
    m = re.search(r"<body([^>]*)>", dom)
    return dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(1)))


def test_page_runs_clean_in_chromium(page):
    path, res = page
    dom = _dom(path)
    b = _body(dom)
    assert b.get("checked") == "1", "the page's check script did not run"
    assert b["errors"] == ""  # no script error
    assert int(b["images"]) >= 8 and b["images-bad"] == "0"  # every image decoded
    assert b["overlaps"] == "0", b.get("overlap-list")
    # the summary and the recommendation come before any figure
    assert dom.index('id="recommend"') < dom.index('id="summary"') < dom.index("<img")
    # navigation links to every candidate section
    for r in res:
        assert f">{r.candidate}</a>" in dom


def test_only_view_opens_one_candidate(page):
    path, res = page
    r = next(x for x in res if x.candidate == "gelu.safe_clip" and x.dtype == "bf16")
    anchor = html_report.slug(f"{r.candidate}-{r.dtype}-{r.compute}-{html_report._ptext(r)}")
    dom = _dom(path, f"#only:{anchor}")
    assert _body(dom)["errors"] == ""
    m = re.search(rf'<details class="cand" id="{re.escape(anchor)}"( open="")?', dom)
    assert m and m.group(1), "the candidate named in the link is open"
    assert 'id="summary" style="display: none;"' in dom
