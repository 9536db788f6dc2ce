package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// nodeView is one node's answer to one status poll.
type nodeView struct {
	State   string // "Leader", "Follower", "Candidate", … ; "" when unreachable
	Leader  string
	Term    string
	Commit  string
	Applied string
	Err     string // "unreachable", or another error
}

// poll is one status record: every node's view at one time.
type poll struct {
	t     int64
	index int
	nodes map[string]nodeView
}

// parseStatus reads the status records ({"node1":{"state":…,"leader":…,
// "term":…,"commit":…,"applied":…} | {"error":"unreachable"}, …}); records
// it cannot read are skipped. It returns the polls in time order and the
// node names in order.
func parseStatus(ops []history.Op) ([]poll, []string) {
	var polls []poll
	names := map[string]bool{}
	for i, o := range ops {
		if o.F != history.FStatus || len(o.Value) == 0 {
			continue
		}
		var raw map[string]map[string]any
		dec := json.NewDecoder(bytes.NewReader(o.Value))
		dec.UseNumber()
		if dec.Decode(&raw) != nil || len(raw) == 0 {
			continue
		}
		p := poll{t: o.Time, index: i, nodes: map[string]nodeView{}}
		for n, v := range raw {
			names[n] = true
			nv := nodeView{State: str(v["state"]), Leader: str(v["leader"]), Term: str(v["term"]),
				Commit: str(v["commit"]), Applied: str(v["applied"]), Err: str(v["error"])}
			if nv.Err == "" && nv.State == "" {
				nv.Err = "no state"
			}
			p.nodes[n] = nv
		}
		polls = append(polls, p)
	}
	sort.SliceStable(polls, func(a, b int) bool { return polls[a].t < polls[b].t })
	nodes := make([]string, 0, len(names))
	for n := range names {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	return polls, nodes
}

func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// stateClass is the CSS class of a node state.
func stateClass(v nodeView) string {
	if v.Err != "" {
		return "sx"
	}
	switch strings.ToLower(v.State) {
	case "leader":
		return "sl"
	case "follower":
		return "sf"
	case "candidate":
		return "sc"
	default:
		return "so"
	}
}

// leaderOf is who led at one poll: the one node claiming leadership; when
// several claim it, "split"; when none does, the leader most reachable nodes
// point to (marked as hearsay), or "" when there is none.
func leaderOf(p poll) (leader string, split bool, hearsay bool) {
	var claim []string
	votes := map[string]int{}
	for n, v := range p.nodes {
		if v.Err != "" {
			continue
		}
		if strings.EqualFold(v.State, "leader") {
			claim = append(claim, n)
		}
		if v.Leader != "" {
			votes[v.Leader]++
		}
	}
	sort.Strings(claim)
	switch {
	case len(claim) == 1:
		return claim[0], false, false
	case len(claim) > 1:
		parts := make([]string, len(claim))
		for i, n := range claim {
			parts[i] = n + " (term " + p.nodes[n].Term + ")"
		}
		return strings.Join(parts, ", "), true, false
	}
	best, bestN := "", 0
	for n, c := range votes {
		if c > bestN || (c == bestN && n < best) {
			best, bestN = n, c
		}
	}
	return best, false, best != ""
}

// segment is a run of polls with the same view of one row.
type segment struct {
	start, end int64
	key        string // what must match to merge
	class      string
	fill       string // an explicit fill colour (leader row), else by class
	label      string // drawn inside when wide enough
	title      string
	first      nodeView
	last       nodeView
}

// pollEnds is when each poll's view stops being current: the next poll, and
// for the last one a typical poll interval later (within the horizon).
func pollEnds(polls []poll, horizon int64) []int64 {
	ends := make([]int64, len(polls))
	var gaps []int64
	for i := 1; i < len(polls); i++ {
		gaps = append(gaps, polls[i].t-polls[i-1].t)
	}
	step := int64(nsPerSec)
	if len(gaps) > 0 {
		sort.Slice(gaps, func(a, b int) bool { return gaps[a] < gaps[b] })
		step = gaps[len(gaps)/2]
	}
	for i := range polls {
		if i+1 < len(polls) {
			ends[i] = polls[i+1].t
		} else {
			ends[i] = min(polls[i].t+step, horizon)
		}
	}
	return ends
}

// nodeSegments is one node's state over time.
func nodeSegments(polls []poll, ends []int64, node string) []segment {
	var out []segment
	for i, p := range polls {
		v, ok := p.nodes[node]
		if !ok {
			v = nodeView{Err: "not polled"}
		}
		key := v.Err + "|" + v.State + "|" + v.Leader + "|" + v.Term
		if n := len(out); n > 0 && out[n-1].key == key && out[n-1].end == p.t {
			out[n-1].end = ends[i]
			out[n-1].last = v
			continue
		}
		out = append(out, segment{start: p.t, end: ends[i], key: key, class: stateClass(v), first: v, last: v})
	}
	for i := range out {
		s := &out[i]
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s–%s: ", node, shortSecs(s.start), shortSecs(s.end))
		if s.first.Err != "" {
			b.WriteString(s.first.Err)
			s.label = s.first.Err
		} else {
			fmt.Fprintf(&b, "%s, term %s", s.first.State, s.first.Term)
			if s.first.Leader != "" {
				fmt.Fprintf(&b, ", leader %s", s.first.Leader)
			}
			fmt.Fprintf(&b, ", commit %s", rangeText(s.first.Commit, s.last.Commit))
			fmt.Fprintf(&b, ", applied %s", rangeText(s.first.Applied, s.last.Applied))
			s.label = s.first.State + " t" + s.first.Term
		}
		s.title = b.String()
	}
	return out
}

func rangeText(a, b string) string {
	if a == b {
		return a
	}
	return a + "→" + b
}

// leaderSegments is who led over time.
func leaderSegments(polls []poll, ends []int64, nodeColor map[string]string) []segment {
	var out []segment
	for i, p := range polls {
		l, split, hearsay := leaderOf(p)
		key := fmt.Sprint(l, split, hearsay)
		if n := len(out); n > 0 && out[n-1].key == key && out[n-1].end == p.t {
			out[n-1].end = ends[i]
			continue
		}
		s := segment{start: p.t, end: ends[i], key: key}
		switch {
		case split:
			s.class, s.label = "lsplit", "2+ leaders"
			s.title = "several nodes claim leadership: " + l
		case l == "":
			s.class, s.label, s.title = "lnone", "no leader", "no node claims leadership"
		case hearsay:
			s.class, s.label = "lhear", l+"?"
			s.title = l + " named leader by reachable followers (it did not answer as leader)"
		default:
			s.class, s.fill, s.label, s.title = "lead", nodeColor[l], l, l+" leads"
		}
		out = append(out, s)
	}
	for i := range out {
		out[i].title = fmt.Sprintf("%s–%s: %s", shortSecs(out[i].start), shortSecs(out[i].end), out[i].title)
	}
	return out
}
