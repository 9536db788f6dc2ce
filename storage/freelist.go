package storage

import "go.etcd.io/bbolt"

// persistFreelist writes the freelist into the file with a last, empty commit
// before a clean close. The state database runs with NoFreelistSync (commits
// do not write the freelist), so bbolt's Open has to rebuild the freelist by
// walking every page of the file: the whole file read, and held in the
// process's memory through the mmap, on every start. With the freelist
// written, the next Open reads one page instead.
//
// The first write transaction after that Open drops the freelist again (bbolt
// frees the page and commits the meta without it), so a process that stops
// without Close leaves a file whose next Open walks it, as before, and a file
// with a synced freelist is one nothing wrote to since a clean close.
//
// The caller holds the write lock: no transaction is running. An error leaves
// the freelist unsynced (the commit did not happen); the next Open walks.
func persistFreelist(db *bbolt.DB) error {
	if db.IsReadOnly() {
		return nil
	}
	db.NoFreelistSync = false
	defer func() { db.NoFreelistSync = true }()
	return db.Update(func(*bbolt.Tx) error { return nil })
}

// CloseUnchanged closes the database without Close's freelist commit, which
// allocates a page from a freelist rebuilt from the file's own tree: for a
// file found damaged, kept aside as it is.
func (s *StateDB) CloseUnchanged() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropPending()
	return s.db.Close()
}
