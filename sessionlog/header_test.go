package sessionlog

import (
	"testing"

	"github.com/sessionstore/sessionstore"
)

func ptr[T any](v T) *T { return &v }

func TestHeaderLine(t *testing.T) {
	tests := []struct {
		name string
		h    sessionstore.Header
		want string
	}{
		{"minimal", sessionstore.Header{ID: "s1", CreatedAt: 1000},
			`{"type":"session","version":0,"id":"s1","createdAt":1000,"delegationDepth":0}`},
		{"crash example log", sessionstore.Header{ID: "crash-1", CreatedAt: 1755600000000, Cwd: ptr("/home/u/proj")},
			`{"type":"session","version":0,"id":"crash-1","createdAt":1755600000000,"cwd":"/home/u/proj","delegationDepth":0}`},
		{"forked-child example log", sessionstore.Header{ID: "child-1", CreatedAt: 1755602000000, Cwd: ptr("/home/u/proj"), ParentSession: ptr("parent-1"), SeedLength: ptr[int64](6)},
			`{"type":"session","version":0,"id":"child-1","createdAt":1755602000000,"cwd":"/home/u/proj","parentSession":"parent-1","seedLength":6,"delegationDepth":0}`},
		{"every field", sessionstore.Header{Version: 99, ID: "x", CreatedAt: 1, Cwd: ptr("/w"), ParentSession: ptr("p"), SeedLength: ptr[int64](0),
			Origin: ptr("subagent"), DelegationDepth: ptr[int64](2), AgentPreset: ptr("coder")},
			`{"type":"session","version":99,"id":"x","createdAt":1,"cwd":"/w","parentSession":"p","seedLength":0,"origin":"subagent","delegationDepth":2,"agentPreset":"coder"}`},
		{"JS string escaping", sessionstore.Header{ID: "id" + specialChars, CreatedAt: 1, Cwd: ptr("/w/" + specialChars)},
			`{"type":"session","version":0,"id":"id` + specialCharsJS + `","createdAt":1,"cwd":"/w/` + specialCharsJS + `","delegationDepth":0}`},
		{"negative version", sessionstore.Header{Version: -1, ID: "v", CreatedAt: 1},
			`{"type":"session","version":-1,"id":"v","createdAt":1,"delegationDepth":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(HeaderLine(tt.h)); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestCheckCreateHeader(t *testing.T) {
	const (
		lossless  = "session metadata must be losslessly JSON-serializable"
		createdAt = "session metadata createdAt must be a non-negative safe integer"
	)
	ok := sessionstore.Header{ID: "s1", CreatedAt: 1000, Cwd: ptr("/w")}
	tests := []struct {
		name   string
		edit   func(*sessionstore.Header)
		reason sessionstore.Reason
		msg    string
	}{
		{"valid", func(*sessionstore.Header) {}, "", ""},
		{"version 99 accepted", func(h *sessionstore.Header) { h.Version = 99 }, "", ""},
		{"relative cwd accepted", func(h *sessionstore.Header) { h.Cwd = ptr("rel") }, "", ""},
		{"odd ids accepted", func(h *sessionstore.Header) { h.ID = "../a/b\x00" }, "", ""},
		{"createdAt 0", func(h *sessionstore.Header) { h.CreatedAt = 0 }, "", ""},
		{"negative createdAt", func(h *sessionstore.Header) { h.CreatedAt = -1 }, sessionstore.ReasonInvalidHeader, createdAt},
		{"createdAt 2^53", func(h *sessionstore.Header) { h.CreatedAt = 1 << 53 }, sessionstore.ReasonInvalidHeader, createdAt},
		{"huge version", func(h *sessionstore.Header) { h.Version = 1 << 53 }, sessionstore.ReasonInvalidHeader, lossless},
		{"huge seedLength", func(h *sessionstore.Header) { h.SeedLength = ptr[int64](-(1 << 60)) }, sessionstore.ReasonInvalidHeader, lossless},
		{"huge delegationDepth", func(h *sessionstore.Header) { h.DelegationDepth = ptr[int64](1 << 53) }, sessionstore.ReasonInvalidHeader, lossless},
		{"invalid UTF-8 cwd", func(h *sessionstore.Header) { h.Cwd = ptr("/\xff") }, sessionstore.ReasonInvalidHeader, lossless},
		{"lossless before createdAt", func(h *sessionstore.Header) { h.Version = 1 << 60; h.CreatedAt = -1 }, sessionstore.ReasonInvalidHeader, lossless},
		{"empty id", func(h *sessionstore.Header) { h.ID = "" }, sessionstore.ReasonInvalidSessionID, ""},
		{"empty cwd", func(h *sessionstore.Header) { h.Cwd = ptr("") }, sessionstore.ReasonInvalidHeader, "session metadata cwd must be a non-empty string when present"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ok
			tt.edit(&h)
			err := CheckCreateHeader(h)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			wantErr(t, err, tt.reason, tt.msg)
		})
	}
}

func TestCheckStoredHeader(t *testing.T) {
	const path = "/root/--w--/v/session.jsonl.zstd"
	tests := []struct {
		name   string
		id     string
		h      sessionstore.Header
		raw    string
		reason sessionstore.Reason
		msg    string
	}{
		{"valid", "s", sessionstore.Header{ID: "s", CreatedAt: 1, Cwd: ptr("/w"), Origin: ptr("subagent")}, "", "", ""},
		{"identity", "identity-a", sessionstore.Header{ID: "identity-b", Version: 7}, path, sessionstore.ReasonInvalidStored,
			`stored session "identity-a" failed validation: Error: stored session identity mismatch: requested "identity-a", header contains "identity-b"`},
		{"K35 newer", "v99", sessionstore.Header{ID: "v99", Version: 99, CreatedAt: 1, Cwd: ptr("/w")}, "", sessionstore.ReasonFormatUnsupported,
			"session \"v99\" uses log format v99, but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it"},
		{"K35 newer with raw log", "v7", sessionstore.Header{ID: "v7", Version: 7}, path, sessionstore.ReasonFormatUnsupported,
			"session \"v7\" uses log format v7, but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it (raw log: " + path + ")"},
		{"K36 older", "v-1", sessionstore.Header{ID: "v-1", Version: -1, CreatedAt: 1}, "", sessionstore.ReasonFormatUnsupported,
			`session "v-1" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it`},
		{"version before fields", "s", sessionstore.Header{ID: "s", Version: 1, Cwd: ptr("rel")}, "", sessionstore.ReasonFormatUnsupported, ""},
		{"relative cwd", "s", sessionstore.Header{ID: "s", Cwd: ptr("rel/dir")}, "", sessionstore.ReasonInvalidStored,
			`stored session "s" failed validation: Error: session header cwd must be an absolute path, got "rel/dir"`},
		{"createdAt", "s", sessionstore.Header{ID: "s", CreatedAt: -1}, "", sessionstore.ReasonInvalidStored,
			`stored session "s" failed validation: Error: session header createdAt must be a non-negative safe integer`},
		{"seedLength", "s", sessionstore.Header{ID: "s", SeedLength: ptr[int64](-1)}, "", sessionstore.ReasonInvalidStored,
			`stored session "s" failed validation: Error: session header seedLength must be a non-negative safe integer`},
		{"origin", "s", sessionstore.Header{ID: "s", Origin: ptr("user")}, "", sessionstore.ReasonInvalidStored,
			`stored session "s" failed validation: Error: session header origin must be "subagent"`},
		{"delegationDepth", "s", sessionstore.Header{ID: "s", DelegationDepth: ptr[int64](-2)}, "", sessionstore.ReasonInvalidStored,
			`stored session "s" failed validation: Error: session header delegationDepth must be a non-negative safe integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckStoredHeader(tt.id, tt.h, tt.raw)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			wantErr(t, err, tt.reason, tt.msg)
		})
	}
}

func TestCheckReadFromHeader(t *testing.T) {
	err := CheckReadFromHeader("a", sessionstore.Header{ID: "b"}, "")
	wantErr(t, err, sessionstore.ReasonInvalidStored, `stored session identity mismatch: requested "a", header contains "b"`)
	err = CheckReadFromHeader("a", sessionstore.Header{ID: "a", Version: 2}, "/p")
	wantErr(t, err, sessionstore.ReasonFormatUnsupported,
		"session \"a\" uses log format v2, but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it (raw log: /p)")
	if err := CheckReadFromHeader("a", sessionstore.Header{ID: "a", Cwd: ptr("relative")}, ""); err != nil {
		t.Fatalf("readFrom checks no header fields: got %v, want nil", err)
	}
}
