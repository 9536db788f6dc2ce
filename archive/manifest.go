package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// ManifestName is the manifest's name at the root of an export.
const ManifestName = "manifest.json"

// Manifest format identification.
const (
	ManifestFormat  = "sessionstore-export"
	ManifestVersion = 1
)

// Compression modes of the session files (the reference's "compression").
const (
	CompressionZstd = "zstd"
	CompressionNone = "none"
)

// NotExported is what the manifest says an export leaves out.
const NotExported = "leases (owners and epochs), pending plan-mode selections and approved plan exits, and request-id deduplication records: state beside the logs, not the logs; imported sessions start cold"

// Manifest is manifest.json, the last entry of an export.
type Manifest struct {
	Format        string `json:"format"`         // ManifestFormat
	FormatVersion int    `json:"format_version"` // ManifestVersion
	ClusterID     string `json:"cluster_id"`
	// NodeID is the node that answered the export's Status call.
	NodeID string `json:"node_id,omitempty"`
	// AppliedIndexAtStart is that node's applied Raft index when the export
	// began; sessions registered after it are not in the export.
	AppliedIndexAtStart uint64    `json:"applied_index_at_start"`
	StartedAt           time.Time `json:"started_at"`
	FinishedAt          time.Time `json:"finished_at"`
	Filters             Filters   `json:"filters"`
	// Compression is CompressionZstd (session.jsonl.zstd files) or
	// CompressionNone (session.jsonl).
	Compression string            `json:"compression"`
	NotExported string            `json:"not_exported"`
	Sessions    []ManifestSession `json:"sessions"`
	// Failed lists the sessions that were selected but could not be
	// exported (vanished, unreadable); they have no file.
	Failed []ManifestFailure `json:"failed,omitempty"`
}

// Filters are the export's selection, as given.
type Filters struct {
	Sessions  []string `json:"sessions,omitempty"`
	CwdPrefix string   `json:"cwd_prefix,omitempty"`
	// Since is the earliest header createdAt exported (RFC 3339), if any.
	Since string `json:"since,omitempty"`
}

// ManifestSession describes one exported session.
type ManifestSession struct {
	ID string `json:"id"`
	// Path is the session file, relative to the root, with "/" separators.
	Path string `json:"path"`
	// Revision is the revision the session was read at.
	Revision string `json:"revision"`
	// Events is the number of events (lines after the header).
	Events int64 `json:"events"`
	// SHA256 is the hex SHA-256 of the decoded text (header line and event
	// lines, each ending in "\n"), whatever the compression.
	SHA256 string `json:"sha256"`
	// TextBytes is the length of the decoded text.
	TextBytes int64 `json:"text_bytes"`
	// Bytes is the length of the file as written.
	Bytes int64 `json:"bytes"`
}

// ManifestFailure is a selected session that could not be exported.
type ManifestFailure struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

// encode renders the manifest with a trailing newline.
func (m *Manifest) encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// parseManifest reads a manifest and checks its format.
func parseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestName, err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("%s: format %q is not %q", ManifestName, m.Format, ManifestFormat)
	}
	if m.FormatVersion != ManifestVersion {
		return nil, fmt.Errorf("%s: format version %d is not supported (this build reads %d)", ManifestName, m.FormatVersion, ManifestVersion)
	}
	return &m, nil
}

// textDigest is the SHA-256 of a session's decoded text.
func textDigest(text []byte) string {
	s := sha256.Sum256(text)
	return hex.EncodeToString(s[:])
}

// headerFromPB converts an API header.
func headerFromPB(h *sessionpb.SessionHeader) sessionstore.Header {
	if h == nil {
		return sessionstore.Header{}
	}
	out := sessionstore.Header{Version: int64(h.GetVersion()), ID: h.GetId(), CreatedAt: h.GetCreatedAt(),
		Cwd: h.Cwd, ParentSession: h.ParentSession, SeedLength: h.SeedLength, Origin: h.Origin, AgentPreset: h.AgentPreset}
	if h.DelegationDepth != nil {
		d := int64(*h.DelegationDepth)
		out.DelegationDepth = &d
	}
	return out
}

// headerToPB converts a header for the API; the caller has checked that
// Version and DelegationDepth fit the API's int32 fields (fitsPB).
func headerToPB(h sessionstore.Header) *sessionpb.SessionHeader {
	out := &sessionpb.SessionHeader{Version: int32(h.Version), Id: h.ID, CreatedAt: h.CreatedAt, Cwd: h.Cwd,
		ParentSession: h.ParentSession, SeedLength: h.SeedLength, Origin: h.Origin, AgentPreset: h.AgentPreset}
	if h.DelegationDepth != nil {
		d := int32(*h.DelegationDepth)
		out.DelegationDepth = &d
	}
	return out
}
