package checker

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// Converge: after heal and catch-up, every node's own copy of each session
// equals the final log (identities and revision; without a final log, the
// copies equal each other), and all nodes' artifact digests are equal.
//
// A node that has a session's copy missing from Final.Nodes[node] was not
// read, which is "unknown" (the runner records a node that answers "no such
// session" as an empty NodeCopy). An empty ArtifactSHA256 on a non-empty
// log makes that session's digest comparison unknown. No node copies at all
// is unknown.
func Converge(h *History) Result {
	v := h.newVerdict(NameConverge)
	nodes := h.nodeNames()
	if len(nodes) == 0 {
		v.unknown("", nil, "no node's own copy was read, so convergence cannot be checked")
		return v.result()
	}
	compared := 0
	for _, s := range h.sessionNames {
		sv := h.sessions[s]
		ref, refName := sv.final, "the final log"
		refRev := h.Final.Revisions[s]
		if !sv.hasFinal {
			ref, refName, refRev = nil, "", ""
			for _, n := range nodes {
				if cp, present := h.Final.Nodes[n][s]; present {
					ref, refName, refRev = cp.Events, n+"'s copy", cp.Revision
					break
				}
			}
			if refName == "" {
				continue // nobody has it
			}
		}
		digests := map[string][]string{} // digest -> nodes
		missingDigest := []string{}
		for _, n := range nodes {
			cp, present := h.Final.Nodes[n][s]
			if !present {
				if sv.hasFinal && len(sv.final) == 0 {
					continue
				}
				v.unknown(s, nil, "%s's own copy of session %s was not read", n, s)
				continue
			}
			compared++
			if d := firstDiff(ref, cp.Events); d >= 0 {
				v.fail(s, nil, "%s's copy of session %s differs from %s at seq %d: %s has %s, %s has %s",
					n, s, refName, d, n, at(cp.Events, int64(d)), refName, at(ref, int64(d)))
			}
			if refRev != "" && cp.Revision != refRev {
				v.fail(s, nil, "%s's copy of session %s is at revision %q, %s at %q", n, s, cp.Revision, refName, refRev)
			}
			if cp.ArtifactSHA256 == "" {
				missingDigest = append(missingDigest, n)
			} else {
				digests[cp.ArtifactSHA256] = append(digests[cp.ArtifactSHA256], n)
			}
		}
		empty := len(ref) == 0
		if len(digests) > 1 {
			var parts []string
			for d, ns := range digests {
				verb := " has "
				if len(ns) > 1 {
					verb = " have "
				}
				parts = append(parts, strings.Join(ns, ",")+verb+short(d))
			}
			sort.Strings(parts)
			v.fail(s, nil, "the nodes' artifacts of session %s differ: %s", s, strings.Join(parts, "; "))
		} else if len(missingDigest) > 0 && !empty {
			v.unknown(s, nil, "session %s: no artifact digest from %s, so the artifacts cannot be compared", s, strings.Join(missingDigest, ","))
		}
	}
	v.stats["nodes"] = len(nodes)
	v.stats["copies_compared"] = compared
	return v.result()
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// firstDiff is the first seq where a and b differ (-1 when equal).
func firstDiff(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		if len(a) < len(b) {
			return len(a)
		}
		return len(b)
	}
	return -1
}

// The nemesis records' Value is history.NemesisValue.
type NemesisValue = history.NemesisValue

// Nemesis actions.
const (
	ActionInject = history.ActionInject
	ActionHeal   = history.ActionHeal
)

// Liveness checks that the run could have found something (Jepsen's stats,
// etcd's min-QPS guard). It is never "false", only "unknown":
//
//   - at least opt.MinOKBeforeFaults OK client operations complete before the
//     first nemesis record with action "inject";
//   - at least opt.MinFaults inject records with ok true;
//   - after the last "heal" record (the whole run when there is none), every
//     operation kind invoked there has at least one OK completion there;
//   - at least one OK client operation.
func Liveness(h *History, opt Options) Result {
	v := h.newVerdict(NameLiveness)
	firstInject, lastHeal, lastFaultHeal := -1, -1, -1
	injected, injectFailed, heals := 0, 0, 0
	for i, o := range h.Ops {
		if o.F != history.FNemesis {
			continue
		}
		var nv NemesisValue
		if len(o.Value) == 0 || json.Unmarshal(o.Value, &nv) != nil {
			continue
		}
		switch nv.Action {
		case ActionInject:
			if firstInject < 0 {
				firstInject = i
			}
			if nv.OK {
				injected++
			} else {
				injectFailed++
			}
		case ActionHeal:
			lastHeal = i
			heals++
			if nv.Fault != "all" {
				lastFaultHeal = i
			}
		}
	}
	// Every node that clients used in the healed window after the last fault
	// (before the final heal of everything, when the workers stop) must have
	// answered at least one of them successfully: a node that never recovers
	// leaves its clients without service.
	nodeUsed, nodeOK := map[string]bool{}, map[string]bool{}
	for i, o := range h.Ops {
		if !isClient(o) || o.Node == "" || i <= lastFaultHeal || (lastHeal > lastFaultHeal && i > lastHeal) {
			continue
		}
		if o.Type == history.Invoke {
			nodeUsed[o.Node] = true
		} else if o.Type == history.OK {
			nodeOK[o.Node] = true
		}
	}
	var usedNodes []string
	for n := range nodeUsed {
		usedNodes = append(usedNodes, n)
	}
	sort.Strings(usedNodes)
	for _, n := range usedNodes {
		if !nodeOK[n] {
			v.unknown("", nil, "no operation sent to %s succeeded in the healed window after the last fault", n)
		}
	}
	v.stats["nodes_serving_after_last_fault"] = len(nodeOK)
	counts := map[history.F]map[history.Type]int{}
	okBefore, okTotal := 0, 0
	usedAfter := map[history.F]bool{}
	okAfter := map[history.F]int{}
	for i, o := range h.Ops {
		if !isClient(o) {
			continue
		}
		if o.Type == history.Invoke {
			if i > lastHeal {
				usedAfter[o.F] = true
			}
			continue
		}
		if counts[o.F] == nil {
			counts[o.F] = map[history.Type]int{}
		}
		counts[o.F][o.Type]++
		if o.Type != history.OK {
			continue
		}
		okTotal++
		if firstInject < 0 || i < firstInject {
			okBefore++
		}
		if i > lastHeal {
			okAfter[o.F]++
		}
	}
	if okTotal == 0 {
		v.unknown("", nil, "no client operation completed OK")
	}
	if okBefore < opt.MinOKBeforeFaults {
		v.unknown("", nil, "only %d OK operations completed before the first fault; at least %d are required", okBefore, opt.MinOKBeforeFaults)
	}
	if injected < opt.MinFaults {
		v.unknown("", nil, "only %d faults were injected successfully (%d injections failed); at least %d are required", injected, injectFailed, opt.MinFaults)
	}
	var fs []string
	for f := range usedAfter {
		fs = append(fs, string(f))
	}
	sort.Strings(fs)
	where := "after the last heal"
	if lastHeal < 0 {
		where = "in the whole run"
	}
	for _, f := range fs {
		if okAfter[history.F(f)] == 0 {
			v.unknown("", nil, "no %s operation completed OK %s, though %s operations were invoked there", f, where, f)
		}
	}
	v.stats["ok_before_faults"] = okBefore
	v.stats["faults_injected"] = injected
	v.stats["faults_failed"] = injectFailed
	v.stats["heals"] = heals
	ops := map[string]map[string]int{}
	for f, byType := range counts {
		m := map[string]int{}
		for t, n := range byType {
			m[string(t)] = n
		}
		ops[string(f)] = m
	}
	v.stats["ops"] = ops
	after := map[string]int{}
	for f, n := range okAfter {
		after[string(f)] = n
	}
	v.stats["ok_after_last_heal"] = after
	return v.result()
}
