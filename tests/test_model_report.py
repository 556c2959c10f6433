"""The model report page (``actaudit model --effect --report DIR``): the effect figures of
each site and of all at once, checked against an independent computation (the test's own
ORT sessions for the prefix and each suffix of a three-site chain, correct roundings from
mpmath); the effect-ranking picture (its bars read back from the SVG: their order is the
ranking computed here, their lengths on a log scale); the fix and identify results where
the document has them."""

from __future__ import annotations

import base64
import contextlib
import io
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from test_model_effect import cr32, sig, tanh  # noqa: E402

F = TensorProto.FLOAT


def erf(x):
    import mpmath

    return mpmath.erf(x)


def _weights():
    rng = np.random.default_rng(5)
    return (
        (rng.standard_normal((6, 6)) * 1.5).astype(np.float32),
        rng.standard_normal((6, 6)).astype(np.float32),
        (rng.standard_normal((6, 4)) * 0.5).astype(np.float32),
    )


def _model(tmp_path):
    """x [B, 6] -> MatMul W1 -> h -> Sigmoid -> s -> MatMul W2 -> z -> Tanh -> t -> MatMul W3
    -> u -> Erf -> y [B, 4]: three sites in a chain."""
    w1, w2, w3 = _weights()
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
        helper.make_node("Sigmoid", ["h"], ["s"], name="sig"),
        helper.make_node("MatMul", ["s", "W2"], ["z"], name="mm2"),
        helper.make_node("Tanh", ["z"], ["t"], name="tanh"),
        helper.make_node("MatMul", ["t", "W3"], ["u"], name="mm3"),
        helper.make_node("Erf", ["u"], ["y"], name="erf"),
    ]
    g = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", F, ["B", 6])],
        [helper.make_tensor_value_info("y", F, ["B", 4])],
        [numpy_helper.from_array(w, n) for w, n in ((w1, "W1"), (w2, "W2"), (w3, "W3"))],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "chain.onnx"
    onnx.save(m, p)
    rng = np.random.default_rng(8)
    d = tmp_path / "data"
    d.mkdir()
    xs = []
    for k in range(2):
        x = (rng.standard_normal((32, 6)) * 2).astype(np.float32)
        np.savez(d / f"b{k}.npz", x=x)
        xs.append(x)
    return p, d, m, xs


def _sess(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(
        nodes,
        "s",
        [helper.make_tensor_value_info(i, F, None) for i in inputs],
        [helper.make_tensor_value_info(o, F, None) for o in outputs],
        list(inits),
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _independent(m, xs) -> dict:
    """Per site and for all at once: (the outputs as run, the outputs with the replacement),
    from our own sessions: the whole model with its intermediates as outputs (the prefix),
    and the graph after each site (the suffixes)."""
    w1, w2, w3 = _weights()
    W2, W3 = numpy_helper.from_array(w2, "W2"), numpy_helper.from_array(w3, "W3")
    full = _sess(
        [
            helper.make_node("MatMul", ["x", "W1"], ["h"]),
            helper.make_node("Sigmoid", ["h"], ["s"]),
            helper.make_node("MatMul", ["s", "W2"], ["z"]),
            helper.make_node("Tanh", ["z"], ["t"]),
            helper.make_node("MatMul", ["t", "W3"], ["u"]),
            helper.make_node("Erf", ["u"], ["y"]),
        ],
        ["x"],
        ["y", "h", "z", "u"],
        [numpy_helper.from_array(w1, "W1"), W2, W3],
    )
    after_s = _sess(
        [
            helper.make_node("MatMul", ["s", "W2"], ["z"]),
            helper.make_node("Tanh", ["z"], ["t"]),
            helper.make_node("MatMul", ["t", "W3"], ["u"]),
            helper.make_node("Erf", ["u"], ["y"]),
        ],
        ["s"],
        ["y"],
        [W2, W3],
    )
    after_t = _sess(
        [helper.make_node("MatMul", ["t", "W3"], ["u"]), helper.make_node("Erf", ["u"], ["y"])],
        ["t"],
        ["y"],
        [W3],
    )
    mm2 = _sess([helper.make_node("MatMul", ["s", "W2"], ["z"])], ["s"], ["z"], [W2])
    mm3 = _sess([helper.make_node("MatMul", ["t", "W3"], ["u"])], ["t"], ["u"], [W3])
    out: dict = {k: ([], []) for k in ("s1", "s2", "s3", "joint")}
    for x in xs:
        y, h, z, u = full.run(None, {"x": x})
        for k, new in (
            ("s1", after_s.run(None, {"s": cr32(sig, h)})[0]),
            ("s2", after_t.run(None, {"t": cr32(tanh, z)})[0]),
            ("s3", cr32(erf, u)),
        ):
            out[k][0].append(y)
            out[k][1].append(new)
        # all at once, down the chain: each site reads what the correct roundings above gave
        zj = mm2.run(None, {"s": cr32(sig, h)})[0]
        uj = mm3.run(None, {"t": cr32(tanh, zj)})[0]
        out["joint"][0].append(y)
        out["joint"][1].append(cr32(erf, uj))
    figs = {}
    for k, (base, new) in out.items():
        b = np.concatenate(base).astype(np.float64)
        v = np.concatenate(new).astype(np.float64)
        d = np.abs(v - b)
        nz = b != 0
        figs[k] = {
            "max_abs": float(d.max()),
            "max_rel": float((d[nz] / np.abs(b[nz])).max()),
            "mean_abs": float(d.mean()),
            "argmax_changed": np.count_nonzero(np.argmax(b, -1) != np.argmax(v, -1)) / b.shape[0],
            "scale": float(np.abs(b).max()),
        }
    return figs


class _Cells(HTMLParser):
    """The effect table's rows: (site, output) -> {figure: exact value}."""

    KEYS = ("max_abs", "max_rel", "mean_abs", "argmax_changed", "nonfinite_changed")

    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.inside, self.rows, self.row, self.cells = table_id, False, {}, None, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.inside = a.get("id") == self.table_id
        elif self.inside and tag == "tr" and "data-site" in a:
            self.row, self.cells = (a["data-site"], a["data-output"]), []
            self.rows[self.row] = self.cells
        elif self.inside and tag == "td" and self.row is not None:
            self.cells.append(a.get("data-value"))

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False

    def figures(self) -> dict:
        return {
            k: dict(zip(self.KEYS, [None if c is None else float(c) for c in v[-5:]]))
            for k, v in self.rows.items()
        }


def _cli(args):
    from audit.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(args)
    return code, out.getvalue()


def _bars(svg: bytes) -> dict:
    """key -> (the bar's vertical centre, its length), read from the SVG's bar groups."""
    root = ET.fromstring(svg)
    out = {}
    for el in root.iter():
        gid = el.get("id") or ""
        if not gid.startswith("effect-bar-"):
            continue
        path = next(p for p in el.iter() if p.tag.endswith("path"))
        v = [float(t) for t in re.findall(r"-?\d+(?:\.\d+)?", path.get("d"))]
        xs, ys = v[0::2], v[1::2]
        out[gid[len("effect-bar-") :]] = ((min(ys) + max(ys)) / 2, max(xs) - min(xs))
    return out


def test_report_shows_each_sites_effect_and_the_ranking_picture(tmp_path):
    p, d, m, xs = _model(tmp_path)
    want = _independent(m, xs)
    rep = tmp_path / "rep"
    code, out = _cli(["model", str(p), "--data", str(d), "--effect", "--report", str(rep)])
    assert code == 0, out
    html = (rep / "index.html").read_text()
    cells = _Cells("effect-table")
    cells.feed(html)
    got = cells.figures()
    assert set(got) == {("s1", "y"), ("s2", "y"), ("s3", "y"), ("joint", "y")}
    for k, w in want.items():
        g = got[k, "y"]
        assert w["max_abs"] > 0, k  # every site of the test model moves the output
        assert g["max_abs"] == w["max_abs"], k
        assert g["max_rel"] == pytest.approx(w["max_rel"], rel=1e-12), k
        assert g["mean_abs"] == pytest.approx(w["mean_abs"], rel=1e-12), k
        assert g["argmax_changed"] == w["argmax_changed"], k
        assert g["nonfinite_changed"] == 0, k
    # the picture: written beside the page and embedded in it
    svg = (rep / "effect-ranking.svg").read_bytes()
    src = re.search(r"id='effect-ranking' src='data:image/svg\+xml;base64,([^']+)'", html)
    assert src and base64.b64decode(src.group(1)) == svg
    bars = _bars(svg)
    assert set(bars) == {"s1", "s2", "s3", "joint"}
    sites = ("s1", "s2", "s3")
    rel = {k: want[k]["max_abs"] / want[k]["scale"] for k in want}
    ranking = sorted(sites, key=lambda k: (want[k]["argmax_changed"], rel[k]), reverse=True)
    assert len({rel[k] for k in sites}) == 3  # the premise: no ties
    top_down = sorted(sites, key=lambda k: bars[k][0])
    assert top_down == ranking  # rank 1 at the top
    assert bars["joint"][0] > max(bars[k][0] for k in sites)  # all at once: below the sites
    # the lengths are affine in log10 of the relative change (a log axis)
    lv = {k: np.log10(rel[k]) for k in want}
    a, b, c = ranking
    slope_ab = (bars[a][1] - bars[b][1]) / (lv[a] - lv[b])
    slope_ac = (bars[a][1] - bars[c][1]) / (lv[a] - lv[c])
    slope_aj = (bars[a][1] - bars["joint"][1]) / (lv[a] - lv["joint"]) if lv[a] != lv["joint"] else slope_ab
    assert slope_ab > 0 and slope_ac == pytest.approx(slope_ab, rel=1e-3)
    assert slope_aj == pytest.approx(slope_ab, rel=1e-3)
    # the mean change of each site: a marker on its bar, on the same log axis
    root = ET.fromstring(svg)
    x0 = min(
        float(re.findall(r"-?\d+(?:\.\d+)?", p.get("d"))[0])
        for el in root.iter()
        if (el.get("id") or "").startswith("effect-bar-")
        for p in el.iter()
        if p.tag.endswith("path")
    )  # the bars' left edge
    marks = {}
    for el in root.iter():
        gid = el.get("id") or ""
        if gid.startswith("effect-mean-"):
            use = next(u for u in el.iter() if u.tag.endswith("use"))
            marks[gid[len("effect-mean-") :]] = (float(use.get("x")) - x0, float(use.get("y")))
    assert set(marks) == set(bars)
    for k in marks:
        assert marks[k][1] == pytest.approx(bars[k][0], abs=0.01)  # on its own bar
        lm = np.log10(want[k]["mean_abs"] / want[k]["scale"])
        assert marks[k][0] == pytest.approx(bars[a][1] + slope_ab * (lm - lv[a]), abs=0.05)


def _doc(tmp_path):
    import audit.model

    p, d, _, _ = _model(tmp_path)
    doc, m = audit.model.run(str(p), data=str(d), effect=True)
    return doc, m


SITE_BEFORE = {"status": "audited", "weighted": {"mean_ulp": 7.25, "p99_ulp": 813.0, "nan": 0.0, "inf": 0.0,
               "underflow": 0.0}}  # fmt: skip
SITE_AFTER = {"status": "audited", "weighted": {"mean_ulp": 0.125, "p99_ulp": 0.875, "nan": 0.0, "inf": 0.0,
              "underflow": 0.0}}  # fmt: skip


@pytest.mark.parametrize("key", ["fix", "rewrites"])
def test_report_shows_the_fix_results_where_the_document_has_them(tmp_path, key):
    from reports.model_html import write_report

    doc, _ = _doc(tmp_path)
    after = {**doc, "effect": {**doc["effect"], "joint": {**doc["effect"]["joint"], "outputs": {
        "y": {**doc["effect"]["joint"]["outputs"]["y"], "max_abs": 1.5e-9, "mean_abs": 2.5e-10}}}}}  # fmt: skip
    fdoc = {
        "schema": "actaudit.model-fix/1",
        key: [
            {
                "site": "s3",
                "rewrite": "gelu-kernel",
                "kept": True,
                "why": "",
                "before": SITE_BEFORE,
                "after": SITE_AFTER,
            },
            {
                "site": "s1",
                "rewrite": "sigmoid-stable",
                "kept": False,
                "why": "an output is worse on the data",
                "before": SITE_BEFORE,
                "after": None,
            },
        ],  # fmt: skip
        "written": "fixed.onnx",
        "before": doc,
        "after": after,
    }
    html = write_report(fdoc, None, tmp_path / "r").read_text()
    rows = re.findall(r"<tr data-site='(s\d)' data-rewrite='([^']+)'>(.*?)</tr>", html)
    assert [(s, r) for s, r, _ in rows] == [("s3", "gelu-kernel"), ("s1", "sigmoid-stable")]
    vals = [float(v) for v in re.findall(r"data-value='([^']+)'", rows[0][2])]
    assert vals[:2] == [7.25, 813.0] and vals[5:7] == [0.125, 0.875]
    assert "<td>yes</td>" in rows[0][2] and "<td>no</td>" in rows[1][2]
    assert "not kept: an output is worse on the data" in html and "written: fixed.onnx" in html
    out = re.search(r"<tr data-output='y'>(.*?)</tr>", html.split("id='fix-outputs'")[1]).group(1)
    jb = doc["effect"]["joint"]["outputs"]["y"]
    assert [float(v) for v in re.findall(r"data-value='([^']+)'", out)] == [
        float(jb["max_abs"]), 1.5e-9, float(jb["mean_abs"]), 2.5e-10,
    ]  # fmt: skip
    assert (tmp_path / "r" / "effect-ranking.svg").exists()  # the model before the fix, ranked


def test_report_shows_identify_results_and_refuses_a_malformed_fix(tmp_path):
    from audit.errors import ActauditError
    from reports.model_html import page

    doc, _ = _doc(tmp_path)
    doc["sites"][1]["identify"] = {
        "identify": [
            {"candidate": "tanh.mlas", "path": "compute fp32", "identical_fraction": 1.0,
             "first_difference": None},
            {"candidate": "tanh.xla", "path": "compute fp32", "identical_fraction": 0.75,
             "first_difference": {"differing": 12, "x": 0.5, "target": 0.25, "candidate": 0.375}},
        ]
    }  # fmt: skip
    html = page(doc, {})
    s2 = html.split("<section id='s2'>")[1].split("</section>")[0]
    assert "tanh.mlas" in s2 and "identical on every input compared" in s2
    assert "differs on 12 inputs; at x = 0.5 the engine gives 0.25, the candidate 0.375" in s2
    assert "data-value='0.75'" in s2
    for bad in ({"fix": [{"site": "s1", "rewrite": 3, "kept": True}]}, {"fix": "yes"}):
        with pytest.raises(ActauditError, match="the model report: fix"):
            page({**doc, **bad}, {})


def test_sites_that_tie_on_max_abs_are_ranked_by_their_mean_change():
    """Hand-worked: an fp16 output moved by one unit in its last place (2^-11 at 1) by both
    sites; the one that moves it on more positions (larger mean) ranks first."""
    from audit.model.effect import score

    def outs(mean):
        return {"y": {"max_abs": 2.0**-11, "mean_abs": mean, "argmax_changed": 0.0, "scale": 1.0,
                      "nonfinite_changed": 0}}  # fmt: skip

    a, b = outs(2.0**-11 / 8), outs(2.0**-11 / 2)
    assert score(a)[:2] == score(b)[:2]
    assert sorted({"a": a, "b": b}.items(), key=lambda kv: score(kv[1]), reverse=True)[0][0] == "b"
