package checker

import (
	"fmt"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// Elle/Kafka-style checks over the session logs: linear time, no search.

// Lost: every OK append (including a Duplicate one, which proves the events
// are stored) has Events[i] at seq Seq+i in the final log, and in every
// node's own copy. A session with OK appends but no final log is unknown.
func Lost(h *History) Result {
	v := h.newVerdict(NameLost)
	checked := 0
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			c := ok(p)
			if c == nil || p.Invoke.F != history.FAppend {
				continue
			}
			if !sv.hasFinal {
				v.unknown(s, recs(p), "%s acknowledged at %s has no final log to be checked against", describe(p), secs(c.Time))
				continue
			}
			checked++
			for i, id := range p.Invoke.Events {
				seq := p.Invoke.Seq + int64(i)
				if seq >= 0 && seq < int64(len(sv.final)) && sv.final[seq] == id {
					continue
				}
				text := fmt.Sprintf("append %s acknowledged at seq %d on %s at %s is absent from the final log at that seq; the final log has %s",
					id, seq, nodeOr(p.Invoke.Node), secs(c.Time), at(sv.final, seq))
				if pos := sv.finalPos[id]; len(pos) > 0 {
					text += fmt.Sprintf(" (%s is at seq %d instead)", id, pos[0])
				}
				v.fail(s, recs(p), "%s", text)
				break
			}
			for _, n := range h.nodeNames() {
				cp, present := h.Final.Nodes[n][s]
				if !present {
					continue // Converge reports missing copies
				}
				for i, id := range p.Invoke.Events {
					seq := p.Invoke.Seq + int64(i)
					if seq >= 0 && seq < int64(len(cp.Events)) && cp.Events[seq] == id {
						continue
					}
					v.fail(s, recs(p), "append %s acknowledged at seq %d at %s is absent from %s's own copy, which has %s",
						id, seq, secs(c.Time), n, at(cp.Events, seq))
					break
				}
			}
		}
	}
	v.stats["ok_appends_checked"] = checked
	return v.result()
}

func nodeOr(n string) string {
	if n == "" {
		return "an unnamed node"
	}
	return n
}

// Duplicates: a workload marker appears at most once in every OK read, in
// the final log and in every node's copy. (Server-written identities are
// digests of bytes and are not required to be unique.)
func Duplicates(h *History) Result {
	v := h.newVerdict(NameDuplicates)
	check := func(s string, log []string, where string, ops []int) {
		seen := make(map[string]int, len(log))
		for i, id := range log {
			if !history.IsMarker(id) {
				continue
			}
			if j, dup := seen[id]; dup {
				v.fail(s, ops, "marker %s appears twice in %s: at seq %d and at seq %d", id, where, j, i)
				continue
			}
			seen[id] = i
		}
	}
	reads := 0
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			if c := ok(p); c != nil && p.Invoke.F == history.FRead {
				reads++
				check(s, c.Events, fmt.Sprintf("the read by process %d on %s at %s", p.Invoke.Process, nodeOr(p.Invoke.Node), secs(c.Time)), recs(p))
			}
		}
		if sv.hasFinal {
			check(s, sv.final, "the final log", nil)
		}
		for _, n := range h.nodeNames() {
			if cp, present := h.Final.Nodes[n][s]; present {
				check(s, cp.Events, n+"'s own copy", nil)
			}
		}
	}
	v.stats["ok_reads_checked"] = reads
	return v.result()
}

// Prefix: every OK read is a prefix of the final log (so any two reads are
// prefix-comparable: no reorder, no divergence). Without a final log the
// reads are compared with the longest read of the session.
func Prefix(h *History) Result {
	v := h.newVerdict(NamePrefix)
	reads := 0
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		ref, refName := sv.final, "the final log"
		var refOps []int
		if !sv.hasFinal {
			refName = ""
			for _, pi := range sv.pairs {
				p := h.Pairs[pi]
				if c := ok(p); c != nil && p.Invoke.F == history.FRead && (refName == "" || len(c.Events) > len(ref)) {
					ref, refOps = c.Events, recs(p)
					refName = fmt.Sprintf("the longer read by process %d at %s", p.Invoke.Process, secs(c.Time))
				}
			}
		}
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			c := ok(p)
			if c == nil || p.Invoke.F != history.FRead {
				continue
			}
			reads++
			for i, id := range c.Events {
				if i < len(ref) && ref[i] == id {
					continue
				}
				other := "ends there"
				if i < len(ref) {
					other = "has " + ref[i]
				}
				v.fail(s, append(recs(p), refOps...), "the read by process %d on %s at %s is not a prefix of %s: it has %s at seq %d, %s %s (read of %d events, reference of %d)",
					p.Invoke.Process, nodeOr(p.Invoke.Node), secs(c.Time), refName, id, i, refName, other, len(c.Events), len(ref))
				break
			}
		}
	}
	v.stats["ok_reads_checked"] = reads
	return v.result()
}

// Contiguous: an OK non-duplicate append reports NextSeq = Seq+len(Events)
// and a Duplicate one NextSeq >= Seq+len(Events); no OK operation reports a
// NextSeq beyond the final log's length (a shorter final log is a gap or a
// truncation); OK appends have Seq >= 0.
func Contiguous(h *History) Result {
	v := h.newVerdict(NameContiguous)
	checked := 0
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			c := ok(p)
			if c == nil {
				continue
			}
			if p.Invoke.F == history.FAppend {
				checked++
				want := p.Invoke.Seq + int64(len(p.Invoke.Events))
				switch {
				case p.Invoke.Seq < 0:
					v.fail(s, recs(p), "%s was acknowledged at a negative seq %d", describe(p), p.Invoke.Seq)
				case !c.Duplicate && c.NextSeq != want:
					v.fail(s, recs(p), "%s at seq %d with %d events was acknowledged at %s with next seq %d, not %d",
						describe(p), p.Invoke.Seq, len(p.Invoke.Events), secs(c.Time), c.NextSeq, want)
				case c.Duplicate && c.NextSeq < want:
					v.fail(s, recs(p), "duplicate %s at seq %d with %d events was acknowledged at %s with next seq %d, below %d",
						describe(p), p.Invoke.Seq, len(p.Invoke.Events), secs(c.Time), c.NextSeq, want)
				}
			}
			if c.NextSeq <= 0 {
				continue
			}
			if !sv.hasFinal {
				v.unknown(s, recs(p), "%s reported next seq %d but the session has no final log", describe(p), c.NextSeq)
				continue
			}
			if c.NextSeq > int64(len(sv.final)) {
				v.fail(s, recs(p), "%s acknowledged at %s reported next seq %d, but the final log has only %d events",
					describe(p), secs(c.Time), c.NextSeq, len(sv.final))
			}
		}
	}
	v.stats["ok_appends_checked"] = checked
	return v.result()
}

// Phantom: every marker in an OK read, the final log or a node's copy of
// session s was sent by some append invoked on s; no marker whose every
// sending append definitely failed appears anywhere (an aborted read); and
// no seq is covered by two different OK non-duplicate appends.
func Phantom(h *History) Result {
	v := h.newVerdict(NamePhantom)
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		sent := map[string]bool{}      // marker -> sent by an append not definitely failed
		failedBy := map[string][]int{} // marker -> records of the failed appends that sent it
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			if p.Invoke.F != history.FAppend {
				continue
			}
			for _, id := range p.Invoke.Events {
				if p.Outcome() == history.Fail {
					failedBy[id] = append(failedBy[id], recs(p)...)
					if _, seen := sent[id]; !seen {
						sent[id] = false
					}
				} else {
					sent[id] = true
				}
			}
		}
		check := func(log []string, where string, ops []int) {
			for i, id := range log {
				if !history.IsMarker(id) {
					continue
				}
				good, known := sent[id]
				switch {
				case !known:
					v.fail(s, ops, "marker %s at seq %d of %s was never sent to session %s by any append", id, i, where, s)
				case !good:
					v.fail(s, append(append([]int(nil), ops...), failedBy[id]...), "marker %s at seq %d of %s was sent only by appends that definitely failed (aborted read)", id, i, where)
				}
			}
		}
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			if c := ok(p); c != nil && p.Invoke.F == history.FRead {
				check(c.Events, fmt.Sprintf("the read by process %d at %s", p.Invoke.Process, secs(c.Time)), recs(p))
			}
		}
		if sv.hasFinal {
			check(sv.final, "the final log", nil)
		}
		for _, n := range h.nodeNames() {
			if cp, present := h.Final.Nodes[n][s]; present {
				check(cp.Events, n+"'s own copy", nil)
			}
		}
		// At most one OK non-duplicate append per seq.
		owner := map[int64]history.Pair{}
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			c := ok(p)
			if c == nil || p.Invoke.F != history.FAppend || c.Duplicate {
				continue
			}
			for i := range p.Invoke.Events {
				seq := p.Invoke.Seq + int64(i)
				if q, taken := owner[seq]; taken {
					v.fail(s, recs(q, p), "two appends were both acknowledged as applied at seq %d: %s (%s) and %s (%s)",
						seq, describe(q), when(q), describe(p), when(p))
					break
				}
				owner[seq] = p
			}
		}
	}
	return v.result()
}
