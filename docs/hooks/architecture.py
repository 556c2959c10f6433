"""Draws docs/design/architecture.svg (the architecture page's picture): `python docs/hooks/architecture.py`."""

from pathlib import Path
from xml.sax.saxutils import escape

W, H = 1000, 640
boxes = {}
out = [
    f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="Helvetica, Arial, sans-serif" font-size="13">',
    '<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    f'<rect width="{W}" height="{H}" fill="white"/>',
]


def box(key, x, y, w, h, title, lines, fill):
    boxes[key] = (x, y, w, h)
    out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="{fill}" stroke="#444"/>')
    out.append(
        f'<text x="{x + w / 2}" y="{y + 20}" text-anchor="middle" font-weight="bold">{escape(title)}</text>'
    )
    for i, text in enumerate(lines):
        out.append(
            f'<text x="{x + w / 2}" y="{y + 38 + 16 * i}" text-anchor="middle" fill="#333">{escape(text)}</text>'
        )


def arrow(a, b, side_a="b", side_b="t", label=None):
    def pt(k, s):
        x, y, w, h = boxes[k]
        return {"b": (x + w / 2, y + h), "t": (x + w / 2, y), "l": (x, y + h / 2), "r": (x + w, y + h / 2)}[s]

    (x1, y1), (x2, y2) = pt(a, side_a), pt(b, side_b)
    out.append(
        f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#555" stroke-width="1.6" marker-end="url(#a)"/>'
    )
    if label:
        out.append(
            f'<text x="{(x1 + x2) / 2 + 6}" y="{(y1 + y2) / 2}" fill="#555" font-size="12">{escape(label)}</text>'
        )


ENTRY, CORE, EXEC, OUTC = "#dbeafe", "#fef3c7", "#e5e7eb", "#dcfce7"
box("cli", 40, 20, 280, 62, "actaudit (audit/cli/__init__.py)", ["a thin layer: options -> API calls"], ENTRY)
box("api", 360, 20, 280, 62, "Python API", ["audit.measure.sweep, audit.model, audit.testing, ..."], ENTRY)
box(
    "gate",
    680,
    20,
    280,
    62,
    "CI gate (audit/gate/check.py)",
    ["spec -> sweeps, models -> baseline compare"],
    ENTRY,
)
box(
    "sweep",
    300,
    130,
    400,
    62,
    "the pipeline (audit/measure/sweep.py)",
    ["targets x formats x compute x semantics x params"],
    CORE,
)
box(
    "inputs",
    20,
    250,
    220,
    78,
    "inputs (audit/numbers/inputs.py)",
    ["every value of the format,", "or a seeded sample / grid"],
    CORE,
)
box(
    "cand",
    260,
    250,
    230,
    78,
    "candidates",
    ["approximations/ (the catalog),", "adapters, c: kernels, dumps"],
    CORE,
)
box(
    "compute",
    510,
    250,
    230,
    78,
    "evaluation path",
    ["compute.py: each op rounded", "semantics.py: the machine"],
    CORE,
)
box(
    "oracle",
    760,
    250,
    220,
    78,
    "the oracle (audit/oracle/oracle.py)",
    ["references.py in mpmath,", "fast paths, verified cache"],
    CORE,
)
box(
    "metrics",
    300,
    380,
    400,
    62,
    "metrics.py: ULP error, distance, classes",
    ["findings.py, clip.py: where, why, what range is safe"],
    CORE,
)
box("exec", 20, 380, 250, 62, "executors.py, checkpoint.py", ["chunks on processes or Dask"], EXEC)
box("io", 730, 380, 250, 62, "io.py, signals.py", ["atomic writes, bounded reads, Ctrl-C"], EXEC)
box(
    "results",
    300,
    490,
    400,
    62,
    "SweepResult (to_dict: actaudit.sweep/1)",
    ["figures, findings, saturation, clip, hidden"],
    OUTC,
)
box(
    "reports",
    40,
    570,
    420,
    58,
    "reports/ (one module per reporter)",
    ["table, HTML, figures, JUnit, Markdown, suggest"],
    OUTC,
)
box(
    "json",
    540,
    570,
    420,
    58,
    "JSON documents, data/baseline.json",
    ["--json, run.json, the gate's baseline"],
    OUTC,
)
for k in ("cli", "api", "gate"):
    arrow(k, "sweep")
for k in ("inputs", "cand", "compute", "oracle"):
    arrow("sweep", k)
arrow("cand", "compute", "r", "l")
for k in ("inputs", "compute", "oracle"):
    arrow(k, "metrics")
arrow("exec", "metrics", "r", "l", None)
arrow("metrics", "results")
arrow("results", "reports")
arrow("results", "json")
out.append("</svg>")
(Path(__file__).resolve().parents[1] / "design" / "architecture.svg").write_text("\n".join(out) + "\n")
