package main

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		files []string
		want  int64
	}{
		{"v2 limited", []string{file("a", "2147483648\n")}, 2 << 30},
		{"v2 unlimited", []string{file("b", "max\n")}, 0},
		{"v1 unlimited", []string{filepath.Join(dir, "absent"), file("c", "9223372036854771712\n")}, 0},
		{"v1 limited", []string{filepath.Join(dir, "absent"), file("d", "536870912")}, 512 << 20},
		{"garbage", []string{file("e", "lots")}, 0},
		{"no cgroup files", []string{filepath.Join(dir, "absent")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := cgroupMemoryFiles
			cgroupMemoryFiles = tc.files
			defer func() { cgroupMemoryFiles = old }()
			if got := cgroupMemoryLimit(); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRuntimeConfigApply(t *testing.T) {
	oldGC, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	defer func() { debug.SetGCPercent(oldGC); debug.SetMemoryLimit(oldLimit) }()
	dir := t.TempDir()
	cgroup := filepath.Join(dir, "memory.max")
	if err := os.WriteFile(cgroup, []byte("1073741824\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		cfg       runtimeConfig
		set       []string
		env       map[string]string
		cgroup    bool
		wantGC    int
		wantLimit int64
		wantErr   string
		wantLog   string
	}{
		{name: "defaults", cfg: defaultRuntimeConfig(), wantGC: defaultGCPercent, wantLimit: math.MaxInt64, wantLog: "gc_percent_from=default memory_limit_from=none"},
		{name: "defaults in a cgroup", cfg: defaultRuntimeConfig(), cgroup: true, wantGC: defaultGCPercent, wantLimit: 751619276 /* 70% of 1 GiB */, wantLog: "memory_limit_from=cgroup memory_limit_mib=716"},
		{name: "GOGC kept", cfg: defaultRuntimeConfig(), env: map[string]string{"GOGC": "80"}, wantGC: 80, wantLimit: math.MaxInt64, wantLog: "gc_percent=80 gc_percent_from=GOGC"},
		{name: "flag beats GOGC", cfg: runtimeConfig{GCPercent: 200}, set: []string{"gc-percent"}, env: map[string]string{"GOGC": "80"}, wantGC: 200, wantLimit: math.MaxInt64, wantLog: "gc_percent_from=flag"},
		{name: "GOMEMLIMIT kept over the cgroup", cfg: defaultRuntimeConfig(), cgroup: true, env: map[string]string{"GOMEMLIMIT": "300MiB"}, wantGC: defaultGCPercent, wantLimit: 300 << 20, wantLog: "memory_limit_from=GOMEMLIMIT"},
		{name: "limit flag", cfg: runtimeConfig{GCPercent: 400, MemoryLimitMiB: 256}, set: []string{"memory-limit-mib"}, cgroup: true, wantGC: 400, wantLimit: 256 << 20, wantLog: "memory_limit_from=flag memory_limit_mib=256"},
		{name: "no limit asked in a cgroup", cfg: runtimeConfig{GCPercent: 400, MemoryLimitMiB: -1}, set: []string{"memory-limit-mib"}, cgroup: true, wantGC: 400, wantLimit: math.MaxInt64, wantLog: "memory_limit_from=none"},
		{name: "off with a limit", cfg: runtimeConfig{GCPercent: -1, MemoryLimitMiB: 512}, set: []string{"gc-percent", "memory-limit-mib"}, wantGC: -1, wantLimit: 512 << 20},
		{name: "off without a limit", cfg: runtimeConfig{GCPercent: -1}, set: []string{"gc-percent"}, wantErr: "would never collect"},
		{name: "GOGC=off kept", cfg: defaultRuntimeConfig(), env: map[string]string{"GOGC": "off"}, wantGC: -1, wantLimit: math.MaxInt64, wantLog: "gc_percent=-1 gc_percent_from=GOGC"},
		{name: "bad percent", cfg: runtimeConfig{GCPercent: -5}, set: []string{"gc-percent"}, wantErr: "--gc-percent -5"},
		{name: "bad limit", cfg: runtimeConfig{GCPercent: 100, MemoryLimitMiB: -2}, set: []string{"memory-limit-mib"}, wantErr: "--memory-limit-mib -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
				if v, ok := tc.env[k]; ok {
					t.Setenv(k, v)
				} else {
					t.Setenv(k, "")
					os.Unsetenv(k)
				}
			}
			// The runtime read GOGC and GOMEMLIMIT at start; stand in for that.
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			switch tc.env["GOGC"] {
			case "80":
				debug.SetGCPercent(80)
			case "off":
				debug.SetGCPercent(-1)
			}
			if tc.env["GOMEMLIMIT"] != "" {
				debug.SetMemoryLimit(300 << 20)
			}
			old := cgroupMemoryFiles
			cgroupMemoryFiles = []string{filepath.Join(dir, "absent")}
			if tc.cgroup {
				cgroupMemoryFiles = []string{cgroup}
			}
			defer func() { cgroupMemoryFiles = old }()
			set := map[string]bool{}
			for _, f := range tc.set {
				set[f] = true
			}
			var log bytes.Buffer
			err := tc.cfg.apply(slog.New(slog.NewTextHandler(&log, nil)), set)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := debug.SetGCPercent(100); got != tc.wantGC {
				t.Errorf("gc percent %d, want %d", got, tc.wantGC)
			}
			if got := debug.SetMemoryLimit(math.MaxInt64); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
			if !strings.Contains(log.String(), tc.wantLog) {
				t.Errorf("logged %q, want %q in it", log.String(), tc.wantLog)
			}
		})
	}
}
