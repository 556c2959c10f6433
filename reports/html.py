"""The HTML report: one self-contained file (images embedded, styles and script inline,
no network access) plus one PNG per figure and the run's JSON.

Every text that can come from a user (candidate names, formulas, parameters, causes) is
escaped with html.escape.
"""

from __future__ import annotations

import base64
import datetime
import html
import os
import platform
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from audit._version import __version__
from audit.io import dumps, format_number, write_files
from audit.measure import clip as clip_mod
from audit.measure.sweep import document
from audit.oracle import oracle
from audit.targets.candidates import catalog

from . import figures, weighted

TIERS = [
    (0.5, "t0", "correctly rounded"),
    (4, "t1", "<= 4 ULP"),
    (64, "t2", "<= 64 ULP"),
    (1024, "t3", "<= 1024 ULP"),
    (float("inf"), "t4", "> 1024 ULP or NaN/inf"),
]

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222}
nav{position:fixed;top:0;left:0;bottom:0;width:210px;overflow-y:auto;background:#f7f7f9;
 border-right:1px solid #ddd;padding:12px 10px;font-size:13px;box-sizing:border-box}
nav a{display:block;color:#1a4f8b;text-decoration:none;padding:1px 0;overflow-wrap:anywhere}
nav a:hover{text-decoration:underline}nav .grp{margin-top:10px;font-weight:600;color:#444}
nav .sub{padding-left:10px;font-size:12px}
main{margin-left:230px;padding:16px 24px;max-width:1150px}
details.cand{border:1px solid #e3e3e3;border-radius:4px;margin:8px 0;padding:4px 10px}
details.cand>summary{cursor:pointer;font-weight:600;font-size:14px;padding:4px 0}
.explorer{position:relative;margin:6px 0}.explorer canvas{border:1px solid #ddd;cursor:crosshair;display:block}
.tip{position:absolute;pointer-events:none;background:rgba(255,255,255,.95);border:1px solid #888;
 font:12px monospace;padding:3px 6px;white-space:pre;display:none}
.hint{font-size:12px;color:#666}.rec td{text-align:left}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin-bottom:4px}table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3;cursor:pointer}
td.l,th.l{text-align:left}code{background:#f6f6f6;padding:1px 3px}
.t0{background:#c7e9c0}.t1{background:#e5f5e0}.t2{background:#fff7bc}.t3{background:#fdd49e}.t4{background:#fcae91}
img{max-width:100%;border:1px solid #eee;margin:4px 0}.meta td{text-align:left}
.finding{margin:2px 0 2px 12px;font-size:13px}.note{color:#555;font-size:13px}
.legend span{padding:2px 8px;margin-right:4px;font-size:12px}
"""

# Interactive error maps (no network, no library): each <div class=explorer> holds a canvas
# and the id of a JSON block of points; hover shows x, got, exact and the ULP error of the
# nearest point; drag across to zoom into an x range; double-click to zoom out.  A page
# check records script errors, images that did not load and overlapping blocks in
# data-* attributes of <body> (read by the tests through a headless browser).
EXPLORER_JS = """
(function(){
var errs=[];window.addEventListener('error',function(ev){errs.push(String(ev.message));});
function sl(v,l){var a=Math.abs(v);return (v<0?-1:1)*(a<=l?a/l:1+Math.log10(a/l));}
function isl(t,l){var a=Math.abs(t);return (t<0?-1:1)*(a<=1?a*l:l*Math.pow(10,a-1));}
function unpack(b,A){var s=atob(b),a=new Uint8Array(s.length);for(var i=0;i<s.length;i++)a[i]=s.charCodeAt(i);return Array.from(new A(a.buffer));}
function fmt(v){if(v===0)return '0';var a=Math.abs(v);return (a>=1e4||a<1e-3)?v.toExponential(2).replace(/\\.?0+e/,'e').replace('e+','e'):String(+v.toPrecision(4));}
function setup(div){
  var d=JSON.parse(document.getElementById(div.dataset.points).textContent);
  var F=d.xbytes===8?Float64Array:Float32Array;
  d.x=unpack(d.x,F);d.got=unpack(d.got,F);d.exact=unpack(d.exact,F).map(function(e,i){return d.got[i]+e;});d.u=unpack(d.u,d.ubytes===8?Float64Array:Float32Array);
  var cv=div.querySelector('canvas'),tip=div.querySelector('.tip'),g=cv.getContext('2d');
  var btn=div.querySelector('button.mode'),mode='lin';
  var W=cv.width,H=cv.height,L=58,R=10,T=22,B=30,n=d.x.length;
  function tr(x){return mode==='lin'?x:sl(x,d.lin);}
  function itr(t){return mode==='lin'?t:isl(t,d.lin);}
  var tx=d.x.map(tr);
  var ty=d.u.map(function(v){return Math.log10(Math.max(v,d.floor));});
  var full=d.region.slice(),y0=Math.log10(d.floor)-0.3,y1=Math.log10(d.top)+0.15;
  var v=full.slice(),drag=null;
  function setMode(m){mode=m;tx=d.x.map(tr);full=mode==='lin'?d.region.slice():[sl(-d.xmax,d.lin),sl(d.xmax,d.lin)];
    v=full.slice();div.dataset.mode=mode;
    if(btn)btn.textContent=mode==='lin'?'show the whole format (symlog x)':'show the active region (linear x)';draw();}
  if(btn)btn.addEventListener('click',function(){setMode(mode==='lin'?'log':'lin');});
  function X(t){return L+(t-v[0])/(v[1]-v[0])*(W-L-R);}
  function Y(t){return H-B-(Math.min(t,y1)-y0)/(y1-y0)*(H-T-B);}
  function drawX(ts){for(var i2=0;i2<ts.length;i2++){var t=ts[i2],x=X(t);g.beginPath();g.moveTo(x,T);g.lineTo(x,H-B);g.stroke();
      var s=fmt(itr(t));g.fillText(s,Math.min(Math.max(x-g.measureText(s).width/2,L),W-R-g.measureText(s).width),H-B+14);}}
  function draw(sel){
    g.clearRect(0,0,W,H);g.font='11px sans-serif';g.fillStyle='#333';g.strokeStyle='#ddd';
    var ys=Math.max(1,Math.ceil((y1-y0)/8));
    for(var k=Math.ceil(y0);k<=Math.floor(y1);k++){if(k!==Math.log10(d.floor)&&(k%ys)!==0)continue;var y=Y(k);g.beginPath();g.moveTo(L,y);g.lineTo(W-R,y);g.stroke();
      g.fillText(k===Math.log10(d.floor)?'floor':(Math.abs(k)>=4?'1e'+k:String(Math.pow(10,k))),4,y+4);}
    if(mode==='lin'){var sp=(v[1]-v[0])/6,m=Math.pow(10,Math.floor(Math.log10(sp))),st=sp/m>5?10*m:sp/m>2?5*m:sp/m>1?2*m:m,tl=[];
      for(var q=Math.ceil(v[0]/st)*st;q<=v[1];q+=st)tl.push(Math.abs(q)<st*1e-9?0:q);drawX(tl);}else{
    var ts=[0],kmax=Math.floor(Math.log10(d.xmax)),kmin=Math.ceil(Math.log10(d.lin));
    for(var k2=kmin;k2<=kmax;k2++){ts.push(sl(Math.pow(10,k2),d.lin));ts.push(sl(-Math.pow(10,k2),d.lin));}
    var one=sl(1,d.lin),wide=v[0]<-one&&v[1]>one;
    ts=ts.filter(function(t){return t>=v[0]&&t<=v[1]&&(!wide||t===0||Math.abs(t)>=one);}).sort(function(a,b){return a-b;});
    var kstep=Math.max(1,Math.ceil(ts.length/9)),step=1;
    ts=ts.filter(function(t){if(t===0)return true;var k=Math.round(Math.log10(Math.abs(isl(t,d.lin))));return k===0||k%kstep===0;});
    if(ts.length<3){ts=[];for(var i=0;i<=4;i++)ts.push(v[0]+(v[1]-v[0])*i/4);}
    drawX(ts);}
    g.fillText('ULP error (log)',4,12);g.fillText(mode==='lin'?'x (linear)':'x (symlog)',W-R-60,H-4);
    g.fillStyle=d.color;
    for(var j=0;j<n;j++){if(tx[j]<v[0]||tx[j]>v[1])continue;var px=X(tx[j]),py=Y(ty[j]);g.fillRect(px-1,py-1,2.5,2.5);}
    if(sel){g.fillStyle='rgba(30,90,200,.15)';g.fillRect(Math.min(sel[0],sel[1]),T,Math.abs(sel[1]-sel[0]),H-T-B);}
  }
  function tpos(e){var r=cv.getBoundingClientRect();return [e.clientX-r.left,e.clientY-r.top];}
  cv.addEventListener('mousemove',function(e){var p=tpos(e);
    if(drag!==null){draw([drag,p[0]]);return;}
    var best=-1,bd=1e9;for(var j=0;j<n;j++){if(tx[j]<v[0]||tx[j]>v[1])continue;
      var dx=X(tx[j])-p[0],dy=Y(ty[j])-p[1],dd=dx*dx+dy*dy;if(dd<bd){bd=dd;best=j;}}
    if(best<0||bd>400){tip.style.display='none';return;}
    tip.textContent='x     '+d.x[best]+'\\ngot   '+d.got[best]+'\\nexact '+d.exact[best]+'\\nerror '+fmt(d.u[best])+' ULP';
    tip.style.display='block';tip.style.left=Math.min(p[0]+12,W-230)+'px';tip.style.top=(p[1]+12)+'px';});
  cv.addEventListener('mouseleave',function(){tip.style.display='none';});
  cv.addEventListener('mousedown',function(e){drag=tpos(e)[0];});
  cv.addEventListener('mouseup',function(e){var a=drag,b=tpos(e)[0];drag=null;
    if(a!==null&&Math.abs(b-a)>4){var t0=v[0]+(Math.min(a,b)-L)/(W-L-R)*(v[1]-v[0]),t1=v[0]+(Math.max(a,b)-L)/(W-L-R)*(v[1]-v[0]);v=[t0,t1];}
    draw();});
  cv.addEventListener('dblclick',function(){v=full.slice();draw();});
  setMode('lin');
}
function openTarget(){var h=decodeURIComponent(location.hash.slice(1));if(!h)return;
  var only=h.indexOf('only:')===0;if(only)h=h.slice(5);var el=document.getElementById(h);
  if(!el||el.tagName!=='DETAILS')return;el.open=true;
  if(only)Array.from(el.parentNode.children).forEach(function(c){if(c!==el&&c.tagName!=='H1'&&c.tagName!=='SCRIPT')c.style.display='none';});
  el.scrollIntoView();}
window.addEventListener('hashchange',openTarget);
window.addEventListener('load',function(){
  try{document.querySelectorAll('.explorer').forEach(setup);openTarget();}catch(ex){errs.push(String(ex));}
  var imgs=Array.from(document.images),bad=imgs.filter(function(i){return !(i.complete&&i.naturalWidth>0);});
  document.querySelectorAll('details').forEach(function(x){x.dataset.wasOpen=x.open?'1':'0';x.open=true;});
  var els=Array.from(document.querySelectorAll('main img, main canvas, main table, nav')).filter(function(x){
    return x.offsetParent!==null||x.tagName==='NAV';}),rs=els.map(function(x){return x.getBoundingClientRect();}),ov=[];
  for(var i=0;i<els.length;i++)for(var j=i+1;j<els.length;j++){
    if(els[i].contains(els[j])||els[j].contains(els[i]))continue;var a=rs[i],b=rs[j];
    var w=Math.min(a.right,b.right)-Math.max(a.left,b.left),h=Math.min(a.bottom,b.bottom)-Math.max(a.top,b.top);
    if(w>1&&h>1&&a.width>0&&b.width>0)ov.push(els[i].tagName+'/'+els[j].tagName);}
  document.querySelectorAll('details').forEach(function(x){x.open=x.dataset.wasOpen==='1';});
  var b=document.body;b.dataset.images=imgs.length;b.dataset.imagesBad=bad.length;
  b.dataset.overlaps=ov.length;b.dataset.overlapList=ov.slice(0,5).join(',');b.dataset.errors=errs.join(' | ');
  b.dataset.checked='1';
  openTarget();
});
})();
"""

JS = """
document.querySelectorAll('table.sortable th').forEach(function(th, i){
  th.addEventListener('click', function(){
    var tb = th.closest('table').tBodies[0], rows = Array.from(tb.rows);
    var asc = th.dataset.asc !== '1'; th.dataset.asc = asc ? '1' : '0';
    rows.sort(function(a, b){
      var x = a.cells[i].dataset.v || a.cells[i].textContent, y = b.cells[i].dataset.v || b.cells[i].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function(r){ tb.appendChild(r); });
  });
});
"""


def e(s) -> str:
    return html.escape(str(s), quote=True)


def tier(v: float) -> str:
    if v is None or not np.isfinite(v):
        return "t4"
    for lim, cls, _ in TIERS:
        if v <= lim:
            return cls
    return "t4"


num = format_number


def slug(s: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", s.lower()).strip("-")[:80]


def binade_table(r) -> list[tuple]:
    """(e, count, max and mean ULP for x < 0, max and mean ULP for x > 0) per binade of |x|.

    One stable sort by (binade, sign) puts each cell's errors together in their input order,
    so each max and mean is taken over the same array as a mask would select (the same
    numbers, bit for bit) without two passes over every input per binade."""
    p = r.points
    ok = (p.cls == 0) & (p.x != 0)
    x, u = p.x[ok], p.ulp_err[ok]
    ex = np.frexp(np.abs(x))[1] - 1
    side = np.where(x < 0, 0, np.where(x > 0, 1, 2))  # (2: neither, a NaN x: counted only)
    base = int(ex.min()) if len(ex) else 0
    key = (ex.astype(np.int64) - base) * 3 + side
    order = np.argsort(key, kind="stable")
    key, u = key[order], u[order]
    cuts = np.flatnonzero(np.diff(key)) + 1
    starts, ends = np.r_[0, cuts], np.r_[cuts, len(key)]
    cell = {int(key[a]): u[a:b] for a, b in zip(starts, ends) if b > a}
    rows = []
    for b in np.unique(ex):
        k, cells = (int(b) - base) * 3, []
        for s in (0, 1):
            v = cell.get(k + s)
            cells += [float(v.max()), float(v.mean())] if v is not None else [None, None]
        n = sum(len(cell[k + s]) for s in (0, 1, 2) if k + s in cell)
        rows.append((int(b), n, *cells))
    return rows


class Report:
    """Collects figure jobs while the page is laid out; renders them (on every core when
    there are many) and puts the PNGs in place of their tokens."""

    def __init__(self, out: Path):
        self.out = out
        self.jobs: list[tuple[str, str, tuple]] = []  # (file name, figure function, args)
        self._slim: dict = {}

    def slim(self, r):
        """The result as a figure needs it: the figures it names, and its per-input arrays
        cut to those the figures draw (x, x2, result, RN_F(f) in float32; ULP error, class),
        so that a figure job sent to a worker carries a sixth of the bytes (a family
        figure: every result of the family)."""
        if getattr(r, "points", None) is None:
            return r
        if id(r) not in self._slim:
            from dataclasses import replace

            from audit.numbers.formats import get_format

            p, none = r.points, np.empty(0)
            # the format's values are exact in float32 up to 32 bits; the errors are drawn
            f = np.float32 if get_format(r.dtype).bits <= 32 else np.float64
            small = {k: getattr(p, k).astype(f) for k in ("x", "got", "rounded")}
            pts = replace(
                p,
                **small,
                x2=None if p.x2 is None else p.x2.astype(f),
                ulp_err=p.ulp_err,  # (float64: errors reach 1e76 ULP)
                exact=none,
                exact_lo=none,
                ulp_dist=none,
                abs_err=none,
                rel_err=none,
                correct=none,
            )
            from types import SimpleNamespace

            keep = (
                "candidate dtype compute formats_label saturation clip findings reference nan_count "
                "inf_count max_ulp mean_ulp p99_ulp correctly_rounded_fraction"
            ).split()
            light = SimpleNamespace(
                **{k: getattr(r, k) for k in keep},
                weighted=getattr(r, "weighted", None),
                domain=SimpleNamespace(exhaustive=r.domain.exhaustive, count=r.domain.count),
                points=pts,
            )
            self._slim[id(r)] = (r, light)
        return self._slim[id(r)][1]

    def img(self, name: str, job: tuple, alt: str) -> str:
        fname = f"{len(self.jobs):03d}-{slug(name)}.png"
        args = tuple(
            [self.slim(x) for x in a] if isinstance(a, list) else self.slim(a) if hasattr(a, "points") else a
            for a in job[1:]
        )
        self.jobs.append((fname, job[0].__name__, args))
        return f'<img alt="{e(alt)}" title="{e(fname)}" src="@@{fname}@@">'

    def render(self) -> list[tuple[str, bytes]]:
        from audit.signals import ready

        ready("render")
        if len(self.jobs) < 8 or (os.cpu_count() or 1) < 2:
            pngs = [_render(j) for j in self.jobs]
        else:  # audit's worker pool: interruptible at any moment, workers die with it
            from audit.measure.executors import engine_threads, run_chunks

            if engine_threads():  # fresh interpreters: each job travels to its worker
                pngs = list(run_chunks(_render_in_pool, None, self.jobs, workers=os.cpu_count()))
            else:  # forked workers hold the jobs already: each gets only its job's index
                pngs = list(
                    run_chunks(_render_nth, self.jobs, list(range(len(self.jobs))), workers=os.cpu_count())
                )
        return [(j[0], p) for j, p in zip(self.jobs, pngs)]


def _render_in_pool(_, job) -> bytes:
    return _render(job)


def _render_nth(jobs, i: int) -> bytes:
    return _render(jobs[i])


def _render(job) -> bytes:
    _, fn, args = job
    return getattr(figures, fn)(*args)


def build(results, out_dir, command: str = "", suggestions=None) -> Path:
    """Write DIR/index.html, one PNG per figure and DIR/run.json; return the HTML path.
    suggestions: ``actaudit.suggest/1`` documents (:func:`audit.repair.suggest.for_results`), shown
    in a "Suggest" section after "Which candidate to use" and linked from its rows."""
    sugg = [s if isinstance(s, dict) else s.to_dict() for s in (suggestions or [])]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep = Report(out)
    colors = figures.color_of([r.candidate for r in results])
    uni = [r for r in results if r.points is not None and r.points.x2 is None]
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>actaudit report</title><style>{CSS}</style></head><body>",
        _nav(results, bool(sugg)),
        "<main>",
        "<h1>actaudit report</h1>",
        _recommend(results, sugg),
        _suggest(sugg),
        _summary(results),
        _meta(results, command),
    ]

    # family views: all candidates of a family on one map, per path
    groups = defaultdict(list)
    for r in uni:
        groups[(r.candidate.split(".")[0], r.dtype, r.compute)].append(r)
    fam = [g for g in groups.values() if len(g) > 1]
    if fam:
        parts.append(
            "<h2 id='families'>Families</h2><p class='note'>One panel per candidate "
            "(the same axes in each panel of a figure) over the family's active region (where "
            "its findings begin and the function saturates; linear x), the whole format below "
            "it: the worst input of each run of consecutive inputs. Triangles on the top edge: "
            "errors beyond the axis.</p>"
        )
        for g in fam:
            name = f"family-{g[0].candidate.split('.')[0]}-{g[0].dtype}-{g[0].compute}"
            parts.append(rep.img(name, (figures.family_map, g, colors), "family error map, active region"))
            parts.append(
                "<details><summary>the same panels over the whole format (symmetric-log x)</summary>"
                + rep.img(
                    f"{name}-full", (figures.family_map, g, colors, True), "family error map, whole format"
                )
                + "</details>"
            )
    # the same candidate across formats
    by_cand = defaultdict(list)
    for r in uni:
        by_cand[r.candidate].append(r)
    multi = {k: v for k, v in by_cand.items() if len(v) > 1}
    if multi:
        parts.append("<h2 id='formats'>Across formats</h2>")
        for k, v in multi.items():
            parts.append(
                rep.img(f"formats-{k}", (figures.formats_side_by_side, v, colors[k]), f"{k} across formats")
            )
    parts.append(
        "<h2 id='candidates'>Candidates</h2><p class='note'>Click a candidate to open "
        "it (a link to it alone: index.html#only:ID). Its error map is interactive: hover to read x, got and exact; drag across "
        "to zoom; double-click to zoom out.</p>"
    )
    for i, r in enumerate(results):
        parts.append(_candidate(rep, r, colors[r.candidate], i))
    parts.append(f"</main><script>{JS}{EXPLORER_JS}</script></body></html>")
    page = "\n".join(parts)
    images = rep.render()
    uri = {
        f"@@{fname}@@": "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        for fname, png in images
    }
    # one pass over the page (a replace per image copied its megabytes 127 times)
    page = re.sub(r"@@[0-9]{3,}-[a-z0-9._-]*\.png@@", lambda m: uri.get(m[0], m[0]), page)

    # written as a set (audit.io.write_files): an interrupted report leaves nothing
    # half-written (index.html is moved last)
    write_files(out, [*images, ("run.json", dumps(document(results, command=command))), ("index.html", page)])
    return out / "index.html"


def written(path: Path, results) -> str:
    """What build wrote, for people (printed also when the output is piped): the page, how
    many results and figures it holds, its size and what lies beside it."""
    page = Path(path).read_text(encoding="utf-8")
    figs = page.count('src="data:image/png;base64,')
    mb = len(page.encode("utf-8")) / 1e6
    return (
        f"wrote {path}: {len(results)} results, {figs} figures\n"
        f"  {num(mb)} MB, self-contained; beside it one PNG per figure and run.json"
    )


def _version_of(module: str) -> str:
    """A library's version without importing it where this process has not (ml_dtypes takes
    0.75 s of CPU to import, for one line of the page)."""
    if module in sys.modules:
        return str(getattr(sys.modules[module], "__version__", "?"))
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return "not installed"


def _meta(results, command) -> str:
    import matplotlib
    import mpmath

    rows = [
        ("command", command or "(Python API)"),
        ("date", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")),
        (
            "versions",
            f"actaudit {__version__}, numpy {np.__version__}, mpmath {mpmath.__version__}, "
            f"ml_dtypes {_version_of('ml_dtypes')}, matplotlib {matplotlib.__version__}, "
            f"Python {platform.python_version()}",
        ),
        (
            "oracle",
            f"version {oracle.ORACLE_VERSION}: exact values from mpmath, correctly rounded "
            f"(precision p + 40 bits, doubled up to {oracle.MAX_PREC} until the rounding and "
            "the binade are certain); float64 fast paths only where proven and unambiguous",
        ),
        (
            "inputs",
            "; ".join(
                sorted(
                    {
                        f"{r.dtype}: {'exhaustive (every finite value; maxima are bounds)' if r.domain.exhaustive else 'sampled (maxima are lower bounds)'}"
                        for r in results
                    }
                )
            ),
        ),
    ]
    body = "".join(f"<tr><th class='l'>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows)
    return f"<h2 id='run'>How the run was made</h2><table class='meta'>{body}</table>"


def _findings_text(r) -> str:
    parts = [f"{f.kind} {f.count}" for f in r.findings]
    if r.hidden:
        parts.append(f"hidden {len(r.hidden)}")
    return ", ".join(parts) or "-"


def _summary(results) -> str:
    head = (
        "<tr><th class='l'>candidate</th><th class='l'>storage</th><th class='l'>compute</th>"
        "<th>inputs</th><th class='l'>kind</th><th>max ULP</th><th>p99 ULP</th><th>mean ULP</th>"
        "<th>max abs</th><th>NaN</th><th>inf</th><th class='l'>findings</th></tr>"
    )
    rows = []
    for r in results:
        mx = r.max_ulp if not (r.nan_count or r.inf_count) else float("inf")
        anchor = slug(f"{r.candidate}-{r.dtype}-{r.compute}-{_ptext(r)}")
        rows.append(
            f"<tr><td class='l'><a href='#{anchor}'>{e(r.candidate)}</a>{e(_ptext(r, ' '))}</td>"
            f"<td class='l'>{e(r.formats_label)}</td><td class='l'>{e(r.compute)}</td><td>{r.domain.count}</td>"
            f"<td class='l'>{'exhaustive' if r.domain.exhaustive else 'sampled'}</td>"
            f"<td class='{tier(mx)}' data-v='{r.max_ulp}'>{num(r.max_ulp)}</td>"
            f"<td class='{tier(r.p99_ulp)}' data-v='{r.p99_ulp}'>{num(r.p99_ulp)}</td>"
            f"<td data-v='{r.mean_ulp}'>{num(r.mean_ulp)}</td><td data-v='{r.max_abs}'>{num(r.max_abs)}</td>"
            f"<td>{r.nan_count}</td><td>{r.inf_count}</td><td class='l'>{e(_findings_text(r))}</td></tr>"
        )
    legend = "".join(f"<span class='{c}'>{e(t)}</span>" for _, c, t in TIERS)
    return (
        f"<h2 id='summary'>Summary</h2><p class='note'>Click a column to sort. Colors: tier of "
        f"the error (NaN or inf results count as the worst tier).</p><div class='legend'>{legend}</div>"
        f"<table class='sortable'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _ptext(r, lead="") -> str:
    p = ", ".join(f"{k}={num(v, 6)}" for k, v in r.params.items())
    sem = getattr(r, "semantics", None)
    return (f"{lead}({p})" if p else "") + (f" [{sem.name}]" if sem is not None else "")


def _candidate(rep: Report, r, color, index: int = 0) -> str:
    cand = catalog().get(r.candidate)
    anchor = slug(f"{r.candidate}-{r.dtype}-{r.compute}-{_ptext(r)}")
    out = [
        f"<details class='cand' id='{anchor}'><summary>{e(r.candidate)}{e(_ptext(r, ' '))}: "
        f"{e(r.formats_label)} storage, {e(r.compute)} compute &middot; max {e(num(r.max_ulp))} ULP"
        f"{f' &middot; {r.nan_count} NaN' if r.nan_count else ''}</summary>"
    ]
    out.append(_semantics_section(r))
    if cand is not None:
        out.append(
            f"<p class='note'>reference <code>{e(cand.reference)}</code>; formula "
            f"<code>{e(cand.formula)}</code><br>source: {e(cand.source)}</p>"
        )
    w = r.worst
    if w:
        out.append(
            f"<p>max {num(r.max_ulp)} ULP at x = {e(repr(w['x']))} ({e(w['x_hex'])}): got "
            f"{e(repr(w['got']))}, exact {e(repr(w['exact']))}. "
            f"{'Exhaustive: this is the true maximum.' if r.domain.exhaustive else 'Sampled: a lower bound.'}</p>"
        )
    out.append(weighted.html_table(r, e))  # figures weighted by --distribution
    if r.points is None:
        return "\n".join(out + ["</details>"])
    if r.points.x2 is not None:
        out.append(
            rep.img(
                f"heatmap-{r.candidate}-{r.dtype}-{r.compute}", (figures.heatmap, r), f"{r.candidate} heatmap"
            )
        )
    else:
        out.append(_explorer(r, color, f"pts{index}"))
        out.append(
            f"<details{' open' if getattr(r, 'weighted', None) else ''}><summary>Error map as a picture (first "
            "the active region, linear x; then the whole format, failure regions, saturation and clip "
            "marked)</summary>"
            + rep.img(
                f"errmap-{r.candidate}-{r.dtype}-{r.compute}{_ptext(r)}",
                (figures.error_map, r, color),
                f"{r.candidate} error map",
            )
            + "</details>"
        )
        out.append(
            rep.img(
                f"hist-{r.candidate}-{r.dtype}-{r.compute}{_ptext(r)}",
                (figures.histogram, r, color),
                f"{r.candidate} histogram",
            )
        )
        rows = "".join(
            f"<tr><td>[2^{b}, 2^{b + 1})</td><td>{n}</td><td>{num(a)}</td><td>{num(m)}</td>"
            f"<td>{num(c)}</td><td>{num(d)}</td></tr>"
            for b, n, a, m, c, d in binade_table(r)
        )
        out.append(
            "<details><summary>Per-binade errors</summary><table><tr><th>|x| in</th>"
            "<th>inputs</th><th>max ULP x&lt;0</th><th>mean ULP x&lt;0</th><th>max ULP x&gt;0</th>"
            f"<th>mean ULP x&gt;0</th></tr>{rows}</table></details>"
        )
    if r.findings or r.hidden:
        out.append("<div><b>Findings</b>")
        for f in r.findings:
            iv = ", ".join(f"[{num(a, 6)}, {num(b, 6)}]" for a, b in f.intervals[:6])
            more = f" (+{f.intervals_total - 6} more)" if f.intervals_total > 6 else ""
            cause = f" &mdash; {e(f.cause['text'])}" if f.cause else ""
            out.append(
                f"<div class='finding'><b>{e(f.kind)}</b>: {f.count} inputs in {e(iv)}{e(more)}{cause}</div>"
            )
        for h in r.hidden:
            out.append(f"<div class='finding'><b>{e(h['kind'])}</b>: {e(h['text'])}</div>")
        out.append("</div>")
    if r.clip:
        c = r.clip
        tol = c["tolerance"]
        out.append(
            f"<p><b>Clip recommendation</b> (tolerance {num(tol['max_ulp'])} ULP"
            f"{'' if tol['atol'] is None else ' or ' + num(tol['atol']) + ' abs'}): "
            f"{e(clip_mod.sentence(c))}</p>"
        )
    if r.saturation:
        s = r.saturation
        txt = "; ".join(
            f"{k}: x = {num(v['x'], 6)} -> {v['value'] if isinstance(v['value'], str) else num(v['value'])}"
            for k, v in s.items()
            if v
        )
        out.append(
            f"<p class='note'>saturation of the exact function in {e(r.dtype)}: {e(txt or 'none')}</p>"
        )
    out.append("</details>")
    return "\n".join(out)


def _semantics_section(r) -> str:
    """The "semantics" section of a result: the machine it was evaluated on."""
    from audit.targets import semantics as semantics_mod

    lines = semantics_mod.explain(
        getattr(r, "semantics", None), getattr(r, "stochastic", None), getattr(r, "changed", None)
    )
    items = "".join(f"<li>{e(t)}</li>" for t in lines)
    return f"<div class='semantics'><b>Semantics</b><ul>{items}</ul></div>"


def _packed(a, dtype) -> str:
    """An array as base64 of its little-endian bytes (the explorer's typed arrays read it)."""
    return base64.b64encode(
        np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    ).decode("ascii")


def _envelope(idx: np.ndarray, u: np.ndarray, runs: int) -> np.ndarray:
    """Of the inputs idx (in order), the one with the largest error u in each of ``runs``
    runs of consecutive ones (all of them when there are fewer)."""
    return idx[figures.worst_of_runs(u[idx], runs)]


def _explorer(r, color, key: str) -> str:
    """An interactive error map: the worst input of each of figures.ENVELOPE runs; it opens
    on the active region (linear x), a button shows the whole format (symmetric-log x).
    x and the results travel as float32 (exact for formats of 32 bits and fewer; float64
    above), the exact values as their difference from the result (float32: 7 digits of the
    error, where the tooltip needs them), the errors as float32, base64-packed."""
    import json

    from matplotlib.colors import to_hex

    from audit.numbers.formats import get_format

    p = r.points
    lo, hi = weighted.active_region(r)
    fin = p.cls == 0
    inside = np.flatnonzero(fin & (p.x >= lo) & (p.x <= hi))
    # the worst of each run: 900 runs over the active region (the view it opens on, about one
    # a pixel of its 830-pixel plot), 400 over the whole format (the symlog view)
    ok = np.union1d(_envelope(inside, p.ulp_err, 900), _envelope(np.flatnonzero(fin), p.ulp_err, 400))
    fmt = get_format(r.dtype)
    u = p.ulp_err[ok]
    xb = 4 if fmt.bits <= 32 else 8
    ub = 4 if not len(u) or float(np.max(u)) < 3e38 else 8  # errors beyond float32's range
    data = {
        "xbytes": xb,
        "x": _packed(p.x[ok], f"f{xb}"),
        "got": _packed(p.got[ok], f"f{xb}"),
        # exact - got: small where the error is, in float32 (float64 for fp64)
        "exact": _packed(p.exact[ok] - p.got[ok], f"f{xb}"),
        "ubytes": ub,
        "u": _packed(u, f"f{ub}"),
        "region": [float(lo), float(hi)],
        "lin": max(fmt.smallest_normal, 1e-30),
        "xmax": fmt.max_finite,
        "floor": figures.FLOOR,
        "color": to_hex(color),
        "top": float(
            10 ** np.ceil(np.log10(min(max(float(u.max()) if len(u) else 1.0, 1.0), figures.CAP)) - 1e-9)
        ),
    }
    blob = json.dumps(data, allow_nan=False).replace("<", "\\u003c")
    return (
        f"<div class='explorer' data-points='{key}'><button type='button' class='mode'></button>"
        "<canvas width='900' height='300'></canvas>"
        f"<div class='tip'></div><div class='hint'>hover: x, got, exact; drag: zoom; "
        f"double-click: zoom out. Errors below {num(figures.FLOOR)} ULP are drawn on the floor, "
        f"above {num(figures.CAP)} ULP on the top edge.</div></div><script type='application/json' id='{key}'>{blob}</script>"
    )


def _spec(r) -> str:
    return (
        f"; {r.special_failures} special input{'s' if r.special_failures > 1 else ''} wrong"
        if r.special_failures
        else ""
    )


def _suggest_id(reference, dtype, compute, sem="ieee") -> str:
    return slug(f"suggest-{reference}-{dtype}-{compute}" + ("" if sem == "ieee" else f"-{sem}"))


def _suggest(docs) -> str:
    """The "Suggest" section: per reference and path, suggest's ranking (correctness, then
    cost), its Pareto front and its verified repairs (reports/suggest.py renders each)."""
    if not docs:
        return ""
    from reports import suggest as suggest_report

    parts = [
        "<h2 id='suggest'>Suggest: what to ship instead</h2><p class='note'>Every candidate "
        "of each reference swept in each path of this report (actaudit suggest): ranked by "
        "correctness (NaN, inf, specials, max ULP, p99), then by cost (weighted operation "
        "counts, audit/repair/cost.py); each repair was verified by a sweep over the same inputs.</p>"
    ]
    for d in docs:
        sec = suggest_report.section(d, level=3).replace("<details open>", "<details>")  # repairs folded
        parts.append(
            f"<div id='{_suggest_id(d['reference'], d['dtype'], d['compute'], d.get('semantics', 'ieee'))}'>"
            f"{sec}</div>"
        )
    return "\n".join(parts)


def _nav(results, suggest: bool = False) -> str:
    links = ["<a href='#recommend'>Which candidate</a>"]
    links += ["<a href='#suggest'>Suggest</a>"] if suggest else []
    links += [
        "<a href='#summary'>Summary</a>",
        "<a href='#run'>How the run was made</a>",
        "<a href='#families'>Families</a>",
        "<a href='#candidates'>Candidates</a>",
    ]
    by_path: dict = defaultdict(list)
    for r in results:
        by_path[(r.dtype, r.compute)].append(r)
    for (d, c), rs in by_path.items():
        links.append(f"<div class='grp'>{e(d)} / {e(c)}</div>")
        links += [
            f"<a class='sub' href='#{slug(f'{r.candidate}-{r.dtype}-{r.compute}-{_ptext(r)}')}'>"
            f"{e(r.candidate)}{e(_ptext(r, ' '))}</a>"
            for r in rs
        ]
    return "<nav>" + "".join(links) + "</nav>"


def _recommend(results, docs=()) -> str:
    """Per evaluation path: the candidates without NaN, inf or wrong specials, lowest max ULP
    first (at most 3); with suggest documents, links to the path's ranking of each
    reference."""
    by_path: dict = defaultdict(list)
    for r in results:
        by_path[(r.dtype, r.compute)].append(r)
    rows = []
    for (d, c), rs in by_path.items():
        clean = sorted(
            (r for r in rs if not (r.nan_count or r.inf_count) and np.isfinite(r.max_ulp)),
            key=lambda r: (r.special_failures > 0, r.max_ulp, r.p99_ulp),
        )
        best = (
            ", ".join(
                f"<b>{e(r.candidate)}</b> ({e(num(r.max_ulp))} ULP max, {e(num(r.p99_ulp))} p99{_spec(r)})"
                if i == 0
                else f"{e(r.candidate)} ({e(num(r.max_ulp))}{_spec(r)})"
                for i, r in enumerate(clean[:3])
            )
            or "none without NaN or inf results"
        )
        links = [
            f"<a href='#{_suggest_id(s['reference'], s['dtype'], s['compute'], s.get('semantics', 'ieee'))}'>"
            f"{e(s['reference'])}</a>"
            for s in docs
            if (s["dtype"], s["compute"]) == (d, c)
        ]
        more = (
            f"<br><span class='note'>ranked with costs and repairs: {', '.join(links)}</span>"
            if links
            else ""
        )
        rows.append(f"<tr><td>{e(d)} storage, {e(c)} compute</td><td>{best}{more}</td></tr>")
    return (
        "<h2 id='recommend'>Which candidate to use</h2><p class='note'>Per evaluation path, "
        "the candidates with no NaN or infinite result over the finite inputs: those with every "
        "special input (+-inf, NaN) right first, then lowest maximum ULP error.</p>"
        f"<table class='rec'><tr><th class='l'>path</th><th class='l'>best (max ULP)</th></tr>"
        f"{''.join(rows)}</table>"
    )
