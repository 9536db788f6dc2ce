package sessionstore

import "time"

// BackupMeta describes a backup of the whole cluster state: what the first
// message of a Backup stream and the header line of a backup file carry.
type BackupMeta struct {
	ClusterID    string    // the source cluster's identity
	AppliedIndex uint64    // Raft index of the last entry applied to the copy
	Term         uint64    // its term
	Time         time.Time // leader time when the copy's read transaction began
	DBBytes      int64     // size of the uncompressed state database
	NodeID       string    // the node that served the copy
	StateFormat  uint32    // the state database format (storage.StateFormatVersion)
}

// BackupTrailer ends a complete backup: it lets a restore verify the copy.
type BackupTrailer struct {
	DBBytes     int64  // bytes of the uncompressed state database
	StreamBytes int64  // bytes of the snapshot stream (compressed)
	SHA256      []byte // SHA-256 of the uncompressed state database
}
