package procstat

import (
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	const io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 81920\ncancelled_write_bytes: 0\n"
	stat, wb := ParseStatCPU, ParseIOWriteBytes
	for _, tc := range []struct {
		name, in string
		parse    func(string) (uint64, error)
		want     uint64
		wantErr  bool
	}{
		{name: "stat plain", parse: stat, in: "4242 (node) S 1 4242 4242 0 -1 4194560 1520 0 0 0 731 269 0 0 20 0 9 0 100 0 0\n", want: 1000},
		{name: "stat name with spaces and parens", parse: stat, in: "7 (a) b) (c) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1\n", want: 11},
		{name: "stat name with nested parens", parse: stat, in: "4711 (node (x) y) S 1 4711 4711 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 12 0 100 0 0\n", want: 1290},
		{name: "stat empty", parse: stat, in: "", wantErr: true},
		{name: "stat no closing paren", parse: stat, in: "7 (node S 1 2 3", wantErr: true},
		{name: "stat no command name", parse: stat, in: "4711 node S 1", wantErr: true},
		{name: "stat truncated", parse: stat, in: "7 (node) S 1 7 7 0 -1 0 0 0 0 0 5", wantErr: true},
		{name: "stat utime not a number", parse: stat, in: "7 (node) S 1 7 7 0 -1 0 0 0 0 0 x 6 0", wantErr: true},
		{name: "stat stime not a number", parse: stat, in: "7 (node) S 1 7 7 0 -1 0 0 0 0 0 5 x 0", wantErr: true},
		{name: "io full", parse: wb, in: io, want: 81920},
		{name: "io cancelled_write_bytes is not write_bytes", parse: wb, in: "cancelled_write_bytes: 5\n", wantErr: true},
		{name: "io empty", parse: wb, in: "", wantErr: true},
		{name: "io not a number", parse: wb, in: "write_bytes: many\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.parse(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("got %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestRead reads this process's own counters, and fails for a pid that
// cannot exist.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(pid int) (uint64, error)
	}{
		{"CPUTicks", CPUTicks},
		{"WriteBytes", WriteBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.read(os.Getpid()); err != nil {
				t.Skipf("no readable /proc here: %v", err)
			}
			if v, err := tc.read(-1); err == nil {
				t.Errorf("%s(-1) = %d, no error", tc.name, v)
			}
		})
	}
}
