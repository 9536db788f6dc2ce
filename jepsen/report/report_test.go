package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

const evilError = `deadline exceeded <script>alert("x")</script> & more`

// synth builds a history of about nOps operations by ten workers over three
// nodes with two faults (one not verified), status polls with a leader
// change and an unreachable node, phases, and verdicts: one invalid with
// witnesses, one unknown, one valid.
func synth(nOps int, seed int64) Input {
	rng := rand.New(rand.NewSource(seed))
	const sec = int64(1e9)
	const workers = 10
	dur := max(int64(nOps)*sec/100, 30*sec) // ~100 ops/s
	nodes := []string{"node1", "node2", "node3"}
	faults := []Fault{
		{Name: "partition-leader", Targets: []string{"node1"}, Start: dur / 3, End: dur/3 + dur/6, Injected: true, Verified: true, Note: "leader isolated"},
		{Name: "kill <node>", Targets: []string{"node3"}, Start: 2 * dur / 3, End: 2*dur/3 + dur/10, Injected: true, Verified: false, Note: "restart took <2s>"},
	}
	inFault := func(t int64) bool {
		for _, f := range faults {
			if t >= f.Start && t < f.End {
				return true
			}
		}
		return false
	}
	type rec struct {
		op  history.Op
		seq int // tie-break: invoke before completion
	}
	var recs []rec
	id := 0
	nextProc := workers
	fs := []history.F{history.FAppend, history.FAppend, history.FAppend, history.FRead, history.FCreate, history.FPrepare, history.FSetMode}
	perWorker := nOps / workers
	evilDone := false
	for w := 0; w < workers; w++ {
		proc := w
		t := int64(rng.Intn(int(sec / 10)))
		seqs := map[string]int64{}
		for k := 0; k < perWorker; k++ {
			id++
			f := fs[rng.Intn(len(fs))]
			sess := fmt.Sprintf("s%d", rng.Intn(8))
			node := nodes[rng.Intn(len(nodes))]
			lat := int64((0.5 + rng.ExpFloat64()*4) * 1e6)
			inv := history.Op{ID: id, Time: t, Type: history.Invoke, Process: proc, F: f, Node: node, Session: sess}
			comp := history.Op{ID: id, Process: proc, F: f, Node: node, Session: sess, Type: history.OK}
			if f == history.FAppend {
				inv.Seq = seqs[sess]
				inv.Events = []string{fmt.Sprintf("p%d-%d", proc, k), fmt.Sprintf("p%d-%d.1", proc, k)}
				comp.NextSeq = inv.Seq + 2
			}
			if f == history.FRead {
				for i := int64(0); i < seqs[sess]; i++ {
					comp.Events = append(comp.Events, fmt.Sprintf("m%d", i))
				}
				comp.Revision = fmt.Sprintf("rev-%d", seqs[sess])
			}
			if inFault(t) {
				switch r := rng.Float64(); {
				case r < 0.35:
					comp.Type, comp.Reason, comp.Error = history.Fail, "NOT_LEADER", "not the leader"
					lat *= 3
				case r < 0.5:
					comp.Type, comp.Reason, comp.Error = history.Info, "OUTCOME_UNKNOWN", "context deadline exceeded"
					lat = 2 * sec
				}
			}
			if !evilDone && comp.Type == history.OK && k > 3 {
				comp.Type, comp.Error = history.Fail, evilError
				evilDone = true
			}
			if comp.Type == history.OK && f == history.FAppend {
				seqs[sess] += 2
			}
			recs = append(recs, rec{inv, 0})
			last := k == perWorker-1 && w%4 == 0 // a few never complete
			if !last {
				comp.Time = t + lat
				recs = append(recs, rec{comp, 1})
			}
			t += lat + rng.Int63n(dur*8/5/int64(perWorker)) // spread over the run
			if comp.Type == history.Info {
				proc = nextProc // continue as a new process
				nextProc++
			}
		}
	}
	// Nemesis records.
	for _, f := range faults {
		v, _ := json.Marshal(map[string]any{"fault": f.Name, "targets": f.Targets, "action": "start"})
		recs = append(recs, rec{history.Op{Time: f.Start, Type: history.Info, Process: history.NemesisProcess, F: history.FNemesis, Value: v}, 0})
		v, _ = json.Marshal(map[string]any{"fault": f.Name, "action": "stop"})
		recs = append(recs, rec{history.Op{Time: f.End, Type: history.Info, Process: history.NemesisProcess, F: history.FNemesis, Value: v}, 0})
	}
	// Status polls once a second: node1 leads, is cut off during the
	// partition (node2 takes over at a higher term), node3 is unreachable
	// while killed.
	for t := sec / 2; t < dur; t += sec {
		view := map[string]any{}
		leader, term := "node1", 2
		if t >= faults[0].Start+sec {
			leader, term = "node2", 3
		}
		for _, n := range nodes {
			switch {
			case n == "node1" && t >= faults[0].Start && t < faults[0].End:
				view[n] = map[string]any{"error": "unreachable"}
			case n == "node3" && t >= faults[1].Start && t < faults[1].End:
				view[n] = map[string]any{"error": "unreachable"}
			default:
				state := "Follower"
				if n == leader {
					state = "Leader"
				}
				view[n] = map[string]any{"state": state, "leader": leader, "term": term, "commit": t / 1e7, "applied": t / 1e7}
			}
		}
		v, _ := json.Marshal(view)
		recs = append(recs, rec{history.Op{Time: t, Type: history.Info, Process: history.NemesisProcess, F: history.FStatus, Value: v}, 0})
	}
	sort.SliceStable(recs, func(a, b int) bool {
		if recs[a].op.Time != recs[b].op.Time {
			return recs[a].op.Time < recs[b].op.Time
		}
		return recs[a].seq < recs[b].seq
	})
	ops := make([]history.Op, len(recs))
	for i, r := range recs {
		r.op.Index = i
		if r.op.Process == history.NemesisProcess {
			id++
			r.op.ID = id
		}
		ops[i] = r.op
	}

	// Witnesses reference some ok appends (and one failure).
	var okAppends, fails []int
	for i, o := range ops {
		if o.F == history.FAppend && o.Type == history.OK {
			okAppends = append(okAppends, i)
		}
		if o.Type == history.Fail {
			fails = append(fails, i)
		}
	}
	w1 := okAppends[len(okAppends)/2]
	w2 := okAppends[len(okAppends)/3]
	in := Input{
		Title: "safety <run> 42",
		Facts: [][2]string{{"scenario", "safety"}, {"seed", "42"}, {"backend", "netns"}, {"git", "deadbeef"},
			{"duration", fmt.Sprintf("%d s", dur/sec)}, {"note", "<b>not bold</b>"}},
		Valid: "false",
		Ops:   ops,
		Phases: []Phase{
			{"warm-up", 0, faults[0].Start}, {"partition-leader#1", faults[0].Start, faults[0].End},
			{"recovery", faults[0].End, faults[1].Start}, {"kill#1", faults[1].Start, faults[1].End},
			{"final", faults[1].End, dur},
		},
		Faults: faults,
		Verdicts: []Verdict{
			{Name: "lost", Valid: "false", Stats: map[string]any{"acked": 812, "lost": 2},
				Witnesses: []WitnessText{
					{Session: ops[w1].Session, Ops: []int{w1, fails[0]}, Text: fmt.Sprintf("append ev=p3-17 acked at seq 12 on node2 at %s s, absent from final log; node1 & node3 have <p5-9> at seq 12", secs(ops[w1].Time))},
					{Session: ops[w2].Session, Ops: []int{w2}, Text: "append \"p1-4\" acknowledged but\nmissing from the final read"},
				}},
			{Name: "liveness", Valid: "unknown", Stats: map[string]any{"reason": "no fault took effect"}},
			{Name: "duplicates", Valid: "true", Stats: map[string]any{"reads": 120, "ratio": 0.25, "per": map[string]int{"a": 1}}},
		},
	}
	in.PhaseTable.Header = []string{"phase", "ok/s", "p99 ms", "unavailable s"}
	for _, p := range in.Phases {
		in.PhaseTable.Rows = append(in.PhaseTable.Rows, []string{p.Name, "41.5", "12 ms", "0"})
	}
	return in
}

func render(t testing.TB, in Input) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, in); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	return b.String()
}

var svgRE = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// svgs parses each inline SVG as XML and returns them by class.
func svgs(t *testing.T, page string) map[string]*xmlNode {
	t.Helper()
	out := map[string]*xmlNode{}
	for _, frag := range svgRE.FindAllString(page, -1) {
		var n xmlNode
		if err := xml.Unmarshal([]byte(frag), &n); err != nil {
			t.Fatalf("SVG does not parse as XML: %v\n%.300s", err, frag)
		}
		out[n.attr("class")] = &n
	}
	return out
}

type xmlNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []xmlNode  `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n *xmlNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// walk calls f on n and every descendant.
func (n *xmlNode) walk(f func(*xmlNode)) {
	f(n)
	for i := range n.Nodes {
		n.Nodes[i].walk(f)
	}
}

func (n *xmlNode) count(elem, class string) int {
	c := 0
	n.walk(func(x *xmlNode) {
		if x.XMLName.Local == elem && x.attr("class") == class {
			c++
		}
	})
	return c
}

// checkBalanced tokenizes the page and checks that every non-void element
// is closed in order.
func checkBalanced(t *testing.T, page string) {
	t.Helper()
	void := map[string]bool{"meta": true, "input": true, "br": true, "img": true, "link": true, "hr": true}
	z := html.NewTokenizer(strings.NewReader(page))
	var stack []string
	for {
		switch z.Next() {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				t.Fatalf("tokenize: %v", z.Err())
			}
			if len(stack) != 0 {
				t.Fatalf("unclosed elements at end: %v", stack)
			}
			return
		case html.StartTagToken:
			name, _ := z.TagName()
			if !void[string(name)] {
				stack = append(stack, string(name))
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			if len(stack) == 0 || stack[len(stack)-1] != string(name) {
				t.Fatalf("unbalanced </%s>; open: %v", name, stack[max(0, len(stack)-5):])
			}
			stack = stack[:len(stack)-1]
		}
	}
}

func TestWriteHTML(t *testing.T) {
	in := synth(400, 1)
	page := render(t, in)
	checkBalanced(t, page)
	if _, err := html.Parse(strings.NewReader(page)); err != nil {
		t.Fatalf("html.Parse: %v", err)
	}

	if !strings.Contains(page, `id="verdict">INVALID<`) {
		t.Error("no INVALID badge")
	}
	for _, want := range []string{"safety &lt;run&gt; 42", "&lt;b&gt;not bold&lt;/b&gt;", "kill &lt;node&gt;", "restart took &lt;2s&gt;", "NOT_LEADER"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, v := range in.Verdicts {
		for _, w := range v.Witnesses {
			if !strings.Contains(page, template.HTMLEscapeString(w.Text)) {
				t.Errorf("page lacks escaped witness text %q", w.Text)
			}
			for _, i := range w.Ops {
				if !strings.Contains(page, fmt.Sprintf(`href="#op-%d"`, i)) {
					t.Errorf("no link to record %d", i)
				}
				if !strings.Contains(page, fmt.Sprintf(`<tr id="op-%d" class="`, i)) {
					t.Errorf("no anchor for record %d", i)
				}
			}
		}
	}
	if !strings.Contains(page, "no fault took effect") || !strings.Contains(page, "liveness") {
		t.Error("the unknown verdict is not listed")
	}
	// Nothing unescaped: the page has no script element at all.
	if strings.Contains(strings.ToLower(page), "<script") {
		t.Error("unescaped <script> in the page")
	}
	if !strings.Contains(page, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Error("the error string is not shown escaped in the log")
	}

	plots := svgs(t, page)
	for _, class := range []string{"plot tl", "plot lat", "plot rate"} {
		p, ok := plots[class]
		if !ok {
			t.Fatalf("no %q SVG; have %v", class, keys(plots))
		}
		if n := p.count("rect", "fault"); n != len(in.Faults) {
			t.Errorf("%s: %d fault rects, want %d", class, n, len(in.Faults))
		}
	}
	tl := plots["plot tl"]
	pairs := history.Pairs(in.Ops)
	bars := 0
	for _, c := range []string{"o", "f", "i", "n", "o w", "f w", "i w", "n w"} {
		bars += tl.count("rect", c)
	}
	if bars != len(pairs) {
		t.Errorf("timeline draws %d bars, want %d (no cap below it)", bars, len(pairs))
	}
	if tl.count("rect", "o w")+tl.count("rect", "f w") == 0 {
		t.Error("no witness-highlighted bar")
	}
	for _, want := range []string{">leader<", ">node1<", "unreachable", "partition-leader", "warm-up"} {
		if !strings.Contains(svgRE.FindString(page), want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
	if strings.Contains(page, "The timeline draws") || strings.Contains(page, "The log lists") {
		t.Error("cap notice without reaching the cap")
	}
}

func keys(m map[string]*xmlNode) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestCaps(t *testing.T) {
	in := synth(12000, 2)
	page := render(t, in)
	checkBalanced(t, page)
	if !strings.Contains(page, "The timeline draws 10000 of") {
		t.Error("no timeline cap notice")
	}
	if !strings.Contains(page, "The log lists 5000 of") {
		t.Error("no log cap notice")
	}
	if rows := strings.Count(page, `<tr id="op-`); rows > maxLogRows {
		t.Errorf("%d log rows, cap %d", rows, maxLogRows)
	}
	plots := svgs(t, page)
	tl := plots["plot tl"]
	bars := 0
	for _, c := range []string{"o", "f", "i", "n", "o w", "f w", "i w", "n w"} {
		bars += tl.count("rect", c)
	}
	if bars != maxTimelineOps {
		t.Errorf("timeline draws %d bars, want the cap %d", bars, maxTimelineOps)
	}
	// Referenced records and every failure stay listed.
	for _, v := range in.Verdicts {
		for _, w := range v.Witnesses {
			for _, i := range w.Ops {
				if !strings.Contains(page, fmt.Sprintf(`<tr id="op-%d" class="`, i)) {
					t.Errorf("referenced record %d dropped from the log", i)
				}
			}
		}
	}
	for i, o := range in.Ops {
		if o.Type == history.Fail && !strings.Contains(page, fmt.Sprintf(`<tr id="op-%d" class="`, i)) {
			t.Errorf("failed record %d dropped from the log", i)
		}
	}
	for _, class := range []string{"plot tl", "plot lat", "plot rate"} {
		if n := plots[class].count("rect", "fault"); n != len(in.Faults) {
			t.Errorf("%s: %d fault rects, want %d", class, n, len(in.Faults))
		}
	}
}

func TestLanes(t *testing.T) {
	// 150 processes all running at once: 59 lanes and "other".
	var ops []history.Op
	for p := 0; p < 150; p++ {
		ops = append(ops, history.Op{Index: len(ops), ID: p + 1, Time: int64(p) * 1e6, Type: history.Invoke, Process: p, F: history.FRead})
	}
	for p := 0; p < 150; p++ {
		ops = append(ops, history.Op{Index: len(ops), ID: p + 1, Time: 2e9 + int64(p)*1e6, Type: history.OK, Process: p, F: history.FRead})
	}
	page := render(t, Input{Valid: "true", Ops: ops})
	checkBalanced(t, page)
	if !strings.Contains(page, ">other (91)<") {
		t.Error("no merged lane for the processes beyond the cap")
	}
	if n := strings.Count(page, `<g class="ops`); n != maxLanes {
		t.Errorf("%d lanes, want %d", n, maxLanes)
	}
	// 100 processes one after the other: one lane.
	ops = nil
	for p := 0; p < 100; p++ {
		ops = append(ops,
			history.Op{Index: len(ops), ID: p + 1, Time: int64(p) * 1e7, Type: history.Invoke, Process: p, F: history.FRead},
			history.Op{Index: len(ops) + 1, ID: p + 1, Time: int64(p)*1e7 + 5e6, Type: history.Info, Process: p, F: history.FRead})
	}
	page = render(t, Input{Valid: "true", Ops: ops})
	if n := strings.Count(page, `<g class="ops`); n != 1 || !strings.Contains(page, ">p0 +99<") {
		t.Errorf("%d lanes for 100 consecutive processes, want one labelled p0 +99", n)
	}
	if !strings.Contains(page, `id="verdict">VALID<`) {
		t.Error("no VALID badge")
	}
	if !strings.Contains(page, "No anomalies") {
		t.Error("no 'no anomalies' note")
	}
}

func TestEmptyAndUnknown(t *testing.T) {
	page := render(t, Input{})
	checkBalanced(t, page)
	if !strings.Contains(page, `id="verdict">UNKNOWN<`) {
		t.Error("empty input: no UNKNOWN badge")
	}
	svgs(t, page)
	page = render(t, Input{Valid: "unknown", Verdicts: []Verdict{{Name: "faults-effective", Valid: "unknown"}}})
	if !strings.Contains(page, "proved nothing") || !strings.Contains(page, "faults-effective") {
		t.Error("unknown verdict not explained")
	}
}

func TestPickTiers(t *testing.T) {
	u := func(n, cost int) []unit {
		var out []unit
		for i := 0; i < n; i++ {
			out = append(out, unit{idx: []int{i}, cost: cost})
		}
		return out
	}
	picked, took := pickTiers([][]unit{u(3, 1), u(10, 2), u(100, 1)}, 13)
	if took[0] != 3 || took[1] != 10 || took[2] != 0 || len(picked) != 8 {
		t.Errorf("took %v, picked %d", took, len(picked))
	}
	_, took = pickTiers([][]unit{u(3, 1), u(100, 1)}, 53)
	if took[0] != 3 || took[1] != 50 {
		t.Errorf("took %v", took)
	}
}

// TestExample writes an example report when JEPSEN_REPORT_EXAMPLE is set
// (to a path ending in .html, or anything for /tmp/jepsen-report-example.html),
// and logs the sizes of reports for 1k and 50k operations (the latter is
// written next to it, as …-50k.html).
func TestExample(t *testing.T) {
	env := os.Getenv("JEPSEN_REPORT_EXAMPLE")
	if env == "" {
		t.Skip("set JEPSEN_REPORT_EXAMPLE to write an example report")
	}
	path := "/tmp/jepsen-report-example.html"
	if strings.HasSuffix(env, ".html") {
		path = env
	}
	if err := WriteFile(path, synth(1000, 7)); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, st.Size())
	for _, n := range []int{1000, 50000} {
		in := synth(n, 3)
		p := filepath.Join(t.TempDir(), "r.html")
		if n > 1000 {
			p = strings.TrimSuffix(path, ".html") + fmt.Sprintf("-%dk.html", n/1000)
		}
		if err := WriteFile(p, in); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(p)
		t.Logf("%d operations (%d records): %d bytes", len(history.Pairs(in.Ops)), len(in.Ops), st.Size())
		if st.Size() > 5<<20 {
			t.Errorf("report for %d operations is %d bytes", n, st.Size())
		}
	}
}
