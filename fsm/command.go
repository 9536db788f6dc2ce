package fsm

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// Command versions, in one place: what each one added. Entries of a newer
// version than CommandVersion make Apply panic: a replica must never apply a
// command it does not understand. A leader proposes a command of version v
// only once every voter advertises v (cluster's votersSupport), and Encode
// stamps each entry with the oldest version that knows all its commands, so
// an older replica refuses it by number rather than misreading it.
// docs/upgrading.md lists them for operators.
const (
	// PlanVersion: the plan-mode commands.
	PlanVersion = 2
	// PrincipalsVersion: principals and limits on Create and Append.
	PrincipalsVersion = 3
	// DeleteVersion: Delete and Sweep.
	DeleteVersion = 4
	// RequestsVersion: a request id bound to its operation (Command.
	// bind_request, requests.go: another operation under a used id is
	// refused instead of getting the stored answer), and a session byte
	// quota that counts the header and kept answers (Limits.count_stored).
	RequestsVersion = 5
	// LayoutVersion: ConvertLayout, to the state's layout 2 (layout.go).
	LayoutVersion = 6
	// StrictVersion: Append.strict (refused when a read would refuse the log).
	StrictVersion = 7
	// PackedVersion: packed entries (pack.go).
	PackedVersion = 8
	// PackedEventsVersion: ConvertLayout to state format 3, packed events; a
	// replica of an older build refuses a format-3 snapshot.
	PackedEventsVersion = 9
	// NumberedRowsVersion: ConvertLayout to state format 4, a session's rows
	// keyed by its number (storage/numbered.go); an older replica refuses a
	// format-4 snapshot.
	NumberedRowsVersion = 10
	// TitleVersion: ConvertLayout to state format 5, session records keep
	// their title (title.go); an older replica refuses a format-5 snapshot.
	TitleVersion = 11

	// CommandVersion is the newest command version this build applies.
	CommandVersion = TitleVersion
)

// Encode serialises an entry for the Raft log, stamped with the oldest
// version that knows all its commands, so an entry an older replica cannot
// apply is refused by version rather than misread.
func Encode(e *fsmpb.Entry) ([]byte, error) {
	e.Version = 1
	for _, c := range e.Commands {
		switch c.Cmd.(type) {
		case *fsmpb.Command_PlanSet, *fsmpb.Command_PlanPreStep, *fsmpb.Command_PlanCommand, *fsmpb.Command_PlanExit:
			e.Version = max(e.Version, PlanVersion)
		}
		if c.Principal != "" || c.Limits != nil {
			e.Version = max(e.Version, PrincipalsVersion)
		}
		switch c.Cmd.(type) {
		case *fsmpb.Command_Delete, *fsmpb.Command_Sweep:
			e.Version = max(e.Version, DeleteVersion)
		}
		if c.BindRequest || c.Limits.GetCountStored() {
			e.Version = max(e.Version, RequestsVersion)
		}
		if cl, ok := c.Cmd.(*fsmpb.Command_ConvertLayout); ok {
			e.Version = max(e.Version, LayoutVersion)
			if cl.ConvertLayout.GetLayout() >= 3 {
				e.Version = max(e.Version, PackedEventsVersion)
			}
			if cl.ConvertLayout.GetLayout() >= 4 {
				e.Version = max(e.Version, NumberedRowsVersion)
			}
			if cl.ConvertLayout.GetLayout() >= 5 {
				e.Version = max(e.Version, TitleVersion)
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
