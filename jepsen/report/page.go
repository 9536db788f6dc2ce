package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// pageData is what the template renders; every string in it is escaped by
// html/template, and the SVGs (template.HTML) are escaped as they are built.
type pageData struct {
	Title      string
	BadgeClass string
	BadgeText  string
	BadgeNote  string
	Facts      [][2]string
	Anomalies  []anomalyView
	Checkers   []checkerView
	Functions  []fRow
	Records    int
	Operations int

	Timeline       template.HTML
	TimelineNotice string
	HasStatus      bool
	Nodes          []swatch
	Latency        template.HTML
	FToggles       []toggle
	NeverDone      int
	Rate           template.HTML
	BucketS        string

	PhaseTable tableView
	Faults     []faultView
	Log        []logRow
	LogNotice  string
	CSS        template.CSS
}

type anomalyView struct {
	Name      string
	Class     string
	Label     string
	Count     int
	Witnesses []witnessView
	More      int
	Stats     string
}

type witnessView struct {
	Session   string
	Text      string
	Links     []opLink
	MoreLinks int
}

type opLink struct {
	Index int
	Label string
	InLog bool
}

type checkerView struct {
	Name      string
	Class     string
	Label     string
	Witnesses int
	Stats     string
}

type fRow struct {
	F                     string
	OK, Fail, Info, Never int
	P50, P99, Max         string
}

type toggle struct {
	ID    string
	Label string
}

type swatch struct {
	Name  string
	Color string
}

type tableView struct {
	Header []cell
	Rows   [][]cell
}

type cell struct {
	Text string
	Num  bool
}

type faultView struct {
	Name     string
	Color    string
	Targets  string
	Window   string
	Length   string
	Injected bool
	Verified bool
	Note     string
}

func badge(v string) (class, text, label string) {
	switch v {
	case "true":
		return "v-true", "VALID", "valid"
	case "false":
		return "v-false", "INVALID", "invalid"
	default:
		return "v-unknown", "UNKNOWN", "unknown"
	}
}

func buildPage(in Input) *pageData {
	m := newModel(in)
	valid := normValid(in.Valid)
	p := &pageData{Title: in.Title, Facts: in.Facts, Records: len(in.Ops), Operations: len(m.pairs), CSS: template.CSS(css)}
	if p.Title == "" {
		p.Title = "Jepsen report"
	}
	p.BadgeClass, p.BadgeText, _ = badge(valid)
	var bad, unknown []string
	for _, v := range in.Verdicts {
		switch normValid(v.Valid) {
		case "false":
			bad = append(bad, v.Name)
		case "unknown":
			unknown = append(unknown, v.Name)
		}
	}
	switch valid {
	case "true":
		p.BadgeNote = fmt.Sprintf("All %d checkers passed.", len(in.Verdicts))
	case "false":
		p.BadgeNote = fmt.Sprintf("%d of %d checkers found anomalies: %s.", len(bad), len(in.Verdicts), strings.Join(bad, ", "))
	default:
		p.BadgeNote = "The run proved nothing either way (for example no fault took effect, or too few operations succeeded)"
		if len(unknown) > 0 {
			p.BadgeNote += "; inconclusive: " + strings.Join(unknown, ", ")
		}
		p.BadgeNote += "."
	}
	if raw := strings.ToLower(strings.TrimSpace(in.Valid)); raw != valid {
		p.BadgeNote += fmt.Sprintf(" (The verdict given was %q.)", in.Valid)
	}

	// The log is picked first: the timeline links bars to listed records.
	picked, notice := m.selectLog()
	m.inLog = make(map[int]bool, len(picked))
	for _, i := range picked {
		m.inLog[i] = true
	}
	p.Log, p.LogNotice = m.logRows(picked), notice

	p.Anomalies = m.anomalies()
	for _, v := range in.Verdicts {
		c, _, l := badge(normValid(v.Valid))
		p.Checkers = append(p.Checkers, checkerView{Name: v.Name, Class: c, Label: l, Witnesses: len(v.Witnesses), Stats: statsText(v.Stats)})
	}
	p.Functions = m.functions()
	tl, tn := m.timelineSVG()
	p.Timeline, p.TimelineNotice = template.HTML(tl), tn
	p.HasStatus = len(m.status) > 0
	for i, n := range m.nodes {
		p.Nodes = append(p.Nodes, swatch{n, nodePalette[i%len(nodePalette)]})
	}
	lat, never := m.latencySVG()
	p.Latency, p.NeverDone = template.HTML(lat), never
	for i, f := range m.fNames {
		p.FToggles = append(p.FToggles, toggle{ID: "lf" + strconv.Itoa(i), Label: f})
	}
	rate, bucket := m.rateSVG()
	p.Rate, p.BucketS = template.HTML(rate), strconv.FormatFloat(bucket, 'f', -1, 64)

	p.PhaseTable = phaseTable(in.PhaseTable)
	for _, f := range in.Faults {
		fv := faultView{Name: f.Name, Color: m.faultHue[f.Name], Targets: strings.Join(f.Targets, ", "),
			Injected: f.Injected, Verified: f.Verified, Note: f.Note}
		if f.End > f.Start {
			fv.Window = fmt.Sprintf("%s – %s s", secs(f.Start), secs(f.End))
			fv.Length = shortSecs(f.End - f.Start)
		} else {
			fv.Window = secs(f.Start) + " s – (not healed)"
		}
		p.Faults = append(p.Faults, fv)
	}
	return p
}

// anomalies lists the checkers that did not pass, failures first.
func (m *model) anomalies() []anomalyView {
	var out []anomalyView
	for _, want := range []string{"false", "unknown"} {
		for _, v := range m.in.Verdicts {
			if normValid(v.Valid) != want {
				continue
			}
			c, _, l := badge(want)
			a := anomalyView{Name: v.Name, Class: c, Label: l, Count: len(v.Witnesses), Stats: statsText(v.Stats)}
			for i, w := range v.Witnesses {
				if i == maxWitnesses {
					a.More = len(v.Witnesses) - i
					break
				}
				wv := witnessView{Session: w.Session, Text: truncate(w.Text, maxWitnessText)}
				for j, idx := range w.Ops {
					if j == maxWitnessLinks {
						wv.MoreLinks = len(w.Ops) - j
						break
					}
					wv.Links = append(wv.Links, m.opLink(idx))
				}
				a.Witnesses = append(a.Witnesses, wv)
			}
			out = append(out, a)
		}
	}
	return out
}

func (m *model) opLink(i int) opLink {
	if i < 0 || i >= len(m.in.Ops) {
		return opLink{Index: i, Label: fmt.Sprintf("#%d (no such record)", i)}
	}
	o := m.in.Ops[i]
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s %s", i, o.Type, o.F, procName(o.Process))
	if o.Node != "" {
		b.WriteString(" @" + o.Node)
	}
	if o.Seq != 0 {
		fmt.Fprintf(&b, " seq %d", o.Seq)
	}
	fmt.Fprintf(&b, " %.3f s", float64(o.Time)/nsPerSec)
	return opLink{Index: i, Label: b.String(), InLog: m.inLog[i]}
}

// functions counts outcomes per function, with ok latency percentiles.
func (m *model) functions() []fRow {
	rows := map[history.F]*fRow{}
	lat := map[history.F][]float64{}
	for _, p := range m.pairs {
		r := rows[p.Invoke.F]
		if r == nil {
			r = &fRow{F: string(p.Invoke.F)}
			rows[p.Invoke.F] = r
		}
		switch outcomeClass(p) {
		case "o":
			r.OK++
			lat[p.Invoke.F] = append(lat[p.Invoke.F], float64(p.Complete.Time-p.Invoke.Time)/nsPerMs)
		case "f":
			r.Fail++
		case "i":
			r.Info++
		default:
			r.Never++
		}
	}
	var out []fRow
	for f, r := range rows {
		if ls := lat[f]; len(ls) > 0 {
			sort.Float64s(ls)
			q := func(x float64) string { return msText(ls[int(math.Round(x*float64(len(ls)-1)))]) }
			r.P50, r.P99, r.Max = q(0.5), q(0.99), msText(ls[len(ls)-1])
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].F < out[b].F })
	return out
}

// statsText is a checker's stats in one line, keys sorted.
func statsText(stats map[string]any) string {
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		var v string
		switch x := stats[k].(type) {
		case string:
			v = x
		case float64:
			v = strconv.FormatFloat(x, 'g', 6, 64)
		case float32:
			v = strconv.FormatFloat(float64(x), 'g', 6, 32)
		case int, int64, int32, uint, uint64, uint32, bool:
			v = fmt.Sprint(x)
		case fmt.Stringer:
			v = x.String()
		default:
			if b, err := json.Marshal(x); err == nil {
				v = string(b)
			} else {
				v = fmt.Sprint(x)
			}
		}
		parts = append(parts, k+"="+truncate(v, 120))
	}
	return truncate(strings.Join(parts, " · "), 600)
}

func isNumber(s string) bool {
	s = strings.TrimSpace(s)
	for _, suf := range []string{"%", " ms", "ms", " s", "s", "/s"} {
		if t := strings.TrimSuffix(s, suf); t != s {
			s = strings.TrimSpace(t)
			break
		}
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// phaseTable marks numeric cells, and the headers of columns whose cells
// are all numeric, for right alignment.
func phaseTable(t Table) tableView {
	var v tableView
	numeric := make([]bool, len(t.Header))
	for i := range numeric {
		numeric[i] = len(t.Rows) > 0
	}
	for _, r := range t.Rows {
		cells := make([]cell, len(r))
		for i, s := range r {
			cells[i] = cell{Text: s, Num: isNumber(s)}
			if i < len(numeric) && !cells[i].Num {
				numeric[i] = false
			}
		}
		v.Rows = append(v.Rows, cells)
	}
	for i, h := range t.Header {
		v.Header = append(v.Header, cell{Text: h, Num: numeric[i]})
	}
	return v
}
