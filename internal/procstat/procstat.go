// Package procstat reads what a process has spent so far from Linux's /proc:
// CPU time (utime+stime) and bytes written to storage. sessionstore bench --replay
// and scripts/vsetcd report their servers' CPU and disk per write from these
// counters, so both read them the same way.
package procstat

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports (the kernel fixes it for userland).
const ClockTicks = 100

// CPUTicks is utime+stime of process pid (all its threads), in ClockTicks.
func CPUTicks(pid int) (uint64, error) { return read(pid, "stat", ParseStatCPU) }

// WriteBytes is the write_bytes counter of process pid's /proc/PID/io.
func WriteBytes(pid int) (uint64, error) { return read(pid, "io", ParseIOWriteBytes) }

// read parses /proc/PID/file; a parse error names the file.
func read(pid int, file string, parse func(string) (uint64, error)) (uint64, error) {
	path := fmt.Sprintf("/proc/%d/%s", pid, file)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := parse(string(b))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ParseStatCPU returns utime+stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) may hold spaces and parentheses, so the
// fields are counted from the last ')'.
func ParseStatCPU(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' closing the command name")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return utime + stime, nil
}

// ParseIOWriteBytes returns the write_bytes line of /proc/PID/io: bytes sent
// to the block layer (page cache write-back included), not write(2) calls.
func ParseIOWriteBytes(io string) (uint64, error) {
	sc := bufio.NewScanner(strings.NewReader(io))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == "write_bytes" {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no write_bytes line")
}
