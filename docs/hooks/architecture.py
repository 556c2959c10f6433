"""Draws docs/design/architecture.svg, the architecture page's picture of the stages:
`python docs/hooks/architecture.py`.  Each stage is a band, highest first, listing the
modules it holds (read from the source tree, so the picture names every module); every
import runs from a band to one below it (tests/test_architecture.py, `lint-imports`)."""

from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[2]
# (band title, packages or modules, what the stage does); siblings share a band
STAGES = [
    ("cli", ["audit/cli"], "the command line: options -> one API call each; errors -> exit codes"),
    ("reports", ["reports"], "one module per reporter: tables, HTML, figures, JUnit, Markdown"),
    (
        "gate | repair | testing",
        ["audit/gate", "audit/repair", "audit/testing.py"],
        "the CI gate; which kernel to ship, fitted kernels; assert_accuracy",
    ),
    (
        "model",
        ["audit/model"],
        "actaudit model: an ONNX graph's activation sites, audited on the user's data",
    ),
    ("compare", ["audit/compare"], "two implementations, one function asked two ways, engines"),
    ("measure", ["audit/measure"], "sweeps: errors, findings, clip ranges, weighted figures, checks"),
    ("catalog", ["approximations"], "the candidates, one module per family (registered on import)"),
    ("targets", ["audit/targets"], "what is audited: candidates, evaluation paths, kernels, engines"),
    ("oracle", ["audit/oracle"], "exact references in mpmath, correctly rounded values"),
    (
        "numbers",
        ["audit/numbers"],
        "formats, exact rounding, ulp, input domains, the optional compiled fp32 passes",
    ),
    (
        "shared",
        ["audit/io.py", "audit/signals.py", "audit/errors.py", "audit/_version.py"],
        "files read and written failing closed, signals, errors",
    ),
]
FILES = {
    "audit/testing.py": "assert_accuracy for test suites",
    "audit/io.py": "atomic writes, bounded reads",
    "audit/signals.py": "SIGINT / SIGTERM, readiness",
    "audit/errors.py": "the user-facing errors",
    "audit/_version.py": "the version",
}
COLORS = [
    "#dbeafe",
    "#dcfce7",
    "#dbeafe",
    "#e0e7ff",
    "#fef3c7",
    "#fef3c7",
    "#fde68a",
    "#fef3c7",
    "#fce7f3",
    "#fce7f3",
    "#e5e7eb",
]


def modules(path: str) -> list[str]:
    p = ROOT / path
    if p.is_file():
        return [p.stem]
    names = []
    for f in sorted(p.rglob("*.py")):
        rel = f.relative_to(p).with_suffix("")
        if rel.name in ("__init__", "__main__"):
            continue
        names.append("/".join(rel.parts))
    return names


def draw() -> str:
    W, left, band, gap = 1000, 20, 66, 12
    H = len(STAGES) * (band + gap) + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        'font-family="Helvetica, Arial, sans-serif" font-size="12">',
        '<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
        f'<rect width="{W}" height="{H}" fill="white"/>',
    ]
    for i, ((_title, paths, what), fill) in enumerate(zip(STAGES, COLORS, strict=True)):
        y = 10 + i * (band + gap)
        cols = len(paths)
        w = (W - 2 * left - 60 - 10 * (cols - 1)) / cols
        for j, path in enumerate(paths):
            x = left + 60 + j * (w + 10)
            out.append(
                f'<rect x="{x:.0f}" y="{y}" width="{w:.0f}" height="{band}" rx="8" fill="{fill}" stroke="#444"/>'
            )
            name = path.removesuffix(".py").replace("/", ".")
            out.append(f'<text x="{x + 8:.0f}" y="{y + 16}" font-weight="bold">{escape(name)}</text>')
            mods = ", ".join(modules(path)) if Path(ROOT / path).is_dir() else ""
            lines, cur = [], ""
            limit = int(w / 6.3)
            for word in mods.split(" "):
                if len(cur) + len(word) + 1 > limit:
                    lines.append(cur)
                    cur = word
                else:
                    cur = f"{cur} {word}".strip()
            if cur:
                lines.append(cur)
            if cols == 1:
                lines = [what] + lines
            elif not lines:
                lines = [FILES.get(path, "")]
            for k, text in enumerate(lines[:3]):
                color = "#333" if k or cols > 1 or not mods else "#555"
                style = ' font-style="italic"' if k == 0 and cols == 1 else ""
                out.append(
                    f'<text x="{x + 8:.0f}" y="{y + 32 + 14 * k}" fill="{color}"{style}>{escape(text)}</text>'
                )
        out.append(f'<text x="{left}" y="{y + band / 2 + 4}" font-weight="bold" fill="#555">{i + 1}</text>')
        if i + 1 < len(STAGES):
            out.append(
                f'<line x1="{left + 30}" y1="{y + band - 8}" x2="{left + 30}" y2="{y + band + gap + 8}" '
                'stroke="#555" stroke-width="1.6" marker-end="url(#a)"/>'
            )
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    (ROOT / "docs" / "design" / "architecture.svg").write_text(draw())
