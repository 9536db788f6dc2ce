package cluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// The clean-stop stamp lets the start-up guard skip the walk over every page
// of state.db (guard.go). Stores.Close writes it after the state database
// closed cleanly; it names the file as it was left: device, inode, size,
// modification and change times. The guard removes it before anything opens
// the file, and trusts the file's unread pages only when the stamp matches the
// file it finds. Any write through the file system since (a tool, a copy, a
// restore, a node of another build) changes the change time at least, so the
// file is checked in full. An unclean stop leaves no stamp.
func cleanStampPath(dir string) string { return filepath.Join(dir, "state.clean") }

// stateStamp describes the state file at path for the clean-stop stamp.
func stateStamp(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("stat %s: no inode data", path)
	}
	return fmt.Appendf(nil, "dev=%d ino=%d size=%d mtime=%d.%09d ctime=%d.%09d\n",
		st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), nil
}

// writeCleanStamp records that state.db was closed cleanly, as it is now.
// Written after the file's last write; the stamp need not be durable (lost:
// the next start checks the whole file).
func writeCleanStamp(dir string) error {
	stamp, err := stateStamp(statePath(dir))
	if err != nil {
		return err
	}
	tmp := cleanStampPath(dir) + ".tmp"
	if err := os.WriteFile(tmp, stamp, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, cleanStampPath(dir))
}

// takeCleanStamp removes the clean-stop stamp and reports whether it
// described state.db as it is now. A removal that fails is an error: the file
// is about to be written, and a stale stamp must not outlive that.
func takeCleanStamp(dir string) (bool, error) {
	want, rerr := os.ReadFile(cleanStampPath(dir))
	if err := os.Remove(cleanStampPath(dir)); err != nil && !os.IsNotExist(err) {
		return false, err
	}
	if rerr != nil {
		return false, nil
	}
	have, err := stateStamp(statePath(dir))
	if err != nil {
		return false, nil
	}
	return bytes.Equal(have, want), nil
}

// removeCleanStamp makes the next start check every page of state.db.
func removeCleanStamp(dir string) error {
	if err := os.Remove(cleanStampPath(dir)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
