// Package du measures the disk space under a path as du(1) does: the
// blocks allocated, so preallocated WAL segments count as what they occupy
// and a small file as at least one block. scripts/vsetcd and
// scripts/scaling report their servers' data directories this way.
package du

import (
	"io/fs"
	"path/filepath"
	"syscall"
)

// Allocated is the space allocated to the files and directories under path.
func Allocated(path string) (int64, error) {
	n, _, err := Usage(path)
	return n, err
}

// Usage is the space allocated to the files and directories under path and
// their apparent size (the regular files' bytes).
func Usage(path string) (allocated, apparent int64, err error) {
	err = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		if info.Mode().IsRegular() {
			apparent += info.Size()
		}
		return nil
	})
	return allocated, apparent, err
}
