package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// The Go collector's default (GOGC=100) collects whenever the heap has grown
// by its live size. A node's live heap is small next to what the write path
// allocates per second (decoded requests, Raft entries, bbolt pages), so at
// 100 it collects several times a second and spends about a tenth of the
// node's CPU on it under load. 400 trades memory (the heap may grow to five
// times the live data between collections) for about a quarter of that work;
// the memory limit keeps the trade from running a container out of memory.
const defaultGCPercent = 400

// memoryLimitShare is the part of a cgroup's memory limit the heap is held
// under by default (the rest: stacks, the bbolt mapping's resident pages,
// the page cache the kernel charges to the cgroup).
const memoryLimitShare = 0.7

// runtimeConfig is how the node's Go runtime collects garbage.
type runtimeConfig struct {
	GCPercent int
	// MemoryLimitMiB is the soft limit of the Go heap in MiB: 0 derives it
	// from the cgroup's memory limit (none without one), -1 sets none.
	MemoryLimitMiB int64
}

func defaultRuntimeConfig() runtimeConfig {
	return runtimeConfig{GCPercent: defaultGCPercent}
}

func runtimeFlags(c *runtimeConfig, fs *flag.FlagSet) {
	fs.IntVar(&c.GCPercent, "gc-percent", c.GCPercent, "heap growth, in per cent of the live heap, that starts a garbage collection (Go's GOGC; higher: less CPU, more memory; -1: collect only at --memory-limit-mib); the GOGC environment variable wins when the flag is not given")
	fs.Int64Var(&c.MemoryLimitMiB, "memory-limit-mib", c.MemoryLimitMiB, "soft limit of the Go heap in MiB: collections run more often as the heap nears it (Go's GOMEMLIMIT; 0: 70% of the cgroup's memory limit, none outside a limited cgroup; -1: none); the GOMEMLIMIT environment variable wins when the flag is not given")
}

// cgroupMemoryFiles hold the memory limit of the process's cgroup (v2, then
// v1); a variable for tests.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// cgroupMemoryLimit returns the cgroup's memory limit in bytes, 0 when
// there is none (v2 says "max"; v1 says a number near 2^63).
func cgroupMemoryLimit() int64 {
	for _, p := range cgroupMemoryFiles {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0
		}
		return n
	}
	return 0
}

// apply sets the collector's target and memory limit. set holds the flags
// given on the command line or in the environment (SESSIONSTORE_*); Go's own
// GOGC and GOMEMLIMIT, read by the runtime at start, are kept unless the
// matching flag was given.
func (c runtimeConfig) apply(logger *slog.Logger, set map[string]bool) error {
	if c.GCPercent < -1 {
		return fmt.Errorf("--gc-percent %d: want -1 (off) or a percentage", c.GCPercent)
	}
	if c.MemoryLimitMiB < -1 {
		return fmt.Errorf("--memory-limit-mib %d: want -1 (none), 0 (from the cgroup) or MiB", c.MemoryLimitMiB)
	}
	gc, gcFrom := c.GCPercent, "flag"
	if _, env := os.LookupEnv("GOGC"); env && !set["gc-percent"] {
		gc, gcFrom = debug.SetGCPercent(-1), "GOGC"
	} else if !set["gc-percent"] {
		gcFrom = "default"
	}
	limit, limitFrom := int64(math.MaxInt64), "none"
	switch {
	case !set["memory-limit-mib"] && os.Getenv("GOMEMLIMIT") != "":
		limit, limitFrom = debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	case c.MemoryLimitMiB > 0:
		limit, limitFrom = c.MemoryLimitMiB<<20, "flag"
	case c.MemoryLimitMiB == 0:
		if cg := cgroupMemoryLimit(); cg > 0 {
			limit, limitFrom = int64(float64(cg)*memoryLimitShare), "cgroup"
		}
	}
	if gc == -1 && limit == math.MaxInt64 && gcFrom == "flag" {
		return fmt.Errorf("--gc-percent -1 without a memory limit would never collect: give --memory-limit-mib")
	}
	debug.SetGCPercent(gc)
	debug.SetMemoryLimit(limit)
	attrs := []any{"gc_percent", gc, "gc_percent_from", gcFrom, "memory_limit_from", limitFrom}
	if limit != math.MaxInt64 {
		attrs = append(attrs, "memory_limit_mib", limit>>20)
	}
	logger.Info("go runtime", attrs...)
	return nil
}
