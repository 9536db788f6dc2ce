package checker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// revision is a parsed <cluster-id>:<incarnation>:<raft-index>.
type revision struct {
	raw   string
	scope string // <cluster-id>:<incarnation>: indices compare only within one scope
	index uint64
}

func parseRevision(s string) (revision, bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || strings.LastIndexByte(s[:i], ':') < 0 {
		return revision{}, false
	}
	idx, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		return revision{}, false
	}
	return revision{raw: s, scope: s[:i], index: idx}, true
}

// revObs is one observed revision of a session.
type revObs struct {
	rev    revision
	length int64 // the log length it belongs to; -1 when unknown
	pair   int   // index into History.Pairs; -1 for the final read
	call   int64 // invoke time
	ret    int64 // completion time
	proc   int
}

// Revisions checks revisions per session, comparing the raft-index
// component numerically and only between revisions of the same
// <cluster-id>:<incarnation>:
//
//   - with the log length (OK reads: len(Events); OK appends, set-mode,
//     pre-step, and load/prepare with NextSeq > 0: NextSeq; the final read):
//     equal lengths have equal revisions and a longer log has a strictly
//     larger index (the revision changes exactly when the log grows);
//   - per process, in the process's operation order, the index never
//     decreases (monotonic reads across node switches);
//   - real time: if A completed before B was invoked, index(B) >= index(A).
//
// Unparsable revisions are skipped and counted in Stats.
func Revisions(h *History) Result {
	v := h.newVerdict(NameRevisions)
	unparsable, observed := 0, 0
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		var obs []revObs
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			c := ok(p)
			if c == nil || c.Revision == "" {
				continue
			}
			r, good := parseRevision(c.Revision)
			if !good {
				unparsable++
				continue
			}
			length := int64(-1)
			switch p.Invoke.F {
			case history.FRead:
				length = int64(len(c.Events))
			case history.FAppend, history.FSetMode, history.FPreStep:
				length = c.NextSeq
			case history.FPrepare, history.FLoad:
				if c.NextSeq > 0 {
					length = c.NextSeq
				}
			}
			obs = append(obs, revObs{rev: r, length: length, pair: pi, call: p.Invoke.Time, ret: c.Time, proc: p.Invoke.Process})
		}
		if fr, present := h.Final.Revisions[s]; present && sv.hasFinal && fr != "" {
			if r, good := parseRevision(fr); good {
				obs = append(obs, revObs{rev: r, length: int64(len(sv.final)), pair: -1, call: h.Horizon, ret: h.Horizon, proc: history.NemesisProcess})
			} else {
				unparsable++
			}
		}
		observed += len(obs)
		checkRevLength(h, v, s, obs)
		checkRevOrder(h, v, s, obs)
	}
	v.stats["observed"] = observed
	if unparsable > 0 {
		v.stats["unparsable"] = unparsable
	}
	return v.result()
}

func (h *History) obsName(o revObs) (string, []int) {
	if o.pair < 0 {
		return "the final read", nil
	}
	p := h.Pairs[o.pair]
	return fmt.Sprintf("%s (%s)", describe(p), when(p)), recs(p)
}

// checkRevLength: equal length -> equal revision; longer -> larger index.
func checkRevLength(h *History, v *verdict, s string, obs []revObs) {
	byScope := map[string][]revObs{}
	for _, o := range obs {
		if o.length >= 0 {
			byScope[o.rev.scope] = append(byScope[o.rev.scope], o)
		}
	}
	scopes := make([]string, 0, len(byScope))
	for sc := range byScope {
		scopes = append(scopes, sc)
	}
	sort.Strings(scopes)
	for _, sc := range scopes {
		list := byScope[sc]
		sort.SliceStable(list, func(i, j int) bool { return list[i].length < list[j].length })
		var prev *revObs // the representative of the previous length
		for i := 0; i < len(list); {
			j := i
			for j < len(list) && list[j].length == list[i].length {
				if list[j].rev.raw != list[i].rev.raw {
					a, ra := h.obsName(list[i])
					b, rb := h.obsName(list[j])
					v.fail(s, append(ra, rb...), "two observations of the same log length %d carry different revisions: %s saw %s, %s saw %s",
						list[i].length, a, list[i].rev.raw, b, list[j].rev.raw)
				}
				j++
			}
			cur := list[i]
			if prev != nil && cur.rev.index <= prev.rev.index {
				a, ra := h.obsName(*prev)
				b, rb := h.obsName(cur)
				v.fail(s, append(ra, rb...), "revision does not grow with the log: %s saw %d events at %s, %s saw %d events at %s",
					a, prev.length, prev.rev.raw, b, cur.length, cur.rev.raw)
			}
			prev = &list[i]
			i = j
		}
	}
}

// checkRevOrder: per process and in real time, the index never decreases.
func checkRevOrder(h *History, v *verdict, s string, obs []revObs) {
	reported := map[[2]int]bool{}
	report := func(a, b revObs, how string) {
		key := [2]int{a.pair, b.pair}
		if reported[key] {
			return
		}
		reported[key] = true
		an, ra := h.obsName(a)
		bn, rb := h.obsName(b)
		v.fail(s, append(ra, rb...), "revision went backwards %s: %s saw %s, then %s saw %s", how, an, a.rev.raw, bn, b.rev.raw)
	}
	// Per process, in invocation order (obs are in invocation order).
	last := map[int]revObs{}
	for _, o := range obs {
		if o.pair < 0 {
			continue
		}
		if p, seen := last[o.proc]; seen && p.rev.scope == o.rev.scope && o.rev.index < p.rev.index {
			report(p, o, fmt.Sprintf("within process %d", o.proc))
		}
		last[o.proc] = o
	}
	// Real time: sweep invocations in time order, folding in completions
	// that happened strictly before, keeping the max index per scope.
	byRet := append([]revObs(nil), obs...)
	sort.SliceStable(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
	byCall := append([]revObs(nil), obs...)
	sort.SliceStable(byCall, func(i, j int) bool { return byCall[i].call < byCall[j].call })
	best := map[string]revObs{}
	k := 0
	for _, b := range byCall {
		for k < len(byRet) && byRet[k].ret < b.call {
			a := byRet[k]
			if cur, seen := best[a.rev.scope]; !seen || a.rev.index > cur.rev.index {
				best[a.rev.scope] = a
			}
			k++
		}
		if a, seen := best[b.rev.scope]; seen && b.rev.index < a.rev.index {
			report(a, b, "in real time")
		}
	}
}
