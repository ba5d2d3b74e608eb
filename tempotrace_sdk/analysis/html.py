# ruff: noqa: E501 - the inline JavaScript and HTML read better unwrapped
"""A self-contained HTML timeline (spec/analysis.md §6.3).

No network fetches: styles and script are inline and a Content-Security-Policy
forbids loading anything else. The headline numbers are written into the page
by Python from ``report.summary()`` (the same dict the JSON holds), so the
page and the JSON cannot disagree; the script draws the timeline from the
embedded data: a row per host and rank, each span a bar with its start and end
uncertainty as whiskers, each hop a line coloured by how it was decided.
"""

from __future__ import annotations

import html
import json
from typing import Any

from .report import AnalysisReport

__all__ = ["HTML_MAX_HOPS", "HTML_MAX_SPANS", "render_html"]

#: A browser draws a few thousand SVG elements comfortably; beyond, the page says it is cut.
HTML_MAX_SPANS = 5000
HTML_MAX_HOPS = 5000

_LABELS = (
    ("spans", "Spans"),
    ("traces", "Traces"),
    ("hops", "Hops (send → receive)"),
    ("hops_matched", "Hops matched to the sender's span"),
    ("edges", "Known causal edges"),
    ("physics", "Decided by physics"),
    ("lamport", "Decided by Lamport (inversion ruled out)"),
    ("svc", "Decided by SVC"),
    ("undecided", "Undecided (no guess)"),
    ("wrong", "WRONG: confident and contradicting the edge"),
    ("naive_inversions", "Naive inversions (raw timestamps)"),
    ("lying_hosts", "Hosts flagged as lying"),
    ("suspect_hosts", "Hosts suspect (cannot tell from peer)"),
    ("bad_lines", "Input lines skipped (unreadable)"),
    ("bad_spans", "Spans refused (a value breaks a rule)"),
    ("export_dropped_spans", "Spans the exporters dropped before writing"),
)

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.legend span{display:inline-block;margin-right:1em}.sw{width:1.2em;height:.6em;display:inline-block;margin-right:.3em}
#wrap{overflow-x:auto;border:1px solid #ddd}svg text{font:11px sans-serif}
.bad{color:#b00;font-weight:bold}
"""

_JS = """
(function(){
var d=JSON.parse(document.getElementById('tt-data').textContent);
var svg=document.getElementById('timeline'),NS='http://www.w3.org/2000/svg';
var colors={physics:'#2a9d3a',lamport:'#2a6fdb',svc:'#8e44ad',undecided:'#999',contradiction:'#d00'};
function el(n,a,p){var e=document.createElementNS(NS,n);for(var k in a)e.setAttribute(k,a[k]);(p||svg).appendChild(e);return e;}
var rows={},order=[],byId={},drawn=0;
d.spans.forEach(function(s){var k=s.host+(s.rank===null?'':' rank '+s.rank);if(!(k in rows)){rows[k]=order.length;order.push(k);}s.row=rows[k];byId[s.span_id]=s;});
// Nested spans on one row get their own lane (depth under a parent on the same row).
function depth(s){if(s.depth!==undefined)return s.depth;var p=byId[s.parent_id];s.depth=0;s.depth=(p&&p.row===s.row)?depth(p)+1:0;return s.depth;}
var lanes=order.map(function(){return 1;});
d.spans.forEach(function(s){lanes[s.row]=Math.max(lanes[s.row],depth(s)+1);});
var laneH=16,top=20,rowTop=[],y0=top;
order.forEach(function(k,i){rowTop.push(y0);y0+=lanes[i]*laneH+10;});
var t0=Infinity,t1=-Infinity;
d.spans.forEach(function(s){t0=Math.min(t0,s.start_ptp_ns-s.start_uncertainty_ns);t1=Math.max(t1,s.end_ptp_ns+(s.end_uncertainty_ns||0));});
if(!isFinite(t0)){t0=0;t1=1;}
var left=170,width=1400,span=Math.max(1,t1-t0);
svg.setAttribute('width',left+width+20);svg.setAttribute('height',y0+20);
function x(t){return left+(t-t0)/span*width;}
function ymid(s){return rowTop[s.row]+s.depth*laneH+6;}
order.forEach(function(k,i){el('text',{x:4,y:rowTop[i]+12}).textContent=k;
  var yl=rowTop[i]+lanes[i]*laneH+4;el('line',{x1:left,x2:left+width,y1:yl,y2:yl,stroke:'#eee'});});
d.spans.forEach(function(s){
  var y=ymid(s)-6,x0=x(s.start_ptp_ns),x1=Math.max(x0+1,x(s.end_ptp_ns));
  var g=el('g',{'class':'span','data-span':s.span_id});
  el('rect',{x:x0,y:y,width:x1-x0,height:12,fill:s.stamped?'#cfe3f7':'#eee',stroke:'#5b8bc7'},g);
  el('title',{},g).textContent=s.name+' @'+s.host+'  start ±'+s.start_uncertainty_ns+' ns ('+s.start_quality+')'+
    (s.end_uncertainty_ns===null?'  end: no bound':'  end ±'+s.end_uncertainty_ns+' ns');
  [[s.start_ptp_ns,s.start_uncertainty_ns],[s.end_ptp_ns,s.end_uncertainty_ns]].forEach(function(p){
    if(p[1]===null||p[1]>=65535)return;var a=x(p[0]-p[1]),b=x(p[0]+p[1]);
    el('line',{x1:a,x2:b,y1:y+6,y2:y+6,stroke:'#333','class':'whisker'},g);
    el('line',{x1:a,x2:a,y1:y+2,y2:y+10,stroke:'#333'},g);el('line',{x1:b,x2:b,y1:y+2,y2:y+10,stroke:'#333'},g);});
  drawn++;});
var hops=0;
d.hops.forEach(function(h){var a=byId[h.send_span],b=byId[h.recv_span];if(!a||!b||h.send_ptp_ns===null||h.recv_ptp_ns===null)return;
  var c=h.outcome==='contradiction'?colors.contradiction:(colors[h.decision.method]||'#999');
  var l=el('line',{x1:x(h.send_ptp_ns),y1:ymid(a),x2:x(h.recv_ptp_ns),y2:ymid(b),stroke:c,'stroke-width':2,
    'class':'hop','data-method':h.decision.method,'data-outcome':h.outcome});
  el('title',{},l).textContent='hop '+h.send_host+' → '+h.recv_host+': '+h.decision.relation+' by '+h.decision.method+
    ' (confidence '+h.decision.confidence+')';hops++;});
svg.setAttribute('data-drawn-spans',drawn);svg.setAttribute('data-drawn-hops',hops);
})();
"""


def _fmt(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else html.escape(str(value))


def _summary_rows(summary: dict[str, Any]) -> str:
    out = []
    for key, label in _LABELS:
        value = summary[key]
        cls = ' class="n bad"' if key in ("wrong", "lying_hosts", "export_dropped_spans") and value else ' class="n"'
        out.append(f'<tr><th>{html.escape(label)}</th><td{cls} data-key="{key}" data-value="{value}">{_fmt(value)}</td></tr>')
    return "\n".join(out)


def _fault_rows(report: AnalysisReport) -> str:
    if not report.faults:
        return '<p id="no-faults">No clock faults: every claimed bound held on every known edge.</p>'
    rows = ['<table id="faults"><tr><th>Host</th><th>Rank</th><th>Verdict</th><th>Kind</th><th>Violations</th>'
            "<th>Edges</th><th>Rate</th><th>Peers</th><th>Max beyond bound (ns)</th><th>Claimed bound (ns)</th></tr>"]
    for f in report.faults:
        rank = "" if f.rank is None else str(f.rank)
        rows.append(
            f'<tr data-host="{html.escape(f.host)}" data-rank="{rank}"><td>{html.escape(f.host)}</td><td>{rank}</td>'
            f"<td>{f.verdict}</td><td>{f.kind}</td>"
            f'<td class="n" data-key="violations">{f.violations:,}</td><td class="n">{f.edges:,}</td>'
            f'<td class="n">{100 * f.rate:.1f}%</td><td class="n">{len(f.peers)}</td>'
            f'<td class="n" data-key="max_excess_ns">{f.max_excess_ns:,}</td><td class="n">{f.claimed_bound_ns:,}</td></tr>'
        )
    rows.append("</table>")
    return "\n".join(rows)


def render_html(report: AnalysisReport) -> str:
    """The page as one string."""
    summary = report.summary()
    spans = report.spans_kept[:HTML_MAX_SPANS]
    hops = report.hops_kept[:HTML_MAX_HOPS]
    data = {"summary": summary, "spans": spans, "hops": hops}
    # "</script" or "<!--" inside a script element would end or derail it; escaping every "<"
    # as \u003c keeps the JSON identical once parsed.
    payload = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    cut = ""
    if len(spans) < report.spans or len(hops) < report.hops:
        cut = (f'<p id="cut">Timeline shows {len(spans):,} of {report.spans:,} spans and {len(hops):,} of '
               f"{report.hops:,} hops; the numbers above cover all of them.</p>")
    legend = "".join(
        f'<span><i class="sw" style="background:{c}"></i>{n}</span>'
        for n, c in (("physics", "#2a9d3a"), ("lamport", "#2a6fdb"), ("svc", "#8e44ad"), ("undecided", "#999"),
                     ("contradiction", "#d00"))
    )
    src = html.escape(report.source or "<spans>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>TempoTrace analysis: {src}</title><style>{_CSS}</style></head>
<body>
<h1>TempoTrace analysis</h1>
<p>Source: <code id="source">{src}</code></p>
<table id="summary">
{_summary_rows(summary)}
</table>
<h2>Clock faults</h2>
{_fault_rows(report)}
<h2>Timeline</h2>
<p class="legend">Hops coloured by how they were decided: {legend} Whiskers: each stamp's claimed ± bound.</p>
{cut}
<div id="wrap"><svg id="timeline" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="span timeline"></svg></div>
<script type="application/json" id="tt-data">{payload}</script>
<script>{_JS}</script>
</body></html>
"""
