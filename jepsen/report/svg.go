package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// The three time plots share one x scale, so their fault windows line up.
const (
	plotLeft  = 84.0 // room for lane labels
	plotRight = 18.0
)

var faultPalette = []string{"#d93025", "#9334e6", "#e37400", "#1a73e8", "#0b8043", "#795548", "#c2185b", "#00838f"}
var nodePalette = []string{"#1a73e8", "#9334e6", "#00897b", "#e8710a", "#6d4c41", "#c2185b", "#3949ab", "#7cb342"}

type xscale struct {
	left, width float64
	horizon     int64
}

func newXScale(horizon int64) xscale {
	w := float64(horizon) / nsPerSec * 15
	w = math.Min(math.Max(w, 1150), 2400)
	return xscale{left: plotLeft, width: w, horizon: horizon}
}

func (s xscale) at(t int64) float64 {
	t = min(max(t, 0), s.horizon)
	return s.left + float64(t)/float64(s.horizon)*s.width
}

func (s xscale) right() float64 { return s.left + s.width }
func (s xscale) total() float64 { return s.left + s.width + plotRight }

// num formats a coordinate with at most one decimal.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

// esc escapes text for SVG (XML) content and attribute values.
func esc(s string) string { return html.EscapeString(s) }

// niceStep is the smallest 1, 2 or 5 × 10^k that is at least span/n.
func niceStep(span float64, n int) float64 {
	if span <= 0 || n <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

type svgBuf struct{ strings.Builder }

func (b *svgBuf) p(format string, args ...any) { fmt.Fprintf(b, format, args...) }

func (b *svgBuf) open(width, height float64, class, label string) {
	b.p(`<svg xmlns="http://www.w3.org/2000/svg" class="%s" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="%s">`,
		class, num(width), num(height), num(width), num(height), esc(label))
}

// timeAxis draws vertical grid lines from top to bottom at each time tick,
// labelled below bottom.
func (m *model) timeAxis(b *svgBuf, top, bottom float64) {
	span := float64(m.horizon) / nsPerSec
	step := niceStep(span, int(m.x.width/90))
	b.p(`<g class="ax">`)
	for v := 0.0; v <= span+1e-9; v += step {
		x := m.x.at(int64(v * nsPerSec))
		b.p(`<line x1="%s" x2="%s" y1="%s" y2="%s"/>`, num(x), num(x), num(top), num(bottom))
		b.p(`<text x="%s" y="%s" text-anchor="middle">%s s</text>`, num(x), num(bottom+12), strconv.FormatFloat(v, 'f', -1, 64))
	}
	b.p(`</g>`)
}

// faultEnd is where a fault's window ends on the plot.
func (m *model) faultEnd(f Fault) int64 {
	if f.End <= f.Start {
		return m.horizon
	}
	return f.End
}

func (m *model) faultTitle(f Fault) string {
	var b strings.Builder
	b.WriteString(f.Name)
	if len(f.Targets) > 0 {
		b.WriteString(" → " + strings.Join(f.Targets, ", "))
	}
	b.WriteString(": " + shortSecs(f.Start) + "–")
	if f.End <= f.Start {
		b.WriteString("(not healed)")
	} else {
		b.WriteString(shortSecs(f.End))
	}
	fmt.Fprintf(&b, "; injected %s, verified %s", yesNo(f.Injected), yesNo(f.Verified))
	if f.Note != "" {
		b.WriteString("; " + f.Note)
	}
	return b.String()
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

// faultRects shades each fault's window between top and bottom: exactly one
// rect of class "fault" per fault. Faults that were not verified to take
// effect get a dashed outline. With labels, names are written at the top of
// wide enough windows.
func (m *model) faultRects(b *svgBuf, top, bottom float64, labels bool) {
	for _, f := range m.in.Faults {
		x0, x1 := m.x.at(f.Start), m.x.at(m.faultEnd(f))
		w := math.Max(x1-x0, 1)
		hue := m.faultHue[f.Name]
		dash := ""
		if !f.Injected || !f.Verified {
			dash = fmt.Sprintf(` stroke="%s" stroke-dasharray="4 3"`, hue)
		}
		b.p(`<rect class="fault" x="%s" y="%s" width="%s" height="%s" fill="%s"%s><title>%s</title></rect>`,
			num(x0), num(top), num(w), num(bottom-top), hue, dash, esc(m.faultTitle(f)))
		if labels && w > 40 {
			b.p(`<text class="fx" x="%s" y="%s" fill="%s">%s</text>`, num(x0+3), num(top+10), hue, esc(fitText(f.Name, w-6)))
		}
	}
}

// phaseLines marks each phase boundary between top and bottom.
func (m *model) phaseLines(b *svgBuf, top, bottom float64) {
	seen := map[int64]bool{0: true, m.horizon: true}
	mark := func(t int64, title string) {
		if seen[t] {
			return
		}
		seen[t] = true
		x := m.x.at(t)
		b.p(`<line class="ph" x1="%s" x2="%s" y1="%s" y2="%s"><title>%s</title></line>`, num(x), num(x), num(top), num(bottom), esc(title))
	}
	for _, p := range m.in.Phases {
		mark(p.Start, p.Name+" begins at "+shortSecs(p.Start))
		mark(p.End, p.Name+" ends at "+shortSecs(p.End))
	}
}

// fitText cuts s to what fits in width pixels (about 6 px a character).
func fitText(s string, width float64) string {
	n := int(width / 6)
	if n <= 1 {
		return ""
	}
	return truncate(s, n-1)
}

// ---------------------------------------------------------------- timeline

type lane struct {
	label string
	title string // the processes sharing the lane
	other bool
	pairs []int // indices into m.pairs
}

// lanes assigns processes to lanes. With at most maxLanes processes each has
// its own. With more (every unknown outcome starts a new process), processes
// whose lifetimes do not overlap share a lane, first fit in order of their
// first operation, so a lane reads like one client worker; processes that
// find no lane among the first maxLanes-1 share "other".
func (m *model) lanes(drawn []int) []lane {
	type life struct {
		proc       int
		start, end int64
	}
	lives := map[int]*life{}
	for _, p := range m.pairs {
		l := lives[p.Invoke.Process]
		if l == nil {
			l = &life{proc: p.Invoke.Process, start: p.Invoke.Time, end: p.End(m.horizon)}
			lives[p.Invoke.Process] = l
		}
		l.start = min(l.start, p.Invoke.Time)
		l.end = max(l.end, p.End(m.horizon))
	}
	order := make([]*life, 0, len(lives))
	for _, l := range lives {
		order = append(order, l)
	}
	sort.Slice(order, func(a, b int) bool {
		if len(lives) <= maxLanes || order[a].start == order[b].start {
			return order[a].proc < order[b].proc
		}
		return order[a].start < order[b].start
	})
	laneOf := map[int]int{}
	var members [][]int
	var laneEnd []int64
	other := -1
	for _, l := range order {
		at := -1
		if len(lives) > maxLanes {
			for i, end := range laneEnd {
				if end < l.start {
					at = i
					break
				}
			}
		}
		if at < 0 {
			if len(laneEnd) >= maxLanes-1 && len(lives) > maxLanes {
				if other < 0 {
					other = len(laneEnd)
					laneEnd = append(laneEnd, math.MaxInt64)
					members = append(members, nil)
				}
				at = other
			} else {
				at = len(laneEnd)
				laneEnd = append(laneEnd, 0)
				members = append(members, nil)
			}
		}
		if at != other {
			laneEnd[at] = l.end
		}
		laneOf[l.proc] = at
		members[at] = append(members[at], l.proc)
	}
	out := make([]lane, len(members))
	for i, ps := range members {
		names := make([]string, len(ps))
		for j, p := range ps {
			names[j] = procName(p)
		}
		out[i].title = "processes " + truncate(strings.Join(names, " "), 300)
		switch {
		case i == other:
			out[i].label, out[i].other = fmt.Sprintf("other (%d)", len(ps)), true
		case len(ps) == 1:
			out[i].label, out[i].title = names[0], "process "+names[0]
		default:
			out[i].label = fmt.Sprintf("%s +%d", names[0], len(ps)-1)
		}
	}
	for _, i := range drawn {
		l := laneOf[m.pairs[i].Invoke.Process]
		out[l].pairs = append(out[l].pairs, i)
	}
	return out
}

// timelineOps picks the operations to draw: all of them up to the cap, else
// those referenced by witnesses, then the failed and unknown ones, then a
// uniform sample of the rest. It returns the picks in invocation order and a
// notice when some were left out.
func (m *model) timelineOps() ([]int, string) {
	var tiers [3][]unit
	for i, p := range m.pairs {
		u := unit{idx: []int{i}, cost: 1}
		switch {
		case m.pairReferenced(p):
			tiers[0] = append(tiers[0], u)
		case outcomeClass(p) != "o":
			tiers[1] = append(tiers[1], u)
		default:
			tiers[2] = append(tiers[2], u)
		}
	}
	picked, took := pickTiers(tiers[:], maxTimelineOps)
	sort.Ints(picked)
	if len(picked) == len(m.pairs) {
		return picked, ""
	}
	return picked, fmt.Sprintf("The timeline draws %d of %d operations (the cap is %d): %d referenced by witnesses, %d of %d failed, unknown or never completed, and a uniform sample of %d of %d ok ones. The operation log and history.jsonl have the rest.",
		len(picked), len(m.pairs), maxTimelineOps, took[0], took[1], len(tiers[1]), took[2], len(tiers[2]))
}

func (m *model) pairReferenced(p history.Pair) bool {
	if m.witness[m.pos[p.Invoke.ID]] {
		return true
	}
	if p.Complete != nil {
		if i, ok := m.compPos[p.Complete.ID]; ok && m.witness[i] {
			return true
		}
	}
	return false
}

func (m *model) pairTitle(p history.Pair) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s", m.pos[p.Invoke.ID], procName(p.Invoke.Process), p.Invoke.F)
	if p.Invoke.Session != "" {
		b.WriteString(" " + p.Invoke.Session)
	}
	if p.Invoke.Node != "" {
		b.WriteString(" @" + p.Invoke.Node)
	}
	fmt.Fprintf(&b, " at %s s: ", secs(p.Invoke.Time))
	if p.Complete == nil {
		b.WriteString("never completed")
		return b.String()
	}
	fmt.Fprintf(&b, "%s after %s", p.Complete.Type, msText(float64(p.Complete.Time-p.Invoke.Time)/nsPerMs))
	if p.Complete.Reason != "" {
		b.WriteString(" " + p.Complete.Reason)
	}
	if p.Complete.Error != "" {
		b.WriteString(": " + truncate(p.Complete.Error, 120))
	}
	return b.String()
}

// timelineSVG draws the processes' operations over time, the faults, the
// phases and the nodes' Raft state.
func (m *model) timelineSVG() (svg string, notice string) {
	drawn, notice := m.timelineOps()
	lanes := m.lanes(drawn)
	laneH := 14.0
	if len(lanes) > 20 {
		laneH = 10
	}
	var b svgBuf
	y := 4.0

	// Phase names.
	phaseTop := y
	if len(m.in.Phases) > 0 {
		y += 14
	}
	// Fault labels, stacked into rows so they do not overlap.
	type flabel struct {
		f   Fault
		row int
	}
	var labels []flabel
	var rowEnd []float64
	faults := append([]Fault(nil), m.in.Faults...)
	sort.SliceStable(faults, func(a, b int) bool { return faults[a].Start < faults[b].Start })
	for _, f := range faults {
		x0 := m.x.at(f.Start)
		text := faultLabel(f)
		x1 := math.Max(m.x.at(m.faultEnd(f)), x0+float64(len([]rune(text)))*6+6)
		row := -1
		for r, end := range rowEnd {
			if end < x0 {
				row = r
				break
			}
		}
		if row < 0 {
			if len(rowEnd) < 6 {
				rowEnd = append(rowEnd, 0)
				row = len(rowEnd) - 1
			} else {
				row = len(rowEnd) - 1 // overflow: overlap in the last row
			}
		}
		rowEnd[row] = x1
		labels = append(labels, flabel{f, row})
	}
	faultTop := y
	y += float64(len(rowEnd)) * 15

	// Node status rows.
	statusTop := y
	var leaderSegs []segment
	var nodeSegs [][]segment
	nodes := m.nodes
	if len(nodes) > maxNodes {
		nodes = nodes[:maxNodes]
	}
	if len(m.status) > 0 {
		ends := pollEnds(m.status, m.horizon)
		colors := map[string]string{}
		for i, n := range m.nodes {
			colors[n] = nodePalette[i%len(nodePalette)]
		}
		leaderSegs = leaderSegments(m.status, ends, colors)
		for _, n := range nodes {
			nodeSegs = append(nodeSegs, nodeSegments(m.status, ends, n))
		}
		y += 14 + float64(len(nodes))*12 + 6
	}
	lanesTop := y
	y += float64(len(lanes)) * laneH
	bottom := y
	height := bottom + 18

	b.open(m.x.total(), height, "plot tl", "timeline of operations, faults and node states")
	// Lane stripes.
	for i := range lanes {
		if i%2 == 1 {
			b.p(`<rect class="stripe" x="%s" y="%s" width="%s" height="%s"/>`, num(m.x.left), num(lanesTop+float64(i)*laneH), num(m.x.width), num(laneH))
		}
	}
	m.timeAxis(&b, statusTop, bottom)
	m.faultRects(&b, statusTop, bottom, false)
	m.phaseLines(&b, phaseTop, bottom)

	// Phase names, centred in their phase when they fit.
	for _, p := range m.in.Phases {
		x0, x1 := m.x.at(p.Start), m.x.at(max(p.End, p.Start))
		if t := fitText(p.Name, x1-x0-4); t != "" {
			b.p(`<text class="phn" x="%s" y="%s" text-anchor="middle"><title>%s</title>%s</text>`,
				num((x0+x1)/2), num(phaseTop+10), esc(fmt.Sprintf("%s: %s–%s", p.Name, shortSecs(p.Start), shortSecs(p.End))), esc(t))
		}
	}
	// Fault labels: a bar over the window and the name.
	for _, l := range labels {
		x0, x1 := m.x.at(l.f.Start), m.x.at(m.faultEnd(l.f))
		ry := faultTop + float64(l.row)*15
		hue := m.faultHue[l.f.Name]
		b.p(`<g class="flab"><title>%s</title><line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s"/><text x="%s" y="%s" fill="%s">%s</text></g>`,
			esc(m.faultTitle(l.f)), num(x0), num(math.Max(x1, x0+2)), num(ry+13), num(ry+13), hue, num(x0+1), num(ry+10), hue, esc(faultLabel(l.f)))
	}
	// Node status.
	if len(leaderSegs) > 0 {
		b.p(`<text class="lbl" x="%s" y="%s" text-anchor="end">leader</text>`, num(m.x.left-4), num(statusTop+10))
		m.segments(&b, leaderSegs, statusTop, 12)
		for i, n := range nodes {
			ry := statusTop + 14 + float64(i)*12
			b.p(`<text class="lbl" x="%s" y="%s" text-anchor="end">%s</text>`, num(m.x.left-4), num(ry+9), esc(truncate(n, 12)))
			m.segments(&b, nodeSegs[i], ry, 10)
		}
	}
	// Operations.
	barH := laneH - 3
	for i, l := range lanes {
		ly := lanesTop + float64(i)*laneH
		b.p(`<text class="lbl" x="%s" y="%s" text-anchor="end"><title>%s</title>%s</text>`, num(m.x.left-4), num(ly+laneH-3), esc(l.title), esc(l.label))
		cls := "ops"
		if l.other {
			cls = "ops other"
		}
		b.p(`<g class="%s" transform="translate(0,%s)">`, cls, num(ly+1.5))
		for _, pi := range l.pairs {
			p := m.pairs[pi]
			x0 := m.x.at(p.Invoke.Time)
			x1 := m.x.at(p.End(m.horizon))
			c := outcomeClass(p)
			if m.pairReferenced(p) {
				c += " w"
			}
			inv := m.pos[p.Invoke.ID]
			link := m.inLog[inv]
			if link {
				b.p(`<a href="#op-%d">`, inv)
			}
			b.p(`<rect x="%s" width="%s" height="%s" class="%s"><title>%s</title></rect>`,
				num(x0), num(math.Max(x1-x0, 1)), num(barH), c, esc(m.pairTitle(p)))
			if link {
				b.p(`</a>`)
			}
		}
		b.p(`</g>`)
	}
	b.p(`</svg>`)
	return b.String(), notice
}

func faultLabel(f Fault) string {
	if len(f.Targets) == 0 {
		return f.Name
	}
	return f.Name + " → " + strings.Join(f.Targets, ", ")
}

// segments draws one status row.
func (m *model) segments(b *svgBuf, segs []segment, top, h float64) {
	for _, s := range segs {
		x0, x1 := m.x.at(s.start), m.x.at(s.end)
		w := math.Max(x1-x0, 0.5)
		fill := ""
		if s.fill != "" {
			fill = ` fill="` + s.fill + `"`
		}
		b.p(`<rect class="st %s" x="%s" y="%s" width="%s" height="%s"%s><title>%s</title></rect>`,
			s.class, num(x0), num(top), num(w), num(h), fill, esc(s.title))
		if t := fitText(s.label, w-4); t != "" && w > 30 {
			b.p(`<text class="stl %s" x="%s" y="%s">%s</text>`, s.class, num(x0+2), num(top+h-2), esc(t))
		}
	}
}

// ---------------------------------------------------------------- latency

// latencySVG is a scatter of every completed operation's latency (log
// scale) at its invocation time, one path per function and outcome so the
// page's checkboxes can hide them. Points falling on the same 2 px cell are
// drawn once.
func (m *model) latencySVG() (svg string, neverDone int) {
	type pt struct {
		x, y float64
		f    int
		c    string
	}
	var pts []pt
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range m.pairs {
		if p.Complete == nil {
			neverDone++
			continue
		}
		ms := math.Max(float64(p.Complete.Time-p.Invoke.Time)/nsPerMs, 0.01)
		lo, hi = math.Min(lo, ms), math.Max(hi, ms)
		pts = append(pts, pt{x: m.x.at(p.Invoke.Time), y: ms, f: m.fIndex[p.Invoke.F], c: outcomeClass(p)})
	}
	if len(pts) == 0 {
		lo, hi = 1, 1000
	}
	d0 := math.Floor(math.Log10(lo))
	d1 := math.Max(math.Ceil(math.Log10(hi)), d0+1)
	const top, plotH = 8.0, 280.0
	bottom := top + plotH
	yOf := func(ms float64) float64 {
		return bottom - (math.Log10(ms)-d0)/(d1-d0)*plotH
	}
	var b svgBuf
	b.open(m.x.total(), bottom+18, "plot lat", "latency of each operation over time, log scale")
	m.timeAxis(&b, top, bottom)
	b.p(`<g class="ax">`)
	for d := d0; d <= d1; d++ {
		y := yOf(math.Pow(10, d))
		b.p(`<line x1="%s" x2="%s" y1="%s" y2="%s"/>`, num(m.x.left), num(m.x.right()), num(y), num(y))
		b.p(`<text x="%s" y="%s" text-anchor="end">%s</text>`, num(m.x.left-4), num(y+3), decadeText(d))
	}
	b.p(`</g>`)
	m.faultRects(&b, top, bottom, true)
	m.phaseLines(&b, top, bottom)
	// One path per (outcome, function), ok first so failures are on top.
	for _, c := range []string{"o", "i", "f"} {
		for f := range m.fNames {
			seen := map[[2]int]bool{}
			var d strings.Builder
			for _, q := range pts {
				if q.c != c || q.f != f {
					continue
				}
				// A 2 px grid: the dots are 3 px wide, so nothing visible is lost.
				k := [2]int{2 * int(math.Round(q.x/2)), 2 * int(math.Round(yOf(q.y)/2))}
				if seen[k] {
					continue
				}
				seen[k] = true
				fmt.Fprintf(&d, "M%d %dh0", k[0], k[1])
			}
			if d.Len() > 0 {
				b.p(`<path class="pt f%d %s" d="%s"/>`, f, c, d.String())
			}
		}
	}
	b.p(`</svg>`)
	return b.String(), neverDone
}

// ---------------------------------------------------------------- throughput

// rateSVG plots completions per second over time: ok as a filled area, fail
// and info as lines. Buckets are 1 s, or wider when there would be more
// buckets than half the plot's pixels.
func (m *model) rateSVG() (svg string, bucketS float64) {
	span := float64(m.horizon) / nsPerSec
	bucketS = 1
	if span/bucketS > m.x.width/2 {
		bucketS = niceStep(span, int(m.x.width/2))
	}
	n := int(math.Ceil(span/bucketS)) + 1
	counts := map[string][]float64{"o": make([]float64, n), "f": make([]float64, n), "i": make([]float64, n)}
	for _, p := range m.pairs {
		if p.Complete == nil {
			continue
		}
		k := int(float64(p.Complete.Time) / nsPerSec / bucketS)
		counts[outcomeClass(p)][min(k, n-1)]++
	}
	peak := 1.0
	for _, cs := range counts {
		for i := range cs {
			cs[i] /= bucketS
			peak = math.Max(peak, cs[i])
		}
	}
	const top, plotH = 8.0, 180.0
	bottom := top + plotH
	step := niceStep(peak, 4)
	ymax := math.Ceil(peak/step) * step
	yOf := func(v float64) float64 { return bottom - v/ymax*plotH }
	var b svgBuf
	b.open(m.x.total(), bottom+18, "plot rate", "operations completed per second over time")
	m.timeAxis(&b, top, bottom)
	b.p(`<g class="ax">`)
	for v := step; v <= ymax+1e-9; v += step {
		y := yOf(v)
		b.p(`<line x1="%s" x2="%s" y1="%s" y2="%s"/>`, num(m.x.left), num(m.x.right()), num(y), num(y))
		b.p(`<text x="%s" y="%s" text-anchor="end">%s/s</text>`, num(m.x.left-4), num(y+3), strconv.FormatFloat(v, 'f', -1, 64))
	}
	b.p(`</g>`)
	m.faultRects(&b, top, bottom, true)
	m.phaseLines(&b, top, bottom)
	stepPath := func(cs []float64, closed bool) string {
		var d strings.Builder
		xAt := func(k int) float64 {
			return m.x.at(int64(math.Min(float64(k)*bucketS, span) * nsPerSec))
		}
		fmt.Fprintf(&d, "M%s %s", num(xAt(0)), num(yOf(0)))
		for k, v := range cs {
			fmt.Fprintf(&d, "V%sH%s", num(yOf(v)), num(xAt(k+1)))
		}
		if closed {
			fmt.Fprintf(&d, "V%sZ", num(yOf(0)))
		}
		return d.String()
	}
	b.p(`<path class="ro" d="%s"/>`, stepPath(counts["o"], true))
	b.p(`<path class="rf" d="%s"/>`, stepPath(counts["f"], false))
	b.p(`<path class="ri" d="%s"/>`, stepPath(counts["i"], false))
	b.p(`</svg>`)
	return b.String(), bucketS
}

// decadeText labels 10^d milliseconds: 0.01 ms … 100 ms, 1 s, 10 s, ….
func decadeText(d float64) string {
	if d >= 3 {
		return strconv.FormatFloat(math.Pow(10, d-3), 'f', -1, 64) + " s"
	}
	return strconv.FormatFloat(math.Pow(10, d), 'f', -1, 64) + " ms"
}
