package storage

// Every bucket and key of the state database, in one place. Changing any of them
// is a format change: bump StateFormatVersion and add a migration.
//
//	meta/                       applied_index, applied_term, cluster_id, clock_ms, format, sums
//	sessions/<id>/              one nested bucket per session id (raw id bytes; ids may hold any byte)
//	    r                       the session record (fsmpb.SessionRecord, encoded by fsm)
//	    s                       CRC-32C of the record (4 BE, checksum.go)
//	    e/<seq:8 BE>            event bytes, verbatim
//	    c/<first seq:8 BE>      CRC-32C (4 BE each, checksum.go) of the events first, first+1, ...
//	                            of one PutEvents call: one entry per append batch
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
//
// The checksums (s, c/ and meta sums) were added without a format bump too, so
// 2f2e872 still reads a database, snapshot or backup of this build (a rolling
// upgrade installs new snapshots on old voters). meta/sums is the applied index
// up to which every record and event has its checksum: SetApplied advances it
// with the applied index only when they were equal, and a build without
// checksums (2f2e872) advances the applied index alone. When they differ at
// open or after a snapshot install, fsm converts (EnsureChecksums): it adds
// the missing checksums and recomputes the record ones.
//
// Format 2 (layout 2, framelog.go) stores events once, in apply order:
//
//	log/<raft index:8 BE><position:4 BE>   one frame: one Append or repair of one session
//	ix/<len(id):4 BE><id><inc:8 BE><block:8 BE>  index block: 32 consecutive frames of a session
//	hot/<id>                               the counters an append changes, and the last frame
//	cwd/<cwd>\x00<id>                      → id: the cwd index of List
//	sessions/<id>/r, s                     the cold record and its checksum (an inline bucket)
//	reqs/<id>/                             the session's request results (q/'s keys)
//
// A database is created in format 1 and converted in place by the
// ConvertLayout command (fsm), which the leader proposes once every voter
// applies command version 6; so a cluster with an older voter keeps format
// 1, whose snapshots that voter reads. A format-2 database or snapshot is
// refused by older builds, by its format number.
//
// Format 3 is layout 2 whose new frames pack their events (frame version 2,
// framelog.go and eventcodec.go); nothing else differs, and what format 2
// stored is read as it is. ConvertLayout{layout: 3}, proposed once every
// voter applies command version 9, only marks the state (FinishLayout3).
//
// Format 4 is format 3 with a session's rows keyed by a number instead of
// its id (numbered.go): records/, counters/, requests/, cwds/ and blocks/
// replace sessions/, hot/, reqs/, cwd/ and ix/. ConvertLayout{layout: 4},
// proposed once every voter applies command version 10, rewrites them
// (ConvertLayout4).
//
// Format 5 is format 4 whose session records keep their title (fsm's
// title.go); nothing else differs. ConvertLayout{layout: 5}, proposed once
// every voter applies command version 11, fills the titles in from the logs
// and marks the state (FinishFormat5).
const StateFormatVersion = 5

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
	keySums         = []byte("sums")

	keyRecord    = []byte("r")
	keyRecordSum = []byte("s")
	bucketEvents = []byte("e")
	bucketSums   = []byte("c")
	bucketFrames = []byte("f")
	bucketReqs   = []byte("q")
	keyReqNext   = []byte("n")
	keyReqBytes  = []byte("b")
)

// Request-id deduplication bounds (docs/design.md "Retries and outcomes").
const (
	MaxRequestIDs     = 1000
	RequestIDLifetime = 24 * 60 * 60 * 1000 // ms
)
