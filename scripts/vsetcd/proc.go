package main

import (
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/sessionstore/sessionstore/internal/procstat"
)

// procSample is what one server process has spent so far.
type procSample struct {
	cpuTicks   uint64 // utime + stime, in procstat.ClockTicks
	writeBytes uint64 // bytes this process caused to be sent to storage
}

func sampleProc(pid int) (procSample, error) {
	ticks, err := procstat.CPUTicks(pid)
	if err != nil {
		return procSample{}, err
	}
	wb, err := procstat.WriteBytes(pid)
	if err != nil {
		return procSample{}, err
	}
	return procSample{cpuTicks: ticks, writeBytes: wb}, nil
}

// diskUsage is the space allocated to the files under dir (du, not the
// apparent size: preallocated WAL segments count as what they occupy).
func diskUsage(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	return n, err
}
