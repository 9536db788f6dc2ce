package fsm

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// CommandVersion is the newest command encoding this build applies.
// Entries of a newer version make Apply panic: a replica must never apply a
// command it does not understand (rolling upgrades propose a new version only
// once every voter supports it). Version 2 added the plan-mode commands.
// Version 3 added principals and limits to Create and Append, version 4
// Delete and Sweep, version 5 request ids bound to their operation
// (Command.bind_request, requests.go) and a session byte quota that counts
// the header and kept answers (Limits.count_stored, also on plan-mode calls),
// version 6 ConvertLayout (the state's layout 2, layout.go), version 7
// strict appends (Append.strict: refused when a read would refuse the log),
// version 8 packed entries (pack.go), version 9 ConvertLayout to state format
// 3 (packed events, layout.go), version 10 ConvertLayout to state format 4
// (rows keyed by session number, layout.go).
const CommandVersion = 10

// StrictVersion is the command version that carries Append.strict.
const StrictVersion = 7

// Encode serialises an entry for the Raft log, stamped with the oldest
// version that knows all its commands, so an entry an older replica cannot
// apply is refused by version rather than misread.
func Encode(e *fsmpb.Entry) ([]byte, error) {
	e.Version = 1
	for _, c := range e.Commands {
		switch c.Cmd.(type) {
		case *fsmpb.Command_PlanSet, *fsmpb.Command_PlanPreStep, *fsmpb.Command_PlanCommand, *fsmpb.Command_PlanExit:
			e.Version = max(e.Version, 2)
		}
		if c.Principal != "" || c.Limits != nil {
			e.Version = max(e.Version, 3)
		}
		switch c.Cmd.(type) {
		case *fsmpb.Command_Delete, *fsmpb.Command_Sweep:
			e.Version = max(e.Version, 4)
		}
		if c.BindRequest || c.Limits.GetCountStored() {
			e.Version = max(e.Version, 5)
		}
		if cl, ok := c.Cmd.(*fsmpb.Command_ConvertLayout); ok {
			e.Version = max(e.Version, layoutVersion)
			if cl.ConvertLayout.GetLayout() >= 3 {
				e.Version = max(e.Version, PackedEventsVersion)
			}
			if cl.ConvertLayout.GetLayout() >= 4 {
				e.Version = max(e.Version, NumberedRowsVersion)
			}
		}
		if c.GetAppend().GetStrict() {
			e.Version = max(e.Version, StrictVersion)
		}
	}
	return proto.Marshal(e)
}

// Decode parses a Raft log entry, packed (Pack) or not.
func Decode(data []byte) (*fsmpb.Entry, error) {
	var e fsmpb.Entry
	if err := proto.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("decode entry: %w", err)
	}
	if e.Version == 0 || e.Version > CommandVersion {
		return nil, fmt.Errorf("decode entry: command version %d not supported (this build: %d)", e.Version, CommandVersion)
	}
	if e.Packed != nil || e.PackedSize != 0 {
		return unpack(&e)
	}
	return &e, nil
}

// HeaderToPB converts a domain header to its stored form.
func HeaderToPB(h sessionstore.Header) *fsmpb.Header {
	return &fsmpb.Header{
		Version: h.Version, Id: h.ID, CreatedAt: h.CreatedAt, Cwd: h.Cwd,
		ParentSession: h.ParentSession, SeedLength: h.SeedLength, Origin: h.Origin,
		DelegationDepth: h.DelegationDepth, AgentPreset: h.AgentPreset,
	}
}

// HeaderFromPB converts a stored header to the domain type.
func HeaderFromPB(p *fsmpb.Header) sessionstore.Header {
	if p == nil {
		return sessionstore.Header{}
	}
	return sessionstore.Header{
		Version: p.Version, ID: p.Id, CreatedAt: p.CreatedAt, Cwd: p.Cwd,
		ParentSession: p.ParentSession, SeedLength: p.SeedLength, Origin: p.Origin,
		DelegationDepth: p.DelegationDepth, AgentPreset: p.AgentPreset,
	}
}

// DecodeRecord parses a stored session record; nil input gives nil.
func DecodeRecord(b []byte) (*fsmpb.SessionRecord, error) {
	if b == nil {
		return nil, nil
	}
	var r fsmpb.SessionRecord
	if err := proto.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode session record: %w", err)
	}
	return &r, nil
}

// Revision renders a session's revision: <cluster-id>:<incarnation>:<last change
// index>. Equal on every replica; changed by every append and committed repair.
func Revision(clusterID string, r *fsmpb.SessionRecord) string {
	// Every answer carries one: appended rather than through fmt.
	b := make([]byte, 0, len(clusterID)+2+2*20)
	b = append(append(b, clusterID...), ':')
	b = append(strconv.AppendUint(b, r.Incarnation, 10), ':')
	return string(strconv.AppendUint(b, r.LastChangeIndex, 10))
}

// ResultError turns a failed result into its domain error (nil on success).
func ResultError(r *fsmpb.Result) error {
	if r == nil || r.Reason == "" {
		return nil
	}
	return &sessionstore.Error{Reason: sessionstore.Reason(r.Reason), Message: r.Message}
}

func errResult(err *sessionstore.Error) *fsmpb.Result {
	return &fsmpb.Result{Reason: string(err.Reason), Message: err.Message}
}
