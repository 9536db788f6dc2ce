package report

import (
	"fmt"
	"html/template"
	"strings"
)

// css is the page's style sheet. The latency plot's checkboxes hide paths
// with CSS alone (no script): one rule per function slot and outcome.
var css = func() string {
	var b strings.Builder
	b.WriteString(baseCSS)
	for i := 0; i < maxFNames; i++ {
		fmt.Fprintf(&b, "#lf%d:not(:checked)~.scroll .f%d{display:none}", i, i)
	}
	for _, c := range []string{"o", "f", "i"} {
		fmt.Fprintf(&b, "#lo%s:not(:checked)~.scroll .pt.%s{display:none}", c, c)
	}
	return b.String()
}()

const baseCSS = `
:root{--ok:#34a853;--fail:#e8566c;--info:#f5a623;--never:#bdbdbd}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#202124;background:#fff}
main{max-width:1500px;margin:0 auto;padding:16px 24px 64px}
h1{font-size:22px;margin:0;word-break:break-word}
h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #dadce0;padding-bottom:4px}
h3{font-size:15px;margin:4px 0}
a{color:#1a73e8}
.muted{color:#5f6368}
.head{display:flex;align-items:center;gap:20px;flex-wrap:wrap}
.badge{font-size:30px;font-weight:800;letter-spacing:.06em;padding:6px 24px;border-radius:8px;color:#fff}
.v-true.badge,.pill.v-true{background:#188038;color:#fff}
.v-false.badge,.pill.v-false{background:#c5221f;color:#fff}
.v-unknown.badge,.pill.v-unknown{background:#f9ab00;color:#202124}
.pill{display:inline-block;font-size:12px;font-weight:600;padding:0 8px;border-radius:9px}
.vnote{margin:6px 0 10px;font-size:15px}
nav{margin:12px 0;font-size:13px}nav a{margin-right:14px}
table{border-collapse:collapse}
th,td{padding:2px 10px 2px 0;text-align:left;vertical-align:top}
.facts th{color:#5f6368;font-weight:500;padding-right:18px;white-space:nowrap}
.facts td{word-break:break-all}
.grid th{background:#f1f3f4;font-weight:600;padding:3px 10px 3px 6px;white-space:nowrap}
.grid td{border-bottom:1px solid #f1f3f4;padding:2px 10px 2px 6px}
.num{text-align:right;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto;max-width:100%}
.anom{border-left:5px solid #f9ab00;padding:6px 14px;margin:12px 0;background:#fafafa}
.anom.v-false{border-color:#c5221f}
.anom ol{padding-left:22px;margin:6px 0}.anom li{margin:8px 0}
.wtext{white-space:pre-wrap;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}
.ops-links{margin-top:2px}
.oplink{display:inline-block;font:12px ui-monospace,Menlo,Consolas,monospace;background:#e8f0fe;border-radius:4px;padding:0 6px;margin:2px 4px 0 0;text-decoration:none}
.oplink.missing{background:#eee;color:#5f6368}
.good{color:#188038;font-weight:600}
.notice{background:#fff8e1;border:1px solid #f9ab00;border-radius:4px;padding:4px 10px;margin:6px 0;font-size:13px}
.legend{font-size:12px;color:#3c4043;margin:4px 0}
.legend span{margin-right:12px;white-space:nowrap}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;vertical-align:-1px;margin-right:4px}
.legend label{margin-right:12px;white-space:nowrap;cursor:pointer}
.legend input{vertical-align:-2px;margin:0 3px 0 0}
svg.plot{display:block;margin:4px 0}
svg text{font:10px system-ui,sans-serif;fill:#5f6368}
svg .lbl{fill:#3c4043}
.ax line{stroke:#e8eaed;stroke-width:1}
.ph{stroke:#3c4043;stroke-dasharray:3 3;stroke-width:1}
.phn{fill:#3c4043;font-weight:600}
.fault{fill-opacity:.13}
.fx{font-weight:600}
.flab line{stroke-width:3}.flab text{font-weight:600}
.stripe{fill:#f8f9fa}
.tl .o{fill:var(--ok)}.tl .f{fill:var(--fail)}.tl .i{fill:var(--info)}.tl .n{fill:var(--never)}
.tl .w{stroke:#000;stroke-width:1.5}
.tl .other rect{fill-opacity:.55}
.st.sl{fill:#1a73e8}.st.sf{fill:#aecbfa}.st.sc{fill:#a142f4}.st.sx{fill:#5f6368}.st.so{fill:#dadce0}
.st.lnone{fill:#eceff1}.st.lsplit{fill:#c5221f}.st.lhear{fill:#cfd8dc}
.stl{font-size:9px;fill:#fff;pointer-events:none}.stl.sf,.stl.so,.stl.lnone,.stl.lhear{fill:#202124}
.pt{fill:none;stroke-linecap:round;stroke-width:3}
.pt.o{stroke:var(--ok);stroke-opacity:.6}.pt.f{stroke:var(--fail);stroke-width:4}.pt.i{stroke:var(--info);stroke-width:4}
.ro{fill:var(--ok);fill-opacity:.25;stroke:#188038;stroke-width:1}.rf{fill:none;stroke:var(--fail);stroke-width:1.5}.ri{fill:none;stroke:var(--info);stroke-width:1.5}
.log{font:12px ui-monospace,Menlo,Consolas,monospace}
.log th{position:sticky;top:0}
.log td{white-space:nowrap}.log td:nth-child(10){white-space:normal;word-break:break-all;min-width:300px}
.log td:nth-child(-n+3),.log td:nth-child(9){text-align:right;font-variant-numeric:tabular-nums}
.log tr.fail td{background:#fdecee}.log tr.info td{background:#fff4dc}.log tr.nem td{background:#f3e8fd}.log tr.stat td{color:#80868b}
.log tr.wit td:first-child{box-shadow:inset 4px 0 #c5221f;font-weight:700}
.log tr:target td{background:#fff176}
.log tr.gap td{color:#80868b;text-align:center;font-style:italic;background:#f8f9fa}
.err{color:#b3261e}
.yes{color:#188038}.no{color:#c5221f;font-weight:600}
footer{margin-top:40px;font-size:12px;color:#80868b}
`

var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{.Title}} — {{.BadgeText}}</title>
<style>{{.CSS}}</style></head>
<body><main>
<header>
<div class="head"><h1>{{.Title}}</h1><div class="badge {{.BadgeClass}}" id="verdict">{{.BadgeText}}</div></div>
<p class="vnote">{{.BadgeNote}}</p>
{{if .Facts}}<table class="facts">{{range .Facts}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>{{end}}
<nav><a href="#anomalies">Anomalies</a><a href="#checkers">Checkers</a><a href="#timeline">Timeline</a><a href="#latency">Latency</a><a href="#throughput">Throughput</a><a href="#phases">Phases</a><a href="#faults">Faults</a><a href="#log">Operation log</a></nav>
</header>

<section id="anomalies"><h2>Anomalies</h2>
{{range .Anomalies}}<div class="anom {{.Class}}">
<h3>{{.Name}} <span class="pill {{.Class}}">{{.Label}}</span> <span class="muted">{{.Count}} witness{{if ne .Count 1}}es{{end}}</span></h3>
{{if .Stats}}<div class="muted">{{.Stats}}</div>{{end}}
{{if .Witnesses}}<ol>{{range .Witnesses}}<li>{{if .Session}}<div class="muted">session {{.Session}}</div>{{end}}<div class="wtext">{{.Text}}</div>
{{if .Links}}<div class="ops-links">{{range .Links}}{{if .InLog}}<a class="oplink" href="#op-{{.Index}}">{{.Label}}</a>{{else}}<span class="oplink missing" title="not in the operation log below; see history.jsonl">{{.Label}}</span>{{end}}{{end}}{{if .MoreLinks}} <span class="muted">and {{.MoreLinks}} more records</span>{{end}}</div>{{end}}</li>
{{end}}</ol>{{if .More}}<p class="muted">… and {{.More}} more witnesses (see the checker output).</p>{{end}}
{{else}}<p class="muted">No witnesses: the checker gave no specific operations{{if eq .Label "unknown"}}; its result is inconclusive rather than wrong{{end}}.</p>{{end}}
</div>
{{else}}<p class="good">No anomalies: every checker passed{{if not .Checkers}} (no checkers ran){{end}}.</p>
{{end}}</section>

<section id="checkers"><h2>Checkers</h2>
{{if .Checkers}}<table class="grid"><tr><th>checker</th><th>verdict</th><th class="num">witnesses</th><th>stats</th></tr>
{{range .Checkers}}<tr><td>{{.Name}}</td><td><span class="pill {{.Class}}">{{.Label}}</span></td><td class="num">{{.Witnesses}}</td><td class="muted">{{.Stats}}</td></tr>
{{end}}</table>{{else}}<p class="muted">No checker results.</p>{{end}}
<h3 style="margin-top:14px">Operations by function</h3>
<p class="muted">{{.Operations}} operations in {{.Records}} records; latencies are of ok operations.</p>
{{if .Functions}}<table class="grid"><tr><th>f</th><th class="num">ok</th><th class="num">fail</th><th class="num">info</th><th class="num">never completed</th><th class="num">p50</th><th class="num">p99</th><th class="num">max</th></tr>
{{range .Functions}}<tr><td>{{.F}}</td><td class="num">{{.OK}}</td><td class="num">{{.Fail}}</td><td class="num">{{.Info}}</td><td class="num">{{.Never}}</td><td class="num">{{.P50}}</td><td class="num">{{.P99}}</td><td class="num">{{.Max}}</td></tr>
{{end}}</table>{{end}}
</section>

<section id="timeline"><h2>Timeline</h2>
<div class="legend"><span><i class="sw" style="background:var(--ok)"></i>ok</span><span><i class="sw" style="background:var(--fail)"></i>fail</span><span><i class="sw" style="background:var(--info)"></i>info (outcome unknown)</span><span><i class="sw" style="background:var(--never)"></i>never completed</span><span><i class="sw" style="background:#fff;border:2px solid #000"></i>referenced by a witness</span><span><i class="sw" style="background:#d93025;opacity:.3"></i>fault window (dashed: not verified)</span><span>┆ phase boundary</span></div>
{{if .HasStatus}}<div class="legend">Node status: <span><i class="sw" style="background:#1a73e8"></i>leader</span><span><i class="sw" style="background:#aecbfa"></i>follower</span><span><i class="sw" style="background:#a142f4"></i>candidate</span><span><i class="sw" style="background:#5f6368"></i>unreachable</span><span><i class="sw" style="background:#c5221f"></i>several leaders</span> · leader row: {{range .Nodes}}<span><i class="sw" style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}</div>{{end}}
<p class="muted">One lane per client process (a process that saw an unknown outcome continues under a new number); each bar runs from invocation to completion. Hover for details; click a bar to jump to its record when it is in the log.</p>
{{if .TimelineNotice}}<p class="notice">{{.TimelineNotice}}</p>{{end}}
<div class="scroll">{{.Timeline}}</div>
</section>

<section id="latency"><h2>Latency</h2>
<p class="muted">Each completed operation at its invocation time; log scale.{{if .NeverDone}} {{.NeverDone}} operations never completed and are not shown.{{end}}</p>
<div class="legend lat-toggles">
<input type="checkbox" id="loo" checked><label for="loo"><i class="sw" style="background:var(--ok)"></i>ok</label>
<input type="checkbox" id="lof" checked><label for="lof"><i class="sw" style="background:var(--fail)"></i>fail</label>
<input type="checkbox" id="loi" checked><label for="loi"><i class="sw" style="background:var(--info)"></i>info</label>
<span class="muted"> · f:</span>
{{range .FToggles}}<input type="checkbox" id="{{.ID}}" checked><label for="{{.ID}}">{{.Label}}</label>
{{end}}<div class="scroll">{{.Latency}}</div>
</div>
</section>

<section id="throughput"><h2>Throughput</h2>
<div class="legend"><span><i class="sw" style="background:var(--ok);opacity:.5"></i>ok/s</span><span><i class="sw" style="background:var(--fail)"></i>fail/s</span><span><i class="sw" style="background:var(--info)"></i>info/s</span> <span class="muted">by completion time, {{.BucketS}} s buckets</span></div>
<div class="scroll">{{.Rate}}</div>
</section>

<section id="phases"><h2>Phases</h2>
{{if .PhaseTable.Header}}<div class="scroll"><table class="grid"><tr>{{range .PhaseTable.Header}}<th{{if .Num}} class="num"{{end}}>{{.Text}}</th>{{end}}</tr>
{{range .PhaseTable.Rows}}<tr>{{range .}}<td{{if .Num}} class="num"{{end}}>{{.Text}}</td>{{end}}</tr>
{{end}}</table></div>{{else}}<p class="muted">No per-phase table.</p>{{end}}
</section>

<section id="faults"><h2>Faults</h2>
{{if .Faults}}<table class="grid"><tr><th>fault</th><th>targets</th><th>window</th><th class="num">length</th><th>injected</th><th>verified</th><th>note</th></tr>
{{range .Faults}}<tr><td><i class="sw" style="background:{{.Color}}"></i>{{.Name}}</td><td>{{.Targets}}</td><td>{{.Window}}</td><td class="num">{{.Length}}</td><td>{{if .Injected}}<span class="yes">yes</span>{{else}}<span class="no">no</span>{{end}}</td><td>{{if .Verified}}<span class="yes">yes</span>{{else}}<span class="no">no</span>{{end}}</td><td>{{.Note}}</td></tr>
{{end}}</table>{{else}}<p class="muted">No faults were injected.</p>{{end}}
</section>

<section id="log"><h2>Operation log</h2>
{{if .LogNotice}}<p class="notice">{{.LogNotice}}</p>{{else}}<p class="muted">Every record of the history ({{.Records}}); history.jsonl has them in machine-readable form.</p>{{end}}
<div class="scroll"><table class="grid log"><tr><th class="num">#</th><th class="num">time s</th><th class="num">id</th><th>process</th><th>type</th><th>f</th><th>node</th><th>session</th><th class="num">latency</th><th>details</th></tr>
{{range .Log}}{{if .Gap}}<tr class="gap"><td colspan="10">… {{.Gap}} record{{if ne .Gap 1}}s{{end}} not listed …</td></tr>
{{else}}<tr id="op-{{.Index}}" class="{{.Class}}"><td>{{.Index}}</td><td>{{.Time}}</td><td>{{.ID}}</td><td>{{.Proc}}</td><td>{{.Type}}</td><td>{{.F}}</td><td>{{.Node}}</td><td>{{.Session}}</td><td>{{.Latency}}</td><td>{{.Details}}{{if .Err}} <span class="err">{{.Err}}</span>{{end}}</td></tr>
{{end}}{{end}}</table></div>
</section>
<footer>Generated by jepsen/report. Times are seconds since the run began. The full history is in history.jsonl next to this file.</footer>
</main></body></html>
`))
