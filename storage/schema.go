package storage

// Every bucket and key of the state database, in one place. Changing any of them
// is a format change: bump StateFormatVersion and add a migration.
//
//	meta/                       applied_index, applied_term, cluster_id, clock_ms, format
//	sessions/<id>/              one nested bucket per session id (raw id bytes; ids may hold any byte)
//	    r                       the session record (fsmpb.SessionRecord, encoded by fsm)
//	    e/<seq:8 BE>            event bytes, verbatim
//	    f/<frame:8 BE>          end seq (exclusive, 8 BE) of artifact frame n (frame 0 is the header)
//	    q/k<request id>         <order:8 BE><time ms:8 BE><encoded result>
//	    q/o<order:8 BE>         <request id>
//	    q/n                     next order number (8 BE)
//	    q/b                     bytes of the q/k entries (ids and results, 8 BE) and the q/n they
//	                            were summed at (8 BE); written by version-5 commands only, added
//	                            without a format bump: absent, or behind q/n (a result stored by
//	                            an older build or command), it is summed again
//	principals/<name>           sessions registered by that principal (8 BE; added without a
//	                            format bump: older builds never read it, a missing bucket is 0)
//	tombstones/<id>             fsmpb.Tombstone of a deleted session (what, when, the deleting
//	                            request's answer); added without a format bump like principals/
const StateFormatVersion = 1

var (
	bucketMeta       = []byte("meta")
	bucketSessions   = []byte("sessions")
	bucketPrincipals = []byte("principals")
	bucketTombstones = []byte("tombstones")

	keyAppliedIndex = []byte("applied_index")
	keyAppliedTerm  = []byte("applied_term")
	keyClusterID    = []byte("cluster_id")
	keyClock        = []byte("clock_ms")
	keyFormat       = []byte("format")

	keyRecord    = []byte("r")
	bucketEvents = []byte("e")
	bucketFrames = []byte("f")
	bucketReqs   = []byte("q")
	keyReqNext   = []byte("n")
	keyReqBytes  = []byte("b")
)

// Request-id deduplication bounds (DESIGN.md "Retries and outcomes").
const (
	MaxRequestIDs     = 1000
	RequestIDLifetime = 24 * 60 * 60 * 1000 // ms
)
