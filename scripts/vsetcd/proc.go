package main

import "github.com/sessionstore/sessionstore/internal/procstat"

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
