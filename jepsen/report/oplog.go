package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// unit is what the caps keep or drop as a whole: an operation's invoke and
// completion, or one record; cost is what it counts against the cap.
type unit struct {
	idx  []int
	cost int
}

// pickTiers keeps whole tiers while they fit in budget; the first tier that
// does not fit is sampled uniformly (by cost) to fill what is left, and the
// later ones are dropped. It returns the kept indices and the cost kept from
// each tier.
func pickTiers(tiers [][]unit, budget int) (picked []int, took []int) {
	took = make([]int, len(tiers))
	for t, us := range tiers {
		total := 0
		for _, u := range us {
			total += u.cost
		}
		if total <= budget {
			for _, u := range us {
				picked = append(picked, u.idx...)
			}
			took[t] = total
			budget -= total
			continue
		}
		acc, used := 0, 0
		for _, u := range us {
			acc += u.cost
			if used+u.cost <= budget && float64(used+u.cost) <= float64(acc)*float64(budget)/float64(total)+1e-9 {
				picked = append(picked, u.idx...)
				used += u.cost
			}
		}
		took[t] = used
		budget -= used
	}
	return picked, took
}

// logRow is one row of the operation log, or (Gap > 0) a marker for records
// left out between two rows.
type logRow struct {
	Gap     int
	Index   int
	Class   string
	Time    string
	ID      int
	Proc    string
	Type    string
	F       string
	Node    string
	Session string
	Latency string
	Details string
	Err     string
}

// selectLog picks the records the operation log lists: all when they fit,
// else those referenced by witnesses, then failed and unknown operations and
// nemesis records, then a uniform sample of the rest; an operation's invoke
// and completion are kept or dropped together.
func (m *model) selectLog() ([]int, string) {
	ops := m.in.Ops
	covered := make([]bool, len(ops))
	var tiers [3][]unit
	tierCost := [3]int{}
	add := func(t int, u unit) {
		tiers[t] = append(tiers[t], u)
		tierCost[t] += u.cost
	}
	for _, p := range m.pairs {
		u := unit{idx: []int{m.pos[p.Invoke.ID]}, cost: 1}
		if p.Complete != nil {
			u.idx = append(u.idx, m.compPos[p.Complete.ID])
			u.cost = 2
		}
		ref := false
		for _, i := range u.idx {
			covered[i] = true
			ref = ref || m.witness[i]
		}
		switch {
		case ref:
			add(0, u)
		case outcomeClass(p) != "o":
			add(1, u)
		default:
			add(2, u)
		}
	}
	for i, o := range ops {
		if covered[i] {
			continue
		}
		u := unit{idx: []int{i}, cost: 1}
		switch {
		case m.witness[i]:
			add(0, u)
		case o.F == history.FStatus || o.Type == history.Invoke || o.Type == history.OK:
			add(2, u)
		default: // nemesis records, orphan fail/info completions
			add(1, u)
		}
	}
	picked, took := pickTiers(tiers[:], maxLogRows)
	sort.Ints(picked)
	if len(picked) == len(ops) {
		return picked, ""
	}
	return picked, fmt.Sprintf("The log lists %d of %d records (the cap is %d): %d of %d in operations referenced by witnesses, %d of %d in failed, unknown or unfinished operations and nemesis records, and a uniform sample of %d of %d others (ok operations and status polls). history.jsonl next to this report has every record.",
		len(picked), len(ops), maxLogRows, took[0], tierCost[0], took[1], tierCost[1], took[2], tierCost[2])
}

// logRows renders the picked records, with gap rows where records were left
// out.
func (m *model) logRows(picked []int) []logRow {
	var rows []logRow
	prev := -1
	for _, i := range picked {
		if i-prev > 1 {
			rows = append(rows, logRow{Gap: i - prev - 1})
		}
		prev = i
		rows = append(rows, m.logRow(i))
	}
	if n := len(m.in.Ops) - 1 - prev; n > 0 && len(rows) > 0 {
		rows = append(rows, logRow{Gap: n})
	}
	return rows
}

func (m *model) logRow(i int) logRow {
	o := m.in.Ops[i]
	r := logRow{Index: i, Time: secs(o.Time), ID: o.ID, Proc: procName(o.Process), Type: string(o.Type),
		F: string(o.F), Node: o.Node, Session: o.Session, Details: details(o)}
	switch {
	case o.F == history.FNemesis:
		r.Class = "nem"
	case o.F == history.FStatus:
		r.Class = "stat"
	case o.Type == history.Invoke:
		r.Class = "inv"
	case o.Type == history.OK:
		r.Class = "ok"
	case o.Type == history.Fail:
		r.Class = "fail"
	default:
		r.Class = "info"
	}
	if m.witness[i] {
		r.Class += " wit"
	}
	if o.Type != history.Invoke && o.Process != history.NemesisProcess {
		if j, ok := m.pos[o.ID]; ok {
			r.Latency = msText(float64(o.Time-m.in.Ops[j].Time) / nsPerMs)
		}
	}
	switch {
	case o.Reason != "" && o.Error != "":
		r.Err = o.Reason + ": " + truncate(o.Error, maxTextLen)
	case o.Reason != "":
		r.Err = o.Reason
	default:
		r.Err = truncate(o.Error, maxTextLen)
	}
	return r
}

// details is the rest of a record in one compact line.
func details(o history.Op) string {
	var parts []string
	add := func(k, v string) { parts = append(parts, k+"="+v) }
	if o.Seq != 0 || (o.F == history.FAppend && o.Type == history.Invoke) {
		add("seq", strconv.FormatInt(o.Seq, 10))
	}
	if len(o.Events) > 0 {
		parts = append(parts, listText("events", o.Events))
	}
	if o.Epoch != 0 {
		add("epoch", strconv.FormatUint(o.Epoch, 10))
	}
	if o.Owner != "" {
		add("owner", o.Owner)
	}
	if o.NextSeq != 0 {
		add("next_seq", strconv.FormatInt(o.NextSeq, 10))
	}
	if o.Revision != "" {
		add("rev", truncate(o.Revision, 16))
	}
	if o.Active != nil {
		add("active", strconv.FormatBool(*o.Active))
	}
	if o.Pending != nil {
		add("pending", strconv.FormatBool(*o.Pending))
	}
	if o.Outcome != "" {
		add("outcome", o.Outcome)
	}
	if len(o.Appended) > 0 {
		parts = append(parts, listText("appended", o.Appended))
	}
	if o.Duplicate {
		parts = append(parts, "duplicate")
	}
	if len(o.Value) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, o.Value) == nil {
			parts = append(parts, truncate(b.String(), maxTextLen))
		} else {
			parts = append(parts, truncate(string(o.Value), maxTextLen))
		}
	}
	return strings.Join(parts, " ")
}

// listText shows a list in full when short, else its ends and its length.
func listText(name string, xs []string) string {
	if len(xs) <= 6 {
		return name + "=[" + strings.Join(xs, " ") + "]"
	}
	return fmt.Sprintf("%s(%d)=[%s %s … %s %s]", name, len(xs), xs[0], xs[1], xs[len(xs)-2], xs[len(xs)-1])
}
