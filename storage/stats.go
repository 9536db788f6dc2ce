package storage

import "go.etcd.io/bbolt"

// BoltStats are a bbolt file's size and freelist figures, for scrape-time
// gauges. Freelist figures are those of the last write transaction (bbolt
// DB.Stats).
type BoltStats struct {
	FileBytes     int64 // size of the file
	FreePages     int   // pages on the freelist, reusable now
	PendingPages  int   // pages freed by write transactions, reusable once older readers end
	FreeBytes     int   // (FreePages + PendingPages) × page size
	FreelistBytes int   // bytes the freelist would take written out (it is not: NoFreelistSync)
}

func boltStats(db *bbolt.DB) BoltStats {
	st := db.Stats()
	out := BoltStats{FreePages: st.FreePageN, PendingPages: st.PendingPageN, FreeBytes: st.FreeAlloc,
		FreelistBytes: st.FreelistInuse}
	_ = db.View(func(tx *bbolt.Tx) error { out.FileBytes = tx.Size(); return nil })
	return out
}

// Stats reports the state database's size and freelist.
func (s *StateDB) Stats() BoltStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return boltStats(s.db)
}

// Stats reports the Raft store file's size and freelist.
func (s *RaftStore) Stats() BoltStats { return boltStats(s.db) }
