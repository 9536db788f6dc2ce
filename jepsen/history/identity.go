package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// EventType is the type of the events the workloads append: unknown to the
// reference, so they carry "ignorable": true and every read accepts them.
const EventType = "jepsen/op"

// MarkedEvent is the JSON text of an event of type typ at seq whose data is
// {"marker": marker, …extra members} (extra: JSON members without braces,
// e.g. `"turn":3`; "" for none).
func MarkedEvent(typ, marker, extra string, seq, timeMs int64) string {
	m, _ := json.Marshal(marker)
	t, _ := json.Marshal(typ)
	data := `{"marker":` + string(m)
	if extra != "" {
		data += "," + extra
	}
	return `{"type":` + string(t) + `,"seq":` + strconv.FormatInt(seq, 10) + `,"time":` +
		strconv.FormatInt(timeMs, 10) + `,"data":` + data + `}}`
}

// WorkloadEvent is the JSON text of a workload event at seq carrying marker,
// a unique id of the form p<process>-<n> that maps reads back to writers.
func WorkloadEvent(marker string, seq, timeMs int64) string {
	m, _ := json.Marshal(marker)
	return `{"type":"` + EventType + `","seq":` + strconv.FormatInt(seq, 10) + `,"time":` +
		strconv.FormatInt(timeMs, 10) + `,"data":{"marker":` + string(m) + `},"ignorable":true}`
}

// Identity names a stored event for the checkers: its marker when it is a
// workload event (any event whose data has a string "marker": the workloads
// also mark the turn/start and turn/end events they write), else "<type>:<first 12 hex digits of the SHA-256 of its
// bytes>" (server-written events: command/run, crash closers), and for
// plan/mode "plan/mode=<active>:<digest>".
// The identity does not depend on seq for workload events, so a marker found
// at two seqs is a duplicate.
func Identity(ev []byte) string {
	var e struct {
		Type string `json:"type"`
		Data struct {
			Marker string `json:"marker"`
			Active *bool  `json:"active"`
		} `json:"data"`
	}
	if json.Unmarshal(ev, &e) == nil && e.Data.Marker != "" {
		return e.Data.Marker
	}
	sum := sha256.Sum256(ev)
	name := e.Type
	if e.Type == "plan/mode" && e.Data.Active != nil {
		name += "=" + strconv.FormatBool(*e.Data.Active) // the plan-mode checks fold these
	}
	return name + ":" + hex.EncodeToString(sum[:6])
}

// IsMarker reports whether an identity is a workload marker (not a
// server-written event).
func IsMarker(id string) bool {
	for i := 0; i < len(id); i++ {
		if id[i] == ':' {
			return false
		}
	}
	return id != ""
}
