package checker

import (
	"fmt"
	"sort"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// appendSenders counts, per identity, the appends of a session that were not
// definitely failed and sent it.
func appendSenders(h *History, sv *sessionView) map[string]int {
	senders := map[string]int{}
	for _, pi := range sv.pairs {
		p := h.Pairs[pi]
		if p.Invoke.F != history.FAppend || p.Outcome() == history.Fail {
			continue
		}
		seen := map[string]bool{}
		for _, id := range p.Invoke.Events {
			if !seen[id] {
				senders[id]++
				seen[id] = true
			}
		}
	}
	return senders
}

// provenApplied reports whether an append of unknown outcome certainly took
// effect itself: every identity it sent is in the final log at Seq+i, and no
// other append sent any of them.
func provenApplied(sv *sessionView, inv history.Op, senders map[string]int) bool {
	if !sv.hasFinal || len(inv.Events) == 0 || inv.Seq < 0 || inv.Seq+int64(len(inv.Events)) > int64(len(sv.final)) {
		return false
	}
	for i, id := range inv.Events {
		if senders[id] != 1 || sv.final[inv.Seq+int64(i)] != id {
			return false
		}
	}
	return true
}

// write is an append that certainly took effect under an epoch.
type write struct {
	pair  int
	epoch uint64
	seq   int64 // first seq it wrote
	call  int64
}

// Fencing checks lease epochs per session. Writes are OK non-duplicate
// appends, appends of unknown outcome proven applied (see provenApplied),
// and OK set-mode / pre-step calls that appended events; each carried
// Invoke.Epoch. (Duplicate appends are excluded: the store accepts an
// identical re-send before checking the lease.)
//
//  1. Real time: no write carrying epoch e was invoked after a prepare
//     granting epoch e' > e had completed OK ("a fenced writer got
//     through").
//  2. Log order: ordered by the seq they wrote at, the writes' epochs never
//     decrease.
func Fencing(h *History) Result {
	v := h.newVerdict(NameFencing)
	checked := 0
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		senders := appendSenders(h, sv)
		type grant struct {
			pair  int
			epoch uint64
			at    int64
		}
		var grants []grant
		var writes []write
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			inv, c := p.Invoke, ok(p)
			switch {
			case inv.F == history.FPrepare && c != nil:
				grants = append(grants, grant{pi, c.Epoch, c.Time})
			case inv.F == history.FAppend && c != nil && !c.Duplicate:
				writes = append(writes, write{pi, inv.Epoch, inv.Seq, inv.Time})
			case inv.F == history.FAppend && p.Outcome() == history.Info && provenApplied(sv, inv, senders):
				writes = append(writes, write{pi, inv.Epoch, inv.Seq, inv.Time})
			case (inv.F == history.FSetMode || inv.F == history.FPreStep) && c != nil && len(c.Appended) > 0:
				writes = append(writes, write{pi, inv.Epoch, c.NextSeq - int64(len(c.Appended)), inv.Time})
			}
		}
		checked += len(writes)
		// 1. Real time.
		sort.SliceStable(grants, func(i, j int) bool { return grants[i].at < grants[j].at })
		for _, w := range writes {
			var top *grant
			for i := range grants {
				if grants[i].at >= w.call {
					break
				}
				if top == nil || grants[i].epoch > top.epoch {
					top = &grants[i]
				}
			}
			if top != nil && top.epoch > w.epoch {
				g, wp := h.Pairs[top.pair], h.Pairs[w.pair]
				v.fail(s, recs(g, wp), "a fenced writer got through: %s carrying epoch %d (%s) took effect although prepare by %s had been granted epoch %d at %s, before the write was invoked",
					describe(wp), w.epoch, when(wp), g.Complete.Owner, top.epoch, secs(top.at))
			}
		}
		// 2. Log order.
		sort.SliceStable(writes, func(i, j int) bool { return writes[i].seq < writes[j].seq })
		for i := 1; i < len(writes); i++ {
			a, b := writes[i-1], writes[i]
			if b.epoch < a.epoch {
				pa, pb := h.Pairs[a.pair], h.Pairs[b.pair]
				v.fail(s, recs(pa, pb), "epochs go backwards in the log: %s wrote at seq %d under epoch %d, but %s wrote later, at seq %d, under epoch %d",
					describe(pa), a.seq, a.epoch, describe(pb), b.seq, b.epoch)
			}
		}
	}
	v.stats["writes_checked"] = checked
	return v.result()
}

// Creators: per session, at most one distinct Owner has an OK create (a
// creator's idempotent retry with an identical header may succeed again).
func Creators(h *History) Result {
	v := h.newVerdict(NameCreators)
	sessions := 0
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		winners := map[string]history.Pair{}
		var order []string
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			if p.Invoke.F != history.FCreate || ok(p) == nil {
				continue
			}
			owner := p.Invoke.Owner
			if owner == "" {
				owner = p.Complete.Owner
			}
			if _, seen := winners[owner]; !seen {
				winners[owner] = p
				order = append(order, owner)
			}
		}
		if len(order) > 0 {
			sessions++
		}
		if len(order) > 1 {
			var ops []int
			for _, o := range order {
				ops = append(ops, recs(winners[o])...)
			}
			first, second := winners[order[0]], winners[order[1]]
			v.fail(s, ops, "%d different creators won session %s: %s by %s (%s) and %s by %s (%s)",
				len(order), s, describe(first), order[0], when(first), describe(second), order[1], when(second))
		}
	}
	v.stats["sessions_created"] = sessions
	return v.result()
}

// PlanMode checks the plan-mode projection rule and that selections apply
// once:
//
//   - projection: an OK get-mode or pre-step with NextSeq k and Active set
//     has Active == fold(first k identities of the final log) (last
//     plan/mode=<v> wins, default false); an OK read with Active set has
//     Active == fold(its Events);
//   - an OK set-mode or pre-step appends at most one plan/mode event (a
//     selection is never applied twice);
//   - each identity an OK operation reports in Appended is in the final log
//     exactly at NextSeq-len(Appended)+i.
//
// A NextSeq beyond the final log is left to Contiguous; a session without a
// final log makes the projection unknown.
func PlanMode(h *History) Result {
	v := h.newVerdict(NamePlanMode)
	projected := 0
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		for _, pi := range sv.pairs {
			p := h.Pairs[pi]
			c := ok(p)
			if c == nil {
				continue
			}
			f := p.Invoke.F
			if f == history.FRead && c.Active != nil {
				projected++
				if want := foldPlanMode(c.Events); want != *c.Active {
					v.fail(s, recs(p), "read (%s) reported plan mode active=%t, but the %d events it returned fold to %t",
						when(p), *c.Active, len(c.Events), want)
				}
			}
			if (f == history.FGetMode || f == history.FPreStep) && c.Active != nil {
				switch {
				case !sv.hasFinal:
					v.unknown(s, recs(p), "%s cannot be projected: the session has no final log", describe(p))
				case c.NextSeq < 0 || c.NextSeq > int64(len(sv.final)):
					// Contiguous reports it.
				default:
					projected++
					if want := foldPlanMode(sv.final[:c.NextSeq]); want != *c.Active {
						v.fail(s, recs(p), "%s (%s) reported plan mode active=%t at next seq %d, but the final log's first %d events fold to %t%s",
							describe(p), when(p), *c.Active, c.NextSeq, c.NextSeq, want, lastPlanMode(sv.final[:c.NextSeq]))
					}
				}
			}
			if !serverWriter(f) || len(c.Appended) == 0 {
				continue
			}
			if f == history.FSetMode || f == history.FPreStep {
				var modes []string
				for _, id := range c.Appended {
					if _, isMode := planModeValue(id); isMode {
						modes = append(modes, id)
					}
				}
				if len(modes) > 1 {
					v.fail(s, recs(p), "%s (%s) applied a selection twice: it appended %d plan/mode events (%s)",
						describe(p), when(p), len(modes), listIDs(modes, 4))
				}
			}
			if !sv.hasFinal {
				v.unknown(s, recs(p), "%s appended events but the session has no final log", describe(p))
				continue
			}
			first := c.NextSeq - int64(len(c.Appended))
			for i, id := range c.Appended {
				seq := first + int64(i)
				if seq >= 0 && seq < int64(len(sv.final)) && sv.final[seq] == id {
					continue
				}
				text := fmt.Sprintf("%s (%s) appended %s at seq %d, but the final log has %s", describe(p), when(p), id, seq, at(sv.final, seq))
				if pos := sv.finalPos[id]; len(pos) > 0 {
					text += fmt.Sprintf(" (%s is at seq %d)", id, pos[0])
				}
				v.fail(s, recs(p), "%s", text)
				break
			}
		}
	}
	v.stats["projections_checked"] = projected
	return v.result()
}

// lastPlanMode names the plan/mode event that decides a fold.
func lastPlanMode(ids []string) string {
	for i := len(ids) - 1; i >= 0; i-- {
		if _, isMode := planModeValue(ids[i]); isMode {
			return fmt.Sprintf(" (the last plan/mode there is %s at seq %d)", ids[i], i)
		}
	}
	return " (there is no plan/mode there)"
}
